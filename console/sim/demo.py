"""`opsconsole demo`: the embedded simulated GPU host.

Starts the SGLang stand-in as the unit `sglang-demo.service` under the demo supervisor (a real
systemd-style unit file that `apply` and `freeze` edit with the same unit model as on a GPU host),
writes `profiles/demo.toml` so that any other `opsconsole` process reaches it (`status demo`,
`apply demo ...`, `bench demo ...`, `logs demo -f`), and stops everything it started and removes its runtime
folder when it ends. `demo_host()` is that lifetime; `opsconsole demo` runs the console on it
(console/cli/demo.py), `--no-ui` prints how to reach it and waits for Ctrl-C (run_headless).

It leaves no process behind however it ends: Ctrl-C, SIGTERM and SIGHUP (its terminal closed: a tmux session
killed, an SSH connection dropped) stop the unit as Ctrl-C does, and printing to a terminal that is gone does
not interrupt that; if it is killed outright, the supervisor's guard process and the kernel's parent-death
signal stop the unit (console/sim/supervisor.py). The guarantee lives here and in the supervisor, not in a
UI, so it holds whatever runs in this process.

Files: <workspace>/.demo/ holds the unit, its backups and the GPU state (kept between runs so edits
survive a restart of the demo); the control socket lives in a short temporary folder (unix socket
paths are limited to ~100 characters). <workspace>/datasets/ gets an open-chat and a code dataset
(console.sim.datasets) when it holds neither, for `bench --dataset chat.json` / `code.jsonl`.
"""

from __future__ import annotations

import argparse
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
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from console import hints
from console.errors import ExitCode, UsageError
from console.sglang.flags import UnsupportedVersionError, resolve_version
from console.sglang.rules import spec_v2_env_default
from console.sim.datasets import write_datasets
from console.sim.profiles import get_profile
from console.sim.supervisor import UnitSupervisor, serve_control
from console.workspace import Workspace

