"""Pilot tests of `b` (the benchmark form and its live view) and `c` (the runs, side by side, export) on scripted
hosts: the engine's events come from tests/tui/bench_support.py, the records are real files in a workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual import events
from textual.widgets import Button, DataTable, Input, Select

from console.core.bench import BenchForm, load_form, save_form
from console.tui.screens.bench import FORM_FIELDS
from console.workspace import Workspace
from tests.tui.bench_support import FAIL_WHY, STOP_WHY, ScriptedBench, bench_app, seeds_workspace
from tests.tui.support import notices, screen_text, view, wait_until

SIZE = (120, 40)


def _text(app: object) -> str:
    return screen_text(app)  # type: ignore[arg-type]


async def _open_form(pilot: object, app: object) -> None:
    await pilot.press("b")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: "Benchmark gpu-a" in _text(app) and "concurrency" in _text(app), "the form")  # type: ignore[arg-type]


async def _set(pilot: object, app: object, field: str, value: str) -> None:
    box = app.screen.query_one(f"#bench-{field}", Input)  # type: ignore[attr-defined]
    box.value = value
    await pilot.pause()  # type: ignore[attr-defined]


async def test_the_form_opens_with_the_last_used_values_and_the_label_of_the_running_setup(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path).ensure()
    save_form(workspace.logs, BenchForm(label="old", concurrency="1,30,64", requests="128", workload="random+chat"))
    app = bench_app(workspace, ScriptedBench(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await _open_form(pilot, app)
        screen = app.screen
        assert screen.query_one("#bench-label", Input).value == "eagle3 s2 k1 d3 v2"
        assert screen.query_one("#bench-concurrency", Input).value == "1,30,64"
        assert screen.query_one("#bench-requests", Input).value == "128"
        assert screen.query_one("#bench-workload", Select).value == "random+chat"
        label = screen.query_one("#bench-label", Input)
        assert app.focused is label
        # Tab goes round the fields and buttons only: the form's scroll container is no stop of its own
        stops = []
        for _ in range(len(FORM_FIELDS) + 3):
            await pilot.press("tab")
            stops.append(app.focused)
            if app.focused is label:
                break
        assert stops[-1] is label and len(stops) == len(FORM_FIELDS) + 2, [type(w).__name__ for w in stops]
        assert all(isinstance(w, (Input, Select, Button)) for w in stops), [type(w).__name__ for w in stops]


async def test_a_proposed_label_follows_the_setup_that_runs_now_and_a_typed_one_is_kept(tmp_path: Path) -> None:
    """Issue 22, item 2: the form open while the setup changes (another console applied one) proposes the new
    setup's name; once the operator typed a label, that label stays."""
    workspace = Workspace(tmp_path).ensure()
    app = bench_app(workspace, ScriptedBench(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await _open_form(pilot, app)
        field = app.screen.query_one("#bench-label", Input)
        assert field.value == "eagle3 s2 k1 d3 v2"
        app.sources["gpu-a"].on_view(view(draft_tokens=5))  # the host now runs another setup
        await wait_until(pilot, lambda: field.value == "eagle3 s2 k1 d5 v2", "the label of the setup that runs now")
        await _set(pilot, app, "label", "my run")
        app.sources["gpu-a"].on_view(view(draft_tokens=3))
        form = app.screen
        await wait_until(pilot, lambda: form.last_proposal == "eagle3 s2 k1 d3 v2", "the form to see the new setup")
        assert field.value == "my run"


async def test_wrong_fields_are_said_beside_them_and_nothing_starts(tmp_path: Path) -> None:
    bench = ScriptedBench(Workspace(tmp_path).ensure())
    app = bench_app(Workspace(tmp_path), bench)
    async with app.run_test(size=SIZE) as pilot:
        await _open_form(pilot, app)
        await _set(pilot, app, "concurrency", "1,eight")
        await _set(pilot, app, "duration", "30")
        await _set(pilot, app, "requests", "64")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "not started: 2 field(s) to fix" in _text(app), "the refusal")
        text = _text(app)
        assert "concurrency levels must be comma-separated whole numbers, e.g. 1,8,32" in text
        assert "give requests or a duration per level, not both" in text
        assert app.screen.query_one("#bench-concurrency", Input).has_class("-wrong")
        assert bench.planned == [] and app.bench_runs == {}
        assert app.focused is app.screen.query_one("#bench-concurrency", Input)
        await _set(pilot, app, "concurrency", "1,8")
        await _set(pilot, app, "duration", "")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "finished: 2 level(s)" in _text(app), "the sweep to run once fixed")
        assert load_form(tmp_path / "logs").concurrency == "1,8"  # the last used values, for the next form


