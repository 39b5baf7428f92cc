"""SVG snapshots of the freeze dialog, the snapshots view and the header's production mark (pytest-textual-snapshot).

Everything shown is fixed: the plan is the real pure plan of a fixed capture (tests/support/snapshots.py), the
snapshot files are written with fixed times, the clock is frozen. `--snapshot-update` rewrites them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.support import snapshots as snaps
from tests.tui.freeze_support import ScriptedPending, scripted_planner, snapshot_workspace, view_with_production
from tests.tui.support import screen_text, scripted_app, view, wait_until, without_cursor


def _freeze_app(**capture: Any) -> Any:
    made: list[ScriptedPending] = []
    return scripted_app(views={"gpu-a": view()}, runners=scripted_planner(made, **capture))


def _previewed(*needles: str) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        await pilot.press("F")
        await wait_until(pilot, lambda: "as a production snapshot" in screen_text(app), "the dialog")  # type: ignore[arg-type]
        await pilot.press(*"steps 2: +45 % at C = 32", "enter")
        await wait_until(pilot, lambda: all(n in screen_text(app) for n in needles), f"{needles}")  # type: ignore[arg-type]
        await without_cursor(pilot)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_freeze_dialog_preview(snap_compare: Any, size: tuple[int, int]) -> None:
    app = _freeze_app(text=snaps.unit_text(install=False))
    assert snap_compare(app, terminal_size=size, run_before=_previewed("ready: ", "Unit change"))


def test_freeze_dialog_refused(snap_compare: Any) -> None:
    app = _freeze_app(need_daemon_reload=True)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_previewed("refused (1)"))


def _snapshots_view(*keys: str, needle: str) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        app.action_snapshots()  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "Production snapshots" in screen_text(app), "the view")  # type: ignore[arg-type]
        await pilot.press(*keys)
        await wait_until(pilot, lambda: needle in screen_text(app), needle)  # type: ignore[arg-type]

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_snapshots_view_with_a_diff(snap_compare: Any, size: tuple[int, int], tmp_path: Path) -> None:
    workspace, _ = snapshot_workspace(tmp_path)
    app = scripted_app(views={"gpu-a": view()}, workspace=workspace)
    run_before = _snapshots_view("down", "down", "d", needle="diff v2 -> v1")
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_snapshots_view_document(snap_compare: Any, tmp_path: Path) -> None:
    workspace, _ = snapshot_workspace(tmp_path)
    app = scripted_app(views={"gpu-a": view()}, workspace=workspace)
    run_before = _snapshots_view("down", needle="# Production setup v2")
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_header_with_drift_from_production(snap_compare: Any, size: tuple[int, int]) -> None:
    app = scripted_app(views={"gpu-a": view_with_production("v2", speculative_num_steps=3)})

    async def run_before(pilot: Pilot[Any]) -> None:
        await wait_until(pilot, lambda: "≠ steps 3" in screen_text(app), "the drift")

    assert snap_compare(app, terminal_size=size, run_before=run_before)
