"""A synthetic workload drawn from a server's measured traffic shape (`bench --shape-from-server`; pure, standard
library only: it also runs in the load generator on a GPU host, console.bench.agent).

The shape (console.sglang.traffic_shape) gives the prompt and output length histograms of a window and the share of
prompt tokens the prefix cache served. Request i of a level:
- its prompt and output lengths are drawn from the histograms by inverse CDF with the same interpolation as
  Prometheus' histogram_quantile (linear inside a bucket, 0 as the first bucket's lower bound, the +Inf bucket read
  as the largest finite bound), so the workload's percentiles are the ones the server reported;
- its prompt is token ids: the first `prefix_len` of them taken from one shared, seeded sequence, the rest its own
  random ids. A radix cache then serves request i the shared part already inserted by the requests before it
  (`reachable_hit`); `prefix_fraction` picks the fraction of each prompt that is shared so that the level's hit
  share is the measured one (bisection over the level's own drawn lengths: the first request, and any request
  longer shared than all before it, miss what no one inserted yet). A hit share higher than the lengths allow is
  capped at the highest reachable, and the record says so;
- its output length is forced (`ignore_eos`), as bench_serving does with lengths it was given.
The draws are seeded per (seed, request index): every setup compared gets the same requests in the same order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Buckets = tuple[tuple[float, float], ...]  # (upper bound, cumulative count), ascending; +Inf last
SHARED_SEED = 7_919  # the shared prefix sequence's own stream, apart from the per-request draws


def draw_length(buckets: Buckets, u: float) -> int:
    """The length at cumulative share u (0 <= u < 1) of the histogram: histogram_quantile(u), as a whole number >= 1."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        raise ValueError("a length histogram without observations")
    rank = u * total
    lower, below = 0.0, 0.0
    finite = [le for le, _ in buckets if not math.isinf(le)]
    for le, count in buckets:
        if count > rank:
            if math.isinf(le):
                return max(1, round(finite[-1] if finite else lower))
            value = lower + (le - lower) * (rank - below) / (count - below)
            return max(1, round(value))
        lower, below = le, count
    return max(1, round(lower))


def reachable_hit(prompt_lens: Sequence[int], prefix_lens: Sequence[int]) -> float:
    """The share of prompt tokens a radix cache (no eviction, empty at the start) serves when request i shares its
    first prefix_lens[i] tokens with one common sequence: what the requests before it inserted of that sequence,
    never the whole prompt (its last token is always computed, as SGLang does)."""
    total = sum(prompt_lens)
    if total <= 0:
        return 0.0
    inserted = 0
    hit = 0
    for length, shared in zip(prompt_lens, prefix_lens, strict=True):
        hit += max(0, min(shared, inserted, length - 1))
        inserted = max(inserted, shared)
    return hit / total


def prefix_lens_for(prompt_lens: Sequence[int], fraction: float) -> list[int]:
    return [min(length, math.floor(fraction * length)) for length in prompt_lens]


def prefix_fraction(prompt_lens: Sequence[int], hit_share: float, steps: int = 40) -> float:
    """The fraction of each prompt to share so that reachable_hit is hit_share (1.0 when it cannot be reached)."""
    if hit_share <= 0 or not prompt_lens:
        return 0.0
    if reachable_hit(prompt_lens, prefix_lens_for(prompt_lens, 1.0)) <= hit_share:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(steps):
        mid = (low + high) / 2
        if reachable_hit(prompt_lens, prefix_lens_for(prompt_lens, mid)) < hit_share:
            low = mid
        else:
            high = mid
    return high


@dataclass(frozen=True)
class ShapeSpec:
    """What the workload is drawn from: the window's length histograms and cache hit share, and the rate seen."""

    prompt_buckets: Buckets
    output_buckets: Buckets
    cache_hit: float
    rate: float
    window_s: float = 0.0
    requests: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_buckets": [[_le(le), c] for le, c in self.prompt_buckets],
            "output_buckets": [[_le(le), c] for le, c in self.output_buckets],
            "cache_hit": self.cache_hit,
            "rate": self.rate,
            "window_s": self.window_s,
            "requests": self.requests,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ShapeSpec:
        return cls(
            prompt_buckets=_buckets(data["prompt_buckets"]),
            output_buckets=_buckets(data["output_buckets"]),
            cache_hit=float(data["cache_hit"]),
            rate=float(data["rate"]),
            window_s=float(data.get("window_s", 0.0)),
            requests=int(data.get("requests", 0)),
        )


@dataclass(frozen=True)
class ShapedRequest:
    prompt_len: int
    output_len: int
    prefix_len: int


def shaped_requests(spec: ShapeSpec, seed: int, count: int, offset: int = 0) -> tuple[list[ShapedRequest], float]:
    """Requests offset..offset+count-1 (lengths and shared prefix), and the hit share they reach."""
    prompts: list[int] = []
    outputs: list[int] = []
    for i in range(offset, offset + count):
        rng = random.Random(seed * 1_000_003 + i)
        prompts.append(draw_length(spec.prompt_buckets, rng.random()))
        outputs.append(draw_length(spec.output_buckets, rng.random()))
    prefixes = prefix_lens_for(prompts, prefix_fraction(prompts, spec.cache_hit))
    out = [ShapedRequest(p, o, s) for p, o, s in zip(prompts, outputs, prefixes, strict=True)]
    return out, reachable_hit(prompts, prefixes)


def shared_ids(seed: int, length: int, id_range: tuple[int, int]) -> list[int]:
    rng = random.Random(seed * 1_000_003 + SHARED_SEED)
    lo, hi = id_range
    return [rng.randrange(lo, hi) for _ in range(length)]


def _le(le: float) -> float | str:
    return "+Inf" if math.isinf(le) else le


def _buckets(rows: Any) -> Buckets:
    return tuple((float(le), float(count)) for le, count in rows)
