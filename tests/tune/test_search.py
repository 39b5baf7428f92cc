"""The tune's search strategy (console/core/tune/search.py), pure: screening, halving, stopping on the noise."""

from __future__ import annotations

import random

import pytest

from console.core.tune.search import Cell, Policy, Search, Stage, cells_for, estimate_stage_seconds

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


# The Kimi demo's screening at C = 1 and C = 48 (issue 22, item 7), in the profile's tok/s.
KIMI_SCREEN = {
    "nospec": (92.0, 679.0),
    "k1v2": (87.1, 744.0),
    "k1": (66.2, 627.5),
    "k2": (63.4, 431.7),
    "k4": (60.6, 352.5),
}
C48 = Cell("random", 48)


def test_a_budget_spent_during_the_full_runs_ranks_each_level_by_the_short_runs_every_contender_had() -> None:
    """The full runs reached no speculation at both levels, then the budget ran out before EAGLE3 topk 1 + spec
    v2's. Its short run at C = 48 (744) beat no speculation's (679): ranking no speculation's full figure ahead of
    it recommended the slower setup with a margin of -8.8 %. Each level is ranked by the short runs instead, says
    which contender never had its full runs, and each level's leader is recommended there."""
    cells = [C1, C48]
    search = Search(list(KIMI_SCREEN), cells)
    screen = search.next_stage(running="k1v2")
    assert screen is not None
    run_stage(search, screen, {(c, cell): KIMI_SCREEN[c][i] for c in KIMI_SCREEN for i, cell in enumerate(cells)})
    full = search.next_stage(running="k4")
    assert full is not None and full.kind == "full"
    assert [(r.candidate, r.cells) for r in full.runs] == [("nospec", (C1, C48)), ("k1v2", (C1, C48))]
    for cell, values in ((C1, (91.9, 92.3)), (C48, (668.0, 669.5))):  # no speculation's full runs, then the budget
        for value in values:
            search.record("nospec", cell, "full", value)
    search.stop("budget")
    search.finish_stage()

    at48, at1 = search.decision(C48), search.decision(C1)
    assert at48.winner is not None and at48.runner_up is not None
    assert (at48.winner.candidate, at48.runner_up.candidate) == ("k1v2", "nospec")
    assert (at48.ranked_by, at48.winner.kind, at48.runner_up.kind) == ("screen", "screen", "screen")
    assert at48.margin_pct == pytest.approx((744.0 / 679.0 - 1) * 100)
    assert at48.awaiting_full == ("k1v2",) and not at48.decided and at48.within_noise  # one short run each
    assert at1.winner is not None and at1.runner_up is not None
    assert (at1.winner.candidate, at1.runner_up.candidate, at1.ranked_by) == ("nospec", "k1v2", "screen")
    assert at1.margin_pct == pytest.approx((92.0 / 87.1 - 1) * 100) and at1.awaiting_full == ("k1v2",)
    assert [s.candidate for s in search.standings(C48)] == ["k1v2", "nospec", "k1", "k2", "k4"]


def test_a_full_stage_in_progress_does_not_decide_a_level_before_its_contenders_full_runs() -> None:
    """Between the trials of a full stage the level waits for the contenders still to run (the progress lines said
    "no speculation leads by -9.1 % (decided)" after its own full runs alone)."""
    search = Search(["nospec", "k1v2"], [C48])
    run_stage(search, search.next_stage(), {("nospec", C48): 679.0, ("k1v2", C48): 744.0})  # type: ignore[arg-type]
    assert search.next_stage() is not None
    search.record("nospec", C48, "full", 668.0)
    search.record("nospec", C48, "full", 669.5)
    waiting = search.decision(C48)
    assert not waiting.decided and waiting.winner and waiting.winner.candidate == "k1v2"
    search.record("k1v2", C48, "full", 735.0)
    search.record("k1v2", C48, "full", 737.0)
    search.finish_stage()
    done = search.decision(C48)
    assert done.decided and not done.within_noise and done.ranked_by == "full" and done.awaiting_full == ()
    assert (
        done.winner and done.winner.candidate == "k1v2" and done.margin_pct == pytest.approx((736 / 668.75 - 1) * 100)
    )


