"""What the core's operations report while they run: typed, frozen, and free of secrets.

An operation takes an open host session (console.core.session) and a typed request, calls `on_event(event)`
for every step, and returns a typed result:

    pending = await plan_apply(session, edits)          # asks nothing; holds the unit's lock
    result = await pending.execute(on_event=show)      # or: await pending.abort("not confirmed")
    result = await restart_service(session, on_event=show)

The CLI prints these events as lines; the console turns them into a progress view. `on_event` is called
synchronously from the operation's task and must be quick. Long operations also offer `request_abort()`:
an intent that the operation honours at its next step (apply rolls back), never a cancelled task that
could lose the request in a race. Freeze and tune report through the same events. What every planned operation
offers (execute, abort, request_abort) is written down in console.core.pending.

Benchmark sweeps report through console.bench.events (the engine's own, emitted many times a second).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeVar

from console.core.change import ApplyState
from console.core.phases import PhaseStatus
from console.host.base import JournalEntry

StartKind = Literal["new", "rollback"]  # the start being watched: the new unit's, or the old one's after a rollback


@dataclass(frozen=True)
class StepChanged:
    """The operation moved to another state (console.core.change.ApplyState), with its UTC time."""

    state: ApplyState
    detail: str
    at: datetime


@dataclass(frozen=True)
class PhaseChanged:
    """A startup phase began, ended or moved on; a failure line appeared; or the server said it is ready."""

    kind: Literal["started", "ended", "progress", "failure", "ready"]
    phase: str | None
    at: datetime
    line: str
    progress: float  # the whole start, 0..1
    phases: tuple[PhaseStatus, ...]  # a copy of every phase as it stands now
    start: StartKind = "new"

    @property
    def current(self) -> PhaseStatus | None:
        running = [p for p in self.phases if p.state == "running"]
        return running[-1] if running else None


@dataclass(frozen=True)
class LogLine:
    """A journal line of the start being watched (already masked)."""

    entry: JournalEntry
    start: StartKind = "new"


@dataclass(frozen=True)
class Reconnecting:
    """The connection dropped during `operation`; the transport is reconnecting and the step will be retried."""

    operation: str
    error: str


@dataclass(frozen=True)
class Notice:
    """Something the operator should read: a warning (the journal could not be followed, an interrupt ...)."""

    message: str
    level: Literal["info", "warning"] = "warning"


ApplyEvent = StepChanged | PhaseChanged | LogLine | Reconnecting | Notice

E = TypeVar("E")
EventSink = Callable[[E], None]


def ignore(_event: object) -> None:
    """The sink of a caller that does not follow the progress."""
