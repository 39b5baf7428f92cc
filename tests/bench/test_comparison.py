"""Unit tests of the pure comparison: deltas, direction per metric, noise from repeats, the plot."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from console.bench.comparison import ascii_plot, compare_runs
from console.bench.levels import LevelKey
from console.bench.records import BenchRecord, order_server_args

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(label: str, c: int, repeat: int = 0, **metrics: Any) -> BenchRecord:
    return BenchRecord(
        run_id=label + "@1", label=label, repeat_index=repeat, target="t", started_at=T0, ended_at=T0,
        max_concurrency=c, completed=10, **metrics,
    )  # fmt: skip


def _cell(comparison: Any, level: str, label: str, metric: str) -> Any:
    lv = next(lv for lv in comparison.levels if str(lv.level) == level)
    return next(r for r in lv.runs if r.label == label).cells[metric]


def test_operator_comparison_reads_at_a_glance() -> None:
    # the operators' figures: topk 1 + spec v2 trails the baseline by 6 % at C=1 and wins at high concurrency,
    # where topk 4 collapses.
    base = [rec("baseline", 1, output_throughput=123.0), rec("baseline", 64, output_throughput=600.0)]
    v2 = [rec("topk1-v2", 1, output_throughput=115.6), rec("topk1-v2", 64, output_throughput=775.0)]
    topk4 = [rec("topk4", 1, output_throughput=150.0), rec("topk4", 64, output_throughput=353.0)]
    comparison = compare_runs([base, v2, topk4])
    assert [lv.level for lv in comparison.levels] == [LevelKey("C", 1), LevelKey("C", 64)]
    c1 = _cell(comparison, "C=1", "topk1-v2", "output_throughput")
    assert round(c1.delta_pct, 1) == -6.0 and c1.verdict == "worse" and c1.within_noise is None
    assert _cell(comparison, "C=64", "topk1-v2", "output_throughput").verdict == "better"
    assert _cell(comparison, "C=64", "topk4", "output_throughput").verdict == "worse"
    assert any("noise unmeasured" in n for n in comparison.notes)


def test_latency_is_better_when_lower_and_noise_comes_from_repeats() -> None:
    base = [rec("a", 8, i, median_tpot_ms=v, output_throughput=t) for i, (v, t) in enumerate([(10, 100), (11, 104)])]
    cand = [rec("b", 8, i, median_tpot_ms=v, output_throughput=t) for i, (v, t) in enumerate([(8, 103), (8.2, 106)])]
    comparison = compare_runs([base, cand])
    tpot = _cell(comparison, "C=8", "b", "median_tpot_ms")
    assert tpot.verdict == "better" and tpot.within_noise is False  # 8..8.2 vs 10..11: outside the spread
    tput = _cell(comparison, "C=8", "b", "output_throughput")
    assert tput.verdict == "better" and tput.within_noise is True  # 103..106 overlaps 100..104
    assert _cell(comparison, "C=8", "a", "output_throughput").median == 102.0
    assert comparison.as_dict()["levels"][0]["runs"][1]["metrics"]["median_tpot_ms"]["within_noise"] is False


def test_a_level_missing_from_a_run_and_failed_requests_are_shown() -> None:
    comparison = compare_runs([[rec("a", 1), rec("a", 32)], [rec("b", 1, failed=3)]])
    assert [r.label for r in comparison.levels[1].runs] == ["a"]
    assert comparison.levels[0].runs[1].failed_requests == 3
    assert any("failed requests" in n for n in comparison.notes)


def test_plot_places_each_run_by_value() -> None:
    C1, C64 = LevelKey("C", 1), LevelKey("C", 64)
    lines = ascii_plot({"a": [(C1, 100.0), (C64, 700.0)], "b": [(C1, 100.0), (C64, None)]}, height=8)
    assert lines[0].rstrip().endswith("A")  # the maximum sits on the top row
    assert "*" in "".join(lines)  # both runs at C=1 overlap
    assert "A = a" in lines[-2] and "B = b" in lines[-1]


def test_speculative_args_first_and_secrets_masked() -> None:
    ordered = order_server_args(
        {"tp_size": 4, "api_key": "s3cret", "speculative_eagle_topk": 1, "speculative_algorithm": "EAGLE"}
    )
    assert list(ordered)[:2] == ["speculative_algorithm", "speculative_eagle_topk"]
    assert ordered["api_key"] == "***"


def sides(prefill_ttft: float, tpot: float, failures: float = 0.0) -> dict[str, Any]:
    """A PD level's figures as console.core.deployment.pd_sides keeps them in its record."""
    counters = {
        "num_bootstrap_failed_reqs_total": failures,
        "num_transfer_failed_reqs_total": 0.0,
        "num_prefill_retries_total": 0.0,
    }
    prefill = {"ttft_ms_smg": 1.0, "prefill_ms_smg": prefill_ttft + 1, "ttft_ms_servers": prefill_ttft}
    decode = {"tpot_ms_servers": tpot, "first_token_ms_smg": None, "kv_transfer_ms": 2.0, "kv_bootstrap_ms": 0.5}
    return {
        "prefill": {**prefill, "failures": dict(counters)},
        "decode": {**decode, "failures": dict(counters)},
        "smg": {"smg_pd_bootstrap_failures_total": 0.0},
    }


def test_a_pd_deployments_runs_are_compared_side_by_side_too() -> None:
    base = [rec("pd-a", 8, i, output_throughput=600.0, per_side=sides(60.0, 9.0)) for i in range(2)]
    cand = [rec("pd-b", 8, i, output_throughput=800.0, per_side=sides(70.0, 7.0, failures=1)) for i in range(2)]
    comparison = compare_runs([base, cand])
    pd = ["pd_prefill_ttft_ms", "pd_prefill_ms_smg", "pd_decode_tpot_ms", "pd_kv_transfer_ms", "pd_kv_bootstrap_ms"]
    assert [m.key for m in comparison.metrics][-6:] == [*pd, "pd_failures"]
    tpot = _cell(comparison, "C=8", "pd-b", "pd_decode_tpot_ms")
    assert (tpot.median, tpot.verdict) == (7.0, "better")  # decode's side got faster
    ttft = _cell(comparison, "C=8", "pd-b", "pd_prefill_ttft_ms")
    assert (ttft.median, ttft.verdict) == (70.0, "worse")  # prefill's side got slower
    assert _cell(comparison, "C=8", "pd-b", "pd_failures").median == 2.0  # one on each side
    metrics = comparison.as_dict()["levels"][0]["runs"][1]["metrics"]
    assert metrics["pd_decode_tpot_ms"]["median"] == 7.0
    # a host's runs are compared on the host's figures alone
    host = compare_runs([[rec("a", 8, output_throughput=1.0)], [rec("b", 8, output_throughput=2.0)]])
    assert not any(m.key.startswith("pd_") for m in host.metrics)
