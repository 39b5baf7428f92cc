"""How many draft tokens a verify round accepts, as a process over the generated tokens (pure, standard library only).

A shorter chain is not the longer one cut short. On SGLang 0.5.17 (the H200, an EAGLE draft, three launches at steps 3,
2 and 1; ../shared/research/wave4-facts.md) cutting the steps-3 histogram predicted the accept length 5-10 % low at
steps 2 and 1, because accepts come in runs: P(A >= 2 | A >= 1) = 0.92, so where a round starts decides much. So the
draft's guess at each output position is right with probability `after_hit` when its guess at the position before was
right and `after_miss` when it was wrong (a two-state Markov chain over the output, `Runs`). A round starts after the
previous round's bonus token and accepts while the guesses are right, at most `depth` (the chain's steps); the first
wrong guess is the bonus position, so the next round starts after a miss, unless every draft was accepted: then the
bonus position's guess was never checked (right with `after_hit`). The rounds' start states settle to a stationary mix,
which gives the histogram of accepted drafts per round for any depth (`round_distribution`).

Fitted by maximum likelihood to the pooled `spec_accept_histogram`s of a host's records (`fit_histograms`), the chain
fitted to the steps-3 histogram above predicts steps 2 and 1 within 0.3 % (tests/core/test_predict_acceptance.py).
Where a server sent only the mean accept length (before SGLang 0.5.17), two chains of different depths still fix
both chances (`fit_means`); one depth alone does not, and `Fit.band` then spans every chain that gives that mean,
from no runs at all (each guess right alike) to runs as strong as the H200's.

Assumptions, said where a prediction rests on them (console.core.predict.forecast):
- depths past the deepest measured: the chain goes on as measured (no further fall with depth), with the band of a
  chance of a right guess 10 % lower per position beyond it (`DEEPER_FALL`), as published EAGLE heads fall with depth;
- trees (topk k > 1) without a measured tree: each further branch catches a share of the misses (`tree_runs`), between
  0 and `TREE_CATCH_HIGH`, the tree's budget spreading its draft tokens over its depths (k_eff = min(k, (n - 1) / s)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# The fit's grids: a coarse one over both chances, then finer ones around the best (the chances to ~0.001).
_COARSE = 17
_FINE = 9
_ZOOMS = 4
_EPS = 1e-6
# Half of chi-square(2 degrees of freedom) at 68 %: the log-likelihood drop that bounds a two-parameter fit's band.
LIKELIHOOD_DROP = 1.15
# Past the deepest measured position the chance of a right guess may fall (published EAGLE heads: 5-15 % a position).
DEEPER_FALL = 0.10
# A tree's further branch catches this share of the misses at most (the band's upper edge without a measured tree).
TREE_CATCH_HIGH = 0.4
TREE_CATCH_MID = 0.1
# The strongest runs seen on a real server (the H200's EAGLE draft: right after right 0.934, after wrong 0.047).
STRONGEST_RUNS_GAP = 0.89


@dataclass(frozen=True, slots=True)
class Runs:
    """The chance that the draft's guess at an output position is right, after a right and after a wrong guess."""

    after_hit: float
    after_miss: float


def _chances(runs: Runs) -> tuple[float, float]:
    return min(max(runs.after_hit, 0.0), 1.0), min(max(runs.after_miss, 0.0), 1.0)


def round_distribution(runs: Runs, depth: int, fall_past: int | None = None, fall: float = 0.0) -> list[float]:
    """P(a round accepts i drafts), i = 0..depth, over a long output (the round-start states' stationary mix). With
    `fall_past`, each draft position past it is guessed right `fall` less often than the one before (a draft deeper in
    its own guesses than any measured)."""
    if depth <= 0:
        return [1.0]
    hit, miss = _chances(runs)
    scale = [1.0 if fall_past is None else (1.0 - fall) ** max(0, j - fall_past) for j in range(1, depth + 1)]

    def given(first: float) -> list[float]:
        out = []
        reached = 1.0  # P(the round accepted every draft before position j)
        for j in range(1, depth + 1):
            right = (first if j == 1 else hit) * scale[j - 1]
            out.append(reached * (1.0 - right))
            reached *= right
        return [*out, reached]

    from_miss, from_hit = given(miss), given(hit)
    # The next round starts after a right guess only when this one accepted all and the unchecked bonus guess was right.
    to_hit_from_miss, to_hit_from_hit = from_miss[depth] * hit, from_hit[depth] * hit
    denominator = 1.0 - to_hit_from_hit + to_hit_from_miss
    share_after_hit = to_hit_from_miss / denominator if denominator > 0 else 1.0
    return [(1.0 - share_after_hit) * a + share_after_hit * b for a, b in zip(from_miss, from_hit, strict=True)]


