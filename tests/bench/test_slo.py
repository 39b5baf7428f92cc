"""SLOs (console.bench.slo): the grammar, goodput as vLLM's bench defines it, a level's verdict, capacity at the SLO
and the search that brackets it; and how compare, the side-by-side and the export carry them."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.bench.comparison import compare_runs
from console.bench.metrics import RequestResult, compute_metrics
from console.bench.records import BenchRecord
from console.bench.sidebyside import side_by_side, slo_lines, to_markdown
from console.bench.slo import (
    CapacitySearch,
    Slo,
    SloBound,
    capacity,
    judge_level,
    parse_slo,
    parse_slo_items,
)
from console.host.profile import ProfileError, parse_profile

# --- the grammar --------------------------------------------------------------------------------------------------


def test_an_slo_is_bounds_at_percentiles_in_ms_or_s() -> None:
    slo = parse_slo("tpot_p95=60ms, TTFT_P95=0.8s,e2e_p50=20000,itl_p99=12.5ms")
    assert slo.bounds == (
        SloBound("ttft", 95, 800.0),
        SloBound("tpot", 95, 60.0),
        SloBound("itl", 99, 12.5),
        SloBound("e2e", 50, 20000.0),
    )
    assert slo.spec() == "ttft_p95=800ms,tpot_p95=60ms,itl_p99=12.5ms,e2e_p50=20000ms"
    assert slo.text() == "TTFT p95 ≤ 800 ms, TPOT p95 ≤ 60 ms, ITL p99 ≤ 12.5 ms, E2E p50 ≤ 20 s"
    assert [b.record_field for b in slo.bounds] == ["p95_ttft_ms", "p95_tpot_ms", "p99_itl_ms", "median_e2e_latency_ms"]
    assert Slo.from_json(slo.to_json()) == slo


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ttft_p96=800ms", "'ttft_p96' is not an SLO key; use METRIC_pNN with METRIC one of ttft, tpot, itl, e2e"),
        ("latency_p95=1s", "'latency_p95' is not an SLO key"),
        ("ttft_p95=fast", "ttft_p95 = 'fast' is not a time; write e.g. 800ms or 0.8s"),
        ("ttft_p95=800us", "is not a time"),
        ("ttft_p95=0ms", "ttft_p95 must be above 0"),
        ("ttft_p95", "'ttft_p95' is not KEY=LIMIT; e.g. ttft_p95=800ms,tpot_p95=60ms"),
        ("ttft_p95=1s,ttft_p95=2s", "ttft_p95 is given twice"),
        (" , ", "no bound given"),
    ],
)
def test_a_malformed_slo_says_what_to_type(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^--slo: ") as caught:
        parse_slo(text)
    assert message in str(caught.value)


def test_goodput_holds_each_request_to_the_tightest_limit_of_its_metric() -> None:
    slo = parse_slo("ttft_p50=500ms,ttft_p99=900ms,tpot_p95=50ms,itl_p99=10ms")
    assert slo.per_request_ms() == {"ttft": 500.0, "tpot": 50.0}  # ITL is per token: percentiles only


def test_a_profile_carries_an_slo_and_a_bad_one_names_the_file_and_key() -> None:
    profile = parse_profile({"host": {"ssh": "ops@gpu"}, "slo": {"ttft_p95": "800ms", "tpot_p95": 60}}, where="p.toml")
    assert profile.slo_limits() == (("ttft_p95", 800.0), ("tpot_p95", 60.0))
    with pytest.raises(ProfileError, match=r"^p\.toml: \[slo\]: 'ttft_p100' is not an SLO key"):
        parse_profile({"host": {"ssh": "ops@gpu"}, "slo": {"ttft_p100": "1s"}}, where="p.toml")
    assert parse_profile({"host": {"ssh": "ops@gpu"}}, where="p.toml").slo_limits() == ()
    assert parse_slo_items({"e2e_p90": 2.5}, where="x") == Slo((SloBound("e2e", 90, 2.5),))


# --- goodput and the level's verdict -------------------------------------------------------------------------------


def request(ttft: float, latency: float, tokens: int, ok: bool = True) -> RequestResult:
    return RequestResult(success=ok, error="" if ok else "boom", ttft=ttft, latency=latency, output_len=tokens)


def test_goodput_counts_requests_whose_own_ttft_tpot_and_e2e_meet_the_limits() -> None:
    results = [
        request(0.2, 1.2, 11),  # TTFT 200 ms, TPOT (1.2 − 0.2) / 10 = 100 ms: good under 150 ms
        request(0.2, 2.2, 11),  # TPOT 200 ms: not good
        request(0.9, 1.0, 3),  # TTFT 900 ms: not good
        request(0.5, 0.5, 1),  # one token: TPOT 0 (vLLM's rule), TTFT 500: good
        request(0.1, 0.2, 0, ok=False),  # failed: never good, but sent
    ]
    metrics = compute_metrics(results, duration=2.0, goodput_limits_ms={"ttft": 800.0, "tpot": 150.0})
    assert metrics["request_goodput"] == pytest.approx(2 / 2.0)
    assert metrics["slo_attainment"] == pytest.approx(2 / 5)
    with_e2e = compute_metrics(results, duration=2.0, goodput_limits_ms={"e2e": 1100.0})
    assert with_e2e["request_goodput"] == pytest.approx(2 / 2.0)  # 1.0 s and 0.5 s latencies
    assert "request_goodput" not in compute_metrics(results, duration=2.0)


def test_a_level_meets_the_slo_when_every_percentile_is_within_its_limit() -> None:
    slo = parse_slo("ttft_p95=800ms,tpot_p50=40ms")
    ok = judge_level({"completed": 10, "p95_ttft_ms": 799.0, "median_tpot_ms": 40.0}, slo)
    assert ok == {"slo": {"ttft_p95": 800.0, "tpot_p50": 40.0}, "slo_met": True, "slo_misses": []}
    missed = judge_level({"completed": 10, "p95_ttft_ms": 912.0, "median_tpot_ms": 41.5}, slo)
    assert missed["slo_met"] is False
    assert missed["slo_misses"] == ["TTFT p95 912.0 ms > 800 ms", "TPOT p50 41.5 ms > 40 ms"]
    nothing = judge_level({"completed": 0, "p95_ttft_ms": 0.0, "median_tpot_ms": 0.0}, slo)
    assert nothing["slo_met"] is False and "no completed request" in nothing["slo_misses"][0]


# --- capacity -------------------------------------------------------------------------------------------------------


def test_capacity_is_the_highest_level_that_meets_the_slo() -> None:
    levels = [("C=1", 1, True, 2.0), ("C=8", 8, True, 12.0), ("C=32", 32, False, 20.0), ("C=16", 16, True, 17.5)]
    cap = capacity(levels)
    assert (cap.level, cap.request_throughput, cap.first_miss) == ("C=16", 17.5, "C=32")
    assert cap.text() == "C=16 (17.50 req/s); C=32 (100 % above) misses it"
    assert capacity([("C=1", 1, False, 2.0)]).text() == "no level meets the SLO (the lowest measured, C=1, misses it)"
    assert capacity([("C=1", 1, True, 2.0)]).text().endswith("every level measured meets it")
    assert capacity([("C=1", 1, None, 2.0)]).level is None


def run_search(threshold: float, start: float, **kwargs: Any) -> CapacitySearch:
    """A server that meets the SLO up to `threshold` req/s, and not above."""
    search = CapacitySearch(start=start, **kwargs)
    while (rate := search.next_rate()) is not None:
        search.record(rate, rate <= threshold)
    return search


def test_the_capacity_search_doubles_then_bisects_and_stops_by_itself() -> None:
    search = run_search(threshold=5.3, start=1.0)
    assert [r for r, _ in search.measured or ()][:4] == [1.0, 2.0, 4.0, 8.0]
    assert search.low is not None and search.high is not None
    assert search.low <= 5.3 < search.high <= search.low * 1.10 and search.reason == "bracketed within 10%"
    down = run_search(threshold=0.3, start=4.0)
    assert [r for r, _ in down.measured or ()][:4] == [4.0, 2.0, 1.0, 0.5]
    assert down.bracketed
    never = run_search(threshold=0.001, start=1.0)
    assert never.low is None and never.reason == "even 0.015625 req/s misses the SLO"  # halved down to min_rate
    capped = run_search(threshold=1e9, start=1.0, max_levels=5)
    assert len(capped.measured or ()) == 5 and capped.reason == "stopped after 5 levels without bracketing it"
    assert capped.summary()["capacity_rate"] == 16.0 and capped.summary()["bracketed"] is False


@settings(max_examples=200, deadline=None)
@given(
    threshold=st.floats(min_value=0.05, max_value=5000.0),
    start=st.floats(min_value=0.1, max_value=100.0),
)
def test_the_capacity_search_brackets_any_threshold_within_10_percent_in_bounded_levels(
    threshold: float, start: float
) -> None:
    search = run_search(threshold, start, max_levels=20)
    measured = search.measured or []
    # doubling or halving to the threshold, then ~4 bisections of a factor-2 bracket
    steps = abs(math.log2(threshold / start)) + 6
    assert len(measured) <= min(20, steps + 1)
    assert search.bracketed, search.summary()
    assert search.low is not None and search.high is not None
    assert search.low <= threshold < search.high <= search.low * 1.10


# --- compare, side by side, the export -------------------------------------------------------------------------------


def record(
    label: str, level: int, *, met: bool | None, goodput: float | None, slo: dict[str, float] | None
) -> BenchRecord:
    t = datetime(2026, 5, 1, tzinfo=UTC) + timedelta(minutes=level)
    return BenchRecord(
        run_id=f"{label}@1",
        label=label,
        target="gpu1",
        started_at=t,
        ended_at=t,
        max_concurrency=level,
        completed=10,
        output_throughput=100.0 * level,
        request_throughput=level * 0.5,
        request_goodput=goodput,
        slo=slo,
        slo_met=met,
        workload={"name": "dataset"},
    )


SLO = {"ttft_p95": 800.0}


def test_compare_carries_the_slo_the_verdicts_and_each_runs_capacity() -> None:
    base = [
        record("no spec", 1, met=True, goodput=0.5, slo=SLO),
        record("no spec", 8, met=True, goodput=3.0, slo=SLO),
        record("no spec", 32, met=False, goodput=2.0, slo=SLO),
    ]
    spec = [
        record("eagle3", 1, met=True, goodput=0.6, slo=SLO),
        record("eagle3", 8, met=True, goodput=2.5, slo=SLO),
        record("eagle3", 32, met=True, goodput=9.0, slo=SLO),
    ]
    comparison = compare_runs([base, spec])
    assert comparison.slo == parse_slo("ttft_p95=800ms")
    doc = comparison.as_dict()
    assert doc["slo"] == SLO
    assert doc["capacity"]["no spec"] == {
        "level": "C=8",
        "request_throughput": 4.0,
        "first_miss": "C=32",
        "gap_pct": 300.0,
    }
    assert doc["capacity"]["eagle3"]["level"] == "C=32"
    assert doc["levels"][2]["runs"][0]["slo_met"] is False
    assert doc["levels"][0]["runs"][1]["metrics"]["request_goodput"]["median"] == 0.6

    sbs = side_by_side([base, spec])
    goodput_crossings = [c for c in sbs.crossovers if c.metric == "request_goodput"]
    assert [(c.below, c.above) for c in goodput_crossings] == [("eagle3", "no spec"), ("no spec", "eagle3")]
    assert slo_lines(sbs.comparison) == [
        "SLO: TTFT p95 ≤ 800 ms (ttft_p95=800ms)",
        "capacity at the SLO, no spec: C=8 (4.00 req/s); C=32 (300 % above) misses it",
        "capacity at the SLO, eagle3: C=32 (16.00 req/s); every level measured meets it",
    ]
    markdown = to_markdown(sbs)
    assert "## SLO" in markdown and "| C=32 | ✖ | ✔ |" in markdown
    assert "## goodput (req/s)" in markdown
    assert "goodput: no spec ahead below, eagle3 ahead above: they cross between C = 8 and 32" in markdown
    assert sbs.to_json()["comparison"]["slo"] == SLO


def test_runs_without_an_slo_compare_as_before() -> None:
    plain = [record("a", 1, met=None, goodput=None, slo=None), record("a", 8, met=None, goodput=None, slo=None)]
    comparison = compare_runs([plain])
    assert comparison.slo is None and "slo" not in comparison.as_dict()
    markdown = to_markdown(side_by_side([plain]))
    assert "SLO" not in markdown and "goodput" not in markdown


def test_runs_judged_against_different_slos_are_noted() -> None:
    a = [record("a", 1, met=True, goodput=1.0, slo=SLO)]
    b = [record("b", 1, met=False, goodput=0.2, slo={"ttft_p95": 100.0})]
    c = [record("c", 1, met=None, goodput=None, slo=None)]
    notes = compare_runs([a, b, c]).notes
    assert "the runs were judged against different SLOs: ✔/✖ and goodput are each run's own" in notes
    assert "some runs had no SLO: they have no goodput and no ✔/✖" in notes
