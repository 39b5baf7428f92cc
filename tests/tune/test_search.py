"""The tune's search strategy (console/core/tune_search.py), pure: screening, halving, stopping on the noise."""

from __future__ import annotations

import random

import pytest

from console.core.tune_search import Cell, Policy, Search, Stage, cells_for, estimate_stage_seconds

C1, C64 = Cell("random", 1), Cell("random", 64)


def run_stage(search: Search, stage: Stage, truth: dict[tuple[str, Cell], float], noise: float = 0.0,
              rng: random.Random | None = None) -> None:  # fmt: skip
    """Benchmark a stage against known figures (± relative noise): what the runner does on a host."""
    rng = rng or random.Random(1)
    for run in stage.runs:
        for cell in run.cells:
            for _ in range(stage.repeats):
                value = truth[(run.candidate, cell)] * (1 + rng.uniform(-noise, noise))
                search.record(run.candidate, cell, stage.kind, value)
    search.finish_stage()


def test_screening_keeps_who_can_still_win_then_full_runs_decide_outside_the_noise() -> None:
    truth = {("a", C1): 100.0, ("b", C1): 97.0, ("c", C1): 60.0, ("d", C1): 50.0}
    search = Search(["a", "b", "c", "d"], [C1])
    screen = search.next_stage()
    assert screen is not None and screen.kind == "screen" and screen.repeats == 1
    assert [r.candidate for r in screen.runs] == ["a", "b", "c", "d"] and screen.duration_fraction == 0.125
    run_stage(search, screen, truth)
    full = search.next_stage()
    assert full is not None and full.kind == "full" and full.repeats == 2 and full.duration_fraction == 1.0
    assert [r.candidate for r in full.runs] == ["a", "b"]  # c and d cannot reach a even with 3 % noise each
    search.record("a", C1, "full", 100.0)
    search.record("a", C1, "full", 101.0)
    search.record("b", C1, "full", 96.0)
    search.record("b", C1, "full", 97.0)
    search.finish_stage()
    decision = search.decision(C1)
    assert decision.decided and not decision.within_noise and decision.winner and decision.winner.candidate == "a"
    assert decision.margin_pct == pytest.approx((100.5 / 96.5 - 1) * 100)
    assert search.next_stage() is None and search.stop_reason == "every cell's winner is outside the noise"


def test_overlapping_repeats_get_more_repeats_then_the_search_stops_within_noise() -> None:
    search = Search(["a", "b", "c"], [C1], Policy(max_full_stages=2))
    run_stage(search, search.next_stage(), {("a", C1): 100.0, ("b", C1): 99.0, ("c", C1): 10.0})  # type: ignore[arg-type]
    for stage_number in (1, 2):
        stage = search.next_stage()
        assert stage is not None and stage.index == stage_number
        assert sorted(r.candidate for r in stage.runs) == ["a", "b"]
        # ranges overlap (100..104 and 97..101) but neither median is inside the other's range: worth repeating
        for a, b in ((100.0, 97.0), (104.0, 101.0)):
            search.record("a", C1, "full", a)
            search.record("b", C1, "full", b)
        search.finish_stage()
    assert search.next_stage() is None and search.stop_reason == "the most repeats planned"
    decision = search.decision(C1)
    assert decision.within_noise and decision.winner and decision.winner.samples == 4


def test_a_tie_stops_at_once_within_the_noise() -> None:
    search = Search(["a", "b"], [C1])
    run_stage(search, search.next_stage(), {("a", C1): 100.0, ("b", C1): 99.0})  # type: ignore[arg-type]
    stage = search.next_stage()
    assert stage is not None
    for a, b in ((98.0, 99.0), (102.0, 100.0)):  # a 98..102 (median 100), b 99..100: b's median inside a's range
        search.record("a", C1, "full", a)
        search.record("b", C1, "full", b)
    search.finish_stage()
    decision = search.decision(C1)
    assert decision.decided and decision.within_noise and decision.winner and decision.winner.candidate == "a"
    assert search.next_stage() is None


def test_screening_keeps_the_best_few_but_always_two() -> None:
    cands = [f"k{i}" for i in range(8)]
    truth = {(c, C1): 100.0 - i * 0.5 for i, c in enumerate(cands)}  # all within the assumed noise
    search = Search(cands, [C1])
    run_stage(search, search.next_stage(), truth)  # type: ignore[arg-type]
    assert [r.candidate for r in search.next_stage().runs] == ["k0", "k1"]  # type: ignore[union-attr]
    wider = Search(cands, [C1], Policy(keep_per_level=4))
    run_stage(wider, wider.next_stage(), truth)  # type: ignore[arg-type]
    assert [r.candidate for r in wider.next_stage().runs] == ["k0", "k1", "k2", "k3"]  # type: ignore[union-attr]
    lone = Search(["x", "y", "z"], [C1], Policy(keep_per_level=3))
    run_stage(lone, lone.next_stage(), {("x", C1): 100.0, ("y", C1): 10.0, ("z", C1): 5.0})  # type: ignore[arg-type]
    assert [r.candidate for r in lone.next_stage().runs] == ["x", "y"]  # type: ignore[union-attr]


