"""SVG snapshots of a rolling change from the overview (pytest-textual-snapshot): the overview with two of three
hosts selected, the roll's form with its plan, the roll's report after a host failed (rolled back, the host after
it not started), at 120×40 and 80×24 (the footer keeps its way out and help).

Everything shown is fixed: the hosts are scripted HostViews, the roll is the core's own PendingRoll over scripted
changes whose clock steps from NOW (tests/tui/roll_support.py). `--snapshot-update` rewrites them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from console.core.roll import HostOutcome
from console.host.ssh import ConnectionState
from console.tui.runners import Runners
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.progress import ProgressScreen
from tests.tui.roll_support import ScriptedRolls, trio_workspace
from tests.tui.support import NOW, screen_text, scripted_app, view, wait_until, without_cursor

HOSTS = ("gpu-a", "gpu-b", "gpu-c")
ROUTER = "http://10.0.0.9:30000"


def _trio_app(tmp_path: Path, rolls: ScriptedRolls, *, router: str | None = None) -> Any:
    views = {
        "gpu-a": view("gpu-a"),
        "gpu-b": view("gpu-b"),
        "gpu-c": replace(view("gpu-c"), connection=ConnectionState("reconnecting", 2, "Connection lost")),
    }
    workspace = trio_workspace(tmp_path / "ws", router)
    return scripted_app(HOSTS, views=views, workspace=workspace, runners=Runners(roll=rolls), groups=("trio",),
                        clock=lambda: NOW)  # fmt: skip


async def _two_selected(pilot: Pilot[Any]) -> None:
    app = pilot.app
    await pilot.press("o")
    await wait_until(pilot, lambda: "GPU power W" in screen_text(app) and "reconnecting" in screen_text(app), "it")  # type: ignore[arg-type]
    await pilot.press("space", "space")  # gpu-a, then gpu-b (space moves to the next host)
    await wait_until(pilot, lambda: "2 selected" in screen_text(app) and "✔ gpu-b" in screen_text(app), "2 selected")  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_overview_with_two_hosts_selected(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = _trio_app(tmp_path, ScriptedRolls())

    async def run_before(pilot: Pilot[Any]) -> None:
        await _two_selected(pilot)
        await wait_until(pilot, lambda: "q Quit" in screen_text(app) and "? Help" in screen_text(app), "the footer")

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_rolling_set_form_with_its_plan(snap_compare: Any, tmp_path: Path) -> None:
    app = _trio_app(tmp_path, ScriptedRolls(), router=ROUTER)

    async def run_before(pilot: Pilot[Any]) -> None:
        await _two_selected(pilot)
        await pilot.press("e")
        await wait_until(pilot, lambda: "Rolling set · @trio" in screen_text(app), "the form")
        await pilot.press(*"speculative-num-steps=3 speculative-num-draft-tokens=4")
        await wait_until(pilot, lambda: "each host's own SGLang version" in screen_text(app), "the change")
        await without_cursor(pilot)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_rolling_set_report_after_a_failure(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    rolls = ScriptedRolls(outcomes={"gpu-b": HostOutcome.ROLLED_BACK})
    app = _trio_app(tmp_path, rolls)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("o")
        await wait_until(pilot, lambda: "GPU power W" in screen_text(app), "the overview")
        await pilot.press("a")  # all three
        await wait_until(pilot, lambda: "3 selected" in screen_text(app), "all selected")
        await pilot.press("e")
        await wait_until(pilot, lambda: "Rolling set · @trio" in screen_text(app), "the form")
        await pilot.press(*"speculative-draft-model-path=./draft", "ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen) and app.screen.done, "the report")
        await wait_until(pilot, lambda: "STOPPED" in screen_text(app) and "Help" in screen_text(app), "drawn")

    assert snap_compare(app, terminal_size=size, run_before=run_before)
