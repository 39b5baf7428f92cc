"""GPU telemetry: `nvidia-smi --query-gpu` over a Transport (one command per poll), or NVML locally.

The CSV parser is pure and tolerant: `[N/A]`, `[Not Supported]`, unit suffixes (when run without
`nounits`), per-GPU "Unable to determine the device handle" lines, "No devices were found" and
driver failures all end up as None values or an `error` text instead of an exception.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from console.host.base import HostError, Transport

QUERY_FIELDS = (
    "index",
    "uuid",
    "name",
    "pstate",
    "utilization.gpu",
    "utilization.memory",
    "memory.total",
    "memory.used",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks.mem",
    "clocks_throttle_reasons.active",
)
APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
APPS_SEPARATOR = "@@opsconsole-compute-apps@@"
_NOT_AVAILABLE = {"", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "unknown error", "none"}
_UNIT_SUFFIXES = (" %", " MiB", " W", " MHz", "%", "MiB", "W", "MHz")

# nvmlClocksEventReasons bits, named as nvidia-smi -q names them.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


class GpuSample(BaseModel):
    index: int
    name: str | None = None
    uuid: str | None = None
    utilization_gpu: float | None = Field(None, description="%")
    utilization_memory: float | None = Field(None, description="%")
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    temperature_gpu: float | None = Field(None, description="°C")
    clocks_sm_mhz: float | None = None
    clocks_mem_mhz: float | None = None
    pstate: str | None = None
    throttle_reasons: list[str] = Field(default_factory=list)


class GpuProcess(BaseModel):
    gpu_uuid: str | None = None
    pid: int | None = None
    process_name: str | None = None
    used_memory_mib: float | None = None


class GpuSnapshot(BaseModel):
    gpus: list[GpuSample] = Field(default_factory=list)
    processes: list[GpuProcess] = Field(default_factory=list)
    error: str | None = None  # driver failure, missing nvidia-smi, unreadable GPUs
    source: str = "nvidia-smi"


def clean_value(raw: str) -> str | None:
    value = raw.strip()
    if value[-1:].isdigit():  # a number as `nounits` gives it (most values): no unit, nor a not-available word
        return value
    if value.lower() in _NOT_AVAILABLE:
        return None
    for suffix in _UNIT_SUFFIXES:
        if value.endswith(suffix) and value[: -len(suffix)].strip().replace(".", "", 1).isdigit():
            return value[: -len(suffix)].strip()
    return value


def _float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def decode_throttle_reasons(value: str | None) -> list[str]:
    if value is None:
        return []
    try:
        mask = int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return []
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def _rows(text: str) -> list[list[str]]:
    """CSV rows, one per line; a line csv cannot read (stray CR, broken quoting) comes back as one cell."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        try:
            rows.extend(row for row in csv.reader([line], skipinitialspace=True) if row)
        except csv.Error:
            rows.append([line])
    return rows


def parse_query_gpu(text: str, fields: Sequence[str] = QUERY_FIELDS) -> tuple[list[GpuSample], list[str]]:
    """`--query-gpu=FIELDS --format=csv,noheader[,nounits]` output -> samples and the lines it could not use."""
    samples: list[GpuSample] = []
    problems: list[str] = []
    for row in _rows(text):
        if len(row) != len(fields):
            problems.append(", ".join(row).strip())
            continue
        values = {field: clean_value(raw) for field, raw in zip(fields, row, strict=True)}
        index = values.get("index")
        if index is None or not index.isdigit():
            problems.append(", ".join(row).strip())
            continue
        samples.append(
            GpuSample(
                index=int(index),
                name=values.get("name"),
                uuid=values.get("uuid"),
                utilization_gpu=_float(values.get("utilization.gpu")),
                utilization_memory=_float(values.get("utilization.memory")),
                memory_used_mib=_float(values.get("memory.used")),
                memory_total_mib=_float(values.get("memory.total")),
                power_draw_w=_float(values.get("power.draw")),
                power_limit_w=_float(values.get("power.limit")),
                temperature_gpu=_float(values.get("temperature.gpu")),
                clocks_sm_mhz=_float(values.get("clocks.sm") or values.get("clocks.current.sm")),
                clocks_mem_mhz=_float(values.get("clocks.mem") or values.get("clocks.current.memory")),
                pstate=values.get("pstate"),
                throttle_reasons=decode_throttle_reasons(
                    values.get("clocks_throttle_reasons.active") or values.get("clocks_event_reasons.active")
                ),
            )
        )
    return samples, problems


def parse_compute_apps(text: str, fields: Sequence[str] = APP_FIELDS) -> list[GpuProcess]:
    processes: list[GpuProcess] = []
    for row in _rows(text):
        if len(row) != len(fields) or "no running" in row[0].lower():
            continue
        values = {field: clean_value(raw) for field, raw in zip(fields, row, strict=True)}
        pid = values.get("pid")
        if pid is None or not pid.isdigit():
            continue  # a header line (pid, process_name, ...) or noise
        processes.append(
            GpuProcess(
                gpu_uuid=values.get("gpu_uuid"),
                pid=int(pid),
                process_name=values.get("process_name"),
                used_memory_mib=_float(values.get("used_memory") or values.get("used_gpu_memory")),
            )
        )
    return processes


