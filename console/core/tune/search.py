"""How `opsconsole tune` spends its time: successive halving over candidates × cells, stopping once the winner of
every cell is outside the noise. Pure: no I/O, no clock; console/core/tune/run.py runs the stages it asks for.

A *cell* is one thing to win: a workload at a concurrency level ("random C=32"). A *stage* is a list of runs,
one per candidate (one restart each), each benchmarking the cells where that candidate is still alive.

- Stage 0, screening: every candidate, every cell, one short run (`screen_fraction` of the full duration).
  A candidate stays alive in a cell while it can still win there: its screening figure, give or take the
  assumed noise of one short run (`screen_noise_pct`, not measured yet), reaches the leader's; at most the
  best `keep_per_level` stay, at least two (a winner needs a runner-up to be judged against). Successive
  halving with the last rung a duel: the candidates' restarts, not the levels, are what a search pays most for.
- Stage 1, 2, ...: the full duration with `repeats` repeats, for the cells still undecided and the candidates
  alive in them; full-run samples pool over the stages. A cell is decided when the leader's range over its
  repeats no longer overlaps the runner-up's (console/bench/comparison.py's notion of "within noise": the
  difference is larger than what repeating the same setup produced), or when it is a tie: each median lies
  within the other's range, so more repeats would not tell them apart (the margin is reported within the
  noise). Otherwise the candidates whose range reaches the leader's get more repeats, up to `max_full_stages`.
- `strategy="grid"`: one stage, every candidate × every cell at the full duration with repeats (the
  baseline the search is measured against, benchmarks/tune_search_vs_grid.py).
- `strategy="predict"`: stage 0 measures the setup the host runs (no restart), full length with repeats; then each
  stage restarts into one setup only, the untried one the prediction (console.core.predict, refitted by the runner
  after every stage from the tune's own records: `predicted()`) gives the best chance to win: its band's upper edge
  reaches past the best measured setup's lower edge in some cell (setups the prediction cannot place, a draft never
  measured, count as able to win). It stops when no untried setup can win anywhere.

Ordering saves restarts: a stage starts with the candidate the host already runs.

Ranking a cell compares like with like (`Search.ranking`). Full runs rank it once they reached every setup that
could still win there; the setups the screening left behind rank after them, by their short runs (below every
promoted setup: the screening kept the best). When the search stopped (the budget, an interruption) before the
full runs reached every contender of a cell, full figures of some cannot be held against short runs of the
others: the cell is ranked by the short runs every setup had, and says which contenders never had their full
runs. So a recommendation is never behind its runner-up by the figures that ranked them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Strategy = Literal["halving", "grid", "predict"]
StageKind = Literal["screen", "full"]


@dataclass(frozen=True, order=True)
class Cell:
    """One workload at one concurrency level: what a recommendation is made for."""

    workload: str
    concurrency: int

    @property
    def label(self) -> str:
        return f"{self.workload} C={self.concurrency}"


@dataclass(frozen=True)
class Policy:
    strategy: Strategy = "halving"
    repeats: int = 2  # full runs per cell and full stage (≥ 2 measures the noise)
    screen_fraction: float = 0.125  # screening run length as a share of the full duration
    screen_noise_pct: float = 3.0  # assumed ± noise of one screening run, before any noise is measured
    keep_per_level: int = 2  # screening keeps at most this many candidates per cell (at least two)
    max_full_stages: int = 2  # full stages after screening; each adds `repeats` samples to the contenders

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.max_full_stages < 1 or self.keep_per_level < 2:
            raise ValueError("repeats and max_full_stages must be ≥ 1, keep_per_level ≥ 2")
        if not 0 < self.screen_fraction <= 1:
            raise ValueError("screen_fraction is a share of the full duration, in (0, 1]")


@dataclass(frozen=True)
class Run:
    """One candidate in one stage: one start of its unit, then a benchmark of these cells."""

    candidate: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Stage:
    index: int
    kind: StageKind
    duration_fraction: float  # of the full per-level duration
    repeats: int
    runs: tuple[Run, ...]

    @property
    def cell_runs(self) -> int:
        """Benchmark levels this stage runs, repeats included (for time estimates)."""
        return sum(len(run.cells) for run in self.runs) * self.repeats


@dataclass(frozen=True)
class Standing:
    """A candidate's figure in a cell, from its most thorough measurement there."""

    candidate: str
    kind: StageKind  # full when it had full runs in this cell, else screen
    median: float
    low: float
    high: float
    samples: int

    @property
    def noise_measured(self) -> bool:
        return self.samples >= 2