async def test_the_live_view_follows_the_sweep_the_dashboard_stays_live_and_cancel_keeps_finished_levels(
    tmp_path: Path,
) -> None:
    workspace = Workspace(tmp_path).ensure()
    bench = ScriptedBench(workspace, then="hold", finish_levels=1)
    app = bench_app(workspace, bench)
    async with app.run_test(size=SIZE) as pilot:
        await _open_form(pilot, app)
        await _set(pilot, app, "concurrency", "1,8,32")
        await _set(pilot, app, "requests", "64")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "37/64" in _text(app), "the running level's progress")
        text = _text(app)
        assert "load generator: here, through the SSH port forward (round trip 0.4 ms" in text
        assert "SGLang 0.5.9 · qwen3.5-122b" in text
        rows = {line.split()[0]: line for line in text.splitlines() if line.strip().startswith("C=")}
        assert rows["C=1"].split()[1:4] == ["done", "64/64", "91.3"] and rows["C=1"].split()[-1] == "1,920"
        assert rows["C=8"].split()[1:3] == ["running", "37/64"] and rows["C=32"].split()[1:3] == ["waiting", "-"]
        # the running level's GPU power is the dashboard's own figure (4 GPUs of the scripted view)
        power = sum(g.power_draw_w for g in view().status.gpus)  # type: ignore[union-attr]
        assert rows["C=8"].split()[-1] == f"{power:,.0f}"
        await pilot.press("escape")
        await wait_until(pilot, lambda: "goes on: b on its tab shows it" in notices(app), "back to the dashboard")
        assert app.bench_runs["gpu-a"].running
        app.scripted["gpu-a"].on_view(view(healthy=False))  # the dashboard takes its host's refreshes meanwhile
        await wait_until(pilot, lambda: "unhealthy (/health is not 200)" in _text(app), "a live dashboard")
        await pilot.press("q")  # quitting would cut the sweep: said, not done
        await wait_until(pilot, lambda: "a benchmark runs on gpu-a" in notices(app), "quit refused")
        await pilot.press("b")
        await wait_until(pilot, lambda: "37/64" in _text(app), "b shows the running sweep again")
        await pilot.press("x")
        await wait_until(pilot, lambda: "cancelled: 1 finished level(s) kept" in _text(app), "the cancel")
        rows = {line.split()[0]: line for line in _text(app).splitlines() if line.strip().startswith("C=")}
        assert rows["C=8"].split()[1] == "stopped" and rows["C=32"].split()[1:3] == ["not", "run"]
        files = (tmp_path / "logs").glob("bench-*.jsonl")
        kept = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        assert [(r["label"], r["max_concurrency"]) for r in kept] == [("eagle3 s2 k1 d3 v2", 1)]
        await pilot.press("c")  # the cancelled sweep's finished level, picked in the runs
        await wait_until(pilot, lambda: "picked 1/4: A eagle3 s2 k1 d3 v2" in _text(app), "the run picked")
        assert "C=1 " in _text(app)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_dashboard_header_marks_a_running_benchmark_until_it_ends(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """Back on the dashboard while a sweep runs, the figures are the benchmark's load, not production's: the header
    says so beside the host's name (where 80 columns still show it), and stops saying it when the sweep ends."""
    workspace = Workspace(tmp_path).ensure()
    app = bench_app(workspace, ScriptedBench(workspace, then="hold", finish_levels=1))
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: "SGLang 0.5.9" in _text(app), "the dashboard")
        assert "benchmark" not in _header(app)
        await _open_form(pilot, app)
        await _set(pilot, app, "concurrency", "1,8,32")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "running · esc: back to the dashboard" in _text(app), "the sweep running")
        await pilot.press("escape")
        await wait_until(pilot, lambda: "▶ benchmark 2/3 C=8" in _header(app), "the mark in the header")
        assert _header(app).index("gpu-a") < _header(app).index("▶ benchmark")
        await pilot.press("b", "x")  # the live view again; cancel: the sweep ends
        await wait_until(pilot, lambda: "cancelled: 1 finished level(s) kept" in _text(app), "the cancel")
        await pilot.press("escape")
        await wait_until(pilot, lambda: "SGLang 0.5.9" in _header(app), "the dashboard again")
        await wait_until(pilot, lambda: "benchmark" not in _header(app), "the mark gone")


