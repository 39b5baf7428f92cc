"""Latency SLOs, goodput and capacity at an SLO (pure; standard library only: the engine judges requests on a GPU
host too).

    slo = parse_slo("ttft_p95=800ms,tpot_p95=60ms")       # ValueError says what to type
    judge_level(metrics, slo)      # {"slo": {...}, "slo_met": False, "slo_misses": ["TTFT p95 912.0 ms > 800 ms"]}

An SLO is one or more bounds `METRIC_pNN=LIMIT` (the grammar: console.sglang.slo, re-exported here). Two ways to
hold a level to it:
- **The level meets the SLO** when each bound's percentile over the level's requests is within its limit (the
  figures bench_serving reports: p50 = the median).
- **Goodput** (vLLM's bench and SGLang 0.5.23's `--goodput`): a request is good when it succeeded and its own TTFT,
  TPOT and E2E latency are each within the SLO's limit for that metric (the tightest one, when the SLO gives the
  metric at several percentiles). TPOT of one request = (latency − TTFT) / (output tokens − 1), 0 for a single
  token. ITL is per token, not per request: it counts only in the percentile check. `request_goodput` = good
  requests / the level's duration (req/s); `slo_attainment` = good / every request sent (failed ones included).
- **Capacity at the SLO**: the highest measured level (concurrency or request rate) that meets the SLO, and the
  request rate it carried (`capacity()`); `CapacitySearch` brackets it over request rates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from console.sglang.slo import (
    EXAMPLE,
    METRICS,
    PER_REQUEST,
    PERCENTILES,
    TITLES,
    Slo,
    SloBound,
    ms_text,
    parse_slo,
    parse_slo_items,
)

__all__ = [  # the grammar lives with SGLang's metric names (console.sglang.slo); bench users find it here too
    "EXAMPLE",
    "METRICS",
    "PERCENTILES",
    "PER_REQUEST",
    "Capacity",
    "CapacitySearch",
    "Slo",
    "SloBound",
    "capacity",
    "goodput",
    "is_good",
    "judge_level",
    "parse_slo",
    "parse_slo_items",
    "request_figures_ms",
    "slo_of_records",
]


# --- requests and levels ----------------------------------------------------------------------------------------


def request_figures_ms(success: bool, ttft_s: float, latency_s: float, output_len: int) -> dict[str, float] | None:
    """One request's TTFT, TPOT and E2E in ms as goodput judges them (None for a failed request)."""
    if not success:
        return None
    tpot = (latency_s - ttft_s) / (output_len - 1) if output_len > 1 else 0.0
    return {"ttft": ttft_s * 1000.0, "tpot": tpot * 1000.0, "e2e": latency_s * 1000.0}


def is_good(figures: Mapping[str, float] | None, limits_ms: Mapping[str, float]) -> bool:
    return figures is not None and all(figures[metric] <= limit for metric, limit in limits_ms.items())


def goodput(good: int, sent: int, duration_s: float) -> dict[str, float]:
    """request_goodput (req/s) and slo_attainment (good / every request sent), SGLang 0.5.23's keys."""
    return {
        "request_goodput": good / max(duration_s, 1e-9),
        "slo_attainment": good / sent if sent else 0.0,
    }


def judge_level(metrics: Mapping[str, Any], slo: Slo) -> dict[str, Any]:
    """Whether a level's percentiles meet the SLO, and which bounds they miss (as sentences). A level without a
    completed request meets nothing."""
    misses = []
    completed = metrics.get("completed") or 0
    for bound in slo.bounds:
        value = metrics.get(bound.record_field)
        if not completed or value is None:
            misses.append(f"{TITLES[bound.metric]} p{bound.percentile}: no completed request")
        elif float(value) > bound.limit_ms:
            misses.append(
                f"{TITLES[bound.metric]} p{bound.percentile} {float(value):,.1f} ms > {ms_text(bound.limit_ms)}"
            )
    return {"slo": slo.to_json(), "slo_met": not misses, "slo_misses": misses}