def mean_accepted(runs: Runs, depth: int, fall_past: int | None = None, fall: float = 0.0) -> float:
    """Drafts accepted per round on average (the accept length is this + 1, the bonus token)."""
    return sum(i * p for i, p in enumerate(round_distribution(runs, depth, fall_past, fall)))


def tree_runs(runs: Runs, branches: float, catch: float) -> Runs:
    """The chain's chances with `branches` candidates a position (k_eff), each further one catching `catch` of the
    misses the ones before left."""
    left = (1.0 - catch) ** max(0.0, branches - 1.0)
    hit, miss = _chances(runs)
    return Runs(1.0 - (1.0 - hit) * left, 1.0 - (1.0 - miss) * left)


@dataclass(frozen=True, slots=True)
class Histogram:
    """A level's pooled verify rounds by drafts accepted, at the depth its setup allowed."""

    depth: int
    counts: tuple[int, ...]

    @property
    def rounds(self) -> int:
        return sum(self.counts)

    @property
    def mean_accepted(self) -> float:
        return sum(i * n for i, n in enumerate(self.counts)) / self.rounds if self.rounds else 0.0


@dataclass(frozen=True, slots=True)
class Fit:
    """A fitted chain and the chains its data cannot tell from it (the band's corners: every (after_hit, after_miss)
    within the likelihood drop, or every chain with the measured means)."""

    runs: Runs
    band: tuple[Runs, ...]
    source: str  # "histograms" or "means"
    rounds: int  # verify rounds it rests on
    deepest: int  # the deepest measured position

    def predict(self, depth: int) -> tuple[float, float, float]:
        """Mean drafts accepted per round at `depth`: (central, low, high); past the deepest measured position the low
        edge lets the chances fall by DEEPER_FALL a position."""
        central = mean_accepted(self.runs, depth)
        values = [mean_accepted(r, depth) for r in self.band] or [central]
        low, high = min(min(values), central), max(max(values), central)
        if depth > self.deepest:
            low = min(low, mean_accepted(self.runs, depth, self.deepest, DEEPER_FALL))
        return central, low, high

    def predict_deeper(self, depth: int) -> float:
        """The fitted chain's mean drafts accepted at `depth` with the chances falling DEEPER_FALL a position past the
        deepest measured (the central value where it is not deeper): the assumption's own edge."""
        if depth > self.deepest:
            return min(mean_accepted(self.runs, depth, self.deepest, DEEPER_FALL), mean_accepted(self.runs, depth))
        return mean_accepted(self.runs, depth)


def log_likelihood(runs: Runs, histograms: Sequence[Histogram]) -> float:
    """How likely these histograms are under the chain (log, up to a constant)."""
    total = 0.0
    for h in histograms:
        dist = round_distribution(runs, h.depth)
        for i, n in enumerate(h.counts):
            if n:
                total += n * math.log(max(dist[min(i, h.depth)], 1e-300))
    return total


def _fronts(chains: Sequence[Runs]) -> tuple[Runs, ...]:
    """The chains that can be the band's edges: the accept length grows with both chances (a right guess more often
    is never fewer accepted), so its least and most over a set of chains are on the set's lower-left and upper-right
    fronts (no chain below, or above, in both chances). What is used of a band is its edges; this keeps them only
    (from hundreds of chains to a few dozen: the fit's calibration asks for the edges of every measured setup)."""

    def front(sign: float) -> list[Runs]:
        ordered = sorted(chains, key=lambda r: (sign * r.after_hit, sign * r.after_miss), reverse=True)
        out: list[Runs] = []
        best = -math.inf
        for r in ordered:
            if sign * r.after_miss > best:
                out.append(r)
                best = sign * r.after_miss
        return out

    return tuple(dict.fromkeys([*front(1.0), *front(-1.0)]))


def _grid(center: float, half_span: float, points: int) -> list[float]:
    low, high = max(_EPS, center - half_span), min(1 - _EPS, center + half_span)
    step = (high - low) / (points - 1)
    return [low + step * i for i in range(points)]


def _search(score: Callable[[Runs], float]) -> tuple[float, Runs, list[tuple[float, Runs]]]:
    """The best-scoring chain: a coarse grid over both chances, then `_ZOOMS` finer grids around the best so far
    (each to a quarter of the step before: the chances to ~0.001); and every point scored."""
    scored: list[tuple[float, Runs]] = []
    center, half, points = Runs(0.5, 0.5), 0.5, _COARSE
    for _ in range(_ZOOMS + 1):
        grid = [
            (Runs(h, m)) for h in _grid(center.after_hit, half, points) for m in _grid(center.after_miss, half, points)
        ]
        scored.extend((score(r), r) for r in grid)
        center = max(scored, key=lambda item: item[0])[1]
        half, points = 2 * half / (points - 1), _FINE
    best = max(scored, key=lambda item: item[0])
    return best[0], best[1], scored