def parse_snapshot(stdout: str, stderr: str = "", exit_status: int = 0) -> GpuSnapshot:
    """The combined output of `gpu_poll_argv` -> GpuSnapshot. Pure."""
    gpu_text, _sep, apps_text = stdout.partition(APPS_SEPARATOR)
    samples, problems = parse_query_gpu(gpu_text)
    error_lines = [p for p in problems if p]
    if "no devices were found" in (stdout + stderr).lower():
        return GpuSnapshot(error="nvidia-smi: No devices were found")
    if exit_status == 127 or ("not found" in stderr.lower() and not samples):
        return GpuSnapshot(error="nvidia-smi is not installed on the host (or not on PATH)")
    if not samples and (exit_status != 0 or error_lines or stderr.strip()):
        detail = (stderr.strip() or "\n".join(error_lines) or f"exit status {exit_status}").splitlines()[0]
        return GpuSnapshot(error=f"nvidia-smi failed: {detail}")
    error = "; ".join(error_lines)[:500] or None
    return GpuSnapshot(gpus=samples, processes=parse_compute_apps(apps_text), error=error)


# Both queries in one shell script, the nvidia-smi to run as "$@": a poll is one remote command.
GPU_POLL_SCRIPT = (
    f'"$@" --query-gpu={",".join(QUERY_FIELDS)} --format=csv,noheader,nounits; status=$?; '
    f"echo {APPS_SEPARATOR}; "
    f'"$@" --query-compute-apps={",".join(APP_FIELDS)} --format=csv,noheader,nounits 2>/dev/null; '
    "exit $status"
)


def gpu_poll_argv(gpu_command: Sequence[str] | None = None) -> list[str]:
    """One shell command that runs both queries, so a poll costs one command."""
    return ["sh", "-c", GPU_POLL_SCRIPT, "sh", *list(gpu_command or ["nvidia-smi"])]


async def read_gpus(transport: Transport, gpu_command: Sequence[str] | None = None) -> GpuSnapshot:
    try:
        result = await transport.run(gpu_poll_argv(gpu_command), timeout=30)
    except HostError as exc:
        return GpuSnapshot(error=str(exc))
    return parse_snapshot(result.stdout, result.stderr, result.exit_status)


class NvmlUnavailable(HostError):
    """NVML cannot be used here (no driver library, no GPU); fall back to nvidia-smi."""


def read_nvml() -> GpuSnapshot:
    """Sample every GPU through NVML (the console runs on the GPU host). Raises NvmlUnavailable."""
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(f"nvidia-ml-py is not installed: {exc}") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML is not available: {exc}") from None
    try:
        gpus: list[GpuSample] = []
        processes: list[GpuProcess] = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            sample, procs = _nvml_device(pynvml, index, handle)
            gpus.append(sample)
            processes.extend(procs)
        return GpuSnapshot(gpus=gpus, processes=processes, source="nvml")
    except pynvml.NVMLError as exc:  # e.g. a GPU fell off the bus: nvidia-smi still shows the others
        raise NvmlUnavailable(f"NVML could not read the GPUs: {exc}") from None
    finally:
        pynvml.nvmlShutdown()


def _nvml_device(nvml: Any, index: int, handle: Any) -> tuple[GpuSample, list[GpuProcess]]:
    def read(fn: str, *args: Any) -> Any:
        try:
            return getattr(nvml, fn)(handle, *args)
        except nvml.NVMLError:  # NotSupported on this board, or a transient failure: leave it empty
            return None

    util = read("nvmlDeviceGetUtilizationRates")
    memory = read("nvmlDeviceGetMemoryInfo")
    power = read("nvmlDeviceGetPowerUsage")
    limit = read("nvmlDeviceGetEnforcedPowerLimit")
    pstate = read("nvmlDeviceGetPerformanceState")
    reasons = read("nvmlDeviceGetCurrentClocksThrottleReasons")
    uuid = read("nvmlDeviceGetUUID")
    mib = 1024 * 1024
    sample = GpuSample(
        index=index,
        name=read("nvmlDeviceGetName"),
        uuid=uuid,
        utilization_gpu=float(util.gpu) if util is not None else None,
        utilization_memory=float(util.memory) if util is not None else None,
        memory_used_mib=round(memory.used / mib) if memory is not None else None,
        memory_total_mib=round(memory.total / mib) if memory is not None else None,
        power_draw_w=power / 1000 if power is not None else None,
        power_limit_w=limit / 1000 if limit is not None else None,
        temperature_gpu=read("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU),
        clocks_sm_mhz=read("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
        clocks_mem_mhz=read("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
        pstate=f"P{pstate}" if pstate is not None else None,
        throttle_reasons=decode_throttle_reasons(str(reasons)) if reasons is not None else [],
    )
    procs = [
        GpuProcess(
            gpu_uuid=uuid,
            pid=p.pid,
            process_name=nvml_process_name(nvml, p.pid),
            used_memory_mib=round(p.usedGpuMemory / mib) if p.usedGpuMemory is not None else None,
        )
        for p in (read("nvmlDeviceGetComputeRunningProcesses") or [])
    ]
    return sample, procs


def nvml_process_name(nvml: Any, pid: int, proc: Path = Path("/proc")) -> str | None:
    """The name nvidia-smi shows for a GPU process (SGLang's scheduler: `sglang::scheduler`): NVML's own, else the
    process's command line from /proc (NVML runs on this host, so its PIDs are ours). None when it is gone."""
    try:
        name = nvml.nvmlSystemGetProcessName(pid)
    except nvml.NVMLError:
        name = None
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    if name:
        return str(name)
    try:
        argv0 = (proc / str(pid) / "cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return None
    return argv0 or None
