"""What an untried speculative setup would do on a host's traffic, from that host's own records (pure).

    predictor = Predictor(evidence, workload, incumbent=running_setup, overlap=running_overlap)
    forecast = predictor.forecast(candidate_setup, candidate_overlap, levels=[1, 8, 32], slo=slo)
    forecast.levels[0].output_tok_s      -> Figure(value=92.1, low=85.0, high=99.3)
    forecast.verdict.text                -> "not worth a restart: slower at C=1 and C=48"

Three parts, each fitted from the records of this host (and its group's pooled: the caller's choice, Measured.host
says whose) and this workload only (never from the stand-in's model: the layering test holds it):
- acceptance (console.core.predict.acceptance): the drafts a round accepts, from the chain's runs fitted to the
  histograms of every chain setup of the same draft (or their mean accept lengths), at the candidate's depth; a tree
  from measured trees of that draft, else with its further branches' catch assumed;
- the round's cost (console.core.predict.cost) at a decode batch, fitted over every setup measured;
- the level: a closed loop of C clients whose requests take the prefill (the TTFT the records show at that level,
  without the time they waited for a free place) and (L - 1) / tokens-per-round rounds; the decode batch is where the
  round's cost and the time spent decoding agree (a fixed point), the running requests capped as SGLang caps them
  (48 with speculation unless the unit says otherwise, and the memory cap the running server reported); and what
  each level measured of that model (`level_factor`: a short level's tail, the batch's curve), alike for every setup.

Each figure has a band for one run of a new launch of that setup: the fit's 95 % along that setup's terms, the
acceptance's range (the chains the data cannot tell apart; an assumption's range held whole, the spread beyond its
edges), the model's own miss on the measured setups, and the spread of runs and of launches
(console.core.predict.spread: the runs' spread the records measured, per level, at Student's t of its degrees of
freedom, never assumed, a band without repeats says so; a launch's beside it, the records' own where a setup ran in
more than one launch, else a prior). The verdict compares means, not runs: the candidate's new launch (the band
without the runs' spread) with the running setup's measured mean (its runs' spread over the square root of their
count): "worth a restart" only where the candidate's low edge clears the incumbent's high edge. Where the round rests
on one setup, `split` names the one benchmark of another chain depth that would tell the draft's steps from the
target's forward, and what it would narrow the bands to.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from console.bench.present import band_text
from console.core.predict.acceptance import (
    TREE_CATCH_HIGH,
    TREE_CATCH_MID,
    Fit,
    Histogram,
    Runs,
    fit_histograms,
    fit_means,
    log_likelihood,
    mean_accepted,
    round_distribution,
    tree_runs,
)
from console.core.predict.cost import ASSUMPTIONS, Point, RoundCost, fit_round_cost
from console.core.predict.evidence import Evidence, Measured
from console.core.predict.spread import Spread, launch_ratio
from console.sglang.setup import SpecSetup
from console.sglang.slo import Slo

# SGLang resets an unset --max-running-requests to this with speculation (console/sglang/rules.py).
SPEC_MAX_RUNNING = 48
# Points are weighed by this relative spread where the records repeat nothing (the band then says it has no noise).
UNMEASURED_WEIGHT_NOISE = 0.05
# The fit's band: two standard deviations.
FIT_SIGMAS = 2.0
# A level's own acceptance replaces the pooled one when the pooled chain explains its histograms worse than the level's
# own fit by this much (twice the log-likelihood: chi-square with 2 degrees of freedom at 95 %).
LEVEL_TEST = 5.99

LevelVerdict = Literal["better", "slower", "within"]
VerdictKind = Literal["running", "worth", "not-worth", "unknown", "unrated"]


@dataclass(frozen=True, slots=True)
class Figure:
    value: float
    low: float
    high: float

    @property
    def band(self) -> float:
        """The band's larger half, relative to the value."""
        if self.value <= 0:
            return 0.0
        return max(self.high - self.value, self.value - self.low) / self.value

    def band_text(self, *, compact: bool = False) -> str:
        """`± 6%`, or `-45% / +82%` where the edges differ by more than a third; compact, for a table's cell: `±6%`,
        `-45/+82%` (console.bench.present.band_text)."""
        return band_text(self.value, self.low, self.high, compact=compact)


@dataclass(frozen=True)
class LevelForecast:
    concurrency: int
    output_tok_s: Figure
    tpot_ms: Figure
    ttft_ms: float
    accept_length: Figure | None  # tokens per round, the bonus included
    decode_batch: float
    measured: Figure | None = None  # this setup's own records at this level (median, spread), where it has some
    # the mean of a new launch of it (its own records' median where it has some), what the verdict compares with the
    # running setup's measured mean
    mean: Figure | None = None
    slo_met: bool | None = None
    goodput_req_s: float | None = None


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    text: str
    per_level: dict[int, LevelVerdict] = field(default_factory=dict)
    settle: str | None = None  # the one benchmark that would settle an open question


@dataclass(frozen=True)
class SetupForecast:
    setup: SpecSetup
    overlap: bool
    levels: list[LevelForecast]
    rests_on: list[str]
    assumptions: list[str]
    verdict: Verdict
    noise: float | None  # the run-to-run spread in the band (None: no repeats measured)

    def level(self, concurrency: int) -> LevelForecast | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def capacity(self) -> int | None:
        """The highest level whose predicted figures meet the SLO (None without an SLO or when none does)."""
        met = [lv.concurrency for lv in self.levels if lv.slo_met]
        return max(met) if met else None


