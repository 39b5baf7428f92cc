"""`F` and the snapshots view with Pilot: the dialog shows what will be written and asks; refused means no Freeze
until a reason is given; read-only keeps both off; and end to end on the demo host (the real HostWatcher, the real
plan_freeze and plan_restore): freeze, the header's production mark, drift after an apply, restore from the view
(each watched on the progress screen)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Button, DataTable, Input

from console.cli.connect import build_app
from console.core.apply import plan_apply
from console.core.change import parse_edits
from console.core.session import open_session
from console.core.snapshot import load_snapshot
from console.tui.screens.freeze import FreezeScreen
from console.tui.screens.snapshots import SnapshotsScreen
from console.workspace import Workspace
from tests.support import snapshots as snaps
from tests.support.demo import Demo, running_demo
from tests.tui.freeze_support import ScriptedPending, scripted_planner, snapshot_workspace, view_with_production
from tests.tui.support import notices, screen_text, scripted_app, view, wait_until

SIZE = (120, 40)


def _text(app: object) -> str:
    return screen_text(app)  # type: ignore[arg-type]


async def test_f_previews_the_document_and_the_unit_change_then_freezes_when_asked() -> None:
    made: list[ScriptedPending] = []
    app = scripted_app(views={"gpu-a": view()}, runners=scripted_planner(made, text=snaps.unit_text(install=False)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "gpu-a" in _text(app), "the dashboard")
        await pilot.press("F")
        await wait_until(pilot, lambda: "as a production snapshot" in _text(app), "the freeze dialog")
        screen = app.screen
        assert screen.query_one("#freeze-name", Input).value == "v1"  # the host's first
        assert screen.query_one("#freeze-go", Button).disabled  # nothing to confirm before the preview
        await pilot.press(*"steps 2 wins", "enter")
        await wait_until(pilot, lambda: "ready: " in _text(app), "the preview")
        text = _text(app)
        assert "Unit change (enable needs an [Install] section)" in text and "+WantedBy=multi-user.target" in text
        assert "Document /home/ops/production_v1.md:" in text and "# Production setup v1 — gpu-a (gpu-01)" in text
        assert made[-1].plan.request.note == "steps 2 wins" and not made[-1].executed
        await pilot.click("#freeze-go")
        await wait_until(pilot, lambda: "frozen as v1" in _text(app), "the result")
        assert made[-1].executed and made[-1].aborted is None
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, FreezeScreen), "the dialog to close")
        assert app.scripted["gpu-a"].refreshes == 1  # type: ignore[attr-defined]  # the header shows it at once


async def test_cancel_writes_nothing_and_lets_go_of_the_plan() -> None:
    made: list[ScriptedPending] = []
    app = scripted_app(views={"gpu-a": view()}, runners=scripted_planner(made))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("F")
        await wait_until(pilot, lambda: "as a production snapshot" in _text(app), "the freeze dialog")
        await pilot.press("enter")
        await wait_until(pilot, lambda: "ready: " in _text(app), "the preview")
        await pilot.press("escape")
        await wait_until(pilot, lambda: made[-1].aborted is not None, "the abort")
    assert not made[-1].executed and "nothing was written" in str(made[-1].aborted)


async def test_a_refused_freeze_says_why_and_needs_a_reason_to_go_ahead() -> None:
    made: list[ScriptedPending] = []
    app = scripted_app(views={"gpu-a": view()}, runners=scripted_planner(made, need_daemon_reload=True))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("F")
        await wait_until(pilot, lambda: "as a production snapshot" in _text(app), "the freeze dialog")
        await pilot.press("enter")
        screen = app.screen
        # the count, the rule's id and the disabled button can reach the terminal in different frames: wait on all
        await wait_until(
            pilot,
            lambda: (
                "refused (1)" in _text(app)
                and "[daemon-reload]" in _text(app)
                and screen.query_one("#freeze-go", Button).disabled
            ),
            "the refusal, its rule and Freeze off",
        )
        screen.query_one("#freeze-force", Input).focus()
        await pilot.press(*"documenting before the restart")
        await wait_until(pilot, lambda: not screen.query_one("#freeze-go", Button).disabled, "Freeze anyway")
        await pilot.press("enter")
        await wait_until(pilot, lambda: "frozen as v1" in _text(app), "the forced freeze")
    forced = made[-1].plan.snapshot.forced
    assert forced is not None and forced.reason == "documenting before the restart"


async def test_read_only_keeps_freeze_and_restore_off(tmp_path: Path) -> None:
    workspace, _ = snapshot_workspace(tmp_path)
    app = scripted_app(views={"gpu-a": view()}, read_only=True, workspace=workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "gpu-a" in _text(app), "the dashboard")
        await pilot.press("F")  # the key stays live and says why it does nothing
        await wait_until(pilot, lambda: "read-only: freezing writes the unit" in notices(app), "the refusal")
        assert not isinstance(app.screen, FreezeScreen)
        app.action_snapshots()
        await wait_until(pilot, lambda: "Production snapshots (profiles" in _text(app), "the snapshots view")
        await pilot.press("r")
        await wait_until(pilot, lambda: "read-only: restoring rewrites the unit" in notices(app), "no restore")
        assert "y: write and restart" not in _text(app)


async def test_the_snapshots_view_marks_production_shows_a_document_and_diffs_two(tmp_path: Path) -> None:
    workspace, _ = snapshot_workspace(tmp_path)
    app = scripted_app(views={"gpu-a": view()}, workspace=workspace)
    async with app.run_test(size=SIZE) as pilot:
        app.action_snapshots()
        await wait_until(pilot, lambda: "Production snapshots (profiles" in _text(app), "the snapshots view")
        table = app.screen.query_one(DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [(r[0], r[1], r[2]) for r in rows] == [("★", "b1", "gpu-b"), ("★", "v2", "gpu-a"), ("", "v1", "gpu-a")]
        await pilot.press("down")  # v2
        await wait_until(pilot, lambda: "# Production setup v2 — gpu-a" in _text(app), "v2's document")
        await pilot.press("d")  # v2 is production: nothing to diff it with yet
        await wait_until(pilot, lambda: "mark another snapshot" in _text(app), "the hint")
        await pilot.press("down", "d")  # v1 against its host's production, v2
        await wait_until(pilot, lambda: "diff v2 -> v1" in _text(app), "the diff")
        text = _text(app)
        assert "--speculative-num-steps         2  ->  1" in text
        assert "C=1: output tok/s 178.0 -> 123.5" in text
        await pilot.press("m", "up", "up", "d")  # marked v1, diff against b1 (another host)
        await wait_until(pilot, lambda: "diff v1 -> b1" in _text(app), "the diff with the marked one")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, SnapshotsScreen), "the view to close")


async def test_the_header_says_the_production_snapshot_and_the_drift_from_it() -> None:
    app = scripted_app(views={"gpu-a": view_with_production("v2", speculative_num_steps=3)})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "≠ steps 3, production v2 has 2" in _text(app), "the drift")
    app = scripted_app(views={"gpu-a": view_with_production("v2")})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "= production v2" in _text(app), "in sync")


# --- end to end on the demo host --------------------------------------------------------------------------------


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        yield running


def _args(workspace: Path) -> argparse.Namespace:
    return argparse.Namespace(workspace=str(workspace), ssh_config=None, refresh=0.5, read_only=False, targets=["demo"])


async def test_freeze_and_restore_from_the_console_on_the_demo_host(demo: Demo, tmp_path: Path) -> None:
    workspace = Workspace.resolve(demo.workspace)
    doc = tmp_path / "production_{name}.md"
    app = build_app(_args(demo.workspace), ["demo"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "SGLang 0.5.9" in _text(app), "a refresh", 30)
        await pilot.press("F")
        await wait_until(pilot, lambda: "as a production snapshot" in _text(app), "the freeze dialog")
        app.screen.query_one("#freeze-doc", Input).value = str(doc)
        await pilot.press(*"steps 1", "enter")
        await wait_until(pilot, lambda: "ready: " in _text(app), "the preview", 30)
        await pilot.click("#freeze-go")
        await wait_until(pilot, lambda: "frozen as v1" in _text(app), "the freeze", 30)
        await pilot.press("escape")
        await wait_until(pilot, lambda: "= production v1" in _text(app), "the header's production mark", 30)
        assert (tmp_path / "production_v1.md").read_text().startswith("# Production setup v1 — demo")
        assert load_snapshot(workspace, "v1").server.resolved["speculative_num_steps"] == 1

        async with open_session("demo", workspace) as other:  # someone else changes the host
            edits = parse_edits(["speculative-num-steps=2", "speculative-num-draft-tokens=3"])
            assert (await (await plan_apply(other, edits, timeout_s=60)).execute()).ok
        await wait_until(pilot, lambda: "≠ steps 2, production v1 has 1" in _text(app), "the drift", 30)

        app.action_snapshots()
        await wait_until(pilot, lambda: "Production snapshots (profiles" in _text(app), "the snapshots view")
        await pilot.press("r")
        await wait_until(pilot, lambda: "y: write and restart" in _text(app), "the restore plan", 30)
        assert "+    --speculative-num-steps 1" in _text(app)
        await pilot.press("y")  # watched on the progress screen, as any apply
        await wait_until(pilot, lambda: "✔ verified" in _text(app), "the restore", 60)
        assert "Restoring v1 onto demo" in _text(app) and "esc: back to the snapshots" in _text(app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: "restored v1: verified" in _text(app), "the view's summary")
        await pilot.press("escape")
        await wait_until(pilot, lambda: "= production v1" in _text(app), "in sync again", 30)


async def test_a_change_after_the_preview_needs_a_new_preview_before_freeze() -> None:
    made: list[ScriptedPending] = []
    app = scripted_app(views={"gpu-a": view()}, runners=scripted_planner(made))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("F")
        await wait_until(pilot, lambda: "as a production snapshot" in _text(app), "the freeze dialog")
        await pilot.press(*"first", "enter")
        await wait_until(pilot, lambda: "ready: " in _text(app), "the preview")
        go = app.screen.query_one("#freeze-go", Button)
        assert not go.disabled
        await pilot.press(*" and second")
        await wait_until(pilot, lambda: "changed since the preview" in _text(app), "the stale preview")
        assert go.disabled
        await pilot.press("enter")
        await wait_until(pilot, lambda: not go.disabled, "the new preview")
        assert made[-1].plan.request.note == "first and second" and made[0].aborted == "planned again"
        await pilot.click("#freeze-go")
        await wait_until(pilot, lambda: "frozen as v1" in _text(app), "the freeze")
    assert made[-1].executed and not made[0].executed
