"""Unit tests of the console's pure benchmark views: the runs in logs/ (list, filter, a bad line), the side-by-side
model (setups as resolved, deltas), the crossover finder and the Markdown / JSON export."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from console.bench.levels import LevelKey
from console.bench.records import append_records
from console.bench.runs import filter_runs, list_runs, setup_of
from console.bench.sidebyside import crossover_lines, find_crossovers, side_by_side, to_markdown
from console.core.bench.export import export_comparison, export_paths
from tests.support.bench_runs import EAGLE, NO_SPEC, SEEDS_EAGLE, SEEDS_NO_SPEC, T0, run


def C(concurrency: int) -> LevelKey:
    return LevelKey("C", concurrency)


def test_runs_are_listed_newest_first_with_setup_levels_and_a_bad_line_named(tmp_path: Path) -> None:
    append_records(tmp_path, run("no spec", SEEDS_NO_SPEC, args=NO_SPEC))
    later = T0 + timedelta(hours=1)
    append_records(tmp_path, run("eagle3 s2 k1 d3 v2", SEEDS_EAGLE, args=EAGLE, at=later, repeats=3))  # 9 lines
    with (tmp_path / f"bench-{T0:%Y-%m-%d}.jsonl").open("a") as f:
        f.write('{"label": "cut short\n')
    runs, problems = list_runs(tmp_path)
    assert [r.label for r in runs] == ["eagle3 s2 k1 d3 v2", "no spec"]
    assert runs[0].setup == "eagle3 s2 k1 d3 v2" and runs[1].setup == "no spec"
    assert runs[0].levels_text == "C=1,8,64 ×3" and runs[1].levels == (C(1), C(8), C(64))
    assert runs[0].version == "0.5.9" and runs[0].workload == "random 1024/1024" and runs[0].host == "gpu-a"
    assert len(problems) == 1 and ":13: not a benchmark record" in problems[0]


def test_filter_keeps_runs_holding_every_word() -> None:
    runs, _ = list_runs(Path("/nonexistent"))
    assert runs == []
    from console.bench.runs import summarize

    a = summarize(run("no spec", SEEDS_NO_SPEC, args=NO_SPEC))
    b = summarize(run("topk1 v2", SEEDS_EAGLE, args=EAGLE, host="gpu-b"))
    assert filter_runs([a, b], "") == [a, b]
    assert filter_runs([a, b], "EAGLE3") == [b]  # the setup column
    assert filter_runs([a, b], "gpu-b 0.5.9") == [b]  # host and version, both words
    assert filter_runs([a, b], "gpu-b nospec") == []


def test_setup_of_names_the_resolved_speculative_values() -> None:
    assert setup_of({"speculative_algorithm": "NONE"}) == "no spec"
    assert setup_of({**EAGLE, "disable_overlap_schedule": True}) == "eagle3 s2 k1 d3 no-overlap"


def test_no_speculation_ahead_at_low_concurrency_eagle3_above_the_crossing() -> None:
    sbs = side_by_side([run("no spec", SEEDS_NO_SPEC, args=NO_SPEC), run("eagle3", SEEDS_EAGLE, args=EAGLE)])
    crossings = find_crossovers(sbs.comparison, "output_throughput")
    assert len(crossings) == 1
    c = crossings[0]
    assert (c.below, c.above, c.between, c.axis) == ("no spec", "eagle3", (C(1), C(8)), "C")
    # difference +5.9 at C=1, -30 at C=8: linearly zero at 1 + 7 × 5.9 / 35.9; but C=1 and C=8 are 8× apart, too far
    # for a line to say where (issue 36: such a line put a crossing measured near C = 30 at C ≈ 6)
    assert c.at == pytest.approx(1 + 7 * 5.9 / 35.9)
    assert c.text() == "no spec ahead below, eagle3 ahead above: they cross between C = 1 and 8"
    assert not c.placed and c.to_json()["at"] is None
    cell = next(r for r in sbs.comparison.levels[2].runs if r.label == "eagle3").cells["output_throughput"]
    assert cell.verdict == "better" and cell.delta_pct == pytest.approx(119.5, abs=0.1)


def test_a_crossing_between_levels_at_most_twice_apart_is_placed_between_them() -> None:
    a = run("no spec", {16: 300.0, 32: 400.0}, args=NO_SPEC)
    b = run("eagle3", {16: 280.0, 32: 460.0}, args=EAGLE)
    (c,) = find_crossovers(side_by_side([a, b]).comparison)
    assert c.at == pytest.approx(16 + 16 * 20 / 80) and c.placed
    assert c.text() == "no spec ahead below C ≈ 20, eagle3 ahead above" and c.to_json()["at"] == 20.0


def test_a_crossing_between_levels_far_apart_is_only_said_to_lie_between_them() -> None:
    """The Kimi seeds at C = 1 and 48 (issue 36): the line between them crosses at C ≈ 5, where they measured ~30."""
    a = run("no spec", {1: 92.0, 48: 671.0}, args=NO_SPEC)
    b = run("eagle3", {1: 86.0, 48: 742.0}, args=EAGLE)
    sbs = side_by_side([a, b])
    (c,) = find_crossovers(sbs.comparison)
    assert c.text() == "no spec ahead below, eagle3 ahead above: they cross between C = 1 and 48"
    assert c.between == (C(1), C(48)) and c.to_json()["at"] is None
    assert "output tok/s: no spec ahead below, eagle3 ahead above: they cross between C = 1 and 48" in crossover_lines(
        sbs
    )


def test_tpot_crossing_is_found_in_its_own_direction() -> None:
    a = run("a", {1: 100.0, 32: 100.0}, args=NO_SPEC, tpot={1: 10.0, 32: 30.0})
    b = run("b", {1: 100.0, 32: 100.0}, args=EAGLE, tpot={1: 12.0, 32: 20.0})
    sbs = side_by_side([a, b])
    (c,) = [c for c in sbs.crossovers if c.metric == "median_tpot_ms"]
    assert (c.below, c.above) == ("a", "b")  # fewer ms is ahead: a at C=1, b at C=32
    assert c.at == pytest.approx(1 + 31 * 2 / 12)
    assert crossover_lines(sbs)[0].startswith("output tok/s: no crossover")


def test_a_crossing_inside_the_repeats_spread_says_so() -> None:
    a = run("a", {1: 100.0, 8: 200.0}, args=NO_SPEC, repeats=3, spread=5.0)
    b = run("b", {1: 99.0, 8: 300.0}, args=EAGLE, repeats=3, spread=5.0)
    (c,) = find_crossovers(side_by_side([a, b]).comparison)
    assert c.noise and c.text().endswith("(within noise)")


def test_three_runs_give_every_pair_and_a_run_measured_twice_is_told_apart() -> None:
    first = run("eagle3", SEEDS_EAGLE, args=EAGLE)
    again = run("eagle3", {1: 86.0, 8: 331.0, 64: 770.0}, args=EAGLE, at=T0 + timedelta(hours=2))
    sbs = side_by_side([run("no spec", SEEDS_NO_SPEC, args=NO_SPEC), first, again])
    assert sbs.labels == ["no spec", "eagle3 @11-30 09:00:00", "eagle3 @11-30 11:00:00"]
    pairs = {(c.below, c.above) for c in sbs.crossovers if c.metric == "output_throughput"}
    assert ("no spec", "eagle3 @11-30 09:00:00") in pairs and ("no spec", "eagle3 @11-30 11:00:00") in pairs
    with pytest.raises(ValueError, match="pick one to 4 runs"):
        side_by_side([first] * 5)


def test_markdown_and_json_export(tmp_path: Path) -> None:
    sbs = side_by_side([run("no spec", SEEDS_NO_SPEC, args=NO_SPEC), run("eagle3 | v2", SEEDS_EAGLE, args=EAGLE)])
    md = to_markdown(sbs)
    assert "| run | host | setup | SGLang | unit | workload | started (UTC) |" in md
    assert "| eagle3 \\| v2 | gpu-a | eagle3 s2 k1 d3 v2 | 0.5.9 | sha256:0123456789abcdef | random 1024/1024 |" in md
    assert "## output tok/s (tok/s)" in md
    assert "| C=64 | 353 | 775 (+119.5% ▲) |" in md
    assert "- output tok/s: no spec ahead below, eagle3 \\| v2 ahead above: they cross between C = 1 and 8" in md
    md_path, json_path = export_comparison(sbs, "kimi/c1-vs-c64", tmp_path)
    assert (md_path, json_path) == (tmp_path / "kimi/c1-vs-c64.md", tmp_path / "kimi/c1-vs-c64.json")
    assert md_path.read_text() == md
    data = json.loads(json_path.read_text())
    assert [r["label"] for r in data["runs"]] == ["no spec", "eagle3 | v2"]
    assert data["runs"][1]["speculative"]["speculative_eagle_topk"] == 1
    assert data["crossovers"][0]["below"] == "no spec" and data["comparison"]["baseline"] == "no spec"
    assert not list(tmp_path.rglob("*.tmp"))


def test_export_paths_take_a_stem_a_file_or_a_folder(tmp_path: Path) -> None:
    assert export_paths("a.md", tmp_path) == (tmp_path / "a.md", tmp_path / "a.json")
    assert export_paths(tmp_path / "b.json", tmp_path) == (tmp_path / "b.md", tmp_path / "b.json")
    md, js = export_paths(tmp_path, tmp_path)
    assert md.parent == tmp_path and md.name.startswith("compare-") and js.suffix == ".json"