@dataclass(frozen=True)
class _Acceptance:
    tokens: float  # per round, the bonus token included
    low: float
    high: float
    rests_on: str
    assumptions: tuple[str, ...]
    # the assumptions' own edges (a tree's branches catching least and most, a deeper chain's positions falling), at
    # the fitted chain: between them the band holds every value; the fit's and the runs' spread lie beyond
    floor: float | None = None
    ceiling: float | None = None


def _fit_chains(chains: Sequence[Measured]) -> Fit | None:
    """The chain from these levels' histograms, else from their mean accept lengths."""
    with_histograms = [m for m in chains if m.histogram]
    if with_histograms:
        return fit_histograms(Histogram(m.setup.depth, m.histogram or ()) for m in with_histograms)
    return fit_means((m.setup.depth, m.mean_accepted, m.rounds) for m in chains if m.mean_accepted is not None)


@dataclass(frozen=True, slots=True)
class _Edges:
    value: float
    low: float
    high: float
    tpot: float
    tpot_low: float
    tpot_high: float
    ttft: float
    batch: float
    floor: float  # the output tok/s at the acceptance assumptions' own edges, the round at its mean
    ceiling: float


@dataclass(frozen=True)
class Split:
    """Where the round's cost rests on one setup's records: the one benchmark more (a restart) that would split it into
    the target's part and the draft's, and what it would narrow the other setups' bands to (their median, per
    level, now and after), if that setup measured what it is predicted to (with the runs' spread the records show)."""

    setup: SpecSetup
    overlap: bool
    bands_now: dict[int, float]
    bands_after: dict[int, float]

    @property
    def text(self) -> str:
        levels = ", ".join(f"C={c}" for c in self.bands_now)
        return (
            f"one benchmark of {self.setup.name()} (a restart) would split the round into the target's part and the "
            f"draft's: the other setups' bands from {_span(self.bands_now)} to about {_span(self.bands_after)} "
            f"({levels})"
        )


def _span(bands: dict[int, float]) -> str:
    low, high = min(bands.values()), max(bands.values())
    return f"±{low:.0%}" if round(low * 100) == round(high * 100) else f"±{low:.0%}-{high:.0%}"


class Unknown(Exception):
    """No measured base for part of a setup: the message says which, and what one benchmark would settle it."""

    def __init__(self, why: str, settle: str) -> None:
        super().__init__(why)
        self.settle = settle


