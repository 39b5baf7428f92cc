"""A rolling change as a board: one row per host of the roll (its batch, where it is: pending / draining /
applying / verifying / benchmarking / rolling back / done / unchanged / rolled back / failed / not started, the
latest thing it did, its times), the batch under way, why the roll stopped, and a line per step for the log. Pure:
folds the roll's events (console.core.roll.run) one by one; the console's rolling progress screen renders it, the
times come from the events' own `at`.

    board = RollBoard.planned(roll.plan)       # every host pending, in the roll's order, with its batch
    line = board.feed(event)                   # every RollEvent, in order; a line for the log, or None
    board.finish(report)                       # the hosts the roll did not reach: not started, with why
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from console.core.change import ApplyState
from console.core.events import LogLine, Notice, PhaseChanged, Reconnecting, StepChanged
from console.core.roll import (
    BatchStarted,
    GateJudged,
    GateStarted,
    HostEvent,
    HostFinished,
    HostOutcome,
    HostProgress,
    HostStarted,
    PendingRoll,
    RollEvent,
    RollReport,
    RollStopped,
    RouterStep,
)
from console.core.snapshot import FreezeStep
from console.tui.presenters.steps import STEP_WORDS

# What a host is doing while its change runs, by operation (the other phases are the same for every one).
ACTIVE = {"apply": "applying", "restart": "restarting", "restore": "restoring", "freeze": "freezing"}
OUTCOME_PHASE = {
    HostOutcome.DONE: "done",
    HostOutcome.UNCHANGED: "unchanged",
    HostOutcome.ROLLED_BACK: "rolled back",
    HostOutcome.FAILED: "failed",
    HostOutcome.NOT_STARTED: "not started",
}
_VERIFYING = (ApplyState.HEALTHY, ApplyState.VERIFIED, ApplyState.MISMATCH)
_ROLLING_BACK = (ApplyState.FAILED, ApplyState.ROLLING_BACK, ApplyState.RESTORED, ApplyState.HEALTHY_ON_OLD,
                 ApplyState.ROLLBACK_FAILED)  # fmt: skip
ROUTER_WORDS = {
    "removed": "out of the router",
    "draining": "draining",
    "drained": "drained",
    "drain_timeout": "drain timed out",
    "added": "back in the router",
    "kept_out": "KEPT OUT of the router",
}
# Why a host the roll did not reach is untouched (the stop's own words are the report's headline).
UNTOUCHED = {
    "failures": "untouched: the roll stopped at a failure",
    "gate": "untouched: the gate halted the roll",
    "interrupted": "untouched: the roll was stopped",
    "router": "untouched: the router check stopped the roll",
    "refused": "untouched: the roll was refused",
}
# A log line's style: what went wrong red, what needs an eye yellow, what went right green.
LineStyle = str


@dataclass
class RollRow:
    host: str
    batch: str  # "canary 1", "wave 2"
    phase: str = "pending"
    detail: str = ""
    started: datetime | None = None
    finished: datetime | None = None
    outcome: HostOutcome | None = None
    start_progress: float | None = None  # the new start's progress (0..1) while the host restarts

    @property
    def running(self) -> bool:
        return self.started is not None and self.finished is None

    def seconds(self, now: datetime) -> float | None:
        if self.started is None:
            return None
        return ((self.finished or now) - self.started).total_seconds()


@dataclass
class RollBoard:
    operation: str
    group: str
    order: list[str]
    rows: dict[str, RollRow]
    batches: list[str]  # "canary 1: gpu-a", "wave 1: gpu-b, gpu-c"
    current_batch: str = ""
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)
    report: RollReport | None = None

    @classmethod
    def planned(cls, plan: PendingRoll) -> RollBoard:
        order = [h.label for h in plan.hosts]
        batch_of = {host: f"{b.kind} {b.index}" for b in plan.batches for host in b.hosts}
        rows = {h: RollRow(h, batch_of.get(h, "")) for h in order}
        labels = [f"{b.kind} {b.index}: {', '.join(b.hosts)}" for b in plan.batches]
        return cls(plan.report.operation, plan.report.group, order, rows, labels)

    @property
    def active_word(self) -> str:
        return ACTIVE.get(self.operation, "changing")

    def count(self, phase: str) -> int:
        return sum(1 for r in self.rows.values() if r.phase == phase)

    @property
    def under_way(self) -> list[str]:
        return [h for h in self.order if self.rows[h].running]

    def feed(self, event: RollEvent) -> tuple[str, LineStyle] | None:
        """Take one event in; the line the log shows for it (None: nothing worth a line, e.g. a progress tick)."""
        if isinstance(event, BatchStarted):
            self.current_batch = f"{event.batch.kind} {event.batch.index}"
            return f"== {self.current_batch}: {', '.join(event.batch.hosts)}", "bold"
        if isinstance(event, HostStarted):
            row = self.rows[event.host]
            row.started, row.phase = event.at, self.active_word
            return f"{event.host}: started", ""
        if isinstance(event, HostProgress):
            return self._host_event(self.rows[event.host], event.event)
        if isinstance(event, RouterStep):
            return self._router_step(event)
        if isinstance(event, GateStarted):
            row = self.rows[event.host]
            base = event.baseline
            row.phase, row.detail = "benchmarking", f"gate: {base.level} against {base.label}"
            return f"{event.host}: gate: benchmarking at {base.level} against {base.label}", ""
        if isinstance(event, GateJudged):
            verdict = "passed" if event.verdict.passed else "FAILED"
            self.rows[event.host].detail = f"gate {verdict}: {event.verdict.message}"
            return f"{event.host}: gate {verdict}: {event.verdict.message}", "green" if event.verdict.passed else "red"
        if isinstance(event, HostFinished):
            row = self.rows[event.host]
            row.outcome, row.finished = event.outcome, event.at
            row.phase, row.detail, row.start_progress = OUTCOME_PHASE[event.outcome], event.detail, None
            style = "green" if not event.outcome.failure else "bold red"
            return f"{event.host}: {row.phase}" + (f" ({event.detail})" if event.detail else ""), style
        if isinstance(event, RollStopped):
            self.stopped = event.reason
            return f"roll stopped: {event.reason}", "bold red"
        if isinstance(event, Notice):
            self.notes.append(event.message)
            return f"{event.level}: {event.message}", "yellow"
        return None

    def finish(self, report: RollReport | None) -> None:
        """The roll is over: every host's outcome from the report (those not reached: not started, and why)."""
        self.report = report
        if report is None:
            return
        self.stopped = report.ledger.stop_reason()
        cause = report.ledger.stopped[0] if report.ledger.stopped else None
        for label, record in report.ledger.records.items():
            row = self.rows.get(label)
            if row is None:
                continue
            row.outcome = record.outcome
            row.phase = OUTCOME_PHASE[record.outcome]
            if record.outcome is HostOutcome.NOT_STARTED:  # the reason is the roll's, said once above the hosts
                row.detail = UNTOUCHED.get(cause or "", "untouched")
            else:
                row.detail = record.detail or row.detail
            row.started = record.started or row.started
            row.finished = record.finished or row.finished
            row.start_progress = None

    # -- one host's own events ------------------------------------------------------------------------------

    def _host_event(self, row: RollRow, event: HostEvent) -> tuple[str, LineStyle] | None:
        if isinstance(event, StepChanged):
            word = STEP_WORDS.get(event.state, event.state.value.replace("_", " "))
            if event.state in _VERIFYING:
                row.phase = "verifying"
            elif event.state in _ROLLING_BACK:
                row.phase = "rolling back"
            row.detail = word + (f": {event.detail}" if event.detail else "")
            style = "red" if event.state in _ROLLING_BACK or event.state is ApplyState.RESTART_FAILED else ""
            return f"{row.host}: {row.detail}", style
        if isinstance(event, PhaseChanged):
            current = event.current
            if event.start == "new":
                row.start_progress = event.progress
            where = "rollback: " if event.start == "rollback" else ""
            if event.kind in ("started", "progress") and current is not None:
                row.detail = f"{where}{current.label} ({round(100 * event.progress)}% of the start)"
            if event.kind == "started" and current is not None:
                return f"{row.host}: {where}{current.label} ...", "dim"
            if event.kind == "failure":
                return f"{row.host}: ! {event.line.rstrip()}", "red"
            return None
        if isinstance(event, Reconnecting):
            row.detail = f"connection lost during {event.operation}; reconnecting"
            return f"{row.host}: {row.detail} ({event.error})", "yellow"
        if isinstance(event, Notice):
            return f"{row.host}: {event.level}: {event.message}", "yellow"
        if isinstance(event, LogLine):
            return None  # the steps and phases say where the host is; its journal is on its own tab
        if isinstance(event, FreezeStep):
            row.detail = event.step.replace("_", " ") + (f": {event.detail}" if event.detail else "")
            return f"{row.host}: {row.detail}", ""
        return None

    def _router_step(self, event: RouterStep) -> tuple[str, LineStyle]:
        row = self.rows[event.host]
        word = ROUTER_WORDS.get(event.action, event.action)
        if event.action in ("removed", "draining"):
            row.phase = "draining"
        elif event.action in ("drained", "drain_timeout"):
            row.phase = self.active_word
        row.detail = f"router: {word}" + (f": {event.detail}" if event.detail else "")
        style = {"drain_timeout": "yellow", "kept_out": "bold red", "added": "green"}.get(event.action, "")
        return f"{event.host}: router: {word}: {event.detail}", style
