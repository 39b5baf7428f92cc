"""Pilot tests of the operator's own traffic in the console (issue 23): `b` with a dataset picked from the
workspace's datasets/, an SLO (the profile's [slo] first) and find capacity, each problem beside its field; the
live view's goodput and ✔/✖ per level and the capacity at the SLO; `c` on runs held to an SLO (goodput plotted,
the crossover at the SLO named, the export carrying the SLO). Scripted hosts (tests/tui/bench_support.py), real
dataset files (console.sim.datasets, the demo's) and real records in a workspace."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import DataTable, Input, Label, Select

from console.sim.datasets import write_datasets
from console.workspace import Workspace
from tests.tui.bench_support import ScriptedBench, bench_app, slo_workspace
from tests.tui.support import screen_text, wait_until

SIZE = (120, 40)
PROFILE_SLO = (("ttft_p95", 300.0), ("tpot_p95", 60.0))


def _text(app: object) -> str:
    return screen_text(app)  # type: ignore[arg-type]


def _workspace(root: Path) -> Workspace:
    workspace = Workspace(root).ensure()
    write_datasets(workspace.datasets, count=40)
    return workspace


async def _open_form(pilot: object, app: object) -> None:
    await pilot.press("b")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: "Benchmark gpu-a" in _text(app) and "concurrency" in _text(app), "the form")  # type: ignore[arg-type]


async def test_a_picked_dataset_runs_as_the_dataset_workload_held_to_the_profiles_slo(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    bench = ScriptedBench(workspace)
    app = bench_app(workspace, bench, slo=PROFILE_SLO)
    async with app.run_test(size=SIZE) as pilot:
        await _open_form(pilot, app)
        screen = app.screen
        assert screen.query_one("#bench-slo", Input).value == "ttft_p95=300ms,tpot_p95=60ms"  # the profile's
        picker = screen.query_one("#bench-dataset", Select)
        assert [str(option[0]) for option in picker._options[1:]] == ["chat.json", "code.jsonl"]
        picker.value = "code.jsonl"
        workload = screen.query_one("#bench-workload", Select)
        await wait_until(pilot, lambda: workload.value == "dataset", "picking a file picks the dataset workload")
        screen.query_one("#bench-dataset-sample", Input).value = "16"
        screen.query_one("#bench-concurrency", Input).value = "1,32"
        screen.query_one("#bench-requests", Input).value = "16"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "capacity at the SLO (highest level)" in _text(app), "the capacity")
        ((sweep,),) = bench.planned
        sample = sweep.config.workload.dataset
        assert sample is not None and (sample.file, len(sample.requests)) == ("code.jsonl", 16)
        assert sweep.config.slo == {"ttft_p95": 300.0, "tpot_p95": 60.0}
        text = _text(app)
        assert "good/s" in text and "SLO: TTFT p95 ≤ 300 ms, TPOT p95 ≤ 60 ms" in text
        assert "✔" in text and "✖ C=32: TTFT p95 408.0 ms > 300 ms" in text
        assert "capacity at the SLO (highest level): C=1 (1.33 req/s); C=32 (3100 % above) misses it" in text


async def test_each_traffic_problem_stands_beside_its_field_and_nothing_starts(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    (workspace.datasets / "broken.jsonl").write_text('{"prompt": "one two three"}\n{"prompt": "cut\n')
    bench = ScriptedBench(workspace)
    app = bench_app(workspace, bench)
    async with app.run_test(size=SIZE) as pilot:
        await _open_form(pilot, app)
        screen = app.screen
        assert screen.query_one("#bench-slo", Input).value == ""  # no [slo] in the profile, none used before
        screen.query_one("#bench-workload", Select).value = "dataset"
        screen.query_one("#bench-find-capacity", Select).value = "yes"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "not started: 2 field(s)" in _text(app), "the refusal")
        text = _text(app)
        assert "pick a file of the workspace's datasets/" in text and "find capacity holds each rate to" in text
        assert app.focused is screen.query_one("#bench-dataset", Select)
        screen.query_one("#bench-dataset", Select).value = "broken.jsonl"
        screen.query_one("#bench-slo", Input).value = "ttft_p95=fast"
        await pilot.press("ctrl+s")
        beside = screen.query_one("#bench-hint-dataset", Label)
        await wait_until(pilot, lambda: "broken.jsonl: line 2" in str(beside.content), "the file's problem beside it")
        assert "JSON cut short" in str(beside.content) and "nothing was sent" in str(beside.content)
        assert "ttft_p95" in str(screen.query_one("#bench-hint-slo", Label).content)
        assert set(screen.problems) == {"dataset", "slo"} and bench.planned == []  # nothing sent


async def test_compare_plots_goodput_names_the_crossover_at_the_slo_and_exports_the_slo(tmp_path: Path) -> None:
    workspace = slo_workspace(tmp_path)
    app = bench_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        await wait_until(pilot, lambda: "Benchmark runs (" in _text(app), "the runs")
        app.screen.query_one(DataTable).focus()
        await pilot.press("down", "space", "up", "space", "enter")
        await wait_until(pilot, lambda: "Side by side" in _text(app), "the panes")
        text = _text(app)
        assert "crossover at the SLO goodput: eagle3 k1 v2 ahead below" not in text  # no spec leads at C=1
        goodput = "goodput: no spec ahead below, eagle3 k1 v2 ahead above: they cross between C = 1 and 8"
        assert f"crossover at the SLO {goodput}" in text
        assert "goodput (req/s) by C" in text
        assert "capacity at the SLO, no spec: C=8" in text and "capacity at the SLO, eagle3 k1 v2: C=64" in text
        app.screen.query_one("#runs-compare").scroll_end(animate=False)  # the panes are below the plots
        await wait_until(pilot, lambda: "SLO ✖" in _text(app) and "SLO ✔" in _text(app), "each level's verdict")
        assert "good/s" in _text(app)
        await pilot.press("x")
        path = app.screen.query_one("#runs-export-path", Input)
        await wait_until(pilot, lambda: app.focused is path, "the export path")
        path.value = "slo-compare"
        await pilot.press("enter")
        await wait_until(pilot, lambda: "exported" in _text(app), "the export")
        exported = json.loads((workspace.logs / "slo-compare.json").read_text())
        assert exported["comparison"]["slo"] == {"ttft_p95": 800.0, "tpot_p95": 60.0}
        assert exported["comparison"]["capacity"]["no spec"]["level"] == "C=8"
        assert any(c["metric"] == "request_goodput" for c in exported["crossovers"])
        markdown = (workspace.logs / "slo-compare.md").read_text()
        assert "## SLO" in markdown and "TTFT p95 ≤ 800 ms" in markdown


async def test_an_emptied_slo_field_says_and_holds_the_profiles_slo(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    bench = ScriptedBench(workspace)
    app = bench_app(workspace, bench, slo=PROFILE_SLO)
    async with app.run_test(size=SIZE) as pilot:
        await _open_form(pilot, app)
        screen = app.screen
        hint = str(screen.query_one("#bench-hint-slo", Label).content)
        assert hint == "empty: the profile's ttft_p95=300ms,tpot_p95=60ms" and "none" not in hint
        field = screen.query_one("#bench-slo", Input)
        field.value = ""
        field.focus()
        await wait_until(pilot, lambda: "SLO: empty: the profile's ttft_p95=300ms" in _text(app), "the status line")
        screen.query_one("#bench-find-capacity", Select).value = "yes"  # needs an SLO: the profile's counts
        screen.query_one("#bench-request-rate", Input).value = "2"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: bench.planned != [], "the sweep to start")
        ((sweep,),) = bench.planned
        assert sweep.config.slo is None and sweep.config.find_capacity  # bench_host gives it the profile's [slo]
        assert not screen.problems
