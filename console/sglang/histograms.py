"""Latency percentiles from SGLang's /metrics histograms, the way Prometheus' histogram_quantile does it (pure).

SGLang exports TTFT and inter-token latency as cumulative histograms (`sglang:time_to_first_token_seconds_bucket
{le=...}`), one series per label set (engine type, streaming or not, TP rank, model). A host's figure merges
the series by adding bucket counts (the same bucket bounds), never by averaging per-series percentiles. A
percentile "over the last window" comes from the difference of two scrapes: counts are cumulative since the
server started, so the requests of the window are `now - then` per bucket (a restart resets them: then the
new counts alone are the window).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

TTFT = "sglang:time_to_first_token_seconds"
ITL = "sglang:inter_token_latency_seconds"
E2E = "sglang:e2e_request_latency_seconds"
LATENCY_HISTOGRAMS = (TTFT, ITL, E2E)


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts by upper bound (`+Inf` last), merged over every series of one metric."""

    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), ascending le

    @property
    def count(self) -> float:
        return self.buckets[-1][1] if self.buckets else 0.0

    def minus(self, earlier: Histogram | None) -> Histogram:
        """The observations made since `earlier` (a server restart in between: all of these)."""
        if earlier is None:
            return self
        before = dict(earlier.buckets)
        if [le for le, _ in earlier.buckets] != [le for le, _ in self.buckets] or self.count < earlier.count:
            return self  # different buckets or counts went down: the server restarted
        return Histogram(tuple((le, count - before[le]) for le, count in self.buckets))

    def quantile(self, q: float) -> float | None:
        """histogram_quantile(q): linear interpolation inside the bucket that holds the q-th observation;
        None without observations. An answer in the +Inf bucket is the largest finite bound."""
        total = self.count
        if total <= 0 or not self.buckets:
            return None
        rank = q * total
        lower_bound, lower_count = 0.0, 0.0
        for le, count in self.buckets:
            if count >= rank:
                if math.isinf(le):
                    return lower_bound
                if count == lower_count:
                    return le
                return lower_bound + (le - lower_bound) * (rank - lower_count) / (count - lower_count)
            lower_bound, lower_count = le, count
        return lower_bound


def merged(family: Any) -> Histogram | None:
    """One histogram family (prometheus_client's parser) merged over its label sets by adding bucket counts."""
    buckets: dict[float, float] = {}
    for sample in family.samples:
        if sample.name.endswith("_bucket") and "le" in sample.labels:
            le = float(sample.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + float(sample.value)
    return Histogram(tuple(sorted(buckets.items()))) if buckets else None


def parse_histograms(text: str, names: Iterable[str] = LATENCY_HISTOGRAMS) -> dict[str, Histogram]:
    """The named histograms in Prometheus text, each merged over its label sets."""
    wanted = set(names)
    found = {}
    for family in text_string_to_metric_families(text):
        if family.name in wanted and family.type == "histogram":
            hist = merged(family)
            if hist is not None:
                found[family.name] = hist
    return found


def window_quantiles(
    now: Mapping[str, Histogram], then: Mapping[str, Histogram] | None, quantiles: Iterable[float] = (0.5, 0.95, 0.99)
) -> dict[str, dict[float, float | None]]:
    """{metric: {q: seconds}} over the observations between the two scrapes."""
    earlier = then or {}
    qs = tuple(quantiles)
    return {name: {q: hist.minus(earlier.get(name)).quantile(q) for q in qs} for name, hist in now.items()}