@dataclass(frozen=True)
class Ranking:
    """A cell's measured setups, best first, each by the kind of run that ranks the cell."""

    ranked_by: StageKind
    standings: tuple[Standing, ...]
    # Contenders the full runs never reached (the search stopped first): why a cell with full runs is ranked by
    # the short ones. Empty otherwise.
    awaiting_full: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    """Who wins a cell, by how much, and whether that margin is outside the noise."""

    cell: Cell
    winner: Standing | None
    runner_up: Standing | None
    decided: bool  # the search need not look at this cell again
    within_noise: bool  # True unless the winner is shown to be ahead by more than the noise
    margin_pct: float | None = None  # winner over runner-up, from like-for-like runs (both full, or both screening)
    ranked_by: StageKind = "screen"
    awaiting_full: tuple[str, ...] = ()  # see Ranking


def margin_pct(winner: Standing, runner_up: Standing) -> float | None:
    if runner_up.median <= 0:
        return None
    return (winner.median / runner_up.median - 1.0) * 100.0


def ranges_overlap(a: Standing, b: Standing) -> bool:
    """Within noise as console/bench/comparison.py defines it: the min..max ranges over the repeats overlap."""
    return a.low <= b.high and b.low <= a.high


def tied(a: Standing, b: Standing) -> bool:
    """One's median within the other's range: the gap is smaller than a setup's own spread over its repeats, so more
    repeats would not tell them apart."""
    return a.low <= b.median <= a.high or b.low <= a.median <= b.high


def widened(standing: Standing, noise_pct: float) -> Standing:
    """A single-sample figure with the assumed noise around it (what it could have read on another run)."""
    if standing.noise_measured:
        return standing
    spread = standing.median * noise_pct / 100.0
    return Standing(
        standing.candidate, standing.kind, standing.median, standing.low - spread, standing.high + spread, 1
    )


