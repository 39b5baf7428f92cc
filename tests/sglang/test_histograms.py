"""Latency percentiles from /metrics histograms: merged across series, over a window, like histogram_quantile."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from console.sglang.histograms import E2E, ITL, TTFT, Histogram, parse_histograms, window_quantiles

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _text(series: dict[str, list[tuple[str, float]]]) -> str:
    lines = [f"# HELP {TTFT} ttft", f"# TYPE {TTFT} histogram"]
    for labels, buckets in series.items():
        for le, count in buckets:
            lines.append(f'{TTFT}_bucket{{{labels},le="{le}"}} {count}')
        lines.append(f"{TTFT}_count{{{labels}}} {buckets[-1][1]}")
        lines.append(f"{TTFT}_sum{{{labels}}} 1.0")
    return "\n".join(lines) + "\n"


def test_series_are_merged_by_adding_bucket_counts_never_by_averaging_percentiles() -> None:
    # rank 0 saw 90 fast requests, rank 1 saw 10 slow ones: the host's p50 is fast, its p95 slow.
    text = _text(
        {
            'tp_rank="0"': [("0.1", 90), ("1.0", 90), ("+Inf", 90)],
            'tp_rank="1"': [("0.1", 0), ("1.0", 10), ("+Inf", 10)],
        }
    )
    hist = parse_histograms(text)[TTFT]
    assert hist.buckets == ((0.1, 90.0), (1.0, 100.0), (math.inf, 100.0))
    assert hist.quantile(0.5) == pytest.approx(0.1 * 50 / 90)
    assert hist.quantile(0.95) == pytest.approx(0.1 + 0.9 * 5 / 10)


def test_a_window_is_the_difference_of_two_scrapes_and_a_restart_starts_over() -> None:
    then = Histogram(((0.1, 100.0), (1.0, 100.0), (math.inf, 100.0)))
    now = Histogram(((0.1, 100.0), (1.0, 120.0), (math.inf, 120.0)))  # the last 20 were all slow
    window = now.minus(then)
    assert window.count == 20 and window.quantile(0.5) == pytest.approx(0.55)
    restarted = Histogram(((0.1, 3.0), (1.0, 3.0), (math.inf, 3.0)))
    assert restarted.minus(then) == restarted
    assert window_quantiles({TTFT: now}, {TTFT: then}, (0.5,)) == {TTFT: {0.5: pytest.approx(0.55)}}


def test_no_observations_give_no_percentile_and_the_inf_bucket_gives_the_last_bound() -> None:
    assert Histogram(()).quantile(0.5) is None
    assert Histogram(((0.1, 0.0), (math.inf, 0.0))).quantile(0.99) is None
    assert Histogram(((0.1, 1.0), (math.inf, 10.0))).quantile(0.99) == 0.1


def test_the_real_servers_histograms_parse_and_give_plausible_percentiles() -> None:
    # /metrics of a real SGLang 0.5.17 on an H200 after 16 x 256-token requests (tiny model, CUDA graphs)
    found = parse_histograms((FIXTURES / "real-0.5.17-metrics.txt").read_text())
    assert set(found) == {TTFT, ITL, E2E}
    itl = found[ITL]
    assert itl.count > 3000
    p50, p99 = itl.quantile(0.5), itl.quantile(0.99)
    assert p50 is not None and p99 is not None and 0.002 <= p50 <= p99 <= 0.1  # a tiny model: milliseconds
    assert found[TTFT].count >= 16