class Predictor:
    """Predictions for one host and one workload, from its records."""

    def __init__(
        self,
        evidence: Evidence,
        workload: str,
        *,
        incumbent: SpecSetup | None = None,
        incumbent_overlap: bool = True,
        cross_check: bool = True,
        host: str | None = None,
    ) -> None:
        self.evidence = evidence
        self.host = host  # whose records are the host's own (the rest pooled from its group); None: all own
        self.workload = workload
        self.levels_measured = evidence.of(workload)
        if not self.levels_measured:
            raise Unknown(f"no benchmark record of {workload} on this host", "a benchmark of the running setup")
        self.incumbent = incumbent
        self.incumbent_overlap = incumbent_overlap
        self.noise = evidence.noise(workload)
        self.accept_noise = evidence.accept_noise(workload)
        levels = {m.concurrency for m in self.levels_measured}
        # each level's own spread where a cell of that level was repeated (C = 1 spreads most: a run is few requests),
        # and how much more launches differ (console/core/predict/spread.py)
        self.launches = launch_ratio(evidence.launch_ratio(workload))
        self.accept_launches = launch_ratio(evidence.launch_ratio(workload, accept=True))
        self._spreads = {
            (c, accept): _spread_at(evidence, workload, c, accept, self.accept_launches if accept else self.launches)
            for c in levels
            for accept in (False, True)
        }
        points = [Point(m.setup, m.overlap, m.decode_batch, m.round_ms) for m in self.levels_measured]
        cost = fit_round_cost(points, self.noise if self.noise is not None else UNMEASURED_WEIGHT_NOISE)
        assert cost is not None  # every Measured has a positive round and batch
        self.cost: RoundCost = cost
        self._acceptance_fits: dict[tuple[tuple[str | None, str | None], int | None], Fit | None] = {}
        self._catches: dict[tuple[str | None, str | None], tuple[float, float, float, str | None]] = {}
        self._acceptances: dict[tuple[SpecSetup, int | None], _Acceptance | Unknown] = {}
        self.calibration = 1.0  # the fit's edges read it while it is being measured
        self._level_factor: dict[int, float] = {}
        self._level_factor = self._level_factors()
        self.model_error, self.calibration = self._calibrate(cross_check)
        self.accept_error = self._accept_error()

    # ---- acceptance ------------------------------------------------------------------------------------------

    def _same_draft(self, setup: SpecSetup) -> list[Measured]:
        def match(m: Measured) -> bool:
            if m.setup.algorithm != setup.algorithm:
                return False
            return setup.draft_model_path is None or m.setup.draft_model_path in (None, setup.draft_model_path)

        return [m for m in self.levels_measured if m.setup.speculative and match(m)]

    def _chain_fit(self, setup: SpecSetup, concurrency: int | None) -> Fit | None:
        """The chain fitted to this draft's chain setups, every level pooled; at a level whose own histograms the
        pooled chain does not explain (a likelihood-ratio test at 95 %), the level's own. A benchmark sends every setup
        the same prompts at a level and other prompts at another, and acceptance can differ between them (the H200:
        1.61 at C = 1, 1.57 at C = 16, from 2,149 and 15,308 rounds), where pooling would miss both; where it does
        not, pooling halves the noise of a short level."""
        key = (setup.draft, concurrency)
        if key in self._acceptance_fits:
            return self._acceptance_fits[key]
        chains = [m for m in self._same_draft(setup) if m.setup.topk == 1]
        pooled = _fit_chains(chains)
        fit = pooled
        here = [Histogram(m.setup.depth, m.histogram) for m in chains if m.concurrency == concurrency and m.histogram]
        if pooled is not None and here:
            own = fit_histograms(here)
            if (
                own is not None
                and 2 * (log_likelihood(own.runs, here) - log_likelihood(pooled.runs, here)) > LEVEL_TEST
            ):
                fit = own
        self._acceptance_fits[key] = fit
        return fit

    def acceptance(self, setup: SpecSetup, concurrency: int | None = None) -> _Acceptance:
        """Tokens per round (bonus included) for a setup at a level (None: every level pooled), with its range;
        Unknown where its draft has no record. Once per setup and level (the calibration asks again)."""
        key = (setup, concurrency)
        if key not in self._acceptances:
            try:
                self._acceptances[key] = self._acceptance(setup, concurrency)
            except Unknown as exc:
                self._acceptances[key] = exc
        known = self._acceptances[key]
        if isinstance(known, Unknown):
            raise known
        return known

    def _acceptance(self, setup: SpecSetup, concurrency: int | None) -> _Acceptance:
        if not setup.speculative:
            return _Acceptance(1.0, 1.0, 1.0, "no draft", ())
        fit = self._chain_fit(setup, concurrency)
        if fit is None:
            raise Unknown(
                f"no measured base for {setup.algorithm}"
                + (f" with {setup.draft_model_path}" if setup.draft_model_path else "")
                + f" on {self.workload}",
                f"one benchmark of a setup with that draft ({setup.name()}: a restart)",
            )
        assumptions: list[str] = []
        what = f"{fit.rounds:,} verify rounds of {setup.algorithm} chains ({fit.source})"
        if setup.depth > fit.deepest:
            assumptions.append(
                f"deeper than measured (depth {setup.depth} > {fit.deepest}): the chain's runs go on, the band lets "
                "each further position fall 10 %"
            )
        if setup.topk == 1:
            central, low, high = fit.predict(setup.depth)
            floor = fit.predict_deeper(setup.depth)
            return _Acceptance(1 + central, 1 + low, 1 + high, what, tuple(assumptions), 1 + floor, 1 + central)
        branches = max(1.0, min(float(setup.topk), (setup.draft_tokens - 1) / max(setup.steps, 1)))
        catch, catch_low, catch_high, tree_what = self._tree_catch(setup, fit)
        if tree_what is None:
            assumptions.append(
                f"a tree's further branches catch {catch_low:.0%}-{catch_high:.0%} of the misses (no tree of this "
                "draft measured)"
            )
        else:
            what += f"; {tree_what}"

        def accepted(runs: Runs, share: float) -> float:
            return 1 + mean_accepted(tree_runs(runs, branches, share), setup.depth)

        chains = [*fit.band, fit.runs]  # the chains the data cannot tell apart, for the edges
        return _Acceptance(
            accepted(fit.runs, catch),
            min(accepted(r, catch_low) for r in chains),
            max(accepted(r, catch_high) for r in chains),
            what,
            tuple(assumptions),
            accepted(fit.runs, catch_low),
            accepted(fit.runs, catch_high),
        )

    def _tree_catch(self, setup: SpecSetup, chain: Fit) -> tuple[float, float, float, str | None]:
        """The share of misses a further branch catches: fitted to the measured trees of this draft (their mean
        accepted per round, pooled per tree shape), else the assumption's range. Once per draft."""
        if setup.draft not in self._catches:
            self._catches[setup.draft] = self._fit_catch(setup, chain)
        return self._catches[setup.draft]

    def _fit_catch(self, setup: SpecSetup, chain: Fit) -> tuple[float, float, float, str | None]:
        trees = [m for m in self._same_draft(setup) if m.setup.topk > 1 and m.mean_accepted is not None]
        if not trees:
            return TREE_CATCH_MID, 0.0, TREE_CATCH_HIGH, None
        shapes: dict[tuple[float, int], list[float]] = {}
        for m in trees:
            s = m.setup
            branches = max(1.0, min(float(s.topk), (s.draft_tokens - 1) / max(s.steps, 1)))
            shapes.setdefault((branches, s.depth), []).append(m.mean_accepted or 0.0)
        measured = {shape: statistics.mean(values) for shape, values in shapes.items()}

        def error(catch: float) -> float:
            return sum(
                len(shapes[(branches, depth)])
                * (mean_accepted(tree_runs(chain.runs, branches, catch), depth) - mean) ** 2
                for (branches, depth), mean in measured.items()
            )

        grid = [i / 100 for i in range(91)]
        errors = {c: error(c) for c in grid}
        best = min(grid, key=errors.__getitem__)
        spread = self.noise if self.noise is not None else UNMEASURED_WEIGHT_NOISE
        tolerance = errors[best] + len(trees) * (spread * 0.5) ** 2
        near = [c for c in grid if errors[c] <= tolerance]
        return best, min(near), max(near), f"{len(trees)} levels of measured trees"

    # ---- a level ---------------------------------------------------------------------------------------------

    def _output_len(self, concurrency: int) -> float:
        here = [m.output_len for m in self.levels_measured if m.concurrency == concurrency]
        return statistics.median(here or [m.output_len for m in self.levels_measured])

    def _prefill_ms(self, concurrency: int) -> float:
        """A request's TTFT at this level without the time it queued for a free place (Little's law on each
        record: the requests beyond the running cap wait (C - running) / request rate), interpolated between
        the measured levels."""
        by_level: dict[int, list[float]] = {}
        for m in self.levels_measured:
            running = min(m.concurrency, m.max_running or m.concurrency)
            rate = m.output_tok_s / m.output_len if m.output_len else 0.0
            wait_ms = (m.concurrency - running) / rate * 1000.0 if rate > 0 else 0.0
            by_level.setdefault(m.concurrency, []).append(max(m.ttft_ms - wait_ms, 0.1 * m.ttft_ms))
        points = sorted((c, statistics.median(v)) for c, v in by_level.items())
        if concurrency <= points[0][0]:
            return points[0][1]
        if concurrency >= points[-1][0]:
            return points[-1][1]
        for (c0, p0), (c1, p1) in itertools.pairwise(points):
            if c0 <= concurrency <= c1:
                return p0 + (p1 - p0) * (concurrency - c0) / (c1 - c0)
        return points[-1][1]  # pragma: no cover - the loop always finds the bracket

    def max_running(self, setup: SpecSetup) -> int | None:
        """The running-request cap: SGLang's 48 with speculation, the memory cap the running server reported."""
        reported = [m.max_running for m in self.levels_measured if m.max_running]
        memory = min(reported) if reported else None
        caps = [c for c in (SPEC_MAX_RUNNING if setup.speculative else None, memory) if c]
        return min(caps) if caps else None

    def _closed_loop(
        self, setup: SpecSetup, overlap: bool, concurrency: int, tokens: float, sigmas: float
    ) -> tuple[float, float, float, float]:
        """(output tok/s, TPOT ms, TTFT ms, decode batch) of C clients, the round's cost `sigmas` fit deviations
        off its mean."""
        length = self._output_len(concurrency)
        prefill = self._prefill_ms(concurrency)
        cap = self.max_running(setup)
        running = min(concurrency, cap) if cap else concurrency
        batch = float(running)
        round_ms = decode_ms = 0.0
        for _ in range(60):
            mean, sd = self.cost.predict(setup, overlap, batch)
            # Symmetric on a log scale: k deviations up cost (1 + k sd / mean) more, k down that much less (never
            # below zero, as a line through the mean would go for a wide band).
            ratio = 1.0 + abs(sigmas) * sd / mean if mean > 0 else 1.0
            round_ms = mean * ratio if sigmas >= 0 else mean / ratio
            decode_ms = max(length - 1.0, 0.0) / tokens * round_ms
            new_batch = running * decode_ms / (prefill + decode_ms) if prefill + decode_ms > 0 else float(running)
            if abs(new_batch - batch) < 1e-4 * max(batch, 1.0):
                batch = new_batch
                break
            batch = 0.5 * (batch + new_batch)
        cycle_ms = prefill + decode_ms
        tok_s = running * length / cycle_ms * 1000.0 if cycle_ms > 0 else 0.0
        tok_s *= self.level_factor(concurrency)
        ttft = prefill + (concurrency - running) * cycle_ms / running
        return tok_s, round_ms / tokens, ttft, batch

    def level_factor(self, concurrency: int) -> float:
        """What the level measured of what the model of a steady closed loop gives it, the measured setups' median
        (the nearest measured level's for another): a level of a few seconds ends with its last requests in flight,
        fewer than C at a time, and its tok/s counts that tail (the H100's 8B: 5-8 % at C = 16 with 5 s levels), and
        what a linear round cost misses at that batch, alike for every setup there."""
        if not self._level_factor:
            return 1.0
        nearest = min(self._level_factor, key=lambda c: (abs(math.log(c / concurrency)), c))
        return self._level_factor[nearest]

    def _level_factors(self) -> dict[int, float]:
        ratios: dict[int, list[float]] = {}
        cells: dict[tuple[SpecSetup, bool, int], list[float]] = {}
        for m in self.levels_measured:
            cells.setdefault((m.setup, m.overlap, m.concurrency), []).append(m.output_tok_s)
        for (setup, overlap, c), figures in cells.items():
            try:
                tokens = self.acceptance(setup, c).tokens
            except Unknown:
                continue
            steady = self._closed_loop(setup, overlap, c, tokens, 0.0)[0]
            if steady > 0:
                ratios.setdefault(c, []).append(statistics.median(figures) / steady)
        return {c: statistics.median(r) for c, r in ratios.items()}

    def _fit_edges(self, setup: SpecSetup, overlap: bool, concurrency: int, acceptance: _Acceptance) -> _Edges:
        """The level's output tok/s and TPOT at the fit's centre and at its edges (the acceptance's range, the round
        cost FIT_SIGMAS deviations off its mean, scaled by the calibration), before the runs' spread."""
        sigmas = FIT_SIGMAS * self.calibration
        value, tpot, ttft, batch = self._closed_loop(setup, overlap, concurrency, acceptance.tokens, 0.0)
        slow, tpot_high, _, _ = self._closed_loop(setup, overlap, concurrency, acceptance.low, sigmas)
        fast, tpot_low, _, _ = self._closed_loop(setup, overlap, concurrency, acceptance.high, -sigmas)
        floor = ceiling = value
        if acceptance.floor is not None and acceptance.floor != acceptance.tokens:
            floor = self._closed_loop(setup, overlap, concurrency, acceptance.floor, 0.0)[0]
        if acceptance.ceiling is not None and acceptance.ceiling != acceptance.tokens:
            ceiling = self._closed_loop(setup, overlap, concurrency, acceptance.ceiling, 0.0)[0]
        low, high = min(slow, value), max(fast, value)
        return _Edges(value, low, high, tpot, min(tpot_low, tpot), max(tpot_high, tpot), ttft, batch,
                      min(max(floor, low), value), max(min(ceiling, high), value))  # fmt: skip

    def _calibrate(self, cross_check: bool) -> tuple[float, float]:
        """(model error, calibration). The model error is how far the model misses the measured setups themselves:
        the root mean square of (predicted - measured) / measured output tok/s over every (setup, level) measured,
        what its shape cannot follow (a cost that saturates, the prefill's interplay with decode). The calibration
        holds the fit's band to how far the model carries from setup to setup on this host: each measured setup is
        predicted from the others' records alone (leave one setup out), and where those predictions miss by more
        than their own band says, every band from the fit widens by that factor (never narrows)."""
        cells: dict[tuple[SpecSetup, bool], dict[int, float]] = {}
        for m in self.levels_measured:
            cells.setdefault((m.setup, m.overlap), {}).setdefault(m.concurrency, 0.0)
        for key, levels in cells.items():
            for c in levels:
                figures = [
                    m.output_tok_s for m in self.levels_measured if (m.setup, m.overlap, m.concurrency) == (*key, c)
                ]
                levels[c] = statistics.median(figures)
        in_sample: list[float] = []
        scores: list[float] = []
        for (setup, overlap), levels in cells.items():
            with contextlib.suppress(Unknown):
                for c, measured in levels.items():
                    tokens = self.acceptance(setup, c).tokens
                    predicted = self._closed_loop(setup, overlap, c, tokens, 0.0)[0]
                    in_sample.append((predicted - measured) / measured)
            others = [m for m in self.levels_measured if (m.setup, m.overlap) != (setup, overlap)]
            if not cross_check or not others:
                continue
            with contextlib.suppress(Unknown):
                predictor = Predictor(Evidence(others), self.workload, cross_check=False)
                for c, measured in levels.items():
                    edges = predictor._fit_edges(setup, overlap, c, predictor.acceptance(setup, c))
                    half = (edges.high - edges.low) / 2 or 1e-9
                    scores.append((edges.value - measured) / half * FIT_SIGMAS / 2)
        error = math.sqrt(sum(e * e for e in in_sample) / len(in_sample)) if in_sample else 0.0
        # A 2-sigma band holds a miss of up to FIT_SIGMAS (in sigma units): widen where they missed by more.
        worst = math.sqrt(sum(z * z for z in scores) / len(scores)) if scores else 0.0
        return error, max(1.0, worst)

    def _accept_error(self) -> float:
        """How far the acceptance misses the measured setups' own accept lengths: the root mean square of (predicted -
        measured) / measured over every speculative (setup, level) measured, the measured one its runs' median (the
        throughput's model error's counterpart: the chain's shape, pooled over levels and depths, does not follow
        every level; the H100's steps 3 at C = 1, 2.31 from steps 1's and 3's records against 2.26 measured)."""
        cells: dict[tuple[SpecSetup, int], list[float]] = {}
        for m in self.levels_measured:
            if m.setup.speculative and m.mean_accepted is not None:
                cells.setdefault((m.setup, m.concurrency), []).append(1.0 + m.mean_accepted)
        misses: list[float] = []
        for (setup, c), figures in cells.items():
            with contextlib.suppress(Unknown):
                measured = statistics.median(figures)
                misses.append(self.acceptance(setup, c).tokens / measured - 1.0)
        return math.sqrt(sum(e * e for e in misses) / len(misses)) if misses else 0.0

    def spread(self, concurrency: int, *, accept: bool = False) -> Spread:
        """The runs' and the launches' spread at this level (console/core/predict/spread.py): the level's own where it
        was measured, the records' whole at another."""
        known = self._spreads.get((concurrency, accept))
        if known is None:
            known = _spread_at(self.evidence, self.workload, None, accept,
                               self.accept_launches if accept else self.launches)  # fmt: skip
            self._spreads[(concurrency, accept)] = known
        return known

    # ---- one more setup ------------------------------------------------------------------------------------------

    def rests_on_one_setup(self) -> bool:
        return len({m.setup for m in self.levels_measured if m.setup.speculative}) <= 1

    def split(self, candidates: Sequence[tuple[SpecSetup, bool]], levels: Sequence[int]) -> Split | None:
        """Where the records hold one speculative setup: of `candidates`, the one whose benchmark would narrow the
        others' bands most (each tried as if measured at the incumbent's levels, at its predicted figures, with the
        incumbent's repeats' spread), and the bands before and after; None where two setups are measured already."""
        if not self.rests_on_one_setup() or self.incumbent is None:
            return None
        others = [(s, o) for s, o in candidates if (s, o) != (self.incumbent, self.incumbent_overlap)]
        # what splits a round is another depth of the same draft's chain (the draft's steps apart from the target's
        # forward); a tree or another draft only where the space has no such chain
        inc = self.incumbent
        chains = [
            (s, o) for s, o in others
            if s.speculative and s.topk == 1 and s.algorithm == inc.algorithm and s.draft == inc.draft
            and s.steps != inc.steps
        ]  # fmt: skip
        best: Split | None = None
        for setup, overlap in chains or others:
            try:
                extra = self._as_measured(setup, overlap)
            except Unknown:
                continue
            if not extra:
                continue
            after = Predictor(
                Evidence([*self.levels_measured, *extra]), self.workload, incumbent=self.incumbent,
                incumbent_overlap=self.incumbent_overlap, cross_check=False, host=self.host,
            )  # fmt: skip
            after.calibration = self.calibration
            rest = [(s, o) for s, o in others if (s, o) != (setup, overlap)] or [(setup, overlap)]
            bands, now = self._median_bands(after, rest, levels), self._median_bands(self, rest, levels)
            gain = sum(now.values()) - sum(bands.values())
            if bands and (best is None or gain > sum(best.bands_now.values()) - sum(best.bands_after.values())):
                best = Split(setup, overlap, now, bands)
        return best

    @staticmethod
    def _median_bands(predictor: Predictor, setups: Sequence[tuple[SpecSetup, bool]], levels: Sequence[int]
                      ) -> dict[int, float]:  # fmt: skip
        per_level: dict[int, list[float]] = {}
        for setup, overlap in setups:
            for level in predictor.forecast(setup, overlap, levels).levels:
                per_level.setdefault(level.concurrency, []).append(level.output_tok_s.band)
        return {c: statistics.median(bands) for c, bands in per_level.items()}

    def _as_measured(self, setup: SpecSetup, overlap: bool) -> list[Measured]:
        """The setup's levels as if measured at the incumbent's levels: its predicted tok/s, round and batch, its
        accept length (a chain's histogram from the fitted runs), each of the incumbent's repeats scaled alike."""
        out: list[Measured] = []
        template = [m for m in self.levels_measured if (m.setup, m.overlap) == (self.incumbent, self.incumbent_overlap)]
        fit = self._chain_fit(setup, None) if setup.speculative and setup.topk == 1 else None
        for c in sorted({m.concurrency for m in template}):
            here = [m for m in template if m.concurrency == c]
            tokens = self.acceptance(setup, c).tokens
            tok_s, tpot, ttft, batch = self._closed_loop(setup, overlap, c, tokens, 0.0)
            round_ms = self.cost.predict(setup, overlap, batch)[0]
            middle = statistics.median(m.output_tok_s for m in here)
            for m in here:
                scale = m.output_tok_s / middle if middle > 0 else 1.0
                histogram = None
                if fit is not None and fit.source == "histograms" and setup.speculative:
                    dist = round_distribution(fit.runs, setup.depth)
                    histogram = tuple(round(p * m.rounds) for p in dist)
                out.append(replace(
                    m, setup=setup, overlap=overlap, output_tok_s=tok_s * scale, tpot_ms=tpot / scale, ttft_ms=ttft,
                    decode_batch=batch, round_ms=round_ms / scale, accept_length=tokens if setup.speculative else None,
                    mean_accepted=tokens - 1.0 if setup.speculative else None, histogram=histogram,
                    run_id=f"{m.run_id} (as if)", derived=False,
                ))  # fmt: skip
        return out

    # ---- a setup ---------------------------------------------------------------------------------------------

    def _own(self, levels: list[Measured]) -> list[Measured]:
        """A setup's measured levels as its own figure: the host's own where it has some, else its group's."""
        mine = [m for m in levels if not self.host or not m.host or m.host == self.host]
        return mine or levels

    def forecast(self, setup: SpecSetup, overlap: bool, levels: Sequence[int], slo: Slo | None = None) -> SetupForecast:
        """The setup at each level (closed-loop concurrency), with its bands, what they rest on and the verdict."""
        try:
            acceptances = {c: self.acceptance(setup, c) for c in levels}
            acceptance = self.acceptance(setup)  # pooled: what the prediction says it rests on
        except Unknown as exc:
            return SetupForecast(setup, overlap, [], [], [], Verdict("unknown", f"unknown: {exc}", {}, exc.settle),
                                 self.noise)  # fmt: skip
        out: list[LevelForecast] = []
        for c in levels:
            spread, model = self.spread(c), 2.0 * self.model_error
            edges = self._fit_edges(setup, overlap, c, acceptances[c])
            value = edges.value
            # one run of a new launch: the fit's edges, the runs' and the launches' spread and the model's own miss
            low, high = _band(edges.low, edges.high, edges.floor, edges.ceiling, math.hypot(spread.run, model))
            # the new launch's mean (the verdict's): its runs averaged out, not its launch
            mean_low, mean_high = _band(edges.low, edges.high, edges.floor, edges.ceiling,
                                        math.hypot(spread.launch, model))  # fmt: skip
            own = self._own(
                [m for m in self.levels_measured if (m.setup, m.overlap, m.concurrency) == (setup, overlap, c)]
            )
            measured = _measured(own, spread.run)
            mean = Figure(value, mean_low, mean_high)
            if own:
                middle = statistics.median(m.output_tok_s for m in own)
                half = math.hypot(spread.mean(len(own)), spread.launch)
                mean = Figure(middle, middle * max(0.0, 1.0 - half), middle * (1.0 + half))
            accept = None
            if setup.speculative:
                # the fit's range (the chains its rounds cannot tell apart) and the spread of the accept length between
                # runs and launches of one setup, in quadrature: a level's rounds are many, its runs and launches few
                a = acceptances[c]
                floor, ceiling = a.floor or a.tokens, a.ceiling or a.tokens
                a_low, a_high = _band(a.low, a.high, min(floor, a.tokens), max(ceiling, a.tokens),
                                      math.hypot(self.spread(c, accept=True).run, 2.0 * self.accept_error))  # fmt: skip
                accept = Figure(a.tokens, a_low, a_high)
            level = LevelForecast(
                c, Figure(value, low, high), Figure(edges.tpot, edges.tpot_low, edges.tpot_high), edges.ttft, accept,
                edges.batch, measured, mean=mean,
            )  # fmt: skip
            if slo is not None:
                level = self._judge(level, slo, setup)
            out.append(level)
        rests_on = [f"acceptance: {acceptance.rests_on}", f"round cost: {self.measured_setups_text()}"]
        pooled = self.pooled_hosts()
        if pooled:
            count = sum(pooled.values())
            rests_on.append(
                f"pooled: {count} levels of {', '.join(sorted(pooled))} (its group's, the same model, draft and GPU)"
            )
        if any(m.derived for m in self.levels_measured):
            rests_on.append("rounds of older records read off their mean TPOT and accept length")
        assumptions = [*acceptance.assumptions, *(ASSUMPTIONS[t] for t in self.cost.assumed(setup, overlap))]
        if self.noise is None:
            assumptions.append("no run repeated on this host: the band has no run-to-run spread (bench --repeat 2)")
        if not setup.speculative and not any(not m.setup.speculative for m in self.levels_measured):
            assumptions.append("no speculation never measured: its round is the target's forward the fit implies")
        forecast = SetupForecast(setup, overlap, out, rests_on, assumptions, Verdict("unknown", ""), self.noise)
        return _with_verdict(forecast, self._incumbent_figures(levels, slo), self)

    def measured_setups_text(self) -> str:
        """`12 levels of 2 setups: EAGLE steps 3 topk 1 (running; 2026-12-07), EAGLE steps 1 ... (2026-12-05)`:
        every setup the records hold, by name, with the day of its newest record."""
        newest: dict[SpecSetup, str] = {}
        for m in self.levels_measured:
            newest[m.setup] = max(newest.get(m.setup, ""), m.started_at[:10])
        named = [
            f"{setup.name()} ({'running; ' if setup == self.incumbent else ''}{day})"
            for setup, day in sorted(newest.items(), key=lambda item: (item[0] != self.incumbent, item[1]))
        ]
        return f"{len(self.levels_measured)} levels of {len(newest)} setups: " + ", ".join(named)

    def pooled_hosts(self) -> dict[str, int]:
        """The levels from other hosts than the incumbent's own (pooled records of its group), by host."""
        own = self.host
        out: dict[str, int] = {}
        for m in self.levels_measured:
            if own and m.host and m.host != own:
                out[m.host] = out.get(m.host, 0) + 1
        return out

    def _judge(self, level: LevelForecast, slo: Slo, setup: SpecSetup) -> LevelForecast:
        """The SLO held to the predicted means, each percentile scaled from its mean as this workload's records at
        this level show (their percentile / mean)."""
        measured = [m for m in self.levels_measured if m.concurrency == level.concurrency] or self.levels_measured
        predicted = {"ttft": level.ttft_ms, "tpot": level.tpot_ms.value}
        met = True
        for bound in slo.bounds:
            if bound.metric not in predicted:
                continue
            ratios = [
                m.percentiles.get(bound.record_field, 0.0) / m.mean(bound.metric)
                for m in measured
                if m.mean(bound.metric)
            ]
            ratio = statistics.median(ratios) if ratios else 1.0
            if predicted[bound.metric] * ratio > bound.limit_ms:
                met = False
        rate = level.output_tok_s.value / self._output_len(level.concurrency)
        return replace(level, slo_met=met, goodput_req_s=rate if met else 0.0)

    def _incumbent_figures(self, levels: Sequence[int], slo: Slo | None) -> dict[int, Figure] | None:
        if self.incumbent is None:
            return None
        figures: dict[int, Figure] = {}
        incumbent, overlap = self.incumbent, self.incumbent_overlap
        for c in levels:
            spread = self.spread(c)
            own = self._own(
                [m for m in self.levels_measured if (m.setup, m.overlap, m.concurrency) == (incumbent, overlap, c)]
            )
            if own:
                # the running launch's mean, as its runs measured it (no restart: no launch's spread)
                middle = statistics.median(m.output_tok_s for m in own)
                half = spread.mean(len(own))
                figures[c] = Figure(middle, middle * max(0.0, 1.0 - half), middle * (1.0 + half))
                continue
            try:
                tokens = self.acceptance(self.incumbent, c)
            except Unknown:
                continue
            value, _, _, _ = self._closed_loop(self.incumbent, self.incumbent_overlap, c, tokens.tokens, 0.0)
            low, high = _widen(value, value, value, math.hypot(spread.launch, 2.0 * self.model_error))
            figures[c] = Figure(value, low, high)
        return figures