def _header(app: object) -> str:
    """The dashboard's host header (its two lines), as the terminal shows them."""
    return "\n".join(_text(app).splitlines()[:2])


async def test_a_stopped_level_and_a_failed_host_say_why(tmp_path: Path) -> None:
    for then, why, status, kept in (
        ("stop", STOP_WHY, "stopped early", "2 level(s) recorded"),  # the stopped level has its record
        ("fail", FAIL_WHY, "failed", "1 finished level(s) kept"),
    ):
        workspace = Workspace(tmp_path / then).ensure()
        app = bench_app(workspace, ScriptedBench(workspace, then=then, finish_levels=1))  # type: ignore[arg-type]
        async with app.run_test(size=SIZE) as pilot:
            await _open_form(pilot, app)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda s=status, a=app: f"{s}: " in _text(a), f"the sweep to end: {then}")
            text = _text(app)
            assert f"eagle3 s2 k1 d3 v2 C=8: {why}" in text, then
            assert kept in text, then


async def test_read_only_refuses_b_with_why_and_allows_c(tmp_path: Path) -> None:
    app = bench_app(seeds_workspace(tmp_path), ScriptedBench(), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("b")
        await wait_until(
            pilot, lambda: "a benchmark flushes the server's cache and loads it" in notices(app), "b's why"
        )
        assert app.bench_runs == {}
        await pilot.press("c")
        await wait_until(pilot, lambda: "Benchmark runs (" in _text(app), "the runs table in read-only mode")


async def test_both_are_in_the_command_palette(tmp_path: Path) -> None:
    app = bench_app(seeds_workspace(tmp_path), ScriptedBench())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p", *"compare")
        await wait_until(pilot, lambda: "side by side: plots, crossovers, export" in _text(app), "Compare listed")
        await pilot.press("enter")
        await wait_until(pilot, lambda: "Benchmark runs (" in _text(app), "the runs from the palette")
        await pilot.press("escape")
        await wait_until(pilot, lambda: "Benchmark runs (" not in _text(app), "the dashboard")
        await pilot.press("ctrl+p", *"benchmark")
        await wait_until(pilot, lambda: "watch it live" in _text(app), "Benchmark listed")
        await pilot.press("enter")
        await wait_until(pilot, lambda: "Benchmark gpu-a" in _text(app), "the form from the palette")


async def _runs_table(pilot: object, app: object) -> DataTable:  # type: ignore[type-arg]
    await pilot.press("c")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: "Benchmark runs (" in _text(app), "the runs table")  # type: ignore[arg-type]
    return app.screen.query_one(DataTable)  # type: ignore[attr-defined, no-any-return]


async def test_runs_table_filters_picks_and_shows_the_runs_side_by_side_with_the_crossover(tmp_path: Path) -> None:
    app = bench_app(seeds_workspace(tmp_path))
    async with app.run_test(size=(160, 70)) as pilot:  # tall enough for the plots and the panes without scrolling
        table = await _runs_table(pilot, app)
        assert table.row_count == 3
        assert "eagle3 k1 v2" in _text(app) and "C=1,8,64" in _text(app) and "eagle3 s3 k1 d3" in _text(app)
        await pilot.press("slash", *"gpu-b")
        await wait_until(pilot, lambda: table.row_count == 1, "the filter")
        assert "1 of 3 run(s)" in _text(app)
        app.screen.query_one("#runs-filter", Input).value = ""
        await wait_until(pilot, lambda: table.row_count == 3, "the filter cleared")
        table.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: "pick 2-4 runs with space first (0 picked)" in _text(app), "too few picked")
        await pilot.press("down", "space", "up", "space")  # no spec (older) first: it is the baseline
        await wait_until(pilot, lambda: "picked 2/4: A no spec, B eagle3 k1 v2" in _text(app), "two picked")
        await pilot.press("enter")
        await wait_until(pilot, lambda: "Side by side: 2 runs" in _text(app), "the panes")
        text = _text(app)
        assert (
            "crossover output tok/s: no spec ahead below, eagle3 k1 v2 ahead above: they cross between C = 1 and 8"
            in text
        )
        assert "A no spec  (baseline)" in text and "B eagle3 k1 v2" in text
        assert "▲119.5%" in text  # 775 vs 353 tok/s at C=64
        assert "▼6.4%" in text  # 86.8 vs 92.7 at C=1
        assert "output tok/s (tok/s) by C" in text and "median TPOT (ms) by C" in text
        assert "sha256:0123456789abcdef" in text and "random 1024/1024" in text
        assert app.focused is app.screen.query_one("#runs-compare")  # the keys scroll the panes
        await pilot.press("x")
        await wait_until(pilot, lambda: "write NAME.md and NAME.json" in _text(app), "the export field")
        await pilot.press("enter")
        await wait_until(pilot, lambda: "exported" in _text(app), "the export")
        md = tmp_path / "logs" / "compare-20261130-120000.md"
        assert "| C=64 | 353 | 775 (+119.5% ▲) |" in md.read_text()
        assert json.loads(md.with_suffix(".json").read_text())["crossovers"][0]["below"] == "no spec"
        await pilot.press("escape")
        await wait_until(pilot, lambda: table.display and "picked 2/4" in _text(app), "back to the table")
        await pilot.press("escape")
        await wait_until(pilot, lambda: "Benchmark runs (" not in _text(app), "back to the dashboard")


