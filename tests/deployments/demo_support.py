"""The demo's deployments (`opsconsole demo --profile two-node | pd --no-ui`) for the tests of the console on them:
started in a workspace of their own, waited on until the deployment serves (its status, read by the core), stopped
with Ctrl-C by PID afterwards, nothing left behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from console.core.deployment import load_deployment
from console.core.status import read_deployment_status
from console.workspace import Workspace
from tests.e2e.cli import OPSCONSOLE
from tests.support.cli_run import run_cli
from tests.support.procs import processes_with


def deployment_status(workspace: Path) -> Any:
    ws = Workspace(workspace)
    return asyncio.run(read_deployment_status(load_deployment("demo", ws.profiles), ws, checks=False))


def _up(workspace: Path) -> bool:
    if not (workspace / "profiles" / "deployments" / "demo.toml").is_file():
        return False
    try:
        return bool(deployment_status(workspace).ok)
    except Exception:  # members still starting, profiles being written
        return False


@contextlib.contextmanager
def running_deployment_demo(workspace: Path, layout: str) -> Iterator[Path]:
    out = (workspace / "demo.out").open("w")
    proc = subprocess.Popen([str(OPSCONSOLE), "--workspace", str(workspace), "demo", "--no-ui", "--profile", layout,
                             "--time-scale", "0.005"], stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _up(workspace):
            assert proc.poll() is None, (workspace / "demo.out").read_text()
            assert time.monotonic() < deadline, "the demo deployment did not come up"
            time.sleep(0.2)  # polling the deployment's own state
        yield workspace
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the demo stops every member
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        out.close()
        assert not processes_with(str(workspace / ".demo")), "a member of the demo deployment was left running"


def opsconsole(workspace: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return run_cli([str(OPSCONSOLE), "--workspace", str(workspace), *args], env=dict(os.environ), timeout=timeout,
                   cwd=workspace, workspace=workspace)  # fmt: skip