def test_each_cell_keeps_its_own_contenders_and_a_run_benchmarks_only_those_cells() -> None:
    truth = {
        ("a", C1): 100.0,
        ("b", C1): 60.0,
        ("c", C1): 96.0,
        ("a", C64): 500.0,
        ("b", C64): 800.0,
        ("c", C64): 300.0,
    }
    search = Search(["a", "b", "c"], [C1, C64])
    run_stage(search, search.next_stage(), truth)  # type: ignore[arg-type]
    full = search.next_stage()
    assert full is not None
    assert {r.candidate: r.cells for r in full.runs} == {"a": (C1, C64), "b": (C64,), "c": (C1,)}


def test_the_candidate_the_host_runs_goes_first() -> None:
    search = Search(["a", "b", "c"], [C1])
    stage = search.next_stage(running="c")
    assert stage is not None and [r.candidate for r in stage.runs] == ["c", "a", "b"]


def test_a_candidate_that_failed_is_out_of_every_cell_and_of_the_standings() -> None:
    search = Search(["a", "b", "c"], [C1, C64])
    search.record("b", C1, "screen", 500.0)
    search.drop("b", "failed to start")
    assert "b" not in search.alive(C1) and "b" not in search.alive(C64)
    assert [s.candidate for s in search.standings(C1)] == []
    stage = search.next_stage()
    assert stage is not None and [r.candidate for r in stage.runs] == ["a", "c"]


def test_a_cell_with_its_competitors_still_unmeasured_is_not_decided() -> None:
    search = Search(["a", "b"], [C1])
    search.record("a", C1, "screen", 100.0)
    assert not search.decision(C1).decided
    search.drop("b", "failed")
    decision = search.decision(C1)
    assert decision.decided and decision.runner_up is None and decision.margin_pct is None


def test_grid_measures_everything_fully_once() -> None:
    search = Search(["a", "b", "c"], [C1, C64], Policy(strategy="grid", repeats=2))
    stage = search.next_stage()
    assert stage is not None and stage.kind == "full" and stage.repeats == 2
    assert all(run.cells == (C1, C64) for run in stage.runs) and len(stage.runs) == 3
    search.finish_stage()
    assert search.next_stage() is None


def test_time_estimate_counts_restarts_except_the_running_one() -> None:
    search = Search(["a", "b"], [C1, C64])
    stage = search.next_stage(running="a")
    assert stage is not None
    # one restart (b) + 2 candidates × 2 cells × 1 repeat × an eighth of 60 s
    assert estimate_stage_seconds(stage, restart_s=100.0, full_level_s=60.0, running="a") == 100.0 + 4 * 7.5


@pytest.mark.parametrize("seed", range(20))
def test_against_the_grid_the_search_finds_the_same_clear_winners_with_far_fewer_level_runs(seed: int) -> None:
    """A landscape like the Kimi profile's (no speculation ahead at C=1, a chain with spec v2 ahead at C=48, the
    rest behind) with 2 % run-to-run noise: the search's winners are the grid's, for well under half the levels."""
    rng = random.Random(seed)
    cells = cells_for(["random"], [1, 8, 48])
    figures = {
        "nospec": (93.0, 364.0, 640.0),
        "k1v2": (86.7, 304.0, 700.0),
        "k1": (66.0, 257.0, 600.0),
        "k4": (60.0, 172.0, 350.0),
        "k2": (63.0, 200.0, 420.0),
        "s3": (70.0, 280.0, 560.0),
    }
    truth = {(c, cell): figures[c][i] for c in figures for i, cell in enumerate(cells)}
    search = Search(list(figures), cells)
    levels = 0
    while (stage := search.next_stage()) is not None:
        run_stage(search, stage, truth, noise=0.02, rng=rng)
        levels += stage.cell_runs * stage.duration_fraction
    grid = Search(list(figures), cells, Policy(strategy="grid"))
    grid_levels = 0
    while (stage := grid.next_stage()) is not None:
        run_stage(grid, stage, truth, noise=0.02, rng=rng)
        grid_levels += stage.cell_runs * stage.duration_fraction
    for cell in cells:
        ours, theirs = search.decision(cell), grid.decision(cell)
        assert ours.winner and theirs.winner and ours.winner.candidate == theirs.winner.candidate
    assert levels <= 0.5 * grid_levels
