"""The estimate shown before a tune is confirmed (console/core/tune/timing.py), pure: its starts as the tune makes
them, its levels as the bench engine runs them."""

from __future__ import annotations

import pytest

from console.core.tune.search import Cell, Policy, Search
from console.core.tune.timing import (
    TOKEN_S,
    Pace,
    level_seconds,
    request_seconds,
    stage_bench_seconds,
    tune_seconds,
)

C1, C8, C32 = Cell("random", 1), Cell("random", 8), Cell("random", 32)
GRID, HALVING = Policy(strategy="grid", repeats=2), Policy(strategy="halving", repeats=2)


def starts(candidates: list[str], cells: list[Cell], policy: Policy, running: str | None) -> float:
    """The estimate's number of starts: its part that grows with the length of one."""

    def at(restart_s: float) -> float:
        return tune_seconds(candidates, cells, policy, running=running, duration_s=60.0, warmup=2, request_s=1.0,
                            restart_s=restart_s)  # fmt: skip

    return at(1.0) - at(0.0)


def test_a_grid_starts_every_setup_but_the_one_the_host_runs_then_puts_the_original_back() -> None:
    assert starts(["a", "b", "c"], [C1], GRID, running="a") == pytest.approx(2 + 1)
    assert starts(["a", "b", "c"], [C1], GRID, running=None) == pytest.approx(3 + 1)
    # the host runs the only setup: nothing is started, nothing put back
    assert starts(["a"], [C1, C32], GRID, running="a") == pytest.approx(0)


def test_a_halving_search_screens_without_restarting_the_running_setup_then_starts_its_contenders_again() -> None:
    # screening: b, c, d; full runs: the best two of each of the two levels, at most every setup (4); the restore
    assert starts(["a", "b", "c", "d"], [C1, C32], HALVING, running="a") == pytest.approx(3 + 4 + 1)
    # one level: the two best only
    assert starts(["a", "b", "c", "d"], [C1], HALVING, running="a") == pytest.approx(3 + 2 + 1)
    # alone, the only setup is decided by its screening
    assert starts(["a"], [C1], HALVING, running=None) == pytest.approx(1 + 1)


def test_a_level_is_its_warm_up_its_duration_and_the_tail_of_the_requests_in_flight_at_its_end() -> None:
    # C = 1: the two warm-up requests one after the other, the last measured request half done on average
    assert level_seconds(10.0, 1, warmup=2, request_s=2.0) == pytest.approx(10.0 + 2 * 2.0 + 0.5 * 2.0)
    # C = 8: the two warm-up requests together; the last of eight in flight ends 8/9 of a request after the deadline
    assert level_seconds(10.0, 8, warmup=2, request_s=2.0) == pytest.approx(10.0 + 2.0 + 8 / 9 * 2.0)
    # more warm-up requests than the level's concurrency: waves of C together (5 requests at C = 2: three waves)
    assert level_seconds(10.0, 2, warmup=5, request_s=1.0) == pytest.approx(10.0 + 3 + 2 / 3)
    # right after a start the first repeat warms until two waves agree: one wave more at the least
    assert level_seconds(10.0, 8, warmup=2, request_s=2.0, settle=True) == pytest.approx(10.0 + 2 * 2.0 + 8 / 9 * 2.0)
    assert level_seconds(10.0, 32, warmup=0, request_s=1.0) == pytest.approx(10.0 + 32 / 33)


def test_a_screening_level_pays_its_warm_up_and_tail_in_full() -> None:
    search = Search(["a", "b"], [C1, C8], HALVING)
    screening = search.next_stage(running="a")
    assert screening is not None and screening.duration_fraction == HALVING.screen_fraction
    bench = stage_bench_seconds(screening, duration_s=60.0, warmup=2, request_s=3.0)
    per_setup = (7.5 + 2 * 3.0 + 0.5 * 3.0) + (7.5 + 3.0 + 8 / 9 * 3.0)
    assert bench == pytest.approx(2 * per_setup)
    assert bench > 2 * 2 * (60.0 + 2 * 3.0) * HALVING.screen_fraction  # not an eighth of a full level


def test_the_grids_estimate_is_every_setups_levels_for_every_repeat_and_its_starts() -> None:
    cells = [C1, C32, Cell("chat", 1), Cell("chat", 32)]
    per_workload = level_seconds(60.0, 1, warmup=2, request_s=5.0) + level_seconds(60.0, 32, warmup=2, request_s=5.0)
    total = tune_seconds(["a", "b", "c"], cells, GRID, running="b", duration_s=60.0, warmup=2, request_s=5.0,
                         restart_s=100.0)  # fmt: skip
    # the two setups started (a, c) warm their first repeat of each of the 4 levels until it settles: a wave more
    assert total == pytest.approx(3 * 2 * 2 * per_workload + 2 * 4 * 5.0 + 3 * 100.0)


def test_a_request_before_any_was_measured_is_its_output_tokens_at_the_priors_pace() -> None:
    assert request_seconds(256) == pytest.approx(256 * TOKEN_S)
    assert request_seconds(0) == pytest.approx(TOKEN_S)


def test_the_pace_measured_as_the_tune_runs_prices_the_next_stage_and_keeps_the_budget() -> None:
    search = Search(["a", "b"], [Cell("random", 1), Cell("random", 64)])
    stage = search.next_stage(running="a")
    assert stage is not None and stage.duration_fraction == 1 / 8
    pace = Pace(duration_s=60.0)
    assert pace.stage_s(stage, running="a") is None and pace.level_s == 60.0  # no start measured yet
    pace.starts += [90.0, 110.0, 100.0]
    pace.levels += [70.0, 64.0]
    # one start (b) + 2 setups x 2 levels x 1 repeat x an eighth of the measured 67 s
    assert pace.stage_s(stage, running="a") == 100.0 + 4 * 67.0 / 8
    # b: its start, 2 levels of 67/8 s, and a start kept to put the original back
    need = 100.0 + 2 * 67.0 / 8 + 100.0
    assert not pace.over_budget(stage, "b", running="a", elapsed=10.0, budget_s=10.0 + need)
    assert pace.over_budget(stage, "b", running="a", elapsed=10.1, budget_s=10.0 + need)
    assert not pace.over_budget(stage, "a", running="a", elapsed=10.0, budget_s=10.0 + need - 100.0)  # runs already
