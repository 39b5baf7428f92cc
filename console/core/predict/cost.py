"""What one decode round costs at a running batch, for any speculative setup, fitted from a host's records (pure).

A round over a batch of B requests verifies n tokens each (the draft tokens; 1 without speculation) in one target
forward, after s draft steps over B x topk candidates (SmartSpec's and Sequoia's terms: a linear model of the batch's
tokens, ../shared/research/wave4-facts.md). In milliseconds:

    round = fixed + per_request * B + per_verify_token * B*n          the target's forward
          + draft_step * s + draft_token * s*B*topk                   the draft's steps
          + tree_token * B*n                  (topk > 1)              the tree mask instead of the causal path
          + host_round + host_request * B     (overlap off)           host work the overlap scheduler would hide

Each record's level gives one point: its mean round time at its decode batch (console.bench.metrics.decode_rounds).
The coefficients are fitted by Bayesian linear regression: each starts from a prior (an assumption, stated here and
shown with every prediction that rests on it) and the records move it as far as they can tell it apart from the
others; what they cannot tell apart stays near its prior, with the prior's width. The band of a prediction is the
fit's own spread along that setup's terms (`RoundCost.predict`), so a setup like the measured ones gets a narrow band
and one that needs an unmeasured term (a tree, the overlap turned off, no speculation without such a record) a wide
one. The priors, scaled by the host's own figures (the shortest round measured, t_min, and how the round grows with
the batch, g = ms per request):

- fixed: 0.5 t_min +- 0.5 t_min; per request: 0 +- g; per verify token 0 +- 0.1 g: decode is memory-bound, every
  request's KV cache is read each round while a verify token's own compute is small (what makes a chain of draft
  tokens nearly free to verify at a small batch); where records of two verify widths (a chain and no speculation,
  two chains) tell them apart, the records decide;
- a draft step: 0.05 t_min +- 0.1 t_min (one decoder layer and its head against the target's dozens, launched from a
  CUDA graph; wide, because a real server's round need not follow the steps: on the H200's tiny, host-bound model a
  round of steps 1 took 40 % longer than one of steps 3), a draft token: 0 +- 0.03 g;
- a tree's verify token: as much as a chain's verify token (the first fit's), +- twice that: measured, a tree costs
  from nothing to 2.2x a chain at high load (the seeds: Kimi topk 4 at C = 64 ran 353 tok/s where topk 1 + spec v2 ran
  775; the H200's tiny Llama: topk 2 15-36 % behind topk 1 at C = 32);
- the overlap off: 0.2 t_min +- 0.2 t_min a round and 0 +- 0.1 g a request (the scheduler's host work, which the
  overlap scheduler runs while the GPU computes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from console.sglang.setup import SpecSetup

TERMS = (
    "fixed",
    "per_request",
    "per_verify_token",
    "spec_round",
    "draft_step",
    "draft_token",
    "tree_token",
    "host_round",
    "host_request",
)
# A verify width no record has: the cost of the tokens it adds or drops is uncertain by this share. The model is linear
# in a batch's tokens, and a sparse MoE's expert loading is not: past a few dozen tokens a forward reads every expert
# anyway (the stand-in's Kimi profile: from 144 to 96 verify tokens at batch 48 saves half what a line through 48 and
# 144 says).
UNMEASURED_WIDTH = 0.5
# What each term's prior is, in words, for the assumptions a prediction lists.
ASSUMPTIONS = {
    "spec_round": "a speculative round's own cost (draft extend, bookkeeping) ~10 % of a forward (not told apart)",
    "draft_step": "a draft step costs ~5 % of a target forward (none of the records tells draft steps apart)",
    "draft_token": "a draft token costs little next to a verify token (not told apart by the records)",
    "tree_token": "a tree's verify token costs 0-3x a chain's (no tree measured on this host)",
    "host_round": "turning the overlap off adds ~20 % host work a round (no record with the overlap off)",
    "host_request": "turning the overlap off adds host work per request (no record with the overlap off)",
    "per_verify_token": "the round's growth split between requests and verify tokens (one verify width measured)",
}


@dataclass(frozen=True, slots=True)
class Point:
    """One measured level: the setup, whether the overlap scheduler ran, its decode batch and its mean round (ms)."""

    setup: SpecSetup
    overlap: bool
    batch: float
    round_ms: float


def features(setup: SpecSetup, overlap: bool, batch: float) -> list[float]:
    """The terms' multipliers for one round (in TERMS order)."""
    b = max(batch, 0.0)
    verify = b * setup.verify_tokens
    steps = setup.steps if setup.speculative else 0
    tree = 1.0 if setup.speculative and setup.topk > 1 else 0.0
    off = 0.0 if overlap else 1.0
    spec = 1.0 if setup.speculative else 0.0
    return [1.0, b, verify, spec, float(steps), steps * b * setup.topk, tree * verify, off, off * b]


def _cholesky_solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    n = len(matrix)
    lower = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            total = matrix[i][j] - sum(lower[i][k] * lower[j][k] for k in range(j))
            lower[i][j] = math.sqrt(max(total, 1e-18)) if i == j else total / lower[j][j]
    y = [0.0] * n
    for i in range(n):
        y[i] = (rhs[i] - sum(lower[i][k] * y[k] for k in range(i))) / lower[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum(lower[k][i] * x[k] for k in range(i + 1, n))) / lower[i][i]
    return x


