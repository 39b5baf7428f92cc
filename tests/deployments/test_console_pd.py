"""`connect DEPLOYMENT` in the console (Pilot, in-process) on the demo's PD deployment (`opsconsole demo --profile pd`:
a prefill and a decode server, each a supervised stand-in unit with its own host profile, behind the real smg in PD
mode): the overview's panel shows the deployment up with a row per server and smg's line; the decode server killed
turns the panel down within 10 s, naming it; `r` restarts the deployment as one (through smg, one member at a time,
the prefill first) and the panel is up again with both servers on new processes."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from console.cli.connect import build_app
from console.tui.app import OpsConsoleApp
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.progress import ProgressScreen
from console.tui.widgets.deployment import DeploymentPanel
from tests.deployments.demo_support import deployment_status, running_deployment_demo
from tests.tui.support import screen_text, wait_until

pytestmark = pytest.mark.system

SIZE = (140, 44)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with running_deployment_demo(tmp_path_factory.mktemp("pd"), "pd") as workspace:
        yield workspace


def _args(workspace: Path) -> argparse.Namespace:
    return argparse.Namespace(workspace=str(workspace), ssh_config=None, refresh=0.5, read_only=False,
                              targets=["demo"], prometheus=None)  # fmt: skip


def _panel(app: OpsConsoleApp) -> DeploymentPanel:
    return app.query_one(DeploymentPanel)


def _state(app: OpsConsoleApp) -> str | None:
    health = _panel(app).health
    return health.state if health is not None else None


async def test_the_pd_deployment_is_one_panel_a_killed_decode_shows_it_down_and_r_restarts_it_through_smg(
    demo: Path,
) -> None:
    before = await asyncio.to_thread(deployment_status, demo)
    assert before.ok, before.health.reason
    app = build_app(_args(demo), ["demo"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")  # the overview
        await wait_until(pilot, lambda: _state(app) == "up" and "smg http" in screen_text(app), "the deployment up", 60)
        health = _panel(app).health
        assert health is not None and set(health.members) == {"demo-prefill", "demo-decode"}
        shown = screen_text(app)
        assert "demo (pd, 2 members) UP" in shown and ": ready (2 of 2 workers healthy)" in shown, shown

        # the decode server killed: the panel says down within 10 s, naming it
        decode_pid = before.member("demo-decode").reading.main_pid
        assert decode_pid
        killed = time.monotonic()
        os.kill(decode_pid, signal.SIGKILL)
        await wait_until(pilot, lambda: _state(app) == "down", "down", 10)
        took = time.monotonic() - killed
        down = _panel(app).health
        assert down is not None and "demo-decode" in down.reason, down.reason
        assert down.members["demo-decode"].state == "down" and down.members["demo-prefill"].state == "up"
        print(f"\nconsole on PD: the decode server killed, the panel down after {took:.1f} s: {down.reason}")

        # r: the deployment restarted as one, through smg, one member at a time
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", 60)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        body = Console(width=200, record=True, file=io.StringIO())
        body.print(confirm.body)
        text = body.export_text()
        assert text.index("router out demo-prefill") < text.index("router out demo-decode"), text
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), "the progress")
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        started = time.monotonic()
        await wait_until(pilot, lambda: progress.done, "the restart to end", 180)
        result = progress.result
        assert result is not None and result.state == "verified", result.error if result else progress.error
        assert {m.name: m.outcome for m in result.members} == {"demo-prefill": "done", "demo-decode": "done"}
        print(f"console on PD: r restarted both servers through smg in {time.monotonic() - started:.1f} s")
        await pilot.press("escape")
        await wait_until(pilot, lambda: _state(app) == "up", "the deployment up again", 60)
    after: Any = await asyncio.to_thread(deployment_status, demo)
    assert after.ok
    for name in ("demo-prefill", "demo-decode"):
        assert after.member(name).reading.main_pid != before.member(name).reading.main_pid
