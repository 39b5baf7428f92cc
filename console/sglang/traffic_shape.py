"""The server's own traffic shape from its /metrics: request rate, prompt and output length distributions, cache hit
share (pure: Prometheus text in, figures out).

/metrics holds counters and histograms cumulative since the server started, so a shape "over a window" is the
difference of two scrapes taken the window apart, divided by the time between them (Prometheus' `increase()`
without the extrapolation). The console keeps no history of a host's /metrics, so the window is observed: the
scrape at its start, the wait, the scrape at its end (console.core.bench). Counters are summed over their
label sets (is_streaming, cache_source); histograms merged by adding bucket counts (console.sglang.histograms).

    shape = window_shape(scrape_then, scrape_now, seconds=600.0)     # ShapeUnavailable says what is missing
    shape.summary()      # "last 10 min: 3.1 req/s, input p50 812 / p95 3,900, output p50 240 / p95 610, cache hit 41 %"

Series (names from SGLang 0.5.6-0.5.23; wave3-facts §3): `sglang:num_requests_total`, `sglang:prompt_tokens_total`,
`sglang:cached_tokens_total` (counters), `sglang:prompt_tokens_histogram`, `sglang:generation_tokens_histogram`
(histograms; up to 0.5.10 only with --collect-tokens-histogram, always from 0.5.11).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from console import hints
from console.sglang.histograms import Histogram, merged

REQUESTS = "sglang:num_requests_total"
PROMPT_TOKENS = "sglang:prompt_tokens_total"
CACHED_TOKENS = "sglang:cached_tokens_total"
PROMPT_HISTOGRAM = "sglang:prompt_tokens_histogram"
OUTPUT_HISTOGRAM = "sglang:generation_tokens_histogram"
COUNTERS = (REQUESTS, PROMPT_TOKENS, CACHED_TOKENS)
HISTOGRAMS = (PROMPT_HISTOGRAM, OUTPUT_HISTOGRAM)
SERIES = (*COUNTERS, *HISTOGRAMS)
HISTOGRAM_FLAG = "--collect-tokens-histogram"
LAST_VERSION_NEEDING_FLAG = "0.5.10"  # 0.5.11 records the token histograms always (the flag a deprecated no-op)


class ShapeUnavailable(ValueError):
    """The server cannot give a shape; the message says which series are missing and what to do."""

    def __init__(self, message: str, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class Scrape:
    """The shape's series in one /metrics answer: counters summed over label sets, histograms merged."""

    counters: dict[str, float]
    histograms: dict[str, Histogram]

    def missing(self) -> tuple[str, ...]:
        return tuple(name for name in SERIES if name not in self.counters and name not in self.histograms)


def parse_scrape(text: str) -> Scrape:
    """The shape's series in Prometheus text (counters under their `_total` sample name, as SGLang writes them)."""
    counters: dict[str, float] = {}
    histograms: dict[str, Histogram] = {}
    for family in text_string_to_metric_families(text):
        if family.type == "counter":
            for sample in family.samples:
                if sample.name in COUNTERS:
                    counters[sample.name] = counters.get(sample.name, 0.0) + float(sample.value)
        elif family.type == "histogram" and family.name in HISTOGRAMS:
            hist = merged(family)
            if hist is not None:
                histograms[family.name] = hist
    return Scrape(counters, histograms)


def histograms_need_flag(version: str) -> bool:
    """Whether this version records the token histograms only with --collect-tokens-histogram (up to 0.5.10)."""
    return _version_key(version) <= _version_key(LAST_VERSION_NEEDING_FLAG)


def needs_flag(version: str | None, server_args: dict[str, Any]) -> bool:
    """True when this version records the token histograms only with --collect-tokens-histogram and it is off."""
    if version is None or not histograms_need_flag(version):
        return False
    return not server_args.get("collect_tokens_histogram")


def refuse_before(scrape: Scrape | None, version: str | None, server_args: dict[str, Any]) -> None:
    """At the window's start: ShapeUnavailable when the server cannot give a shape at all (no /metrics, or a version
    that records no token histograms without the flag). Series merely not written yet (no request since the start:
    SGLang's collector writes a family on its first value) are not refused here."""
    if scrape is None:
        raise ShapeUnavailable(
            "the server serves no /metrics: launch it with --enable-metrics (the editor's serving section, or "
            f"`{hints.APPLY_SET.line(FLAG='enable-metrics')}`); nothing was sent",
            SERIES,
        )
    if needs_flag(version, server_args):
        missing = tuple(name for name in HISTOGRAMS if name not in scrape.histograms)
        raise ShapeUnavailable(
            f"SGLang {version} records {' and '.join(missing or HISTOGRAMS)} only with {HISTOGRAM_FLAG}, which this "
            f"server runs without: add it (the editor offers it in its serving section, or "
            f"`{hints.APPLY_SET.line(FLAG=HISTOGRAM_FLAG.removeprefix('--'))}`) and observe again after the restart; "
            "nothing was sent",
            missing or HISTOGRAMS,
        )


