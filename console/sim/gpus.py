"""Simulated GPUs: their figures under load (pure) and the state file the nvidia-smi stand-in reads.

The running simulator writes `gpus.json` into the state folder every fraction of a second:
  $OPSCONSOLE_SIM_STATE_DIR if set, else /run/opsconsole-sim when it can be created, else
  <tempdir>/opsconsole-sim. The file is world-readable so that any user's nvidia-smi sees it.
When no simulator is running (no file, or its PID is gone) the stand-in shows the GPUs idle.
The running simulator also writes `tokenizer/` there: its tokenizer as a Hugging Face folder, for
clients such as SGLang's bench_serving (`--tokenizer <state dir>/tokenizer`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

STATE_FILE = "gpus.json"
DRIVER_VERSION = "580.159.04"
CUDA_VERSION = "13.0"
AMBIENT_C = 32.0
# Throttle (clocks_event_reasons) bits as NVML reports them.
REASON_GPU_IDLE = 0x1
REASON_SW_POWER_CAP = 0x4


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_mib: int


@dataclass(frozen=True)
class GpuState:
    index: int
    uuid: str
    name: str
    bus_id: str
    memory_total_mib: int
    memory_used_mib: int
    power_limit_w: float
    power_draw_w: float
    util_gpu: int
    util_mem: int
    temperature_c: int
    memory_temperature_c: int
    sm_clock_mhz: int
    mem_clock_mhz: int
    max_sm_clock_mhz: int
    throttle_reasons: int
    pstate: str = "P0"
    pcie_gen: int = 5
    pcie_width: int = 16
    processes: tuple[GpuProcess, ...] = field(default_factory=tuple)
    # nvidia-smi reports a small driver reservation as neither used nor free (H200: 143771 total,
    # 143156 free when idle); -1 = derive it from the board size.
    memory_reserved_mib: int = -1
    # The unrounded temperature `follow` continues from: approaching the steady value from the rounded
    # figure stalls once a tick's change is under half a degree. -1 = temperature_c.
    temperature_exact_c: float = -1.0

    @property
    def memory_free_mib(self) -> int:
        reserved = self.memory_reserved_mib if self.memory_reserved_mib >= 0 else reserved_mib(self.memory_total_mib)
        return max(0, self.memory_total_mib - self.memory_used_mib - reserved)


def reserved_mib(total_mib: int) -> int:
    return round(total_mib * 615 / 143771)


def gpu_uuid(profile_name: str, index: int) -> str:
    import hashlib  # here, like tempfile below: the nvidia-smi stand-in, a process at every poll, needs neither

    h = hashlib.sha1(f"{profile_name}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def bus_id(index: int) -> str:
    return f"00000000:{0x18 + index * 0x10:02X}:00.0"


def idle_gpus(spec: Any, count: int, profile_name: str) -> list[GpuState]:
    """The profile's GPUs with nothing running: idle power, max SM clock, ambient-ish temperature."""
    return [
        GpuState(
            index=i,
            uuid=gpu_uuid(profile_name, i),
            name=spec.name,
            bus_id=bus_id(i),
            memory_total_mib=int(spec.memory_mib),
            memory_used_mib=0,
            power_limit_w=float(spec.power_limit_w),
            power_draw_w=float(spec.idle_power_w),
            util_gpu=0,
            util_mem=0,
            temperature_c=int(getattr(spec, "idle_temp_c", AMBIENT_C)),
            memory_temperature_c=int(getattr(spec, "idle_temp_c", AMBIENT_C)),
            sm_clock_mhz=int(getattr(spec, "idle_sm_clock_mhz", spec.max_sm_clock_mhz)),
            mem_clock_mhz=int(spec.mem_clock_mhz),
            max_sm_clock_mhz=int(spec.max_sm_clock_mhz),
            throttle_reasons=REASON_GPU_IDLE,
            pstate="P8",
        )
        for i in range(count)
    ]