def test_a_setup_whose_full_benchmark_failed_at_a_level_is_out_of_that_level_only() -> None:
    """Its short run there was the best, but it could not run the level cleanly: the level goes to the setup that
    could (not to it by its short run), and its other levels keep it."""
    search = Search(["a", "b", "c"], [C1, C48])
    truth = {("a", C1): 100.0, ("b", C1): 99.0, ("c", C1): 50.0, ("a", C48): 700.0, ("b", C48): 690.0,
             ("c", C48): 400.0}  # fmt: skip
    run_stage(search, search.next_stage(), truth)  # type: ignore[arg-type]
    full = search.next_stage()
    assert full is not None and {r.candidate for r in full.runs} == {"a", "b"}
    for cell in (C1, C48):
        for value in (97.0, 98.0) if cell == C1 else (680.0, 681.0):
            search.record("b", cell, "full", value)
    for value in (101.0, 102.0):
        search.record("a", C1, "full", value)
    search.drop_cell("a", C48)  # no clean benchmark at C = 48
    search.finish_stage()
    at48 = search.decision(C48)
    assert at48.winner and at48.winner.candidate == "b" and [s.candidate for s in search.standings(C48)] == ["b", "c"]
    assert at48.margin_pct is not None and at48.margin_pct > 0
    assert search.decision(C1).winner.candidate == "a"  # type: ignore[union-attr]


@pytest.mark.parametrize("seed", range(40))
def test_wherever_the_search_stops_no_level_recommends_a_setup_behind_its_runner_up(seed: int) -> None:
    """Random landscapes (close and far setups, 3 % noise), the search stopped after any trial (a budget): at every
    level the winner is ahead of its runner-up by the figures that ranked them, and the margin is not negative."""
    rng = random.Random(seed)
    cands = [f"k{i}" for i in range(rng.randint(2, 6))]
    cells = cells_for(["random"], [1, 8, 48])
    truth = {(c, cell): rng.uniform(50, 100) * cell.concurrency ** rng.uniform(0.3, 0.9) for c in cands
             for cell in cells}  # fmt: skip
    search = Search(cands, cells, Policy(strategy=rng.choice(["halving", "grid"])))
    stop_after, trials = rng.randint(1, 3 * len(cands)), 0
    while trials < stop_after and (stage := search.next_stage(running=rng.choice(cands))) is not None:
        for run in stage.runs:
            if trials == stop_after:
                search.stop("budget")
                break
            trials += 1
            for cell in run.cells:
                for _ in range(stage.repeats):
                    search.record(
                        run.candidate, cell, stage.kind, truth[(run.candidate, cell)] * rng.uniform(0.97, 1.03)
                    )
        search.finish_stage()
    for cell in cells:
        decision = search.decision(cell)
        if decision.winner is None or decision.runner_up is None:
            continue
        assert decision.margin_pct is None or decision.margin_pct >= 0, (cell, decision)
        if decision.winner.kind == decision.runner_up.kind:
            assert decision.winner.median >= decision.runner_up.median, (cell, decision)
        ranked = search.standings(cell)
        assert ranked[0] == decision.winner, (cell, ranked)
        if decision.ranked_by == "screen":  # like with like: no full figure among short ones
            assert all(s.kind == "screen" for s in ranked), (cell, ranked)
        else:  # the full runs first, then the setups the screening left behind (below every promoted one)
            assert [s.kind for s in ranked] == sorted((s.kind for s in ranked), key=lambda k: k != "full"), ranked


def test_predict_measures_the_running_setup_first_then_restarts_only_for_who_can_win() -> None:
    search = Search(["a", "b", "c", "d"], [C1, C64], Policy(strategy="predict"))
    first = search.next_stage("b")
    assert first is not None and first.kind == "full" and first.repeats == 2
    assert [(r.candidate, r.cells) for r in first.runs] == [("b", (C1, C64))]  # no restart: the host runs it
    run_stage(search, first, {("b", C1): 100.0, ("b", C64): 1000.0}, noise=0.02)
    # b measured about 98-102 / 980-1020: c can reach past it at C=64 only, d nowhere; a is not placed.
    c = {C1: (60.0, 70.0, 80.0), C64: (900.0, 1100.0, 1300.0)}
    d = {C1: (50.0, 60.0, 97.0), C64: (500.0, 600.0, 700.0)}
    search.predicted({"a": None, "c": c, "d": d})
    assert search.can_win() == {"a": [C1, C64], "c": [C64]}
    second = search.next_stage("b")
    assert second is not None and [r.candidate for r in second.runs] == ["c"]  # placed before unplaced
    run_stage(search, second, {("c", C1): 70.0, ("c", C64): 1150.0}, noise=0.02)
    search.predicted({"a": {C1: (40.0, 50.0, 60.0), C64: (400.0, 500.0, 600.0)}, "d": d})
    assert search.can_win() == {}
    assert search.next_stage("c") is None
    assert search.stop_reason == "no untried setup can win by the prediction"
    assert search.tried() == ["b", "c"]  # d and a never restarted
    assert search.decision(C64).winner is not None and search.decision(C64).winner.candidate == "c"


def test_predict_starts_with_the_first_setup_when_the_host_runs_none_of_them() -> None:
    search = Search(["a", "b"], [C1], Policy(strategy="predict"))
    first = search.next_stage("elsewhere")
    assert first is not None and [r.candidate for r in first.runs] == ["a"]
