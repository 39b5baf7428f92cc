"""`opsconsole demo --no-ui` as a real process for tests, and a reader of the demo host that goes around the
code under test (one short-lived session per question)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.core.session import open_session
from console.sim.supervisor import _end_with_parent
from console.workspace import Workspace
from tests.support.cli_run import run_cli

OPSCONSOLE = Path(sys.executable).with_name("opsconsole")
TIME_SCALE = "0.001"  # a simulated large-model start takes about a second
APPLY_TIMEOUT = "60"


@dataclass
class Demo:
    workspace: Path
    proc: subprocess.Popen[str]

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [str(OPSCONSOLE), "--workspace", str(self.workspace), *args]
        return run_cli(argv, input=stdin if stdin is not None else "", timeout=120, env=dict(os.environ))

    def apply(self, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        done = self.run("apply", "demo", *args, "--json", "--timeout", APPLY_TIMEOUT)
        assert done.stdout.strip(), done.stderr
        return done, json.loads(done.stdout)

    def host(self) -> _HostReader:
        return _HostReader(self.workspace)


class _HostReader:
    """Reads the demo host the way apply does not: one short-lived connection per question."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace

    async def _with_host(self, what: str) -> Any:
        async with open_session("demo", Workspace.resolve(self.workspace)) as host:
            if what == "unit":
                return await host.service.read_unit()
            if what == "pid":
                return (await host.service.state()).main_pid
            if what == "state":
                state = await host.service.state()
                return state.active_state, state.sub_state
            if what == "healthy":
                return await (await host.sglang()).healthy()
            if what.startswith("write:"):
                return await host.service.write_unit(what.removeprefix("write:"))
            return await (await host.sglang()).server_info()

    def unit(self) -> str:
        return str(asyncio.run(self._with_host("unit")))

    def write_unit_behind_its_back(self, text: str) -> None:
        """Change the unit on the host without restarting: the running server still runs the old one."""
        asyncio.run(self._with_host("write:" + text))

    def main_pid(self) -> int | None:
        pid = asyncio.run(self._with_host("pid"))
        return int(pid) if pid else None

    def state(self) -> tuple[str, str]:
        active, sub = asyncio.run(self._with_host("state"))
        return str(active), str(sub)

    def healthy(self) -> bool:
        try:
            return bool(asyncio.run(self._with_host("healthy")))
        except Exception:
            return False

    def server_info(self) -> dict[str, Any]:
        info = asyncio.run(self._with_host("server_info"))
        assert isinstance(info, dict)
        return info


def poll(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def running_demo(
    workspace: Path, profile: str | None = None, time_scale: str = TIME_SCALE, sglang_version: str | None = None
) -> Iterator[Demo]:
    """`opsconsole demo --no-ui [--profile NAME] [--sglang-version V]` in its own session, healthy; stopped with Ctrl-C
    (by PID) afterwards. A larger `time_scale` makes a restart take longer (0.02: a few seconds)."""
    workspace.mkdir()
    chosen = ["--profile", profile] if profile else []
    chosen += ["--sglang-version", sglang_version] if sglang_version else []
    proc = subprocess.Popen(
        [str(OPSCONSOLE), "--workspace", str(workspace), "demo", "--no-ui", *chosen, "--time-scale", time_scale],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the demo's own children go with it on teardown
        # a test run killed outright (no teardown) must leave no demo host behind: SIGTERM when this process dies
        preexec_fn=_end_with_parent(os.getpid()),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    demo = Demo(workspace, proc)
    try:
        poll(lambda: (workspace / "profiles" / "demo.toml").is_file() or proc.poll() is not None, 60, "the demo")
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        reader = demo.host()
        poll(reader.healthy, 60, "the demo server to be healthy")
        yield demo
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the demo stops what it started
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc.stdout:
            proc.stdout.close()


async def until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Wait on a condition that a demo host's processes make true, polling without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)
