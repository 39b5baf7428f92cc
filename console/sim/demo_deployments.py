"""`opsconsole demo --profile two-node | pd`: the demo host as a deployment of several stand-in processes.

- `two-node`: the Kimi K2.5 profile's operator unit (EAGLE3, TP 8) over two nodes, 4 simulated GPUs each
  (`--nnodes 2 --node-rank 0|1 --dist-init-addr`, SGLang 0.5.23): units sglang-demo-rank0.service and
  sglang-demo-rank1.service, host profiles demo-rank0 and demo-rank1.
- `pd`: the Qwen 3.5 profile's operator unit as a prefill and a decode server (SGLang 0.5.23, mooncake) behind the real
  smg in PD mode with its retries off: units sglang-demo-prefill.service, sglang-demo-decode.service and
  smg-demo.service, host profiles demo-prefill, demo-decode and demo-router.

Each member is a demo host as `opsconsole demo` makes one (console.sim.demo: a unit file the console edits and
restarts, a control socket, a journal, simulated GPUs), so every host verb reaches each member, and the deployment
profile profiles/deployments/demo.toml (docs/deployments.md: members with their roles, smg as its [router]) names them
all: `opsconsole status demo` shows the deployment. The front door (rank 0, or smg) listens on --port. Stopping the
demo stops the front first (rank 0's ShutdownReq ends rank 1; smg before its servers) and removes the profiles.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from console import hints
from console.sim.demo import (
    DEPLOYMENT_DEMOS,
    STOP_SIGNALS,
    DemoAlreadyRunning,
    _command_name,
    _running_demo,
    _say,
    free_ports,
    profile_toml,
    running_deployment_demo,
    unit_text,
)
from console.sim.supervisor import UnitSupervisor, serve_control
from console.workspace import Workspace

DEPLOYMENT_NAME = "demo"  # profiles/deployments/demo.toml
VERSION = "0.5.23"  # what multi-node and PD emulate (../shared/research/wave5-facts.md §4, §5)
READY_MARKERS = {  # the journal line that says a member is up
    "rank0": "The server is fired up and ready to roll!",
    "rank1": "Dummy health check server started",
    "prefill": "The server is fired up and ready to roll!",
    "decode": "The server is fired up and ready to roll!",
}


@dataclass
class DemoMember:
    """One unit of the demo deployment: its host profile, its supervisor and control socket."""

    name: str  # demo-rank0, demo-prefill, demo-router ...
    unit: str
    port: int
    role: str  # rank0, rank1, prefill, decode, router
    unit_path: Path
    state_dir: Path
    profile_path: Path
    supervisor: UnitSupervisor
    runner: web.AppRunner | None = None
    bootstrap_port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class DeploymentDemo:
    """A running demo deployment (close() once); `members` in the order they stop (the front door first)."""

    workspace: Workspace
    layout: str
    port: int  # the front door's
    members: list[DemoMember]
    deployment_path: Path
    runtime: Path
    router_metrics: int | None = None
    closed: bool = False
    profile_paths: list[Path] = field(default_factory=list)

    @property
    def profile_path(self) -> Path:
        return self.deployment_path

    def abandon(self) -> None:
        """The process is about to end at once: signal every unit's group and remove the files (the guards finish)."""
        for member in self.members:
            proc = member.supervisor.process
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL if member.role == "rank1" else signal.SIGTERM)
        self._remove_files()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for member in self.members:  # the front door first: rank 0's ShutdownReq ends rank 1 by itself
            await member.supervisor.close()
            if member.runner is not None:
                await member.runner.cleanup()
        self._remove_files()

    def _remove_files(self) -> None:
        shutil.rmtree(self.runtime, ignore_errors=True)
        for path in (self.deployment_path, *self.profile_paths):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    async def wait_ready(self, timeout: float) -> bool:
        """Every member up (its journal's marker; smg: /readiness 200), or False at the timeout or a failed unit."""
        deadline = time.monotonic() + timeout
        for member in self.members:
            while True:
                if member.role == "router":
                    if await _answers(member.url + "/readiness"):
                        break
                elif any(READY_MARKERS[member.role] in e.message for e in member.supervisor.entries(0, 0)):
                    break
                if member.supervisor.active_state == "failed" or time.monotonic() > deadline:
                    return False
                await member.supervisor.wait_for_entries(member.supervisor.last_seq, 0.2)
        return True

    def howto(self, opsconsole: str, ws: str) -> str:
        lines = ["", f"The demo deployment is up: {DEPLOYMENT_DEMOS[self.layout]} (simulated GPUs, SGLang {VERSION})."]
        for member in reversed(self.members):
            extra = f", bootstrap port {member.bootstrap_port}" if member.bootstrap_port else ""
            lines.append(f"  {member.name:<13} {member.unit:<30} {member.url}{extra}")
        lines += [
            f"  deployment    {self.deployment_path}",
            "",
            "Try, from another terminal:",
            f"  {opsconsole}{ws} status {DEPLOYMENT_NAME}",
            f"  {opsconsole}{ws} logs {self.members[-1].name} -f",
            "",
            "Ctrl-C stops the demo deployment.",
        ]
        return "\n".join(lines)