async def test_the_runs_table_has_the_keys_from_the_start_and_its_rows_show_the_picks(tmp_path: Path) -> None:
    """In tmux, a space typed right after `c` went into the filter (Textual focused the first field, the filter,
    before the screen's own focus moved to the table), and after two picks the status line said "picked 2/4: A ...,
    B ..." while the rows showed no letter (the mark's column was as wide as its empty cells: none)."""
    focused: list[str] = []

    def record(message: object) -> None:
        if isinstance(message, events.DescendantFocus):
            focused.append(message.widget.id or type(message.widget).__name__)

    app = bench_app(seeds_workspace(tmp_path))
    async with app.run_test(size=SIZE, message_hook=record) as pilot:
        await _runs_table(pilot, app)
        await pilot.press("space", "down", "space")  # no table.focus(): the table has the keys as it opens
        await wait_until(pilot, lambda: "picked 2/4: A eagle3 k1 v2, B no spec" in _text(app), "two picked")
        assert "runs-filter" not in focused, f"the filter had the keys: {focused}"
        assert app.screen.query_one("#runs-filter", Input).value == ""
        rows = [line for line in _text(app).splitlines() if "random 1024/1024" in line]
        labels = ("eagle3 k1 v2", "no spec", "qwen steps 3")
        first_word = {label: row.split()[0] for row in rows for label in labels if f" {label}  " in row}
        assert first_word == {"eagle3 k1 v2": "A", "no spec": "B", "qwen steps 3": "qwen"}, rows


async def test_a_fifth_pick_is_refused_and_a_finished_benchmark_compares_its_workloads(tmp_path: Path) -> None:
    workspace = seeds_workspace(tmp_path)
    app = bench_app(workspace, ScriptedBench(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await _open_form(pilot, app)
        app.screen.query_one("#bench-workload", Select).value = "random+chat"
        await _set(pilot, app, "concurrency", "1,8")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "finished: 4 level(s)" in _text(app), "both workloads")
        await pilot.press("c")
        await wait_until(pilot, lambda: "Side by side: 2 runs" in _text(app), "the two workloads side by side")
        assert "A eagle3 s2 k1 d3 v2 random" in _text(app) and "B eagle3 s2 k1 d3 v2 chat" in _text(app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: "Benchmark runs (" in _text(app), "the table")
        app.screen.query_one(DataTable).focus()
        await pilot.press("space", "down", "space", "down", "space")
        await wait_until(pilot, lambda: "at most 4 runs side by side" in _text(app), "the fifth pick refused")


async def test_at_80x24_the_keys_scroll_down_to_the_panes(tmp_path: Path) -> None:
    app = bench_app(seeds_workspace(tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("c")
        await wait_until(pilot, lambda: "Benchmark runs (" in _text(app), "the runs")
        app.screen.query_one(DataTable).focus()
        await pilot.press("down", "space", "up", "space", "enter")
        await wait_until(pilot, lambda: "Side by side" in _text(app), "the comparison")
        assert "TPOT ms" not in _text(app)  # the panes are below the plots
        await pilot.press("pagedown")
        await wait_until(pilot, lambda: "TPOT ms" in _text(app), "the panes scrolled into view")
