"""What every planned operation offers its caller: apply and restart (console.core.apply.PendingApply, also what
a restore plans), freeze (console.core.snapshot.freeze.PendingFreeze) and tune (console.core.tune.PendingTune).

    pending = await plan_...(session, request)     # holds the unit's lock; asks nothing, changes nothing
    result = await pending.execute(on_event=show)  # or: await pending.abort("not confirmed")

Each one reports through its own typed events (console.core.events) and returns its own typed result; the CLI
and the console drive any of them through these two protocols instead of knowing each operation.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

from console.core.events import EventSink

E_co = TypeVar("E_co", covariant=True)  # the events it reports
R_co = TypeVar("R_co", covariant=True)  # what it returns


@runtime_checkable
class Pending(Protocol[E_co, R_co]):
    """A planned operation that holds the unit's lock until it is executed or aborted (either lets go of it)."""

    async def execute(self, on_event: EventSink[E_co]) -> R_co:
        """Run it, calling `on_event` (synchronously, quickly) for every step; the result says where it ended."""
        ...

    async def abort(self, why: str = ...) -> object:
        """Do not run it: nothing is changed, the lock is let go of, `why` is recorded."""
        ...


@runtime_checkable
class Interruptible(Protocol):
    """An operation that can be asked to stop while execute() runs (Esc in the console, Ctrl-C in the CLI).

    An intent honoured at its next step (an apply rolls back, a tune puts the original unit back), never a
    cancelled task that could lose the request in a race. A freeze is not one: its few writes run to the end."""

    def request_abort(self, why: str = ...) -> None: ...
