"""What the tune concludes (console/core/tune_report.py), pure: recommendations, crossovers, workloads side by side."""

from __future__ import annotations

import pytest

from console.core.tune_report import (
    compare_workloads,
    crossing,
    crossover_summary,
    find_crossovers,
    recommend,
)
from console.core.tune_search import Cell, Search

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
    c8, c64 = Cell("random", 8), Cell("random", 64)
    search = measured(
        {
            ("k1v2", c8): (400.0, 401.0),
            ("nospec", c8): (360.0, 361.0),
            ("k1v2", c64): (600.0, 601.0),
            ("nospec", c64): (720.0, 721.0),
            ("k4", c8): (200.0, 201.0),
            ("k4", c64): (300.0, 301.0),
        }
    )
    recs = recommend(search, NAMES, CONFIGS)
    crossovers = find_crossovers(search, recs)
    assert len(crossovers) == 1
    found = crossovers[0]
    assert (found.below, found.above, found.between) == ("EAGLE3 topk 1 + spec v2", "no speculation", (8, 64))
    assert found.at == pytest.approx(8 + 56 * 40 / (40 + 120))  # medians 400.5 - 360.5 and 600.5 - 720.5
    summary = crossover_summary(recs, crossovers, "random")
    assert summary == f"EAGLE3 topk 1 + spec v2 best up to C ≈ {found.at:.0f}, no speculation beyond"
    assert crossover_summary(recs[:1], [], "random") == "EAGLE3 topk 1 + spec v2 best at every level"


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