async def _answers(url: str) -> bool:
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s, s.get(url) as r:
            return r.status == 200
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False


def deployment_toml(layout: str, members: Sequence[DemoMember], router_metrics: int | None) -> str:
    """profiles/deployments/demo.toml in the deployments' format (docs/deployments.md)."""
    out = [
        f"# Written by `{hints.DEMO.line()} --profile {layout}`: the demo deployment, while that process runs.",
        f'description = "{DEPLOYMENT_DEMOS[layout]} (demo)"',
        f'sglang_version = "{VERSION}"',
        "",
    ]
    router = next((m for m in members if m.role == "router"), None)
    if router is not None:
        out += [
            "[router]",
            f'url = "{router.url}"',
            f'metrics = "http://127.0.0.1:{router_metrics}"',
            f'host = "{router.name}"',
            f'unit = "{router.unit}"',
            "",
        ]
    # ranks by rank, the prefill server before the decode server (the order a change rolls them in)
    for member in sorted((m for m in members if m.role != "router"), key=lambda m: (m.role != "prefill", m.name)):
        out += ["[[member]]", f'host = "{member.name}"']
        if member.role.startswith("rank"):
            out += ['role = "rank"', f"rank = {member.role[4:]}"]
        else:
            out.append(f'role = "{member.role}"')
        out.append(f'url = "{member.url}"')
        if member.bootstrap_port is not None:
            out.append(f"bootstrap_port = {member.bootstrap_port}")
        out.append("")
    return "\n".join(out)