def follow(gpu: GpuState, load: Any, *, processes: tuple[GpuProcess, ...], dt_s: float) -> GpuState:
    """The next state of one GPU given the performance model's steady-state figures for the current load.

    Utilisation, power, clocks and memory follow at once; temperature approaches the steady value with a
    time constant of ~20 s, so it climbs while a benchmark runs and cools afterwards, like a real board.
    """
    alpha = min(1.0, dt_s / 20.0)
    current = gpu.temperature_exact_c if gpu.temperature_exact_c >= 0 else float(gpu.temperature_c)
    temp = current + (float(load.temperature_c) - current) * alpha
    util = int(load.utilization_gpu_pct)
    power = float(load.power_draw_w)
    reasons = 0 if util else REASON_GPU_IDLE
    if power > 0.9 * gpu.power_limit_w:
        reasons = REASON_SW_POWER_CAP
    return replace(
        gpu,
        util_gpu=util,
        util_mem=int(load.utilization_memory_pct),
        power_draw_w=round(power, 2),
        sm_clock_mhz=int(load.sm_clock_mhz),
        mem_clock_mhz=int(load.mem_clock_mhz),
        temperature_c=round(temp),
        temperature_exact_c=temp,
        memory_temperature_c=round(temp - (temp - AMBIENT_C) * 0.3),
        memory_used_mib=min(gpu.memory_total_mib, int(load.memory_used_mib)),
        pstate=str(load.pstate),
        throttle_reasons=reasons,
        processes=processes,
    )


# --- the state file -------------------------------------------------------------------------------


def state_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("OPSCONSOLE_SIM_STATE_DIR")
    if env:
        return Path(env)
    run = Path("/run/opsconsole-sim")
    try:
        run.mkdir(mode=0o755, exist_ok=True)
        if os.access(run, os.W_OK) or run.exists():
            return run
    except OSError:
        pass
    import tempfile

    return Path(tempfile.gettempdir()) / "opsconsole-sim"


def write_state(
    directory: Path,
    *,
    pid: int,
    profile: str,
    gpus: list[GpuState],
    driver_version: str = DRIVER_VERSION,
    cuda_version: str = CUDA_VERSION,
) -> Path:
    """Atomically replace the state file (temp file + rename), world-readable."""
    import tempfile

    directory.mkdir(parents=True, exist_ok=True)
    payload = {
        "pid": pid,
        "profile": profile,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "gpus": [asdict(g) for g in gpus],
    }
    fd, tmp = tempfile.mkstemp(prefix=".gpus-", dir=directory)
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f)
    os.chmod(tmp, 0o644)
    target = directory / STATE_FILE
    os.replace(tmp, target)
    return target


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class HostGpus:
    gpus: list[GpuState]
    driver_version: str = DRIVER_VERSION
    cuda_version: str = CUDA_VERSION


def read_state(directory: Path, idle: Callable[[], list[GpuState]]) -> HostGpus:
    """What nvidia-smi should show: the live simulator's GPUs, or `idle()` when none has written its state."""
    path = directory / STATE_FILE
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return HostGpus(idle())
    gpus = [
        GpuState(**{**g, "processes": tuple(GpuProcess(**p) for p in g.get("processes", ()))})
        for g in payload.get("gpus", [])
    ]
    if not _pid_alive(int(payload.get("pid", 0))):
        # The simulator is gone: same boards, nothing on them.
        gpus = [
            replace(
                g,
                util_gpu=0,
                util_mem=0,
                memory_used_mib=0,
                processes=(),
                power_draw_w=g.power_limit_w * 0.06,
                sm_clock_mhz=g.max_sm_clock_mhz,
                throttle_reasons=REASON_GPU_IDLE,
            )
            for g in gpus
        ]
    return HostGpus(gpus, payload.get("driver_version", DRIVER_VERSION), payload.get("cuda_version", CUDA_VERSION))
