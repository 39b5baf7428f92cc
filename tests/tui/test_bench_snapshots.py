"""SVG snapshots of `b` (the form, its errors, the live view) and `c` (the runs, side by side) at 80×24 and 120×40.

Everything shown is fixed: the host is a scripted HostView, the sweep's events and figures come from
tests/tui/bench_support.py, the runs are records at fixed times (tests/support/bench_runs.py), the clock is frozen.
`--snapshot-update` rewrites them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from console.workspace import Workspace
from tests.tui.bench_support import ScriptedBench, bench_app, seeds_workspace
from tests.tui.support import screen_text, wait_until, without_cursor

SIZES = [(80, 24), (120, 40)]


def _text(pilot: Pilot[Any]) -> str:
    return screen_text(pilot.app)  # type: ignore[arg-type]


def _form(*, errors: bool = False) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("b")
        await wait_until(pilot, lambda: "concurrency" in _text(pilot), "the form")
        if errors:
            pilot.app.screen.query_one("#bench-concurrency").value = "1,eight"  # type: ignore[attr-defined]
            pilot.app.screen.query_one("#bench-duration").value = "30"  # type: ignore[attr-defined]
            pilot.app.screen.query_one("#bench-requests").value = "64"  # type: ignore[attr-defined]
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: "not started" in _text(pilot), "the errors")
        await without_cursor(pilot)

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_bench_form(snap_compare: Any, size: tuple[int, int], tmp_path: Path) -> None:
    app = bench_app(Workspace(tmp_path).ensure(), ScriptedBench())
    assert snap_compare(app, terminal_size=size, run_before=_form())


def test_bench_form_with_errors(snap_compare: Any, tmp_path: Path) -> None:
    app = bench_app(Workspace(tmp_path).ensure(), ScriptedBench())
    assert snap_compare(app, terminal_size=(80, 24), run_before=_form(errors=True))


def _live(needle: str, workload: str = "random") -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("b")
        await wait_until(pilot, lambda: "concurrency" in _text(pilot), "the form")
        pilot.app.screen.query_one("#bench-requests").value = "64"  # type: ignore[attr-defined]
        pilot.app.screen.query_one("#bench-workload").value = workload  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: needle in _text(pilot), needle)
        await without_cursor(pilot)

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_bench_live_view(snap_compare: Any, size: tuple[int, int], tmp_path: Path) -> None:
    app = bench_app(Workspace(tmp_path).ensure(), ScriptedBench(then="hold", finish_levels=1))
    assert snap_compare(app, terminal_size=size, run_before=_live("37/64"))


def test_bench_live_view_stopped_with_both_workloads(snap_compare: Any, tmp_path: Path) -> None:
    app = bench_app(Workspace(tmp_path).ensure(), ScriptedBench(then="stop", finish_levels=2))
    assert snap_compare(app, terminal_size=(120, 40), run_before=_live("stopped early", "random+chat"))


def _runs(*, compare: bool) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("c")
        await wait_until(pilot, lambda: "Benchmark runs (" in _text(pilot), "the runs")
        pilot.app.screen.query_one(DataTable).focus()
        await pilot.press("down", "space", "up", "space")
        await wait_until(pilot, lambda: "picked 2/4" in _text(pilot), "two picked")
        if compare:
            await pilot.press("enter")
            await wait_until(pilot, lambda: "Side by side" in _text(pilot), "the panes")
        await without_cursor(pilot)

    return run_before


def test_runs_table(snap_compare: Any, tmp_path: Path) -> None:
    app = bench_app(seeds_workspace(tmp_path))
    assert snap_compare(app, terminal_size=(120, 40), run_before=_runs(compare=False))


@pytest.mark.parametrize("size", SIZES)
def test_runs_side_by_side(snap_compare: Any, size: tuple[int, int], tmp_path: Path) -> None:
    app = bench_app(seeds_workspace(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=_runs(compare=True))


def _traffic(*, run: bool) -> Any:
    """The form with the demo's code dataset picked and an SLO; run: the live view once the levels are judged."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("b")
        await wait_until(pilot, lambda: "concurrency" in _text(pilot), "the form")
        screen = pilot.app.screen
        screen.query_one("#bench-dataset").value = "code.jsonl"  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: screen.query_one("#bench-workload").value == "dataset", "the workload")  # type: ignore[attr-defined]
        screen.query_one("#bench-dataset-sample").value = "64"  # type: ignore[attr-defined]
        screen.query_one("#bench-requests").value = "64"  # type: ignore[attr-defined]
        screen.query_one("#bench-slo").value = "ttft_p95=300ms,tpot_p95=60ms"  # type: ignore[attr-defined]
        if run:
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: "capacity at the SLO" in _text(pilot), "the capacity")
        await without_cursor(pilot)

    return run_before


def _traffic_workspace(root: Path) -> Workspace:
    from console.sim.datasets import write_datasets

    workspace = Workspace(root).ensure()
    write_datasets(workspace.datasets, count=40)
    return workspace


@pytest.mark.parametrize("size", SIZES)
def test_bench_form_with_a_dataset_and_an_slo(snap_compare: Any, size: tuple[int, int], tmp_path: Path) -> None:
    app = bench_app(_traffic_workspace(tmp_path), ScriptedBench())
    assert snap_compare(app, terminal_size=size, run_before=_traffic(run=False))


@pytest.mark.parametrize("size", SIZES)
def test_bench_live_view_held_to_an_slo(snap_compare: Any, size: tuple[int, int], tmp_path: Path) -> None:
    app = bench_app(_traffic_workspace(tmp_path), ScriptedBench())
    assert snap_compare(app, terminal_size=size, run_before=_traffic(run=True))


def test_runs_side_by_side_held_to_an_slo(snap_compare: Any, tmp_path: Path) -> None:
    from tests.tui.bench_support import slo_workspace

    app = bench_app(slo_workspace(tmp_path))
    assert snap_compare(app, terminal_size=(120, 40), run_before=_runs(compare=True))