def _spread_at(evidence: Evidence, workload: str, concurrency: int | None, accept: bool, launches: float) -> Spread:
    """The runs' spread a band carries at a level: the level's own (its cells run more than once) where it is wider
    than every level's pooled, else the pooled, at Student's t of the pooled degrees of freedom. A level's own rests on
    few runs and can come out narrow by chance (the H100's 8B from steps 1 and 3: 1.1 % at C = 1, steps 1's runs
    replaying each other, where every level's pooled says 1.6 % and steps 2's runs there spread 2-5 %); it is kept
    where it is wider (at C = 1 a run is a few requests)."""
    whole, dof = evidence.spread(workload, None, accept=accept)
    own = evidence.spread(workload, concurrency, accept=accept)[0] if concurrency is not None else None
    sd = max(own, whole) if own is not None and whole is not None else whole
    return Spread(sd, dof, launches)


def _band(low: float, high: float, floor: float, ceiling: float, noise_band: float) -> tuple[float, float]:
    """A band's edges: between the assumptions' edges (`floor`, `ceiling`) every value is as likely as the
    assumption says; beyond each, the fit's own range there and the runs' spread, their relative half-widths added in
    quadrature. Where nothing is assumed (floor = ceiling = the value) this is `_widen`: an assumed edge is not a
    deviation that the spread averages with (the H100's topk-2 tree catches nothing a chain misses: it measured its
    chain's accept length, the assumption's floor, and its runs spread around it)."""
    below = math.hypot((floor - low) / floor, noise_band) if floor > 0 else 0.0
    above = math.hypot((high - ceiling) / ceiling, noise_band) if ceiling > 0 else 0.0
    return floor * max(0.0, 1.0 - below), ceiling * (1.0 + above)


