"""Latency SLOs over the figures SGLang's bench_serving reports (pure; standard library only): the grammar of
`--slo ttft_p95=800ms,tpot_p95=60ms` and of a profile's `[slo]` table, shared by the profile's parser
(console.host.profile) and the benchmarks that hold levels to it (console.bench.slo: goodput, verdicts, capacity).

A bound is `METRIC_pNN=LIMIT`: METRIC one of ttft (time to first token), tpot (time per output token after the
first), itl (inter-token latency), e2e (end-to-end latency); NN one of 50, 90, 95, 99; LIMIT a number with `ms` or
`s` (a bare number is milliseconds). Each maps to bench_serving's record field (p50 = the median).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

METRICS = ("ttft", "tpot", "itl", "e2e")
PERCENTILES = (50, 90, 95, 99)
PER_REQUEST = ("ttft", "tpot", "e2e")  # the metrics goodput judges each request by
TITLES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}
_FIELD = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e_latency"}
_KEY = re.compile(r"^(ttft|tpot|itl|e2e)_p(50|90|95|99)$")
_VALUE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s)?\s*$")
EXAMPLE = "ttft_p95=800ms,tpot_p95=60ms"


@dataclass(frozen=True, order=True)
class SloBound:
    metric: str  # ttft | tpot | itl | e2e
    percentile: int  # 50 | 90 | 95 | 99
    limit_ms: float

    @property
    def key(self) -> str:
        return f"{self.metric}_p{self.percentile}"

    @property
    def record_field(self) -> str:
        """The record's (bench_serving's) field for this percentile: median_ttft_ms, p95_tpot_ms, p99_e2e_latency_ms."""
        prefix = "median" if self.percentile == 50 else f"p{self.percentile}"
        return f"{prefix}_{_FIELD[self.metric]}_ms"

    def text(self) -> str:
        return f"{TITLES[self.metric]} p{self.percentile} ≤ {ms_text(self.limit_ms)}"


@dataclass(frozen=True)
class Slo:
    bounds: tuple[SloBound, ...]

    def per_request_ms(self) -> dict[str, float]:
        """The limit each request's own TTFT, TPOT and E2E are held to for goodput (the tightest given)."""
        out: dict[str, float] = {}
        for bound in self.bounds:
            if bound.metric in PER_REQUEST:
                out[bound.metric] = min(out.get(bound.metric, math.inf), bound.limit_ms)
        return out

    def to_json(self) -> dict[str, float]:
        """{"ttft_p95": 800.0, ...}: how the SLO travels (the sweep's config) and is recorded."""
        return {b.key: b.limit_ms for b in self.bounds}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Slo:
        return parse_slo_items(data, where="the SLO")

    def spec(self) -> str:
        """`ttft_p95=800ms,tpot_p95=60ms`, what --slo takes."""
        return ",".join(f"{b.key}={b.limit_ms:g}ms" for b in self.bounds)

    def text(self) -> str:
        return ", ".join(b.text() for b in self.bounds)


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def ms_text(value: float) -> str:
    return f"{value / 1000:g} s" if value >= 10_000 else f"{value:g} ms"


def _limit(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{_at(where)}{key} = {value!r} is not a time; write e.g. 800ms or 0.8s")
    if isinstance(value, int | float):
        number, unit = float(value), "ms"
    else:
        match = _VALUE.match(str(value))
        if not match:
            raise ValueError(f"{_at(where)}{key} = {value!r} is not a time; write e.g. 800ms or 0.8s")
        number, unit = float(match.group(1)), match.group(2) or "ms"
    limit = number * 1000 if unit == "s" else number
    if not limit > 0:
        raise ValueError(f"{_at(where)}{key} must be above 0 (got {value!r})")
    return limit


def parse_slo_items(items: Mapping[str, Any], *, where: str = "--slo") -> Slo:
    """An SLO from {key: limit} (a profile's [slo] table, a record's `slo`); ValueError names the key."""
    bounds = []
    for key, value in items.items():
        if not _KEY.match(str(key)):
            raise ValueError(
                f"{_at(where)}{key!r} is not an SLO key; use METRIC_pNN with METRIC one of {', '.join(METRICS)} and NN "
                f"one of {', '.join(map(str, PERCENTILES))}, e.g. {EXAMPLE}"
            )
        metric, _, percentile = str(key).partition("_p")
        bounds.append(SloBound(metric, int(percentile), _limit(value, str(key), where)))
    if not bounds:
        raise ValueError(f"{_at(where)}no bound given; e.g. {EXAMPLE}")
    return Slo(tuple(sorted(bounds, key=lambda b: (METRICS.index(b.metric), b.percentile))))


def parse_slo(text: str, *, where: str = "--slo") -> Slo:
    """`ttft_p95=800ms,tpot_p95=60ms` -> Slo; ValueError says what to type."""
    items: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"{_at(where)}{part!r} is not KEY=LIMIT; e.g. {EXAMPLE}")
        key = key.strip().lower()
        if key in items:
            raise ValueError(f"{_at(where)}{key} is given twice")
        items[key] = value
    return parse_slo_items(items, where=where)