def _pooled(histograms: Iterable[Histogram]) -> tuple[Histogram, ...]:
    """One histogram per depth (the likelihood adds over rounds, so levels of the same depth pool)."""
    by_depth: dict[int, list[int]] = {}
    for h in histograms:
        if not h.rounds or h.depth <= 0:
            continue
        counts = by_depth.setdefault(h.depth, [])
        counts.extend([0] * (len(h.counts) - len(counts)))
        for i, n in enumerate(h.counts):
            counts[i] += n
    return tuple(Histogram(depth, tuple(counts)) for depth, counts in sorted(by_depth.items()))


def fit_histograms(histograms: Iterable[Histogram]) -> Fit | None:
    """The chain that makes the pooled histograms most likely (maximum likelihood), with the chains within
    LIKELIHOOD_DROP of it; None without a round."""
    data = _pooled(histograms)
    return _fit_histograms(data) if data else None


@functools.lru_cache(maxsize=256)
def _fit_histograms(data: tuple[Histogram, ...]) -> Fit:
    rounds = sum(h.rounds for h in data)
    if max(h.depth for h in data) == 1:
        # One draft a round: a round accepts it or not, which says how often the first guess is right and nothing of
        # what follows a right one. Like one depth's mean (fit_means): every chain with that rate, no runs to the
        # strongest seen (the H100's 8B from steps 1 alone: a maximum-likelihood chain on that ridge put steps 3 at
        # 1.85, where it measured 2.28-2.37).
        mean = sum(h.mean_accepted * h.rounds for h in data) / rounds
        ridge = _fit_means(((1, mean, rounds),))
        return Fit(ridge.runs, ridge.band, "histograms of one draft a round", rounds, 1)

    def score(runs: Runs) -> float:
        return log_likelihood(runs, data)

    best, runs, _ = _search(score)
    # The band: scan a window around the optimum wide enough for the likelihood to fall by the drop.
    span = 6.0 / math.sqrt(sum(h.rounds for h in data))
    window = [Runs(h, m) for h in _grid(runs.after_hit, span, 15) for m in _grid(runs.after_miss, span, 15)]
    band = _fronts([r for r in window if score(r) >= best - LIKELIHOOD_DROP])
    return Fit(runs, band, "histograms", sum(h.rounds for h in data), max(h.depth for h in data))


def fit_means(points: Iterable[tuple[int, float, int]]) -> Fit | None:
    """A chain from mean drafts accepted per round at one or more depths ((depth, mean, rounds) each; the accept
    length is 1 + the mean). Two depths or more: least squares, the band every chain within 1.5 % of each mean (the
    means' own noise). One depth: every chain that gives that mean, from no runs to the strongest runs seen."""
    by_depth: dict[int, tuple[float, int]] = {}
    for depth, mean, rounds in points:
        if depth > 0 and rounds > 0:
            total, n = by_depth.get(depth, (0.0, 0))
            by_depth[depth] = (total + mean * rounds, n + rounds)
    if not by_depth:
        return None
    return _fit_means(tuple((d, total / n, n) for d, (total, n) in sorted(by_depth.items())))


@functools.lru_cache(maxsize=256)
def _fit_means(data: tuple[tuple[int, float, int], ...]) -> Fit:
    total = sum(n for _, _, n in data)
    if len(data) == 1:
        depth, target, _ = data[0]
        # Along no runs (after_miss == after_hit) and strong runs: the chains with this mean, one per gap.
        band = tuple(
            r for gap in (0.0, STRONGEST_RUNS_GAP / 2, STRONGEST_RUNS_GAP) if (r := _with_mean(target, depth, gap))
        )
        central = band[len(band) // 2] if band else Runs(0.5, 0.5)
        return Fit(central, band, "means", total, depth)

    def error(runs: Runs) -> float:
        return sum(n * (mean_accepted(runs, d) - m) ** 2 for d, m, n in data) / total

    _, runs, scored = _search(lambda r: -error(r))
    tolerance = 0.015**2 * max(m for _, m, _ in data) ** 2
    band = _fronts([r for s, r in scored if -s <= tolerance])
    return Fit(runs, band, "means", total, max(d for d, _, _ in data))


def _with_mean(target: float, depth: int, gap: float) -> Runs | None:
    """The chain with after_hit - after_miss = gap (as far as the chances allow) whose mean at `depth` is `target`."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        runs = Runs(min(1.0, mid + gap * (1 - mid)), max(0.0, mid - gap * mid))
        if mean_accepted(runs, depth) < target:
            low = mid
        else:
            high = mid
    runs = Runs(min(1.0, low + gap * (1 - low)), max(0.0, low - gap * low))
    return runs if abs(mean_accepted(runs, depth) - target) < 0.01 * max(target, 0.05) else None