def smg_unit_text(*, python: str, port: int, metrics_port: int, prefill: DemoMember, decode: DemoMember) -> str:
    """smg in PD mode as a systemd unit: retries off (a failure shows), workers polled every second at startup. smg's
    CLI runs as `python -m smg`: the venv's bin/smg may be sglang-router 0.3's script of the same name."""
    flags = [
        "launch", "--host 127.0.0.1", f"--port {port}", "--prometheus-host 127.0.0.1",
        f"--prometheus-port {metrics_port}", "--pd-disaggregation",
        f"--prefill {prefill.url} {prefill.bootstrap_port}", f"--decode {decode.url}", "--disable-retries",
        "--worker-startup-check-interval 1", "--health-check-interval-secs 5",
    ]  # fmt: skip
    exec_start = f"ExecStart={shlex.quote(python)} -m smg \\\n    " + " \\\n    ".join(flags)
    return (
        f"# {hints.DEMO.line()} deployment: smg (the SGLang Model Gateway) in PD mode in front of the stand-ins\n"
        "[Unit]\n"
        "Description=smg router (demo deployment)\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"{exec_start}\n"
        "Restart=no\n"
        "TimeoutStopSec=10\n"
        "KillMode=control-group\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def _member_flags(layout: str, role: str, *, dist_port: int, bootstrap_port: int | None) -> tuple[str, list[str]]:
    """(the model profile, the member's own launch flags)."""
    if layout == "two-node":
        rank = role[4:]
        return "kimi-k2.5-int4-8x-rtxpro6000-pcie", [
            "--nnodes 2", f"--node-rank {rank}", f"--dist-init-addr 127.0.0.1:{dist_port}",
        ]  # fmt: skip
    flags = [f"--disaggregation-mode {role}"]
    if bootstrap_port is not None:
        flags.append(f"--disaggregation-bootstrap-port {bootstrap_port}")
    return "qwen3.5-122b-fp8-4x-rtxpro6000", flags


@contextlib.asynccontextmanager
async def deployment_demo(args: Any) -> AsyncIterator[DeploymentDemo]:
    """Start the members (each a supervised unit with its control socket and host profile) and the deployment
    profile; stop all of it on the way out, however the block ends."""
    layout = args.profile
    workspace = Workspace.resolve(getattr(args, "workspace", None)).ensure()
    profiles = workspace.profiles
    for running in (_running_demo(profiles / "demo.toml"), running_deployment_demo(profiles)):
        if running:
            raise DemoAlreadyRunning(
                f"A demo host is already running for this workspace (control socket {running}); "
                "stop it with Ctrl-C in its terminal, or use another --workspace."
            )
    home = workspace.root / ".demo" / layout
    runtime = Path(tempfile.mkdtemp(prefix="opsconsole-demo-"))
    (profiles / "deployments").mkdir(parents=True, exist_ok=True)
    # Every port the deployment needs, chosen at once so that no two are the same: the front door, the ranks'
    # rendezvous, a port per other member, the prefill's bootstrap server and smg's metrics.
    ports = iter(free_ports(8))
    front = args.port or next(ports)
    dist_port = next(ports)
    roles = ["rank0", "rank1"] if layout == "two-node" else ["router", "decode", "prefill"]
    members: list[DemoMember] = []
    demo = DeploymentDemo(workspace, layout, front, members, profiles / "deployments" / "demo.toml", runtime)
    try:
        by_role: dict[str, DemoMember] = {}
        for role in reversed(roles):  # servers first: smg's unit names their URLs
            name = f"demo-{role}"
            unit = "smg-demo.service" if role == "router" else f"sglang-demo-{role}.service"
            port = front if role in ("rank0", "router") else next(ports)
            state_dir = home / role / "gpu-state"
            state_dir.mkdir(parents=True, exist_ok=True)
            unit_path = home / role / unit
            member = DemoMember(name, unit, port, role, unit_path, state_dir, profiles / f"{name}.toml",
                                UnitSupervisor(unit, unit_path, home / role / "backups"))  # fmt: skip
            if role == "prefill":
                member.bootstrap_port = next(ports)
            if role == "router":
                demo.router_metrics = next(ports)
                text = smg_unit_text(python=sys.executable, port=port, metrics_port=demo.router_metrics,
                                     prefill=by_role["prefill"], decode=by_role["decode"])  # fmt: skip
            else:
                model, flags = _member_flags(layout, role, dist_port=dist_port, bootstrap_port=member.bootstrap_port)
                text = unit_text(python=sys.executable, port=port, profile=model, time_scale=args.time_scale,
                                 state_dir=state_dir, workdir=Path(__file__).resolve().parents[2], extra=flags,
                                 sglang_version=VERSION)  # fmt: skip
            unit_path.write_text(text)
            control = runtime / f"{role}.sock"
            member.runner = await serve_control(member.supervisor, control)
            gpu_command = [sys.executable, "-m", "console.sim.nvidia_smi", "--sim-state-dir", str(state_dir)]
            member.profile_path.write_text(profile_toml(control=control, port=port, gpu_command=gpu_command, unit=unit))
            demo.profile_paths.append(member.profile_path)
            by_role[role] = member
        members.extend(by_role[role] for role in roles)  # the stop order: the front door first
        demo.deployment_path.write_text(deployment_toml(layout, members, demo.router_metrics))
        for member in reversed(members):
            member.supervisor.daemon_reload()
            await member.supervisor.start()
        yield demo
    finally:
        await demo.close()


async def run_headless(args: Any) -> int:
    """`opsconsole demo --no-ui --profile two-node | pd`: the demo deployment, how to reach it, until Ctrl-C."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        async with deployment_demo(args) as demo:
            _say(f"Demo deployment {demo.layout}: {len(demo.members)} units starting ...")
            up = asyncio.create_task(demo.wait_ready(900))
            stopper = asyncio.create_task(stop.wait())
            await asyncio.wait({up, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if not stop.is_set():
                if not up.result():
                    names = ", ".join(m.name for m in demo.members)
                    _say(f"The demo deployment did not come up; see its members' journals ({names}).")
                root = demo.workspace.root
                ws = "" if root == Path.cwd() else f" --workspace {shlex.quote(str(root))}"
                _say(demo.howto(_command_name(), ws))
                await stop.wait()
            up.cancel()
            stopper.cancel()
            _say("Stopping the demo deployment ...")
    except DemoAlreadyRunning as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    _say("Demo deployment stopped.")
    return 0
