"""The operations the console's screens start on a host (and over the hosts selected on the overview: a roll),
injected through ConsoleOptions as the host sources are: the real ones (console.core on the host's session) by
default; tests pass scripted ones (a fixed capture, fixed events) the same way instead of patching the app.

Each host operation takes the console's `session_of` first and calls it only when it runs: a scripted one needs no
session, and a host that is not connected is said when the operator asks for the operation, not when the screen
opens. A roll opens sessions of its own (`open_host`), as the CLI's rolling verbs do: the fleet's overview has
none to lend, and a host being restarted is read by its own tab meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from console.bench.records import BenchRecord
from console.core.apply import PendingApply
from console.core.bench import PlannedSweep, bench_queue
from console.core.events import EventSink
from console.core.pending import Pending
from console.core.roll import GroupRoll, OpenHost, PlanHost, RollRequest, plan_group_roll
from console.core.session import Session
from console.core.snapshot import (
    FreezeEvent,
    FreezePlan,
    FreezeRequest,
    FreezeResult,
    Snapshot,
    plan_freeze,
    plan_restore,
)
from console.core.tune import PendingTune, TuneRequest, plan_tune
from console.workspace import Workspace

# A host's open session in this console, or HostError saying why there is none (not open here, not connected).
SessionOf = Callable[[str], Session]


class FreezePending(Pending[FreezeEvent, FreezeResult], Protocol):
    """What the freeze dialog needs of a planned freeze (console.core.snapshot.freeze.PendingFreeze)."""

    plan: FreezePlan

    def force(self, reason: str) -> FreezePlan: ...


# (session_of, host, request) -> the planned freeze, holding the unit's lock
FreezePlanner = Callable[[SessionOf, str, FreezeRequest], Awaitable[FreezePending]]
# (session_of, host, sweeps, on_event) -> each sweep's records
BenchRunner = Callable[[SessionOf, str, list[PlannedSweep], EventSink[Any]], Awaitable[list[list[BenchRecord]]]]
# (session_of, snapshot) -> the validated apply that restores it on the snapshot's host, and notes on it
Restorer = Callable[[SessionOf, Snapshot], Awaitable[tuple[PendingApply, list[str]]]]
# (session, request) -> the planned tune, holding the unit's lock (the form has read the unit through the session)
TunePlanner = Callable[[Session, TuneRequest], Awaitable[PendingTune]]
# (workspace, request, each host's planner, a session opener) -> the planned roll over the selected hosts, holding
# the group's lock, a session per host (its own, not the console's) and every host's plan
RollPlanner = Callable[[Workspace, RollRequest, PlanHost, OpenHost], Awaitable[GroupRoll]]


async def freeze_on_host(session_of: SessionOf, label: str, request: FreezeRequest) -> FreezePending:
    pending: FreezePending = await plan_freeze(session_of(label), request)
    return pending


async def bench_on_host(
    session_of: SessionOf, label: str, sweeps: list[PlannedSweep], on_event: EventSink[Any]
) -> list[list[BenchRecord]]:
    return await bench_queue(session_of(label), sweeps, on_event=on_event)


async def restore_on_host(session_of: SessionOf, snapshot: Snapshot) -> tuple[PendingApply, list[str]]:
    return await plan_restore(session_of(snapshot.host.label), snapshot)


async def tune_on_host(session: Session, request: TuneRequest) -> PendingTune:
    return await plan_tune(session, request)


async def roll_over_group(
    workspace: Workspace, request: RollRequest, plan_host: PlanHost, open_host: OpenHost
) -> GroupRoll:
    return await plan_group_roll(workspace, request, plan_host, open_host)


@dataclass(frozen=True)
class Runners:
    freeze: FreezePlanner = freeze_on_host
    bench: BenchRunner = bench_on_host
    restore: Restorer = restore_on_host
    tune: TunePlanner = tune_on_host
    roll: RollPlanner = roll_over_group