# --- capacity ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capacity:
    """The highest measured level that meets the SLO (None: none does), the request rate it carried, and the lowest
    measured level above it that does not (None: every level above met it, or none was measured above)."""

    level: str | None  # `C=32` or `rate=4`
    request_throughput: float | None  # req/s completed at that level
    first_miss: str | None
    gap_pct: float | None = None  # how far above the level the first miss lies: the bracket's width

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "request_throughput": None if self.request_throughput is None else round(self.request_throughput, 3),
            "first_miss": self.first_miss,
            "gap_pct": None if self.gap_pct is None else round(self.gap_pct, 1),
        }

    def text(self) -> str:
        if self.level is None:
            if self.first_miss:
                return f"no level meets the SLO (the lowest measured, {self.first_miss}, misses it)"
            return "not measured"
        carried = f" ({self.request_throughput:,.2f} req/s)" if self.request_throughput is not None else ""
        gap = f" ({self.gap_pct:.0f} % above)" if self.gap_pct is not None else ""
        above = f"; {self.first_miss}{gap} misses it" if self.first_miss else "; every level measured meets it"
        return f"{self.level}{carried}{above}"


def capacity(levels: Iterable[tuple[str, float, bool | None, float | None]]) -> Capacity:
    """From (level key, its position on the axis, met the SLO, request throughput) of one run's levels."""
    ordered = sorted((lv for lv in levels if lv[2] is not None), key=lambda lv: lv[1])
    best: tuple[str, float, bool | None, float | None] | None = None
    for level in ordered:
        if level[2]:
            best = level
    above = [lv for lv in ordered if not lv[2] and (best is None or lv[1] > best[1])]
    gap = (above[0][1] / best[1] - 1) * 100 if best and above and best[1] > 0 else None
    return Capacity(
        best[0] if best else None,
        best[3] if best else None,
        above[0][0] if above else None,
        gap,
    )


@dataclass
class CapacitySearch:
    """The request rate at which a server stops meeting an SLO, bracketed within `precision` (hi ≤ lo × (1 +
    precision)) in at most `max_levels` measured levels: from `start`, the rate doubles while levels meet the SLO
    (halves while they miss, when even the first misses), then bisects between the highest rate that met it and the
    lowest that missed (geometric middle). Stops by itself: bracketed, out of levels, or below `min_rate`.

        search = CapacitySearch(start=2.0)
        while (rate := search.next_rate()) is not None:
            search.record(rate, met=run_level_at(rate))
        search.low, search.high, search.reason
    """

    start: float
    precision: float = 0.10
    max_levels: int = 12
    min_rate: float = 0.01
    low: float | None = None  # the highest rate measured that met the SLO
    high: float | None = None  # the lowest rate measured that did not
    reason: str | None = None  # why it stopped
    measured: list[tuple[float, bool]] | None = None

    def __post_init__(self) -> None:
        if not self.start > 0 or not 0 < self.precision < 1 or self.max_levels < 2:
            raise ValueError("a capacity search needs a positive start rate, a precision in (0, 1), 2+ levels")
        self.measured = []

    def record(self, rate: float, met: bool) -> None:
        assert self.measured is not None
        self.measured.append((rate, met))
        if met and (self.low is None or rate > self.low):
            self.low = rate
        if not met and (self.high is None or rate < self.high):
            self.high = rate

    @property
    def bracketed(self) -> bool:
        return self.low is not None and self.high is not None and self.high <= self.low * (1 + self.precision)

    def next_rate(self) -> float | None:
        assert self.measured is not None
        if not self.measured:
            return self.start
        if self.bracketed:
            self.reason = f"bracketed within {self.precision:.0%}"
            return None
        if len(self.measured) >= self.max_levels:
            self.reason = f"stopped after {self.max_levels} levels without bracketing it"
            return None
        if self.low is None:
            assert self.high is not None
            rate = self.high / 2
            if rate < self.min_rate:
                self.reason = f"even {self.high:g} req/s misses the SLO"
                return None
            return rate
        if self.high is None:
            return self.low * 2
        if self.high <= self.low:  # noise: a higher rate met it after a lower one missed; trust the lower miss
            self.reason = f"not monotonic: {self.high:g} req/s missed the SLO below {self.low:g} req/s that met it"
            return None
        return math.sqrt(self.low * self.high)

    def summary(self) -> dict[str, Any]:
        return {
            "capacity_rate": self.low,
            "first_miss_rate": self.high,
            "bracketed": self.bracketed,
            "reason": self.reason,
            "levels": [{"rate": r, "met": m} for r, m in self.measured or ()],
        }


def slo_of_records(slos: Sequence[Mapping[str, Any] | None]) -> Slo | None:
    """The one SLO a set of records was judged against, None when none was (ValueError when they differ)."""
    distinct = {tuple(sorted(s.items())) for s in slos if s}
    if not distinct:
        return None
    if len(distinct) > 1:
        raise ValueError("the records were judged against different SLOs")
    return parse_slo_items(dict(next(iter(distinct))), where="the records' SLO")