def _inverse(matrix: list[list[float]]) -> list[list[float]]:
    n = len(matrix)
    columns = [_cholesky_solve(matrix, [1.0 if i == j else 0.0 for i in range(n)]) for j in range(n)]
    return [[columns[j][i] for j in range(n)] for i in range(n)]


@dataclass(frozen=True)
class RoundCost:
    """The fitted round-cost model: the coefficients' posterior mean and covariance, and which terms the records
    moved (the others are still their priors: assumptions)."""

    mean: tuple[float, ...]
    covariance: tuple[tuple[float, ...], ...]
    prior_sd: tuple[float, ...]
    noise: float  # the relative spread the points were weighed with
    verify_widths: frozenset[int]  # the draft tokens (1: none) of the setups measured

    def predict(self, setup: SpecSetup, overlap: bool, batch: float) -> tuple[float, float]:
        """(round ms, its standard deviation) for a setup at a decode batch: the fit's own, and for a verify width
        no record has, half of what the verify tokens it adds or drops cost by the fit (UNMEASURED_WIDTH)."""
        phi = features(setup, overlap, batch)
        value = sum(p * m for p, m in zip(phi, self.mean, strict=True))
        used = [(i, p) for i, p in enumerate(phi) if p]  # most terms are off for a setup: only its own count
        cov = self.covariance
        variance = sum(p * q * cov[i][j] for i, p in used for j, q in used)
        gap = min(abs(setup.verify_tokens - n) for n in self.verify_widths) if self.verify_widths else 0
        per_token = self.mean[TERMS.index("per_verify_token")] + (
            self.mean[TERMS.index("tree_token")] if setup.speculative and setup.topk > 1 else 0.0
        )
        variance += (UNMEASURED_WIDTH * max(per_token, 0.0) * max(batch, 0.0) * gap) ** 2
        return max(value, 1e-3), math.sqrt(max(variance, 0.0))

    def assumed(self, setup: SpecSetup, overlap: bool) -> list[str]:
        """The terms this setup needs that the records left at their priors (posterior sd above half the prior's)."""
        phi = features(setup, overlap, 1.0)
        out = []
        for i, term in enumerate(TERMS):
            if phi[i] and term in ASSUMPTIONS and math.sqrt(self.covariance[i][i]) > 0.5 * self.prior_sd[i]:
                out.append(term)
        return out


def _fit(points: Sequence[Point], prior_mean: list[float], prior_sd: list[float], noise: float) -> RoundCost:
    n = len(TERMS)
    precision = [[(1.0 / prior_sd[i] ** 2 if i == j else 0.0) for j in range(n)] for i in range(n)]
    rhs = [prior_mean[i] / prior_sd[i] ** 2 for i in range(n)]
    for p in points:
        phi = features(p.setup, p.overlap, p.batch)
        weight = 1.0 / (noise * p.round_ms) ** 2
        used = [(i, weight * f) for i, f in enumerate(phi) if f]  # a point's terms that are on (the rest add 0)
        for i, wi in used:
            rhs[i] += wi * p.round_ms
            row = precision[i]
            for j, _ in used:
                row[j] += wi * phi[j]
    mean = _cholesky_solve(precision, rhs)
    covariance = _inverse(precision)
    widths = frozenset(p.setup.verify_tokens for p in points)
    return RoundCost(tuple(mean), tuple(tuple(row) for row in covariance), tuple(prior_sd), noise, widths)


def fit_round_cost(points: Sequence[Point], noise: float) -> RoundCost | None:
    """The model fitted to the measured levels (`noise`: their relative run-to-run spread, at least 1 %); None
    without a point."""
    usable = [p for p in points if p.round_ms > 0 and p.batch > 0]
    if not usable:
        return None
    noise = max(noise, 0.01)
    shortest = min(p.round_ms for p in usable)
    growth = _growth_per_request(usable, shortest)
    prior = {
        "fixed": (0.5 * shortest, 0.5 * shortest),
        "per_request": (0.0, growth),
        "per_verify_token": (0.0, 0.1 * growth),
        "spec_round": (0.1 * shortest, 0.1 * shortest),
        "draft_step": (0.05 * shortest, 0.1 * shortest),
        "draft_token": (0.0, 0.03 * growth),
        "tree_token": (0.0, 1e-6 * growth),  # priced after the first fit, against a chain's verify token
        "host_round": (0.2 * shortest, 0.2 * shortest),
        "host_request": (0.2 * growth, 0.2 * growth),
    }
    prior_mean = [prior[t][0] for t in TERMS]
    prior_sd = [prior[t][1] for t in TERMS]
    first = _fit(usable, prior_mean, prior_sd, noise)
    chain_token = max(first.mean[TERMS.index("per_verify_token")], 0.0)
    chain_token = chain_token or 0.1 * growth / max(p.setup.verify_tokens for p in usable)
    tree = TERMS.index("tree_token")
    prior_mean[tree], prior_sd[tree] = 1.5 * chain_token, 0.75 * chain_token
    return _fit(usable, prior_mean, prior_sd, noise)


def _growth_per_request(points: Sequence[Point], shortest: float) -> float:
    """How much a round grows per request of the batch, from the widest spread of batches measured (a tenth of the
    shortest round a request when one batch was measured)."""
    low = min(points, key=lambda p: p.batch)
    high = max(points, key=lambda p: p.batch)
    if high.batch - low.batch >= 1.0:
        return max(abs(high.round_ms - low.round_ms) / (high.batch - low.batch), 0.01 * shortest)
    return 0.1 * shortest
