"""What the tune concludes (console/core/tune/report.py), pure: recommendations, crossovers, workloads side by side."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from console.bench.records import BenchRecord
from console.bench.slo import capacity
from console.cli.common import said
from console.core.tune import SpaceRequest
from console.core.tune.report import (
    OBJECTIVES,
    Crossover,
    compare_workloads,
    crossing,
    crossover_summary,
    find_crossovers,
    recommend,
    score_of,
    speculation_verdicts,
)
from console.core.tune.run import TuneRequest, checked_request
from console.core.tune.search import Cell, Search
from console.errors import UsageError

NAMES = {"nospec": "no speculation", "k1v2": "EAGLE3 topk 1 + spec v2", "k4": "EAGLE3 topk 4"}
CONFIGS = {key: {"speculative_algorithm": None if key == "nospec" else "EAGLE3"} for key in NAMES}


def measured(values: dict[tuple[str, Cell], tuple[float, ...]]) -> Search:
    cells = sorted({cell for _, cell in values})
    search = Search(list(NAMES), cells)
    for (candidate, cell), samples in values.items():
        for value in samples:
            search.record(candidate, cell, "full", value)
    return search


def test_per_level_the_best_with_its_margin_and_whether_it_is_outside_the_noise() -> None:
    c1, c48 = Cell("random", 1), Cell("random", 48)
    search = measured(
        {
            ("nospec", c1): (93.0, 94.0),
            ("k1v2", c1): (86.0, 87.0),
            ("k4", c1): (60.0, 61.0),
            ("nospec", c48): (640.0, 660.0),
            ("k1v2", c48): (650.0, 700.0),
            ("k4", c48): (350.0, 352.0),
        }
    )
    recs = recommend(search, NAMES, CONFIGS)
    assert [(r.cell.concurrency, r.name, r.within_noise) for r in recs] == [
        (1, "no speculation", False),
        (48, "EAGLE3 topk 1 + spec v2", True),  # 650..700 overlaps 640..660
    ]
    assert recs[0].margin_pct == pytest.approx((93.5 / 86.5 - 1) * 100)
    assert recs[0].runner_up == "EAGLE3 topk 1 + spec v2"
    doc = recs[0].to_json()
    assert {"concurrency", "config", "output_throughput", "margin_pct", "within_noise"} <= set(doc)
    assert doc["config"] == {"speculative_algorithm": None}


def test_crossing_is_where_the_difference_reaches_zero() -> None:
    assert crossing(1, 10.0, 64, -53.0) == pytest.approx(11.0)
    assert crossing(24, -5.0, 40, 3.0) == pytest.approx(34.0)


def test_a_crossover_is_named_like_the_operators_say_it() -> None:
    c16, c32 = Cell("random", 16), Cell("random", 32)
    search = measured(
        {
            ("k1v2", c16): (400.0, 401.0),
            ("nospec", c16): (360.0, 361.0),
            ("k1v2", c32): (600.0, 601.0),
            ("nospec", c32): (720.0, 721.0),
            ("k4", c16): (200.0, 201.0),
            ("k4", c32): (300.0, 301.0),
        }
    )
    recs = recommend(search, NAMES, CONFIGS)
    crossovers = find_crossovers(search, recs)
    assert len(crossovers) == 1
    found = crossovers[0]
    assert (found.below, found.above, found.between) == ("EAGLE3 topk 1 + spec v2", "no speculation", (16, 32))
    assert found.at == pytest.approx(16 + 16 * 40 / (40 + 120))  # medians 400.5 - 360.5 and 600.5 - 720.5
    assert found.placed and found.to_json()["concurrency"] == round(found.at, 1) == 20.0
    summary = crossover_summary(recs, crossovers, "random")
    assert summary == "EAGLE3 topk 1 + spec v2 best up to C ≈ 20, no speculation beyond"
    assert crossover_summary(recs[:1], [], "random") == "EAGLE3 topk 1 + spec v2 best at every level"


def test_a_crossover_between_levels_far_apart_is_said_to_be_between_them() -> None:
    """The Kimi demo's tune at C = 1 and 48 (issue 36): a straight line between the two put the crossing at C ≈ 6;
    the seeds measured it near 30. Levels more than 2x apart bracket it, and the report says no more than that."""
    c1, c48 = Cell("random", 1), Cell("random", 48)
    search = measured(
        {
            ("nospec", c1): (92.0, 93.0),
            ("k1v2", c1): (86.0, 87.0),
            ("nospec", c48): (671.0, 672.0),
            ("k1v2", c48): (742.0, 743.0),
        }
    )
    recs = recommend(search, NAMES, CONFIGS)
    (found,) = find_crossovers(search, recs)
    assert found.between == (1, 48) and found.at == pytest.approx(1 + 47 * 6 / (6 + 71))  # the line's 4.7
    summary = crossover_summary(recs, [found], "random")
    assert summary == "no speculation best up to a crossing between C = 1 and 48, EAGLE3 topk 1 + spec v2 beyond"
    assert found.to_json()["concurrency"] is None and found.to_json()["between"] == [1, 48]
    assert not found.placed


@pytest.mark.parametrize(
    ("between", "placed"), [((16, 32), True), ((16, 33), False), ((1, 2), True), ((1, 3), False), ((8, 8), True)]
)
def test_a_crossing_is_placed_only_between_levels_at_most_twice_apart(between: tuple[int, int], placed: bool) -> None:
    crossover = Crossover("random", "a", "b", between, float(between[0]))
    assert crossover.placed is placed
    assert crossover.where == (
        f"C ≈ {between[0]}" if placed else f"a crossing between C = {between[0]} and {between[1]}"
    )


def test_the_optimistic_and_realistic_winners_side_by_side_warn_when_temperature_0_inflates_acceptance() -> None:
    r1, chat1 = Cell("random", 1), Cell("chat", 1)
    search = measured(
        {
            ("k1v2", r1): (120.0, 121.0),
            ("nospec", r1): (93.0, 94.0),
            ("k1v2", chat1): (88.0, 89.0),
            ("nospec", chat1): (92.0, 93.0),
        }
    )
    recs = recommend(search, NAMES, CONFIGS)
    sides = compare_workloads(recs, {("k1v2", r1): 2.9, ("k1v2", chat1): 1.6, ("nospec", chat1): None})
    assert len(sides) == 1
    side = sides[0]
    assert side.optimistic and side.optimistic.name == "EAGLE3 topk 1 + spec v2"
    assert side.realistic and side.realistic.name == "no speculation"
    assert side.warning is not None
    assert "2.90" in side.warning and "1.60" in side.warning and "on chat no speculation is best" in side.warning
    calm = compare_workloads(recs, {("k1v2", r1): 1.70, ("k1v2", chat1): 1.62})
    assert calm[0].warning is None
    assert side.to_json()["optimistic"]["accept_length"] == 2.9


def test_a_level_the_full_runs_did_not_finish_is_recommended_by_the_short_runs_and_says_so() -> None:
    """The search stopped (its budget) after no speculation's full runs, before EAGLE3 topk 1 + spec v2's: each
    level is ranked by the short runs, names who had no full runs, and the faster one is never the runner-up."""
    c1, c48 = Cell("random", 1), Cell("random", 48)
    search = Search(list(NAMES), [c1, c48])
    for key, figures in {"nospec": (92.0, 679.0), "k1v2": (87.1, 744.0), "k4": (60.6, 352.5)}.items():
        search.record(key, c1, "screen", figures[0])
        search.record(key, c48, "screen", figures[1])
    search.finish_stage()
    assert search.next_stage() is not None  # the full runs: no speculation and EAGLE3 topk 1 + spec v2
    for cell, value in ((c1, 91.8), (c1, 92.2), (c48, 668.0), (c48, 669.0)):
        search.record("nospec", cell, "full", value)
    search.stop("budget")
    recs = recommend(search, NAMES, CONFIGS)
    assert [(r.cell.concurrency, r.name, r.runner_up, r.measured_by) for r in recs] == [
        (1, "no speculation", "EAGLE3 topk 1 + spec v2", "screen"),
        (48, "EAGLE3 topk 1 + spec v2", "no speculation", "screen"),
    ]
    assert recs[1].output_throughput == 744.0 and recs[1].margin_pct == pytest.approx((744 / 679 - 1) * 100)
    assert recs[1].evidence_note == (
        "C=48: ranked by the short screening runs, one each (the full runs did not reach EAGLE3 topk 1 + spec v2)"
    )
    doc = recs[1].to_json()
    assert (doc["measured_by"], doc["awaiting_full_runs"]) == ("screen", ["EAGLE3 topk 1 + spec v2"])
    assert find_crossovers(search, recs)[0].below == "no speculation"


def test_full_runs_rank_a_level_without_a_note() -> None:
    c1 = Cell("random", 1)
    search = measured({("nospec", c1): (93.0, 94.0), ("k1v2", c1): (86.0, 87.0)})
    (rec,) = recommend(search, NAMES, CONFIGS)
    assert rec.measured_by == "full" and rec.evidence_note is None and rec.to_json()["awaiting_full_runs"] == []


# --- the objective ------------------------------------------------------------------------------------------------


def bench_record(output: float, goodput: float | None, carried: float, met: bool | None) -> BenchRecord:
    t = datetime(2026, 5, 1, tzinfo=UTC)
    return BenchRecord(
        run_id="r",
        label="l",
        target="gpu1",
        started_at=t,
        ended_at=t,
        output_throughput=output,
        request_goodput=goodput,
        request_throughput=carried,
        slo_met=met,
    )


def test_each_objective_scores_a_level_its_own_way() -> None:
    met = bench_record(900.0, 2.5, 3.0, True)
    missed = bench_record(1200.0, 1.0, 4.0, False)
    assert [score_of(met, o) for o in OBJECTIVES] == [900.0, 2.5, 3.0]
    assert [score_of(missed, o) for o in OBJECTIVES] == [1200.0, 1.0, 0.0]  # carries nothing within the SLO
    assert score_of(bench_record(10.0, None, 1.0, None), "goodput") == 0.0


def test_goodput_can_pick_another_setup_than_throughput() -> None:
    """EAGLE3 makes more tokens at C=32 but its requests miss the TPOT bound more often: by goodput, no speculation."""
    c32 = Cell("dataset", 32)
    goodput = measured({("nospec", c32): (3.1, 3.2), ("k1v2", c32): (2.0, 2.1)})
    tok_s = {("nospec", c32): 600.0, ("k1v2", c32): 750.0}
    (rec,) = recommend(goodput, NAMES, CONFIGS, objective="goodput", throughput=tok_s)
    assert (rec.name, rec.output_throughput, rec.objective) == ("no speculation", 600.0, "goodput")
    assert rec.score == pytest.approx(3.15)
    assert rec.to_json()["objective"] == "goodput" and rec.to_json()["score"] == 3.15


def test_the_report_says_where_speculation_loses_on_this_traffic() -> None:
    chat = [Cell("dataset", 1), Cell("dataset", 8)]
    search = measured(
        {("nospec", chat[0]): (2.0, 2.1), ("k1v2", chat[0]): (1.8, 1.9), ("nospec", chat[1]): (9.0, 9.2),
         ("k1v2", chat[1]): (8.0, 8.1)}
    )  # fmt: skip
    recs = recommend(search, NAMES, CONFIGS, objective="goodput")
    plain = {"dataset": {"nospec"}}
    caps = {"dataset": {"no speculation": capacity([("C=8", 8, True, 9.1)]), "EAGLE3 topk 1 + spec v2":
            capacity([("C=1", 1, True, 1.85), ("C=8", 8, False, 8.0)])}}  # fmt: skip
    assert speculation_verdicts(recs, plain, caps, NAMES, "goodput") == [
        "on dataset speculation loses at every level: no speculation is best by goodput at C=1, 8",
        "on dataset speculation lowers the capacity at the SLO: 9.10 req/s without it, 1.85 at best with it",
    ]
    code = measured({("nospec", chat[0]): (2.0, 2.1), ("k1v2", chat[0]): (2.9, 3.0), ("nospec", chat[1]): (9.0, 9.1),
                     ("k1v2", chat[1]): (8.0, 8.2)})  # fmt: skip
    assert speculation_verdicts(recommend(code, NAMES, CONFIGS), plain, {}, NAMES, "throughput") == [
        "on dataset speculation loses at C=8: no speculation is best there by throughput"
    ]
    assert speculation_verdicts(recs, {}, caps, NAMES, "goodput") == []  # no setup without speculation measured


def test_goodput_and_capacity_need_an_slo_and_the_profile_can_give_it() -> None:
    base = TuneRequest(space=SpaceRequest(), concurrencies=(1,))
    assert checked_request(base) == base
    with pytest.raises(UsageError) as caught:
        checked_request(dataclasses.replace(base, objective="goodput"))
    assert caught.value.field == "objective"
    assert said(caught.value).startswith("--objective goodput needs an SLO to count good requests against: give --slo")
    from_profile = checked_request(dataclasses.replace(base, objective="capacity"), (("ttft_p95", 800.0),))
    assert from_profile.slo == {"ttft_p95": 800.0}
    given = dataclasses.replace(base, objective="goodput", slo={"tpot_p95": 50.0})
    assert checked_request(given, (("ttft_p95", 800.0),)).slo == {"tpot_p95": 50.0}  # --slo wins over the profile
    with pytest.raises(UsageError, match="the dataset workload needs dataset FILE") as dataset:
        checked_request(dataclasses.replace(base, workloads=("dataset",)))
    assert said(dataset.value).startswith("the dataset workload needs --dataset FILE")