UNIT = "sglang-demo.service"
PROFILE_NAME = "demo"
# `--profile NAME` for a demo deployment of several units (console.sim.demo_deployments) instead of one host.
DEPLOYMENT_DEMOS = {
    "two-node": "the Kimi K2.5 profile over two nodes (TP 8 = 2 × 4 GPUs): rank 0 and rank 1",
    "pd": "the Qwen 3.5 profile as a prefill and a decode server behind smg in PD mode",
}
DEPLOYMENT_MEMBERS = ("demo-rank0", "demo-rank1", "demo-prefill", "demo-decode", "demo-router")  # their host profiles
# Each stops the demo host like Ctrl-C. SIGHUP: the terminal went away (closed, tmux killed, SSH dropped).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def unit_text(
    *,
    python: str,
    port: int,
    profile: str,
    time_scale: float,
    state_dir: Path,
    workdir: Path,
    extra: Sequence[str] = (),
    sglang_version: str | None = None,
) -> str:
    """The demo's unit: what the profile's operators run (console.sim.profiles.OperatorUnit: its model, tensor
    parallelism and speculative setup), as an SGLang systemd unit with the stand-in as the launcher, behaving as
    `sglang_version` (default the operators'); `extra` flags (a deployment member's: its node rank, its PD role) go
    before the stand-in's own. Where that release has no SGLANG_ENABLE_SPEC_V2 (0.5.14 on) the unit does not set it.
    ValueError for an unknown profile (the message lists the known ones)."""
    sim = get_profile(profile)
    setup = sim.unit
    version = sglang_version or setup.sglang_version
    speculative = [
        f"--speculative-algorithm {setup.speculative_algorithm}",
        f"--speculative-num-steps {setup.num_steps}",
        f"--speculative-eagle-topk {setup.eagle_topk}",
        f"--speculative-num-draft-tokens {setup.num_draft_tokens}",
    ]
    if setup.draft_model_path:
        speculative.append(f"--speculative-draft-model-path {shlex.quote(setup.draft_model_path)}")
    flags = [
        f"--model-path {shlex.quote(sim.served_model)}",
        f"--served-model-name {shlex.quote(setup.served_model_name)}",
        "--host 127.0.0.1",
        f"--port {port}",
        f"--tp-size {sim.tp_size}",
        *speculative,
        "--enable-metrics",
        *extra,
        f"--sim-profile {shlex.quote(profile)}",
        f"--sim-sglang-version {version}",
        f"--sim-time-scale {time_scale:g}",
        f"--sim-state-dir {shlex.quote(str(state_dir))}",
    ]
    exec_start = f"ExecStart={shlex.quote(python)} -m console.sim \\\n    " + " \\\n    ".join(flags)
    environment = (
        f'Environment="SGLANG_ENABLE_SPEC_V2={setup.spec_v2}"\n' if spec_v2_env_default(version) is not None else ""
    )
    return (
        f"# {hints.DEMO.line()} host: the SGLang stand-in run like an SGLang systemd service\n"
        "[Unit]\n"
        f"Description=SGLang server ({hints.DEMO.line()}, simulated GPUs)\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"WorkingDirectory={workdir}\n"
        f"{environment}"
        f"{exec_start}\n"
        "Restart=no\n"
        "TimeoutStartSec=900\n"
        "TimeoutStopSec=30\n"
        "KillMode=control-group\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def profile_toml(*, control: Path, port: int, gpu_command: list[str], unit: str = UNIT) -> str:
    gpu = ", ".join(f'"{a}"' for a in gpu_command)
    return (
        f"# Written by `{hints.DEMO.line()}`: reach the demo host while that process runs.\n"
        "[host]\n"
        'transport = "demo"\n'
        f'control = "{control}"\n'
        f'unit = "{unit}"\n'
        f"gpu_command = [{gpu}]\n"
        "\n"
        "[sglang]\n"
        f"port = {port}\n"
    )


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _running_demo(profile_path: Path) -> str | None:
    """The control socket of a live demo that wrote this profile, or None (stale or absent)."""
    import socket
    import tomllib

    try:
        control = tomllib.loads(profile_path.read_text())["host"]["control"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(control))
        except OSError:
            return None
    return str(control)


async def _wait_ready(sup: UnitSupervisor, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        for entry in sup.entries(0, seen):
            seen = entry.seq
            if "The server is fired up and ready to roll!" in entry.message:
                return True
        if sup.active_state == "failed":
            return False
        await sup.wait_for_entries(seen, 0.5)
    return False


def running_deployment_demo(profiles: Path) -> str | None:
    """The control socket of a live member of a demo deployment in this workspace, else None."""
    for name in DEPLOYMENT_MEMBERS:
        running = _running_demo(profiles / f"{name}.toml")
        if running:
            return running
    return None


class DemoAlreadyRunning(Exception):
    """A demo host already runs for this workspace (the message names its control socket)."""


@dataclass
class DemoHost:
    """A running demo host: how to reach it, where its files are, and how to stop it (close(), once)."""

    workspace: Workspace
    port: int
    profile_path: Path
    unit_path: Path
    state_dir: Path
    supervisor: UnitSupervisor
    runner: web.AppRunner
    runtime: Path
    closed: bool = False

    def abandon(self) -> None:
        """The process is about to end at once (its terminal is gone): signal the unit's process group and
        remove the files; the supervisor's guard finishes the stop (SIGKILL after TimeoutStopSec if need be)."""
        proc = self.supervisor.process
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        shutil.rmtree(self.runtime, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.profile_path.unlink()

    async def close(self) -> None:
        """Stop the unit and the control socket, remove the runtime folder and the profile."""
        if self.closed:
            return
        self.closed = True
        await self.supervisor.close()
        await self.runner.cleanup()
        shutil.rmtree(self.runtime, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.profile_path.unlink()


@contextlib.asynccontextmanager
async def demo_host(args: argparse.Namespace) -> AsyncIterator[DemoHost]:
    """Start the demo host (supervisor, control socket, profile, the unit started) and stop all of it on the way
    out, however the block ends. Yields as soon as the unit is started; `wait_ready()` waits for the server.
    (`--profile two-node` or `pd`: console.sim.demo_deployments runs a demo deployment instead.)"""
    try:
        get_profile(args.profile)
    except ValueError as exc:
        raise UsageError(f"--profile: {exc} (or a demo deployment: {', '.join(DEPLOYMENT_DEMOS)})") from None
    version = getattr(args, "sglang_version", None)
    if version:
        try:
            resolve_version(version)
        except UnsupportedVersionError as exc:
            raise UsageError(f"--sglang-version: {exc}") from None
    workspace = Workspace.resolve(getattr(args, "workspace", None)).ensure()
    running = _running_demo(workspace.profiles / f"{PROFILE_NAME}.toml") or running_deployment_demo(workspace.profiles)
    if running:
        raise DemoAlreadyRunning(
            f"A demo host is already running for this workspace (control socket {running}); "
            f"stop it with Ctrl-C in its terminal, or use another --workspace."
        )
    if not any((workspace.datasets / name).exists() for name in ("chat.json", "code.jsonl")):
        write_datasets(workspace.datasets)  # open chat and code, for `bench --dataset` (kept: the operator's to edit)
    home = workspace.root / ".demo"
    state_dir = home / "gpu-state"
    state_dir.mkdir(parents=True, exist_ok=True)
    runtime = Path(tempfile.mkdtemp(prefix="opsconsole-demo-"))
    control = runtime / "control.sock"
    port = args.port or _free_port()
    unit_path = home / UNIT
    # The unit is rewritten each run (new port, this interpreter); edits made through the console during
    # a run are kept in backups/ like on a real host.
    unit_path.write_text(
        unit_text(
            python=sys.executable,
            port=port,
            profile=args.profile,
            time_scale=args.time_scale,
            state_dir=state_dir,
            workdir=Path(__file__).resolve().parents[2],
            sglang_version=version,
        )
    )
    sup = UnitSupervisor(UNIT, unit_path, home / "backups")
    runner = await serve_control(sup, control)
    profile_path = workspace.profiles / f"{PROFILE_NAME}.toml"
    gpu_command = [sys.executable, "-m", "console.sim.nvidia_smi", "--sim-state-dir", str(state_dir)]
    profile_path.write_text(profile_toml(control=control, port=port, gpu_command=gpu_command))
    host = DemoHost(workspace, port, profile_path, unit_path, state_dir, sup, runner, runtime)
    try:
        sup.daemon_reload()
        await sup.start()
        yield host
    finally:
        await host.close()


async def run_headless(args: argparse.Namespace) -> int:
    """`opsconsole demo --no-ui`: the demo host, how to reach it, until Ctrl-C (or SIGTERM, SIGHUP)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        async with demo_host(args) as host:
            await _headless_host(host, args, stop)
    except DemoAlreadyRunning as exc:
        print(exc, file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"opsconsole demo: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    _say("Demo host stopped.")
    return 0


async def _headless_host(host: DemoHost, args: argparse.Namespace, stop: asyncio.Event) -> None:
    _say(f"Demo GPU host: {UNIT} (SGLang stand-in, profile {args.profile}) starting ...")
    up = asyncio.create_task(_wait_ready(host.supervisor, 900))
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({up, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if not stop.is_set():
        if not up.result():
            _say(f"The demo server did not come up; its journal: {hints.LOGS.line(HOST=PROFILE_NAME)}")
        _print_howto(host.port, host.profile_path, host.unit_path, host.state_dir, host.workspace)
        await stop.wait()
    up.cancel()
    stopper.cancel()
    _say("Stopping the demo host ...")


def _say(text: str) -> None:
    """Print to the operator's terminal, which may be gone (closed window, dropped SSH: EIO or EPIPE): the
    demo host still stops everything it started."""
    with contextlib.suppress(OSError):
        print(text, flush=True)


def _command_name() -> str:
    """`opsconsole` when that is what the shell finds (an activated venv), else the path to this one
    (after `make demo` it lives in .venv/bin, which is not on PATH)."""
    mine = Path(sys.argv[0]).resolve()
    found = shutil.which("opsconsole")
    if mine.name == "opsconsole" and (found is None or Path(found).resolve() != mine):
        with contextlib.suppress(ValueError):
            return str(mine.relative_to(Path.cwd()))
        return str(mine)
    return "opsconsole"


def _print_howto(port: int, profile_path: Path, unit_path: Path, state_dir: Path, workspace: Workspace) -> None:
    ws = "" if workspace.root == Path.cwd() else f" --workspace {shlex.quote(str(workspace.root))}"
    opsconsole = _command_name()
    _say(
        "\n".join(
            [
                "",
                "The demo GPU host is up (simulated GPUs, SGLang stand-in under a local service manager).",
                f"  SGLang API    http://127.0.0.1:{port}   (/health, /server_info, /generate, /v1/chat/completions)",
                f"  profile       {profile_path}",
                f"  unit file     {unit_path}",
                f"  nvidia-smi    OPSCONSOLE_SIM_STATE_DIR={state_dir} python -m console.sim.nvidia_smi",
                f"  tokenizer     {state_dir / 'tokenizer'}   (for bench_serving --tokenizer)",
                "",
                "Try, from another terminal:",
                f"  {opsconsole}{ws} status {PROFILE_NAME}",
                f"  {opsconsole}{ws} apply {PROFILE_NAME} --set speculative-num-steps=2 "
                "--set speculative-num-draft-tokens=3",
                f"  {opsconsole}{ws} bench {PROFILE_NAME} --concurrency 1,8,32",
                f"  {opsconsole}{ws} bench {PROFILE_NAME} --dataset code.jsonl --slo ttft_p95=2s,tpot_p95=100ms"
                "   (datasets/: chat.json, code.jsonl)",
                f"  {opsconsole}{ws} logs {PROFILE_NAME} -f",
                "",
                "Ctrl-C stops the demo host.",
            ]
        )
    )


def run(args: argparse.Namespace) -> int:
    """`opsconsole demo --no-ui` (the console on it is console.cli.demo)."""
    try:
        return asyncio.run(run_headless(args))
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        return 1