@dataclass(frozen=True)
class TrafficShape:
    """The traffic of one window: finished requests per second, the length distributions (bucket counts of the
    window's requests: cumulative, by upper bound) and the share of prompt tokens the prefix cache served."""

    window_s: float
    requests: int
    prompt: Histogram
    output: Histogram
    prompt_tokens: float
    cached_tokens: float

    @property
    def rate(self) -> float:
        return self.requests / self.window_s if self.window_s > 0 else 0.0

    @property
    def cache_hit(self) -> float:
        return min(1.0, self.cached_tokens / self.prompt_tokens) if self.prompt_tokens > 0 else 0.0

    def quantiles(self) -> dict[str, float | None]:
        return {
            "input_p50": self.prompt.quantile(0.5),
            "input_p95": self.prompt.quantile(0.95),
            "output_p50": self.output.quantile(0.5),
            "output_p95": self.output.quantile(0.95),
        }

    def summary(self) -> str:
        q = self.quantiles()
        return (
            f"last {_duration(self.window_s)}: {self.rate:,.2f} req/s ({self.requests:,} requests), "
            f"input p50 {_tokens(q['input_p50'])} / p95 {_tokens(q['input_p95'])}, "
            f"output p50 {_tokens(q['output_p50'])} / p95 {_tokens(q['output_p95'])}, "
            f"cache hit {self.cache_hit:.0%}"
        )

    def to_json(self) -> dict[str, Any]:
        """For the run record: the figures and the buckets, nothing of any prompt."""
        return {
            "source": "server /metrics, two scrapes the window apart",
            "window_s": round(self.window_s, 3),
            "requests": self.requests,
            "rate": round(self.rate, 4),
            "cache_hit": round(self.cache_hit, 4),
            **{k: None if v is None else round(v, 1) for k, v in self.quantiles().items()},
            "prompt_buckets": [[_le(le), count] for le, count in self.prompt.buckets],
            "output_buckets": [[_le(le), count] for le, count in self.output.buckets],
        }


def window_shape(then: Scrape, now: Scrape, seconds: float) -> TrafficShape:
    """The shape of the requests finished between the two scrapes; ShapeUnavailable when series are missing at the
    end, the server restarted in between, or no request finished."""
    missing = now.missing()
    if missing:
        raise ShapeUnavailable(
            f"the server's /metrics has no {', '.join(missing)}: "
            + (
                f"its version records the token histograms only with {HISTOGRAM_FLAG}; "
                if set(missing) <= set(HISTOGRAMS)
                else ""
            )
            + "nothing was sent",
            missing,
        )
    counts = {name: now.counters[name] - then.counters.get(name, 0.0) for name in COUNTERS}
    if any(value < 0 for value in counts.values()):
        raise ShapeUnavailable("the server restarted during the window (its counters went down): observe again")
    requests = round(counts[REQUESTS])
    if requests < 1:
        raise ShapeUnavailable(
            f"no request finished on the server in the {_duration(seconds)} observed: nothing to shape a workload "
            "on (observe a longer window, or while traffic runs); nothing was sent"
        )
    prompt = now.histograms[PROMPT_HISTOGRAM].minus(then.histograms.get(PROMPT_HISTOGRAM))
    output = now.histograms[OUTPUT_HISTOGRAM].minus(then.histograms.get(OUTPUT_HISTOGRAM))
    return TrafficShape(seconds, requests, prompt, output, counts[PROMPT_TOKENS], counts[CACHED_TOKENS])


def parse_window(text: str) -> float:
    """`10m`, `90s`, `1h`, `45` (seconds) -> seconds; ValueError saying what to write."""
    value = text.strip().lower()
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(value[-1:])
    number = value[:-1] if scale is not None else value
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        raise ValueError(f"--shape-from-server takes a window like 10m, 90s or 1h (got {text!r})") from None
    if seconds <= 0:
        raise ValueError(f"--shape-from-server's window must be positive (got {text!r})")
    return seconds


def _version_key(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _le(le: float) -> float | str:
    return "+Inf" if le == float("inf") else le


def _tokens(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _duration(seconds: float) -> str:
    if seconds >= 90 and seconds % 60 < 1:
        return f"{seconds / 60:.0f} min"
    if seconds >= 90:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"
