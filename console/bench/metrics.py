"""Per-level benchmark metrics with SGLang bench_serving's definitions (pure, no I/O).

Definitions (SGLang's bench_serving.py, `calculate_metrics`):
- TTFT: time from sending the request to the first chunk that carries output.
- TPOT per request: (latency − TTFT) / (output_len − 1), only for output_len > 1.
- ITL: one entry per output token after the first chunk; a chunk carrying k new tokens after a gap g
  contributes k entries of g/k (bench_serving's native backend), so speculation does not hide in ITL.
- E2E latency: time of the last event (including `[DONE]`) since the request was sent.
- output_throughput = Σ output tokens / duration; concurrency = Σ latency / duration.
- Percentiles interpolate linearly (numpy's default), std is the population std (numpy's default).
- With an SLO's per-request limits: request_goodput and slo_attainment (console.bench.slo, vLLM's definition).
Times are kept in seconds in RequestResult and reported in milliseconds, like bench_serving.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.bench.slo import goodput, is_good, request_figures_ms
from console.sglang.spec_meta import HISTOGRAM_KEYS, spelling_of


@dataclass
class RequestResult:
    """What one request measured on the client. Failed requests keep their error and are counted."""

    success: bool = False
    error: str = ""
    prompt_len: int = 0
    output_len: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    start: float = 0.0  # perf_counter when sent, for the 1-second peak buckets
    events: int = 0  # SSE events received (for the client-speed benchmark)
    spec_verify_ct: int | None = None  # from the final meta_info, when speculation is on
    # verify rounds by drafts accepted (index), from the final meta_info where the server sends it (SGLang 0.5.9+)
    spec_accept_histogram: list[int] | None = None
    spec_correct_drafts: int | None = None  # accepted draft tokens, bonus excluded (any release's spelling)
    spec_proposed_drafts: int | None = None
    spec_meta_keys: list[str] | None = None  # the spec_* keys its final meta_info carried: which spelling it saw
    finish_reason: str | None = None


def percentile(values: Sequence[float], q: float) -> float:
    """numpy.percentile with linear interpolation; 0.0 for an empty list (bench_serving prints 0 too)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def pstdev(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def _summary(prefix: str, values_s: Sequence[float], percentiles: Sequence[int]) -> dict[str, float]:
    ms = [v * 1000.0 for v in values_s]
    out = {
        f"mean_{prefix}_ms": mean(ms),
        f"median_{prefix}_ms": percentile(ms, 50),
        f"std_{prefix}_ms": pstdev(ms),
    }
    for p in percentiles:
        out[f"p{p}_{prefix}_ms"] = percentile(ms, p)
    return out


def spec_accept_length(results: Sequence[RequestResult]) -> float | None:
    """Σ completion tokens / Σ verify forwards over this level's own requests (sglang PR #34743's fix),
    never the server's lifetime average. None when the server reported no speculation."""
    scoped = [r for r in results if r.success and r.spec_verify_ct]
    verifies = sum(r.spec_verify_ct or 0 for r in scoped)
    if not verifies:
        return None
    return sum(r.output_len for r in scoped) / verifies


def pooled_accept_histogram(results: Sequence[RequestResult]) -> list[int] | None:
    """The level's verify rounds by drafts accepted, summed over its requests (SGLang's per-request
    spec_accept_histogram, each as long as the most that request saw + 1); None when no request carried one."""
    pooled: list[int] = []
    for r in results:
        if not (r.success and r.spec_accept_histogram):
            continue
        if len(pooled) < len(r.spec_accept_histogram):
            pooled.extend([0] * (len(r.spec_accept_histogram) - len(pooled)))
        for accepted, rounds in enumerate(r.spec_accept_histogram):
            pooled[accepted] += rounds
    return pooled or None


def spec_wire(results: Sequence[RequestResult]) -> dict[str, Any]:
    """Which spelling of SGLang's speculative meta_info the level saw (console.sglang.spec_meta): every spec key its
    requests carried, the key its histograms came from, and the spelling's name (the releases that send it)."""
    keys: set[str] = set()
    for r in results:
        if r.success and r.spec_meta_keys:
            keys.update(r.spec_meta_keys)
    histogram_key = next((k for k in HISTOGRAM_KEYS if k in keys), None)
    return {
        "spec_meta_keys": sorted(keys) or None,
        "spec_histogram_key": histogram_key,
        "spec_spelling": spelling_of(keys),
    }


def decode_rounds(results: Sequence[RequestResult]) -> dict[str, Any]:
    """What a decode round cost at what batch, for the prediction (console.core.predict): the time-weighted mean
    number of requests between their first and last token (`decode_batch`, the server's running batch as the client
    sees it: a request queued at the server has no first token yet), the rounds they took (their verify rounds with
    speculation, else one a token after the first) and the mean time of one (`round_time_ms`)."""
    ok = [r for r in results if r.success and r.output_len > 1 and r.latency > r.ttft]
    decode_s = sum(r.latency - r.ttft for r in ok)
    spec = [r for r in ok if r.spec_verify_ct]
    rounds = sum(r.spec_verify_ct or 0 for r in spec) if spec else sum(r.output_len - 1 for r in ok)
    return {"decode_rounds": rounds, "round_time_ms": decode_s / rounds * 1000.0 if rounds else None}


def _peaks(results: Sequence[RequestResult], level_start: float) -> tuple[float, int]:
    """bench_serving's peak output tokens/s and peak concurrent requests over 1-second buckets."""
    done = [r for r in results if r.success]
    if not done:
        return 0.0, 0
    end = max(r.start + r.latency for r in done)
    buckets = max(1, math.ceil(end - level_start))
    tokens = [0.0] * buckets
    running = [0] * buckets
    for r in done:
        first = int(max(0.0, r.start - level_start))
        last = min(buckets - 1, int(max(0.0, r.start + r.latency - level_start)))
        for b in range(first, last + 1):
            running[b] += 1
        # Tokens land when they arrive: the first at TTFT, the rest spread over the decode time.
        t = r.start + r.ttft
        tokens[min(buckets - 1, int(max(0.0, t - level_start)))] += 1 if r.output_len else 0
        for gap in r.itl:
            t += gap
            tokens[min(buckets - 1, int(max(0.0, t - level_start)))] += 1
    return max(tokens), max(running)


def compute_metrics(
    results: Sequence[RequestResult],
    duration: float,
    level_start: float = 0.0,
    goodput_limits_ms: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Every figure of one level, keyed by bench_serving's field names (plus a few of our own); with an SLO's
    per-request limits (Slo.per_request_ms) also its goodput."""
    ok = [r for r in results if r.success]
    duration = max(duration, 1e-9)
    total_in = sum(r.prompt_len for r in ok)
    total_out = sum(r.output_len for r in ok)
    tpots = [(r.latency - r.ttft) / (r.output_len - 1) for r in ok if r.output_len > 1]
    itls = [gap for r in ok for gap in r.itl]
    per_request_tps = [r.output_len / r.latency for r in ok if r.latency > 0]
    peak_tps, peak_running = _peaks(results, level_start)
    errors: dict[str, int] = {}
    for r in results:
        if not r.success:
            errors[r.error or "unknown error"] = errors.get(r.error or "unknown error", 0) + 1
    metrics: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "errors": errors,
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration,
        "input_throughput": total_in / duration,
        "output_throughput": total_out / duration,
        "total_throughput": (total_in + total_out) / duration,
        # The single-stream figure operators quote: one request's own output tokens per second.
        "mean_request_output_throughput": mean(per_request_tps),
        "median_request_output_throughput": percentile(per_request_tps, 50),
        "concurrency": sum(r.latency for r in ok) / duration,
        "accept_length": spec_accept_length(ok),
        "spec_accept_histogram": pooled_accept_histogram(ok),
        "spec_verify_ct": sum(r.spec_verify_ct or 0 for r in ok) or None,
        "decode_batch": sum(r.latency - r.ttft for r in ok if r.output_len > 1) / duration,
        "max_output_tokens_per_s": peak_tps,
        "max_concurrent_requests": peak_running,
    }
    metrics.update(spec_wire(ok))
    metrics.update(decode_rounds(ok))
    metrics.update(_summary("ttft", [r.ttft for r in ok], (90, 95, 99)))
    metrics.update(_summary("tpot", tpots, (90, 95, 99)))
    metrics.update(_summary("itl", itls, (90, 95, 99)))
    metrics["max_itl_ms"] = max(itls) * 1000.0 if itls else 0.0
    metrics.update(_summary("e2e_latency", [r.latency for r in ok], (90, 95, 99)))
    if goodput_limits_ms is not None:
        good = sum(
            is_good(request_figures_ms(r.success, r.ttft, r.latency, r.output_len), goodput_limits_ms) for r in results
        )
        metrics.update(goodput(good, len(results), duration))
    return metrics