def _widen(value: float, low: float, high: float, noise_band: float) -> tuple[float, float]:
    """The fit's and the acceptance's edges, and the runs' spread beside them (their relative half-widths added in
    quadrature)."""
    below = math.hypot((value - low) / value, noise_band) if value > 0 else 0.0
    above = math.hypot((high - value) / value, noise_band) if value > 0 else 0.0
    return value * max(0.0, 1.0 - below), value * (1.0 + above)


def _measured(own: Sequence[Measured], noise_band: float) -> Figure | None:
    if not own:
        return None
    figures = [m.output_tok_s for m in own]
    median = statistics.median(figures)
    low, high = _widen(median, min(figures), max(figures), noise_band)
    return Figure(median, min(low, min(figures)), max(high, max(figures)))


def _with_verdict(forecast: SetupForecast, incumbent: dict[int, Figure] | None, predictor: Predictor) -> SetupForecast:
    """The candidate against the running setup, level by level: the mean of a new launch of it (its own measurement
    where it has one, else the prediction; `LevelForecast.mean`) against the running launch's measured mean; better
    only where the candidate's low edge clears the incumbent's high edge. A run's spread averages out over a launch's
    hours; a launch's does not (the restart gives one)."""
    setup = forecast.setup
    if setup == predictor.incumbent and forecast.overlap == predictor.incumbent_overlap:
        return replace(forecast, verdict=Verdict("running", "the running setup"))
    if not incumbent:
        return replace(forecast, verdict=Verdict("unrated", "no running setup to compare with"))
    per_level: dict[int, LevelVerdict] = {}
    change: dict[int, float] = {}
    for level in forecast.levels:
        theirs = incumbent.get(level.concurrency)
        if theirs is None:
            continue
        mine = level.mean or level.output_tok_s
        change[level.concurrency] = mine.value / theirs.value - 1 if theirs.value else 0.0
        if mine.low > theirs.high:
            per_level[level.concurrency] = "better"
        elif mine.high < theirs.low:
            per_level[level.concurrency] = "slower"
        else:
            per_level[level.concurrency] = "within"

    def at(kind: LevelVerdict, with_change: bool) -> str:
        levels = [c for c, v in per_level.items() if v == kind]
        return ", ".join(f"C={c} ({change[c]:+.0%})" if with_change else f"C={c}" for c in levels)

    slower, within = at("slower", False), at("within", True)
    rest = "; ".join(
        part for part in (slower and f"slower at {slower}", within and f"within the bands at {within}") if part
    )
    if "better" in per_level.values():
        text = f"worth a restart: {at('better', True)} beyond both bands" + (f"; {rest}" if rest else "")
        return replace(forecast, verdict=Verdict("worth", text, per_level))
    settle = None
    if within and forecast.assumptions:
        settle = f"one benchmark of {setup.name()} (a restart) would settle it"
    return replace(forecast, verdict=Verdict("not-worth", f"not worth a restart: {rest}", per_level, settle))
