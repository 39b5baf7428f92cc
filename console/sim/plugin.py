"""What the simulator contributes to the rest of the console, registered by `register()`.

- The stand-in as an SGLang launcher (console.sglang.launchers): a unit whose ExecStart runs
  `python -m console.sim` is an SGLang unit; its `--sim-*` options are its own (kept, never checked as SGLang
  flags) and `--sim-sglang-version V` says which SGLang version's flags it takes.
- The demo host (console.host.registry): `transport = "demo"` targets are driven through the demo
  supervisor's control socket, and their GPUs read through the simulated `nvidia-smi`.

console.host, console.sglang and console.core import nothing from console.sim; the composition root calls
`register()` before it parses a unit or opens a host: the CLI's main for every verb, and whatever else drives the
core in its own process (the test suite's conftest, the benchmarks and scripts that open hosts). Standard library
only, and cheap to call again: `opsconsole check-args` pays for it on its fast path (the supervisor and aiohttp are
imported only when a demo host is opened).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from console.host.registry import register_service_factory
from console.sglang.launchers import LauncherSpec, register_launcher

if TYPE_CHECKING:
    from console.host.base import ServiceManager
    from console.host.targets import Target

STAND_IN = LauncherSpec(module="console.sim", own_option_prefix="--sim-", version_option="--sim-sglang-version")
DEMO_TRANSPORT = "demo"
# The simulated GPUs' nvidia-smi, for a demo profile that names no gpu_command (`opsconsole demo` writes one).
NVIDIA_SMI = (sys.executable, "-m", "console.sim.nvidia_smi")


def register() -> None:
    """Register the stand-in launcher and the demo transport (idempotent)."""
    register_launcher(STAND_IN)
    register_service_factory(DEMO_TRANSPORT, demo_service, gpu_command=NVIDIA_SMI)


def demo_service(target: Target) -> ServiceManager:
    """The demo host's service manager: a client of `opsconsole demo`'s control socket."""
    from console.host.base import HostError

    try:
        from console.sim.supervisor import DemoServiceManager
    except ImportError as exc:
        raise HostError(f"{target.label}: the demo host is not available in this build ({exc})") from None
    manager: ServiceManager = DemoServiceManager.from_target(target)
    return manager
