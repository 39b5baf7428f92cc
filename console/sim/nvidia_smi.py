"""`nvidia-smi` stand-in: the simulated GPUs in exactly the real tool's output formats.

    python -m console.sim.nvidia_smi [--query-gpu=F,... --format=csv[,noheader][,nounits]]
                                     [--query-compute-apps=F,... --format=...] [-L] [-i N]

Reads the running simulator's state file (console.sim.gpus); idle GPUs when none runs. The layouts
are checked byte for byte against real H200 captures in tests/sim/test_nvidia_smi.py.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from console.sim.gpus import GpuProcess, GpuState, HostGpus, idle_gpus, read_state, state_dir

NA = "[N/A]"


class Field(NamedTuple):  # tuples, not dataclasses: a process runs this module at every poll of the demo's GPUs
    header: str  # what the CSV header says (newer drivers rename some fields)
    unit: str  # suffix in csv without nounits ("" for none)
    value: Callable[[GpuState, HostGpus], str]


def _f2(x: float) -> str:
    return f"{x:.2f}"


GPU_FIELDS: dict[str, Field] = {
    "index": Field("index", "", lambda g, h: str(g.index)),
    "uuid": Field("uuid", "", lambda g, h: g.uuid),
    "name": Field("name", "", lambda g, h: g.name),
    "pci.bus_id": Field("pci.bus_id", "", lambda g, h: g.bus_id),
    "driver_version": Field("driver_version", "", lambda g, h: h.driver_version),
    "pstate": Field("pstate", "", lambda g, h: g.pstate),
    "count": Field("count", "", lambda g, h: str(len(h.gpus))),
    "persistence_mode": Field("persistence_mode", "", lambda g, h: "Enabled"),
    "compute_mode": Field("compute_mode", "", lambda g, h: "Default"),
    "utilization.gpu": Field("utilization.gpu [%]", " %", lambda g, h: str(g.util_gpu)),
    "utilization.memory": Field("utilization.memory [%]", " %", lambda g, h: str(g.util_mem)),
    "memory.total": Field("memory.total [MiB]", " MiB", lambda g, h: str(g.memory_total_mib)),
    "memory.used": Field("memory.used [MiB]", " MiB", lambda g, h: str(g.memory_used_mib)),
    "memory.free": Field("memory.free [MiB]", " MiB", lambda g, h: str(g.memory_free_mib)),
    "temperature.gpu": Field("temperature.gpu", "", lambda g, h: str(g.temperature_c)),
    "temperature.memory": Field("temperature.memory", "", lambda g, h: str(g.memory_temperature_c)),
    "power.draw": Field("power.draw [W]", " W", lambda g, h: _f2(g.power_draw_w)),
    "power.draw.instant": Field("power.draw.instant [W]", " W", lambda g, h: _f2(g.power_draw_w)),
    "clocks.current.sm": Field("clocks.current.sm [MHz]", " MHz", lambda g, h: str(g.sm_clock_mhz)),
    "power.limit": Field("power.limit [W]", " W", lambda g, h: _f2(g.power_limit_w)),
    "enforced.power.limit": Field("enforced.power.limit [W]", " W", lambda g, h: _f2(g.power_limit_w)),
    "clocks.sm": Field("clocks.current.sm [MHz]", " MHz", lambda g, h: str(g.sm_clock_mhz)),
    "clocks.mem": Field("clocks.current.memory [MHz]", " MHz", lambda g, h: str(g.mem_clock_mhz)),
    "clocks.gr": Field("clocks.current.graphics [MHz]", " MHz", lambda g, h: str(g.sm_clock_mhz)),
    "clocks.max.sm": Field("clocks.max.sm [MHz]", " MHz", lambda g, h: str(g.max_sm_clock_mhz)),
    "clocks.max.mem": Field("clocks.max.memory [MHz]", " MHz", lambda g, h: str(g.mem_clock_mhz)),
    "pcie.link.gen.current": Field("pcie.link.gen.current", "", lambda g, h: str(g.pcie_gen)),
    "pcie.link.width.current": Field("pcie.link.width.current", "", lambda g, h: str(g.pcie_width)),
    "fan.speed": Field("fan.speed [%]", "", lambda g, h: NA),
    "ecc.errors.uncorrected.volatile.total": Field("ecc.errors.uncorrected.volatile.total", "", lambda g, h: "0"),
    "clocks_event_reasons.active": Field(
        "clocks_event_reasons.active", "", lambda g, h: f"0x{g.throttle_reasons:016x}"
    ),
}
_ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "clocks.current.memory": "clocks.mem",
    "clocks.current.graphics": "clocks.gr",
    "clocks.max.memory": "clocks.max.mem",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
}


class AppField(NamedTuple):
    header: str
    unit: str
    value: Callable[[GpuProcess, GpuState], str]


APP_FIELDS: dict[str, AppField] = {
    "pid": AppField("pid", "", lambda p, g: str(p.pid)),
    "process_name": AppField("process_name", "", lambda p, g: p.name),
    "name": AppField("process_name", "", lambda p, g: p.name),
    "used_memory": AppField("used_gpu_memory [MiB]", " MiB", lambda p, g: str(p.used_mib)),
    "used_gpu_memory": AppField("used_gpu_memory [MiB]", " MiB", lambda p, g: str(p.used_mib)),
    "gpu_uuid": AppField("gpu_uuid", "", lambda p, g: g.uuid),
    "gpu_bus_id": AppField("gpu_bus_id", "", lambda p, g: g.bus_id),
    "gpu_name": AppField("gpu_name", "", lambda p, g: g.name),
}


class UsageError(Exception):
    """What nvidia-smi prints (on stdout) and its exit status for a bad invocation (checked on an H200)."""

    def __init__(self, output: str, exit_status: int) -> None:
        super().__init__(output.strip())
        self.output = output
        self.exit_status = exit_status


def _invalid_field(name: str) -> UsageError:
    return UsageError(f'Field "{name}" is not a valid field to query.\n\n', 2)


def _csv_options(fmt: str | None) -> tuple[bool, bool]:
    if fmt is None:  # nvidia-smi defaults to csv with header and units
        return False, False
    parts = [p.strip() for p in fmt.split(",")]
    if not parts or any(p not in {"csv", "noheader", "nounits"} for p in parts):
        raise UsageError("Format modifier is not recognized.\n", 2)
    return "noheader" in parts, "nounits" in parts


def query_gpu(host: HostGpus, fields: str, fmt: str | None) -> str:
    noheader, nounits = _csv_options(fmt)
    chosen: list[Field] = []
    for raw in fields.split(","):
        name = raw.strip()
        key = _ALIASES.get(name, name)
        if key not in GPU_FIELDS:
            raise _invalid_field(name)
        chosen.append(GPU_FIELDS[key])
    lines = [] if noheader else [", ".join(f.header for f in chosen)]
    for g in host.gpus:
        cells = []
        for f in chosen:
            v = f.value(g, host)
            cells.append(v if nounits or v == NA else v + f.unit)
        lines.append(", ".join(cells))
    return "".join(line + "\n" for line in lines)


def query_apps(host: HostGpus, fields: str, fmt: str | None) -> str:
    noheader, nounits = _csv_options(fmt)
    chosen: list[AppField] = []
    for raw in fields.split(","):
        name = raw.strip()
        if name not in APP_FIELDS:
            raise _invalid_field(name)
        chosen.append(APP_FIELDS[name])
    lines = [] if noheader else [", ".join(f.header for f in chosen)]
    for g in host.gpus:
        for p in g.processes:
            lines.append(", ".join(f.value(p, g) + ("" if nounits else f.unit) for f in chosen))
    return "".join(line + "\n" for line in lines)


def list_gpus(host: HostGpus) -> str:
    return "".join(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n" for g in host.gpus)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def table(host: HostGpus, now: float | None = None) -> str:
    """Plain `nvidia-smi`: the summary table with the process list."""
    stamp = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now))
    wide = "+" + "-" * 89 + "+"
    cells = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    head = (
        f"NVIDIA-SMI {host.driver_version:<23}Driver Version: {host.driver_version:<15}"
        f"CUDA Version: {host.cuda_version:<8}"
    )
    out = [
        stamp + " " * 7,
        wide,
        f"| {head:<87} |",
        cells,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for g in host.gpus:
        power = f"{int(g.power_draw_w)}W / {int(g.power_limit_w):>4}W"
        memory = f"{g.memory_used_mib}MiB / {g.memory_total_mib}MiB"
        out += [
            f"| {g.index:>3}  {_fit(g.name, 27):<29}{'On':>4}  | {g.bus_id:>18} Off | {'0':>20} |",
            f"| N/A  {g.temperature_c:>3}C    {g.pstate:<2}{power:>24} | {memory:>22} "
            f"| {g.util_gpu:>6}%      Default |",
            "|                                         |                        |             Disabled |",
            cells,
        ]
    out += [
        "",
        wide,
        f"| {'Processes:':<87} |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
    ]
    procs = [(g, p) for g in host.gpus for p in g.processes]
    if not procs:
        out.append(f"|  {'No running processes found':<86} |")
    for g, p in procs:
        used = f"{p.used_mib}MiB"
        out.append(f"| {g.index:>4}   N/A  N/A  {p.pid:>14}      C   {_fit(p.name, 36):<36}{used:>10} |")
    out.append(wide)
    return "".join(line + "\n" for line in out)


KNOWN_OPTIONS = {"-i", "--id", "--query-gpu", "--query-compute-apps", "--format", "-L", "--list-gpus"}


def _option(argv: Sequence[str], name: str) -> str | None:
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def render(argv: Sequence[str], host: HostGpus, now: float | None = None) -> str:
    """The output for one nvidia-smi invocation (raises UsageError on bad options)."""
    unknown = [a for a in argv if a.startswith("-") and a.split("=")[0] not in KNOWN_OPTIONS]
    if unknown:
        option = unknown[0].split("=")[0]
        raise UsageError(f"ERROR: Option {option} is not recognized. Please run 'nvidia-smi -h'.\n\n", 255)
    index = _option(argv, "-i") or _option(argv, "--id")
    if index is not None:
        wanted = {int(x) for x in index.split(",") if x.strip().isdigit()}
        host = HostGpus([g for g in host.gpus if g.index in wanted], host.driver_version, host.cuda_version)
        if not host.gpus:
            raise UsageError("No devices were found\n", 6)
    fmt = _option(argv, "--format")
    gpu_q = _option(argv, "--query-gpu")
    if gpu_q is not None:
        return query_gpu(host, gpu_q, fmt)
    apps_q = _option(argv, "--query-compute-apps")
    if apps_q is not None:
        return query_apps(host, apps_q, fmt)
    if "-L" in argv or "--list-gpus" in argv:
        return list_gpus(host)
    return table(host, now)


def _is_state_dir_arg(args: Sequence[str], i: int) -> bool:
    return args[i].startswith("--sim-state-dir") or (i > 0 and args[i - 1] == "--sim-state-dir")


def _default_profiles_idle_gpus() -> list[GpuState]:
    # Imported only when no simulator has written its state: the profiles are a tenth of a poll's process.
    from console.sim.profiles import DEFAULT_PROFILE, get_profile

    profile = get_profile(DEFAULT_PROFILE)
    return idle_gpus(profile.gpu, profile.gpu_count, profile.name)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    explicit_dir = _option(args, "--sim-state-dir")  # the demo's profile points its gpu_command here
    args = [a for i, a in enumerate(args) if not _is_state_dir_arg(args, i)]
    host = read_state(state_dir(explicit_dir), _default_profiles_idle_gpus)
    try:
        sys.stdout.write(render(args, host))
    except UsageError as e:
        sys.stdout.write(e.output)
        return e.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())
