"""The overview's selection and the rolling changes' screens with Pilot, on scripted hosts and scripted rolls (the
core's own PendingRoll over scripted changes, tests/tui/roll_support.py): what the keys do with and without a
selection, read-only, the form's checks, a refusal named per host, esc stopping the roll, the group's lock held by
another. The rolls over real hosts are tests/tui/test_rolling_overview.py's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from console.core.roll import HostOutcome, group_lock
from console.tui.runners import Runners
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.progress import ProgressScreen
from console.tui.screens.roll import RollScreen
from console.tui.widgets.overview import Overview
from console.tui.widgets.selection import SelectionBar
from tests.tui.roll_support import ScriptedRolls, trio_workspace
from tests.tui.support import modal_rows, notices, screen_text, scripted_app, view, wait_until

HOSTS = ("gpu-a", "gpu-b", "gpu-c")
SIZE = (120, 40)


def _app(tmp_path: Path, rolls: ScriptedRolls | None = None, *, read_only: bool = False,
         groups: tuple[str, ...] = ("trio",), runners: Runners | None = None) -> Any:  # fmt: skip
    views = {label: view(label) for label in HOSTS}
    return scripted_app(HOSTS, views=views, workspace=trio_workspace(tmp_path / "ws"), read_only=read_only,
                        runners=runners or Runners(roll=rolls or ScriptedRolls()), groups=groups)  # fmt: skip


async def _overview(pilot: Any) -> Overview:
    await pilot.press("o")
    await wait_until(pilot, lambda: "GPU power W" in screen_text(pilot.app), "the overview")
    return pilot.app.query_one(Overview)  # type: ignore[no-any-return]


async def test_space_and_a_select_hosts_mark_them_and_count_them(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        table = await _overview(pilot)
        bar = app.query_one(SelectionBar)
        assert not bar.display and "selected" not in screen_text(app)
        await pilot.press("down", "space")  # gpu-b; the cursor moves on to gpu-c
        await wait_until(pilot, lambda: "1 selected" in screen_text(app), "one selected")
        assert table.selected_hosts() == ("gpu-b",) and "✔ gpu-b" in screen_text(app) and bar.display
        assert table.cursor_row == 2
        await pilot.press("space")
        await wait_until(pilot, lambda: "2 selected of 3: gpu-b, gpu-c" in screen_text(app), "two selected")
        await pilot.press("a")  # not all selected: all
        await wait_until(pilot, lambda: "3 selected" in screen_text(app), "all")
        assert table.selected_hosts() == HOSTS
        await pilot.press("a")  # all selected: none
        await wait_until(pilot, lambda: not bar.display and "✔" not in screen_text(app), "none")
        assert table.selected_hosts() == ()


async def test_without_a_selection_e_r_f_are_the_dashboards_and_help_says_to_select(tmp_path: Path) -> None:
    rolls = ScriptedRolls()
    app = _app(tmp_path, rolls)
    async with app.run_test(size=SIZE) as pilot:
        await _overview(pilot)
        footer = screen_text(app).splitlines()[-1]
        assert "e Edit" in footer and "Rolling" not in footer
        await pilot.press("e", "r", "F")  # a host's actions need a host: nothing opens
        await pilot.pause()
        assert not isinstance(app.screen, RollScreen) and rolls.planned == []
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys — overview" in screen_text(app), "the help")
        rows = modal_rows(app)
        assert any(r.startswith("e ") and "select hosts (space) to roll it, or open one" in r for r in rows), rows
        assert any(r.startswith("space ") and "Select" in r and r.endswith("select-host") for r in rows), rows
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: "Edit parameters" in screen_text(app), "the palette")
        await pilot.press(*"rolling restart")
        await wait_until(pilot, lambda: "Rolling restart" in screen_text(app), "the roll in the palette")
        await pilot.press("enter")
        await wait_until(pilot, lambda: "select hosts on the overview first" in notices(app), "what to do first")


async def test_read_only_says_why_a_roll_does_not_open(tmp_path: Path) -> None:
    app = _app(tmp_path, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await _overview(pilot)
        await pilot.press("space")
        await wait_until(pilot, lambda: "1 selected" in screen_text(app), "one selected")
        for key, reason in (("r", "a rolling restart restarts"), ("e", "a rolling set writes"),
                            ("F", "a fleet freeze writes")):  # fmt: skip
            await pilot.press(key)
            await wait_until(pilot, lambda r=reason: f"read-only: {r}" in notices(app), f"{key}: why")  # type: ignore[misc]
        assert not isinstance(app.screen, RollScreen)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys — overview" in screen_text(app), "the help")
        assert any(r.startswith("r ") and "Rolling restart  — read-only" in r for r in modal_rows(app))


async def test_the_form_marks_what_cannot_be_used_and_plans_nothing_then(tmp_path: Path) -> None:
    rolls = ScriptedRolls()
    app = _app(tmp_path, rolls)
    async with app.run_test(size=SIZE) as pilot:
        await _overview(pilot)
        await pilot.press("a", "e")
        await wait_until(pilot, lambda: isinstance(app.screen, RollScreen), "the form")
        await wait_until(pilot, lambda: "✖ nothing to set" in screen_text(app), "nothing to set yet")
        await pilot.press(*"speculative-num-steps")
        app.screen.query_one("#roll-wave").focus()
        await pilot.press("backspace", *"0%")
        await wait_until(pilot, lambda: "✖ wave 0%: a share of the group is more than 0%" in screen_text(app), "wave")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "fix what is marked ✖ first" in notices(app), "refused to plan")
        assert rolls.planned == []


async def test_a_value_one_host_refuses_is_named_with_that_host_and_nothing_runs(tmp_path: Path) -> None:
    rolls = ScriptedRolls(refusals={"gpu-b": "--speculative-num-steps 9: more steps than SGLang 0.5.6 takes"})
    app = _app(tmp_path, rolls)
    async with app.run_test(size=SIZE) as pilot:
        await _overview(pilot)
        await pilot.press("a", "e")
        await wait_until(pilot, lambda: isinstance(app.screen, RollScreen), "the form")
        await pilot.press(*"speculative-num-steps=9", "ctrl+s")
        await wait_until(pilot, lambda: "REFUSED: nothing was changed on any host" in screen_text(app), "refusal")
        assert "gpu-b: --speculative-num-steps 9: more steps than SGLang 0.5.6 takes" in screen_text(app)
        _request, changes = rolls.planned[0]
        assert not any(c.ran for c in changes) and all(c.aborted for c in changes)  # every plan let go of
        assert isinstance(app.screen, RollScreen)  # the operator fixes the value here


async def test_esc_during_a_host_stops_the_roll_that_host_rolled_back_the_rest_not_started(tmp_path: Path) -> None:
    hold = asyncio.Event()
    rolls = ScriptedRolls(holds={"gpu-a": hold})
    app = _app(tmp_path, rolls)
    async with app.run_test(size=SIZE) as pilot:
        await _overview(pilot)
        await pilot.press("a", "r")
        await wait_until(pilot, lambda: isinstance(app.screen, RollScreen), "the form")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: "▶ canary 1: gpu-a" in screen_text(app), "gpu-a under way")
        progress = app.screen
        assert isinstance(progress, ProgressScreen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: "Stop the roll?" in screen_text(app), "the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: "stopping: no new host starts" in screen_text(app), "stopping")
        hold.set()
        await wait_until(pilot, lambda: progress.done, "the roll over")
        report = progress.result
        assert report is not None and report.ledger.outcomes() == {
            "gpu-a": HostOutcome.ROLLED_BACK, "gpu-b": HostOutcome.NOT_STARTED, "gpu-c": HostOutcome.NOT_STARTED,
        }  # fmt: skip
        shown = ("STOPPED", "1 rolled back · 2 not started", "interrupted: rolled back to the previous unit")
        await wait_until(pilot, lambda: all(s in screen_text(app) for s in shown), "the report")
        _request, changes = rolls.planned[0]
        assert changes[0].abort_requested and not changes[1].ran and not changes[2].ran


async def test_a_roll_held_by_another_says_who_and_changes_nothing(tmp_path: Path) -> None:
    app = _app(tmp_path, runners=Runners())  # the real planner: the group's lock is taken before any host
    holder = "ops@console-2 (opsconsole restart --rolling @trio, pid 4242)"
    async with group_lock(app.options.workspace, "trio", holder), app.run_test(size=SIZE) as pilot:
        await _overview(pilot)
        await pilot.press("space", "r")
        await wait_until(pilot, lambda: isinstance(app.screen, RollScreen), "the form")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "not planned, nothing was changed" in screen_text(app), "the refusal")
        form = app.screen
        assert isinstance(form, RollScreen)
        assert f"another rolling change of this group is running (held by {holder})" in str(form.outcome)


async def test_hosts_outside_the_consoles_groups_are_not_rolled(tmp_path: Path) -> None:
    app = _app(tmp_path, groups=())  # `connect gpu-a gpu-b gpu-c`: no group named
    async with app.run_test(size=SIZE) as pilot:
        await _overview(pilot)
        await pilot.press("space", "r")
        await wait_until(pilot, lambda: "open the console with @GROUP" in notices(app), "the reason")
        assert not isinstance(app.screen, RollScreen)
