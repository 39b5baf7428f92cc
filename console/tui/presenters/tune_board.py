"""A running tune as a board: one row per setup (pending / starting / benchmarking C=N / done / failed / skipped /
pruned), what the current trial is doing (its start's phase, its benchmark's level and running figures), the
stage, the standings per level and the notices. Pure: folds the tune's events (console.core.tune) one by one;
the console's Tune screen renders it, the time comes from the events' own `at`.

    board = TuneBoard.planned(pending.space)
    board.feed(event)            # every TuneEvent, in order
    board.rows, board.current, board.stage, board.levels, board.finished

Under the goodput or capacity objective (TuneStarted says which) the rows' figures are the objective's (req/s) and
`rankings()` orders each level's setups by it, as the search ranks them.

Under the strategy predict each stage after the first is one setup, the untried one the prediction likes best; after
each stage (SetupsPredicted) every untried row holds its predicted figures per level and its chance: it can still
win (it may be restarted), it cannot (it will not be), or nothing places it (a draft never measured: it counts as able
to win). A row once tried has its measured figures instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from console.bench.events import LevelDone, LevelStarted, RunningFigures
from console.core.change import ApplyState
from console.core.events import Notice, PhaseChanged, Reconnecting, StepChanged
from console.core.tune import (
    Cell,
    LevelProgress,
    Restoring,
    SetupsPredicted,
    Space,
    StageStarted,
    TrialApplied,
    TrialApplyEvent,
    TrialBenchEvent,
    TrialBenchmarked,
    TrialFailed,
    TrialRef,
    TrialSkipped,
    TrialStarted,
    TuneEvent,
    TuneFinished,
    TuneStarted,
)

RowState = Literal["pending", "starting", "benchmarking", "done", "failed", "skipped", "pruned", "merged"]
# Strategy predict: what the latest prediction says of an untried setup ("" once tried, or before any prediction).
Chance = Literal["", "can win", "cannot win", "unplaced"]
NOTES_KEPT = 50
# Apply states worth naming on the current trial's line (the rest is the phase of the start).
_APPLY_WORDS = {
    ApplyState.BACKED_UP: "unit backed up",
    ApplyState.WRITTEN: "unit written",
    ApplyState.DAEMON_RELOADED: "daemon-reload",
    ApplyState.RESTARTING: "restarting",
    ApplyState.STARTING: "starting",
    ApplyState.HEALTHY: "healthy",
    ApplyState.VERIFIED: "verified",
    ApplyState.FAILED: "did not come up",
    ApplyState.ROLLING_BACK: "rolling back",
    ApplyState.RESTORED: "previous unit restored",
    ApplyState.HEALTHY_ON_OLD: "healthy on the previous unit",
    ApplyState.ROLLBACK_FAILED: "ROLLBACK FAILED",
}


@dataclass
class BoardRow:
    key: str  # the candidate's key ("" for pruned and merged points)
    name: str
    state: RowState = "pending"
    detail: str = ""  # the level being benchmarked, why it failed or was skipped, SGLang's reason for a prune
    figures: dict[Cell, float] = field(default_factory=dict)  # output tok/s per level, the latest trial's
    scores: dict[Cell, float] = field(default_factory=dict)  # the objective's figure per level (goodput, capacity)
    trials: int = 0
    out: bool = False  # the search left it behind at every level (not among those that can still win)
    predicted: dict[Cell, tuple[float, float, float]] = field(default_factory=dict)  # (low, value, high) tok/s
    chance: Chance = ""

    @property
    def state_text(self) -> str:
        if self.state == "pending" and self.chance:
            return {"can win": "pending: can win", "cannot win": "predicted out", "unplaced": "pending: no base"}[
                self.chance
            ]
        if self.state == "benchmarking":
            return f"benchmarking {self.detail}".rstrip()
        if self.state == "failed":
            return "failed, skipped"
        if self.state == "done" and self.out:
            return "done (out)"
        return str(self.state)


@dataclass
class Current:
    """The trial in progress: its start's phase, or its benchmark's level and running figures."""

    trial: TrialRef
    started_at: datetime
    phase: str = "planning"
    progress: float = 0.0  # the start, 0..1
    level: str = ""  # "random C=8, run 1"
    throughput: float | None = None  # output tok/s of the running level
    completed: int = 0
    failed: int = 0
    elapsed_s: float = 0.0  # of the running level


@dataclass
class TuneBoard:
    rows: list[BoardRow]
    cells: list[Cell] = field(default_factory=list)  # the levels the tune measures, in order
    started_at: datetime | None = None
    guarded: bool = False
    stage: str = ""
    stage_estimate_s: float | None = None
    current: Current | None = None
    restoring: str | None = None
    levels: dict[Cell, LevelProgress] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    finished: TuneFinished | None = None
    trials_run: int = 0
    objective: str = "throughput"  # what ranks a level's setups: output tok/s, goodput or capacity (req/s)
    strategy: str = "halving"
    prediction: SetupsPredicted | None = None  # strategy predict: the latest, after a stage

    @classmethod
    def planned(cls, space: Space) -> TuneBoard:
        rows = [BoardRow(c.key, c.name) for c in space.candidates]
        rows += [BoardRow("", m.setting.describe(), "merged", f"runs as {m.into_name}") for m in space.merged]
        rows += [BoardRow("", p.setting.describe(), "pruned", p.reason) for p in space.pruned]
        return cls(rows)

    def row(self, key: str) -> BoardRow | None:
        return next((r for r in self.rows if r.key == key and key), None)

    @property
    def unit(self) -> str:
        """What the rows' figures are in: tok/s, or req/s under goodput and capacity."""
        return "tok/s" if self.objective == "throughput" else "req/s"

    def figure(self, row: BoardRow, cell: Cell) -> float | None:
        """The row's figure at the level by the objective (output tok/s under throughput)."""
        return (row.figures if self.objective == "throughput" else row.scores).get(cell)

    def rankings(self) -> list[tuple[Cell, list[tuple[str, float]]]]:
        """Per level measured so far, its setups best first by the objective (the search's standings: medians)."""
        return [
            (cell, [(standing[0], standing[1]) for standing in self.levels[cell].standings])
            for cell in self.cells
            if cell in self.levels and self.levels[cell].standings
        ]

    def elapsed_s(self, now: datetime) -> float:
        if self.started_at is None:
            return 0.0
        end = self.finished.at if self.finished is not None else now
        return max(0.0, (end - self.started_at).total_seconds())

    # -- the fold ---------------------------------------------------------------------------------------------

    def feed(self, event: TuneEvent) -> None:
        if isinstance(event, TuneStarted):
            self.started_at, self.guarded, self.cells = event.at, event.guarded, list(event.cells)
            self.objective, self.strategy = event.objective, event.strategy
        elif isinstance(event, StageStarted):
            kind = "screening (short runs)" if event.kind == "screen" else "full runs with repeats"
            self.stage = f"stage {event.stage}: {kind}, {len(event.runs)} setups"
            if self.strategy == "predict" and event.runs:
                why = "measured first" if event.stage == 0 else "the likeliest winner by the prediction"
                self.stage = f"stage {event.stage}: {event.runs[0]}, {why} (full runs with repeats)"
            self.stage_estimate_s = event.estimate_s
        elif isinstance(event, SetupsPredicted):
            self._predicted(event)
        elif isinstance(event, TrialStarted):
            self.trials_run += 1
            self.current = Current(event.trial, event.at)
            self._set(event.trial, "starting", "")
        elif isinstance(event, TrialApplyEvent):
            self._apply_event(event)
        elif isinstance(event, TrialApplied):
            if self.current is not None:
                self.current.phase = "restarted, verified" if event.restarted else "already running"
                self.current.progress = 1.0
        elif isinstance(event, TrialBenchEvent):
            self._bench_event(event)
        elif isinstance(event, TrialBenchmarked):
            row = self.row(event.trial.candidate)
            if row is not None:
                row.figures.update(dict(event.figures))
                row.scores.update(dict(event.scores))
            self._set(event.trial, "done", "" if event.figures else "no clean level")
            self.current = None
        elif isinstance(event, TrialFailed):
            self._set(event.trial, "failed", event.reason)
            self.current = None
        elif isinstance(event, TrialSkipped):
            row = self.row(event.trial.candidate)
            if row is not None and row.figures:
                row.detail = f"its next run skipped: {event.reason}"  # what it measured still counts
            else:
                self._set(event.trial, "skipped", event.reason)
            if self.current is not None and self.current.trial.number == event.trial.number:
                self.current = None
        elif isinstance(event, LevelProgress):
            self.levels[event.cell] = event
            self._mark_out()
        elif isinstance(event, Restoring):
            self.restoring = event.name
            self.stage = f"putting back {event.name}"
            self.current = None
        elif isinstance(event, TuneFinished):
            self.finished = event
            self.current = None
        elif isinstance(event, Notice):
            self._note(event.message)
        elif isinstance(event, Reconnecting):
            self._note(f"connection lost during {event.operation}; reconnecting ({event.error})")

    def _predicted(self, event: SetupsPredicted) -> None:
        self.prediction = event
        figures = dict(event.forecasts)
        for row in self.rows:
            if not row.key:
                continue
            row.predicted = {cell: (low, value, high) for cell, low, value, high in figures.get(row.name, ())}
            row.chance = (  # one nothing places is among those that can win too: its own word says why
                "unplaced" if row.name in event.unplaced
                else "can win" if row.name in event.can_win
                else "cannot win" if row.name in event.cannot_win
                else ""
            )  # fmt: skip

    def _set(self, trial: TrialRef, state: RowState, detail: str) -> None:
        row = self.row(trial.candidate)
        if row is None:
            return
        if state == "starting":
            row.trials += 1
        row.state, row.detail = state, detail

    def _note(self, text: str) -> None:
        self.notes.append(text)
        del self.notes[:-NOTES_KEPT]

    def _apply_event(self, event: TrialApplyEvent) -> None:
        inner = event.event
        if isinstance(inner, Reconnecting | Notice):
            self.feed(inner)
            return
        current = self.current
        if current is None and self.restoring is not None:
            # the restore's own apply: shown as the current line, with no row of its own
            current = self.current = Current(event.trial, getattr(inner, "at", None) or self.started_at or _epoch())
            current.phase = "planning"
        if current is None:
            return
        if isinstance(inner, StepChanged):
            word = _APPLY_WORDS.get(inner.state)
            if word:
                current.phase = word
        elif isinstance(inner, PhaseChanged):
            running = inner.current
            prefix = "rollback: " if inner.start == "rollback" else ""
            if running is not None:
                current.phase = f"{prefix}{running.label}"
            elif inner.kind == "ready":
                current.phase = f"{prefix}ready"
            if inner.start == "new":
                current.progress = inner.progress

    def _bench_event(self, event: TrialBenchEvent) -> None:
        inner, current = event.event, self.current
        if current is None:
            return
        if isinstance(inner, LevelStarted):
            run = f", run {inner.repeat_index + 1}" if event.trial.kind == "full" else ""
            current.level = f"{event.workload} {inner.level.label}{run}"
            current.throughput, current.completed, current.failed, current.elapsed_s = None, 0, 0, 0.0
            self._set_detail(event.trial, inner.level.label)
            current.phase = "benchmarking"
        elif isinstance(inner, RunningFigures):
            current.throughput = inner.output_throughput
            current.completed, current.failed, current.elapsed_s = inner.completed, inner.failed, inner.elapsed
        elif isinstance(inner, LevelDone):
            value = inner.metrics.get("output_throughput")
            if isinstance(value, int | float):
                current.throughput = float(value)

    def _set_detail(self, trial: TrialRef, level: str) -> None:
        row = self.row(trial.candidate)
        if row is not None:
            row.state, row.detail = "benchmarking", level

    def _mark_out(self) -> None:
        """A setup no level keeps among those that can still win is out of the race (its figures still count)."""
        if not self.levels:
            return
        alive = {name for progress in self.levels.values() for name in progress.alive}
        for row in self.rows:
            if row.key and row.state == "done":
                row.out = row.name not in alive


def _epoch() -> datetime:
    from datetime import UTC

    return datetime.fromtimestamp(0, UTC)
