"""`connect DEPLOYMENT` in the console (Pilot, in-process) on the demo's two-node deployment (`opsconsole demo --profile
two-node`: rank 0 and rank 1, each a supervised stand-in unit with its own host profile): the overview's panel shows
the deployment up with a row per rank, and rank 1's row never says healthy from its dummy /health; a killed rank 1
turns the panel down within 10 s, naming it; `r` restarts the deployment as one (both ranks, rank 0 verified) and the
panel is up again. The editor on rank 0's tab changes the deployment: one diff per rank in the confirmation, both ranks
restarted together, rank 0 verified, both units carrying the new steps."""

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
from console.tui.screens.edit import EditScreen
from console.tui.screens.progress import ProgressScreen
from console.tui.widgets.deployment import DeploymentPanel
from tests.deployments.demo_support import deployment_status, running_deployment_demo
from tests.tui.support import screen_text, wait_until
from tests.tui.test_editor import set_field

pytestmark = pytest.mark.system

SIZE = (140, 44)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with running_deployment_demo(tmp_path_factory.mktemp("two-node"), "two-node") as workspace:
        yield workspace


def _status(workspace: Path) -> Any:
    return deployment_status(workspace)


def _args(workspace: Path) -> argparse.Namespace:
    return argparse.Namespace(workspace=str(workspace), ssh_config=None, refresh=0.5, read_only=False,
                              targets=["demo"], prometheus=None)  # fmt: skip


def _panel(app: OpsConsoleApp) -> DeploymentPanel:
    return app.query_one(DeploymentPanel)


async def test_the_deployment_is_one_panel_a_killed_rank_shows_it_down_and_r_restarts_it_as_one(demo: Path) -> None:
    app = build_app(_args(demo), ["demo"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")  # the overview
        await wait_until(pilot, lambda: _panel(app).health is not None and _panel(app).health.state == "up",
                         "the deployment up", 60)  # fmt: skip
        health = _panel(app).health
        assert health is not None and set(health.members) == {"demo-rank0", "demo-rank1"}
        assert health.members["demo-rank1"].reason.startswith("its unit runs (its own /health is a dummy 200")
        overview_rank1 = app.hosts_overview()
        assert overview_rank1 is not None and "demo-rank1" in overview_rank1.dummy_health

        # rank 1 killed: the panel says down within 10 s, naming it
        before = await asyncio.to_thread(_status, demo)
        rank1_pid = before.member("demo-rank1").reading.main_pid
        assert rank1_pid
        killed = time.monotonic()
        os.kill(rank1_pid, signal.SIGKILL)
        await wait_until(pilot, lambda: _panel(app).health is not None and _panel(app).health.state == "down", "down",
                         10)  # fmt: skip
        shown = time.monotonic() - killed
        down = _panel(app).health
        assert down is not None and "demo-rank1" in down.reason, down.reason
        print(f"\nconsole: rank 1 killed, the deployment's panel down after {shown:.1f} s: {down.reason}")

        # r: the deployment restarted as one
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", 60)
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), "the progress")
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await wait_until(pilot, lambda: progress.done, "the restart to end", 120)
        result = progress.result
        assert result is not None and result.state == "verified", result.state if result else progress.error
        assert [m.outcome for m in result.members] == ["done", "done"]
        await pilot.press("escape")
        await wait_until(pilot, lambda: _panel(app).health is not None and _panel(app).health.state == "up",
                         "the deployment up again", 60)  # fmt: skip
    after = await asyncio.to_thread(_status, demo)
    assert after.ok and after.member("demo-rank0").reading.main_pid != before.member("demo-rank0").reading.main_pid


async def test_the_editor_on_a_rank_changes_the_deployment_one_diff_per_rank(demo: Path) -> None:
    before = await asyncio.to_thread(_status, demo)
    assert before.ok
    app = build_app(_args(demo), ["demo"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1")  # rank 0's tab
        await wait_until(pilot, lambda: app.views.get("demo-rank0") is not None
                         and app.views["demo-rank0"].status is not None, "rank 0 read", 60)  # fmt: skip
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, EditScreen) and app.screen.form is not None, "editor")
        editor = app.screen
        assert isinstance(editor, EditScreen)
        await wait_until(pilot, lambda: "Nothing to apply" in screen_text(app), "the report")
        steps = int(before.member("demo-rank0").host.sglang.speculative_num_steps or 2)
        await set_field(pilot, editor, "speculative_num_steps", str(steps + 1))
        await set_field(pilot, editor, "speculative_num_draft_tokens", str(steps + 2))
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", 60)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.question == "Write these units and restart demo in this order?"
        body = Console(width=200, record=True, file=io.StringIO())
        body.print(confirm.body)
        text = body.export_text()
        assert text.count(f"+    --speculative-num-steps {steps + 1}") == 2, text  # one diff per rank
        assert "stop demo-rank0: rank 0 first" in text and "wait down demo-rank0, demo-rank1" in text
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), "the progress")
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await wait_until(pilot, lambda: progress.done, "the change to end", 120)
        result = progress.result
        assert result is not None and result.state == "verified", result.error if result else progress.error
        assert [(m.starts, m.outcome) for m in result.members] == [(1, "done"), (1, "done")]
    after = await asyncio.to_thread(_status, demo)
    assert after.ok and after.member("demo-rank0").host.sglang.speculative_num_steps == steps + 1


async def test_a_ranks_editor_offers_the_gate_with_its_cost_and_the_change_opens_it_once_both_ranks_joined(
    demo: Path,
) -> None:
    """The demo's ranks run without the gate: rank 0's editor offers it (its cost under the field), the confirmation
    says what it means for every later start, and the change restarts both ranks with the gate, opened by the
    console once both have joined; removed again with apply, its note saying so."""
    import json

    from console.core.apply import GATE_HINT
    from tests.deployments.demo_support import opsconsole
    from tests.support.simproc import free_port

    before = await asyncio.to_thread(_status, demo)
    assert before.ok
    port = str(free_port())
    app = build_app(_args(demo), ["demo"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1")  # rank 0's tab
        await wait_until(pilot, lambda: app.views.get("demo-rank0") is not None
                         and app.views["demo-rank0"].status is not None, "rank 0 read", 60)  # fmt: skip
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, EditScreen) and app.screen.form is not None, "editor")
        editor = app.screen
        assert isinstance(editor, EditScreen)
        await wait_until(pilot, lambda: "Nothing to apply" in screen_text(app), "the report")
        assert editor.form is not None and editor.form.field("gated_launch_port").hint == GATE_HINT
        await set_field(pilot, editor, "gated_launch_port", port)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", 60)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        body = Console(width=200, record=True, file=io.StringIO())
        body.print(confirm.body)
        text = body.export_text()
        assert text.count(f"+    --gated-launch-port {port}") == 2, text  # both ranks
        assert f"--gated-launch-port {port} on every rank" in text and "waits there for ever" in text, text
        assert "open gate demo-rank0" in text  # the new units' order: the gate opened once both have joined
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), "the progress")
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await wait_until(pilot, lambda: progress.done, "the change to end", 120)
        result = progress.result
        assert result is not None and result.state == "verified", result.error if result else progress.error
    journal = opsconsole(demo, "logs", "demo-rank1", "--lines", "200")
    assert "Gated launch activated" in journal.stdout, journal.stdout[-2000:]
    removed = opsconsole(demo, "apply", "demo", "--unset", "gated-launch-port", "--yes", "--json", "--timeout", "120")
    assert removed.returncode == 0, removed.stderr[-2000:]
    notes = json.loads(removed.stdout)["notes"]
    assert any("--gated-launch-port removed" in n for n in notes), notes
