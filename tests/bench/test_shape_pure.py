"""The pure parts of --shape-from-server: the shape read from /metrics (on the real 0.5.17 captures), lengths drawn
from histogram buckets, the shared prefix sized to a cache hit share, the seeded Poisson arrivals."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from console.bench.engine import poisson_gaps
from console.bench.shape import (
    ShapeSpec,
    draw_length,
    prefix_fraction,
    prefix_lens_for,
    reachable_hit,
    shaped_requests,
)
from console.bench.workloads import WorkloadSpec, build_requests
from console.sglang.histograms import Histogram
from console.sglang.traffic_shape import (
    ShapeUnavailable,
    needs_flag,
    parse_scrape,
    parse_window,
    refuse_before,
    window_shape,
)

REAL = Path(__file__).resolve().parents[1] / "sim" / "fixtures" / "real-0.5.17" / "capture"
INF = math.inf
# SGLang's default token buckets up to 3000, then +Inf; 1000 observations spread evenly over 100..2000
EVEN = Histogram(((100.0, 0.0), (300.0, 105.0), (500.0, 210.0), (1000.0, 474.0), (2000.0, 1000.0), (INF, 1000.0)))


def test_the_shape_of_the_real_servers_traffic_comes_from_its_scrape() -> None:
    then = parse_scrape("")  # the server's start: every count of the capture is the window's
    now = parse_scrape((REAL / "metrics_after.txt").read_text())
    assert now.missing() == ()
    shape = window_shape(then, now, seconds=10.0)
    requests = now.counters["sglang:num_requests_total"]
    assert shape.requests == requests > 0 and shape.rate == pytest.approx(requests / 10.0)
    assert shape.prompt == now.histograms["sglang:prompt_tokens_histogram"]  # from the start: all of them
    assert shape.output == now.histograms["sglang:generation_tokens_histogram"] and shape.output.count > 0
    cached = now.counters["sglang:cached_tokens_total"]
    prompt = now.counters["sglang:prompt_tokens_total"]
    assert shape.cache_hit == pytest.approx(cached / prompt)
    assert "req/s" in shape.summary() and "cache hit" in shape.summary()
    record = shape.to_json()
    assert record["requests"] == shape.requests and record["prompt_buckets"] == [[100.0, 26.0]]  # the trimmed capture


def test_a_window_without_requests_a_restart_or_missing_series_is_refused_by_name() -> None:
    now = parse_scrape((REAL / "metrics_after.txt").read_text())
    with pytest.raises(ShapeUnavailable, match="no request finished"):
        window_shape(now, now, seconds=5.0)
    with pytest.raises(ShapeUnavailable, match="restarted"):
        window_shape(now, parse_scrape(_halved((REAL / "metrics_after.txt").read_text())), seconds=5.0)
    text = "\n".join(
        line for line in (REAL / "metrics_after.txt").read_text().splitlines() if "tokens_histogram" not in line
    )
    with pytest.raises(ShapeUnavailable) as refused:
        window_shape(now, parse_scrape(text), seconds=5.0)
    assert refused.value.missing == ("sglang:prompt_tokens_histogram", "sglang:generation_tokens_histogram")
    assert "--collect-tokens-histogram" in str(refused.value)


def test_versions_up_to_0_5_10_without_the_flag_are_refused_before_the_window() -> None:
    assert needs_flag("0.5.9", {}) and needs_flag("0.5.10", {"collect_tokens_histogram": False})
    assert not needs_flag("0.5.9", {"collect_tokens_histogram": True})
    assert not needs_flag("0.5.11", {}) and not needs_flag("0.5.17", {})
    empty = parse_scrape("")
    with pytest.raises(ShapeUnavailable, match="only with --collect-tokens-histogram") as refused:
        refuse_before(empty, "0.5.6", {})
    assert refused.value.missing == ("sglang:prompt_tokens_histogram", "sglang:generation_tokens_histogram")
    with pytest.raises(ShapeUnavailable, match="--enable-metrics"):
        refuse_before(None, "0.5.17", {})
    refuse_before(empty, "0.5.17", {})  # not written yet on an idle 0.5.17: the window decides


def test_windows_read_like_durations() -> None:
    assert [parse_window(w) for w in ("10m", "90s", "1h", "45")] == [600.0, 90.0, 3600.0, 45.0]
    for bad in ("ten", "0", "-5m"):
        with pytest.raises(ValueError, match="--shape-from-server"):
            parse_window(bad)


def test_lengths_drawn_from_the_buckets_have_the_histograms_own_quantiles() -> None:
    assert draw_length(EVEN.buckets, 0.0) == 100  # nothing below 100: the draws start at the first bound
    assert draw_length(((100.0, 10.0), (INF, 10.0)), 0.0) == 1  # the first bucket starts at 0, a length at 1
    assert draw_length(EVEN.buckets, 0.999) == 1998  # 1000 + 1000 * (999 - 474) / 526
    draws = sorted(draw_length(EVEN.buckets, (i + 0.5) / 4000) for i in range(4000))
    for q in (0.5, 0.95):
        expected = EVEN.quantile(q)
        assert expected is not None
        assert draws[int(q * len(draws))] == pytest.approx(expected, rel=0.01)
    tail = ((1000.0, 90.0), (INF, 100.0))  # a tenth above the largest bound: read as that bound
    assert draw_length(tail, 0.95) == 1000
    with pytest.raises(ValueError):
        draw_length(((100.0, 0.0), (INF, 0.0)), 0.5)


def test_the_shared_prefix_is_sized_so_a_radix_cache_serves_the_hit_share() -> None:
    assert reachable_hit([100, 100, 100], [50, 50, 50]) == pytest.approx(100 / 300)  # the first inserts, two hit
    assert reachable_hit([100, 100], [100, 100]) == pytest.approx(99 / 200)  # never more than a prompt's len - 1
    lens = [draw_length(EVEN.buckets, (i * 0.618) % 1) for i in range(200)]
    for target in (0.0, 0.2, 0.41, 0.8):
        fraction = prefix_fraction(lens, target)
        assert reachable_hit(lens, prefix_lens_for(lens, fraction)) == pytest.approx(target, abs=0.005)
    assert prefix_fraction(lens, 0.9999) == 1.0  # more than the lengths allow: capped at all-shared


def test_shaped_requests_are_seeded_and_share_their_prefix_as_sized() -> None:
    spec = ShapeSpec(EVEN.buckets, ((100.0, 0.0), (500.0, 50.0), (INF, 50.0)), cache_hit=0.4, rate=3.0)
    first, hit = shaped_requests(spec, seed=1, count=300)
    again, _ = shaped_requests(spec, seed=1, count=300)
    other, _ = shaped_requests(spec, seed=2, count=300)
    assert first == again and first != other
    assert hit == pytest.approx(0.4, abs=0.005)
    assert 250 <= statistics.median(r.output_len for r in first) <= 350  # output drawn from 100..500
    bodies = build_requests(WorkloadSpec(name="shape", shape=spec, seed=1), 300)
    assert [b.prompt_len for b in bodies] == [r.prompt_len for r in first]
    import json

    ids = [json.loads(b.body)["input_ids"] for b in bodies]
    assert [len(x) for x in ids] == [r.prompt_len for r in first]
    longest = max(first, key=lambda r: r.prefix_len)
    shared = ids[first.index(longest)][: longest.prefix_len]
    assert all(x[: r.prefix_len] == shared[: r.prefix_len] for x, r in zip(ids, first, strict=True))
    sampling = json.loads(bodies[0].body)["sampling_params"]
    assert sampling["ignore_eos"] is True and sampling["max_new_tokens"] == first[0].output_len
    described = WorkloadSpec(name="shape", shape=spec).describe()
    assert described["shape"]["cache_hit"] == 0.4 and described["input_len"] is None  # type: ignore[index]


def test_poisson_arrivals_are_seeded_with_the_rates_mean_gap() -> None:
    gaps = poisson_gaps(4.0, seed=3)
    drawn = [next(gaps) for _ in range(20000)]
    again = poisson_gaps(4.0, seed=3)
    assert [next(again) for _ in range(100)] == drawn[:100]
    other = poisson_gaps(4.0, seed=4)
    assert [next(other) for _ in range(100)] != drawn[:100]
    assert statistics.fmean(drawn) == pytest.approx(0.25, rel=0.03)
    assert statistics.pstdev(drawn) == pytest.approx(0.25, rel=0.05)  # exponential: sd = mean


def _halved(text: str) -> str:
    """The capture with every request counter halved: counts that went down, as after a restart."""
    out = []
    for line in text.splitlines():
        if line.startswith("sglang:num_requests_total"):
            name, value = line.rsplit(" ", 1)
            line = f"{name} {float(value) / 2}"
        out.append(line)
    return "\n".join(out) + "\n"
