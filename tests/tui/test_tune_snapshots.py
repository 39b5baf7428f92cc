"""SVG snapshots of the Tune screen: the form beside the space it makes, a tune live, a tune's result
(pytest-textual-snapshot). Everything shown is fixed: the form reads a fixed unit (tests/tui/support.py), the
tune is the core's own PendingTune playing fixed events with fixed times and figures, and its result comes from
the core's own search and report (tests/tui/tune_support.py); the clock is frozen. `--snapshot-update` rewrites
them."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from console.tui.screens.tune import TuneFormScreen, TuneProgress, tune_progress
from tests.tui.support import NOW, FixedSession, screen_text, scripted_app, view, wait_until, without_cursor
from tests.tui.tune_support import ScriptedTune


def _app() -> Any:
    return scripted_app(views={"gpu-a": view()})


def _showing(make: Any, *needles: str) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        app.push_screen(make())
        await wait_until(pilot, lambda: all(n in screen_text(app) for n in needles), f"{needles}")  # type: ignore[arg-type]
        await without_cursor(pilot)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_tune_form(snap_compare: Any, size: tuple[int, int]) -> None:
    def form() -> TuneFormScreen:
        return TuneFormScreen(FixedSession(), label="gpu-a", clock=lambda: NOW)  # type: ignore[arg-type]

    assert snap_compare(_app(), terminal_size=size, run_before=_showing(form, "setups to run", "ctrl+s"))


def test_tune_live(snap_compare: Any) -> None:
    def live() -> TuneProgress:
        return tune_progress(ScriptedTune(finish=False), label="gpu-a", clock=lambda: NOW)

    run_before = _showing(live, "benchmarking C=16", "598 tok/s")
    assert snap_compare(_app(), terminal_size=(120, 40), run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_tune_result(snap_compare: Any, size: tuple[int, int]) -> None:
    def result() -> TuneProgress:
        return tune_progress(ScriptedTune(finish=True), label="gpu-a", clock=lambda: NOW)

    run_before = _showing(result, "best setup per level", "the original unit, healthy")
    assert snap_compare(_app(), terminal_size=size, run_before=run_before)


def test_tune_result_optimistic_and_realistic(snap_compare: Any) -> None:
    def result() -> TuneProgress:
        return tune_progress(ScriptedTune(finish=True, workloads="random,chat"), label="gpu-a", clock=lambda: NOW)

    run_before = _showing(result, "chat: best setup per level", "vs realistic (chat)", "is inflated")
    assert snap_compare(_app(), terminal_size=(120, 40), run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_tune_result_by_goodput(snap_compare: Any, size: tuple[int, int]) -> None:
    """Ranked by goodput against an SLO: each level's ranking on the board, each setup's capacity at the SLO and
    where speculation loses on this traffic."""

    def result() -> TuneProgress:
        return tune_progress(ScriptedTune(finish=True, objective="goodput"), label="gpu-a", clock=lambda: NOW)

    run_before = _showing(result, "best setup per level by goodput", "the original unit, healthy")
    assert snap_compare(_app(), terminal_size=size, run_before=run_before)


def test_tune_form_with_the_traffic_fields(snap_compare: Any, tmp_path: Any) -> None:
    """The objective goodput without an SLO is refused beside the SLO field; the demo's datasets are offered."""
    from console.sim.datasets import write_datasets

    write_datasets(tmp_path, count=20)

    def form() -> TuneFormScreen:
        screen = TuneFormScreen(FixedSession(), label="gpu-a", clock=lambda: NOW, datasets=tmp_path)  # type: ignore[arg-type]
        return screen

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        screen = form()
        app.push_screen(screen)
        await wait_until(pilot, lambda: "setups to run" in screen_text(app), "the form")  # type: ignore[arg-type]
        screen.query_one("#tune-field-objective").value = "goodput"  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "✖ SLO: the objective goodput counts" in screen_text(app), "the refusal")  # type: ignore[arg-type]
        await without_cursor(pilot)

    assert snap_compare(_app(), terminal_size=(120, 40), run_before=run_before)