@dataclass
class Search:
    """The search's state: samples per (candidate, cell, kind), who is alive where, what is decided."""

    candidates: Sequence[str]
    cells: Sequence[Cell]
    policy: Policy = field(default_factory=Policy)
    stages_done: int = 0
    stop_reason: str | None = None
    _samples: dict[tuple[str, Cell, StageKind], list[float]] = field(default_factory=dict)
    _alive: dict[Cell, list[str]] = field(default_factory=dict)
    _dropped: dict[str, str] = field(default_factory=dict)  # candidate -> why it is out everywhere
    _left_out: set[tuple[str, Cell]] = field(default_factory=set)  # no clean benchmark there: out of that cell
    _decided: set[Cell] = field(default_factory=set)
    # strategy "predict": per untried candidate its predicted (low, value, high) per cell; None: cannot be placed
    _forecasts: dict[str, dict[Cell, tuple[float, float, float]] | None] = field(default_factory=dict)
    _tried: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.candidates or not self.cells:
            raise ValueError("a search needs at least one candidate and one cell")
        self._alive = {cell: list(self.candidates) for cell in self.cells}

    # -- what the runner reports -------------------------------------------------------------------------

    def record(self, candidate: str, cell: Cell, kind: StageKind, value: float) -> None:
        self._samples.setdefault((candidate, cell, kind), []).append(float(value))

    def drop(self, candidate: str, reason: str) -> None:
        """The candidate is out everywhere (its start failed, the server ran something else, ...)."""
        self._dropped[candidate] = reason
        for alive in self._alive.values():
            if candidate in alive:
                alive.remove(candidate)

    def drop_cell(self, candidate: str, cell: Cell) -> None:
        """The candidate could not be measured in this cell (the benchmark failed there): it is out of the cell's
        ranking, whatever its earlier runs there measured (a setup that fails at a level is no choice for it)."""
        self._left_out.add((candidate, cell))
        if candidate in self._alive[cell]:
            self._alive[cell].remove(candidate)

    def stop(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason

    # -- what to run next ----------------------------------------------------------------------------------

    def next_stage(self, running: str | None = None) -> Stage | None:
        """The next stage to run (None: finished; stop_reason says why). `running` is the candidate the host
        runs now: it goes first, so the stage begins without a restart."""
        if self.stop_reason is not None:
            return None
        p = self.policy
        if p.strategy == "predict":
            return self._predicted_stage(running)
        if self.stages_done == 0:
            if p.strategy == "grid":
                return self._stage("full", 1.0, p.repeats, {c: list(self._alive[c]) for c in self.cells}, running)
            return self._stage("screen", p.screen_fraction, 1, {c: list(self._alive[c]) for c in self.cells}, running)
        if p.strategy == "grid" or self.stages_done > p.max_full_stages:
            self.stop("every cell measured as planned" if p.strategy == "grid" else "the most repeats planned")
            return None
        wanted: dict[Cell, list[str]] = {}
        for cell in self.cells:
            if cell in self._decided:
                continue
            alive = self._contenders(cell)
            self._alive[cell] = alive
            if self.decision(cell).decided:
                self._decided.add(cell)
                continue
            wanted[cell] = alive
        if not wanted:
            self.stop("every cell's winner is outside the noise")
            return None
        return self._stage("full", 1.0, p.repeats, wanted, running)

    def finish_stage(self) -> None:
        self.stages_done += 1

    # -- strategy "predict" ---------------------------------------------------------------------------------

    def predicted(self, forecasts: dict[str, dict[Cell, tuple[float, float, float]] | None]) -> None:
        """The prediction of the untried candidates, refitted after a stage: (low, value, high) of the figure
        per cell, or None for a candidate the prediction cannot place."""
        self._forecasts = dict(forecasts)

    def can_win(self) -> dict[str, list[Cell]]:
        """Every untried candidate that can still win, with the cells where its band reaches past the best measured
        lower edge (all cells for one the prediction cannot place)."""
        out: dict[str, list[Cell]] = {}
        for candidate in self.candidates:
            if candidate in self._tried or candidate in self._dropped:
                continue
            forecast = self._forecasts.get(candidate)
            if forecast is None:
                out[candidate] = list(self.cells)
                continue
            cells = []
            for cell in self.cells:
                measured = [s.low for s in self.standings(cell) if s.kind == "full"]
                if cell in forecast and (not measured or forecast[cell][2] > max(measured)):
                    cells.append(cell)
            if cells:
                out[candidate] = cells
        return out

    def _predicted_stage(self, running: str | None) -> Stage | None:
        p = self.policy
        if self.stages_done == 0:
            first = running if running is not None and running in self.candidates else self.candidates[0]
            return self._one(first, p.repeats)
        contenders = self.can_win()
        if not contenders:
            self.stop("no untried setup can win by the prediction")
            return None

        def promise(candidate: str) -> tuple[int, float]:
            forecast = self._forecasts.get(candidate)
            if forecast is None:
                return (0, 0.0)  # placed by nothing: after every setup the prediction likes
            best = [max((s.low for s in self.standings(c) if s.kind == "full"), default=0.0) for c in self.cells]
            gains = [forecast[c][1] / b for c, b in zip(self.cells, best, strict=True) if c in forecast and b > 0]
            return (1, max(gains, default=0.0))

        return self._one(max(contenders, key=promise), p.repeats)

    def _one(self, candidate: str, repeats: int) -> Stage:
        self._tried.append(candidate)
        return Stage(self.stages_done, "full", 1.0, repeats, (Run(candidate, tuple(self.cells)),))

    def tried(self) -> list[str]:
        return list(self._tried)

    def _stage(
        self, kind: StageKind, fraction: float, repeats: int, wanted: dict[Cell, list[str]], running: str | None
    ) -> Stage:
        order = [c for c in self.candidates if c not in self._dropped]
        if running in order:
            order.remove(running)
            order.insert(0, str(running))
        runs = []
        for candidate in order:
            cells = tuple(cell for cell in self.cells if candidate in wanted.get(cell, ()))
            if cells:
                runs.append(Run(candidate, cells))
        return Stage(self.stages_done, kind, fraction, repeats, tuple(runs))

    def _contenders(self, cell: Cell) -> list[str]:
        """Who can still win this cell, from what was measured so far."""
        ranking = self.ranking(cell)
        standings = [s for s in ranking.standings if s.candidate in self._alive[cell]]
        if not standings:
            return []
        full = [s for s in standings if s.kind == "full"]
        if ranking.ranked_by == "full":
            leader = full[0]
            keep = [s.candidate for s in full if ranges_overlap(s, leader)]
            return keep if len(keep) >= 2 else [s.candidate for s in full[:2]]
        # Screening only: the assumed noise of a short run decides who can still reach the leader.
        p = self.policy
        leader = widened(standings[0], p.screen_noise_pct)
        reach = [s.candidate for s in standings if widened(s, p.screen_noise_pct).high >= leader.low]
        keep = reach[: p.keep_per_level]
        return keep if len(keep) >= 2 else [s.candidate for s in standings[:2]]

    # -- what was found ---------------------------------------------------------------------------------------

    def samples(self, candidate: str, cell: Cell, kind: StageKind) -> list[float]:
        return list(self._samples.get((candidate, cell, kind), []))

    def standing(self, candidate: str, cell: Cell, kind: StageKind | None = None) -> Standing | None:
        """From the full runs if it had any in this cell (else the screening), or from `kind`'s runs only."""
        kinds: tuple[StageKind, ...] = ("full", "screen") if kind is None else (kind,)
        for k in kinds:
            values = self._samples.get((candidate, cell, k))
            if values:
                return Standing(candidate, k, statistics.median(values), min(values), max(values), len(values))
        return None

    def standings(self, cell: Cell) -> list[Standing]:
        """Every measured candidate in this cell, best first, by the runs that rank it (see ranking())."""
        return list(self.ranking(cell).standings)

    def ranking(self, cell: Cell) -> Ranking:
        """The cell's candidates, best first, like with like. By the full runs when they reached every contender
        (those still alive here) and no setup left at the screening beat the full leader's own screening run:
        full-run figures first, then the ones the screening left behind, by their short runs. Otherwise (the
        search stopped before the full runs reached every contender) by the short runs, which every setup had:
        a full figure of one is no measure against a short run of another."""
        present = [c for c in self.candidates if c not in self._dropped and (c, cell) not in self._left_out]
        found = [s for s in (self.standing(c, cell) for c in present) if s is not None]
        full = _best_first(s for s in found if s.kind == "full")
        screened_only = _best_first(s for s in found if s.kind == "screen")
        if not full:
            return Ranking("screen", tuple(screened_only))
        awaiting = tuple(s.candidate for s in screened_only if s.candidate in self._alive[cell])
        leader_screened = self.standing(full[0].candidate, cell, "screen")
        overtaken = bool(screened_only and leader_screened and screened_only[0].median > leader_screened.median)
        if not awaiting and not overtaken:
            return Ranking("full", tuple(full + screened_only))
        by_screen = [self.standing(s.candidate, cell, "screen") or s for s in found]
        # Those without a short run (none in a halving search) go last, on their own figures.
        ranked = sorted(by_screen, key=lambda s: (s.kind != "screen", -s.median))
        return Ranking("screen", tuple(ranked), awaiting)

    def decision(self, cell: Cell) -> Decision:
        ranking = self.ranking(cell)
        standings = ranking.standings

        def decide(
            winner: Standing | None, runner_up: Standing | None, decided: bool, noise: bool, margin: float | None
        ) -> Decision:
            return Decision(cell, winner, runner_up, decided, noise, margin, ranking.ranked_by, ranking.awaiting_full)

        if not standings:
            return decide(None, None, True, True, None)
        winner = standings[0]
        same_kind = [s for s in standings[1:] if s.kind == winner.kind]
        runner_up = same_kind[0] if same_kind else (standings[1] if len(standings) > 1 else None)
        if runner_up is None:
            # Alone: decided once nobody else is left to measure here (the others failed or were dropped).
            waiting = [c for c in self._alive[cell] if c != winner.candidate]
            return decide(winner, None, not waiting, False, None)
        if runner_up.kind != winner.kind:
            # The others were left at the screening: compare like with like, the screening figures.
            mine = self.standing(winner.candidate, cell, "screen")
            theirs = self.standing(runner_up.candidate, cell, "screen")
            if mine is None or theirs is None:
                return decide(winner, runner_up, True, True, None)
            p = self.policy
            noise = ranges_overlap(widened(mine, p.screen_noise_pct), widened(theirs, p.screen_noise_pct))
            return decide(winner, runner_up, True, noise, margin_pct(mine, theirs))
        margin = margin_pct(winner, runner_up)
        if winner.kind == "screen":
            # Short single runs only (so far, or the full runs did not reach every contender): their noise is not
            # measured, so no margin is outside it yet, and the cell waits for full runs.
            return decide(winner, runner_up, False, True, margin)
        measured = winner.noise_measured and runner_up.noise_measured
        separated = measured and not ranges_overlap(winner, runner_up)
        return decide(winner, runner_up, separated or (measured and tied(winner, runner_up)), not separated, margin)

    def alive(self, cell: Cell) -> list[str]:
        return list(self._alive[cell])

    def dropped(self) -> dict[str, str]:
        return dict(self._dropped)


def _best_first(standings: Iterable[Standing]) -> list[Standing]:
    return sorted(standings, key=lambda s: -s.median)


def estimate_stage_seconds(stage: Stage, *, restart_s: float, full_level_s: float, running: str | None) -> float:
    """How long a stage takes: a restart per run (none for the candidate already running) plus its levels."""
    restarts = sum(1 for run in stage.runs if run.candidate != running)
    return restarts * restart_s + stage.cell_runs * full_level_s * stage.duration_fraction


def cells_for(workloads: Iterable[str], concurrencies: Iterable[int]) -> list[Cell]:
    return [Cell(w, c) for w in workloads for c in concurrencies]
