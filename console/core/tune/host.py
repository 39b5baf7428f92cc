"""What a tune does to what it tunes, with the tune's locks held throughout: a trial's setup through the validated
change (planning retried while the connection comes back), a restart in place, the server's health, a benchmark, and
the units put back at the end. The run (run.py) decides what to do with each answer; this says how it is done.

    TuneTarget   what the run asks of what it tunes (a Protocol): a host (TuneHost, here), or a deployment
                 (console.core.tune.deployment.DeploymentTuneHost: each trial the deployment's change)
    Applied      how a trial's change ended, as the run judges it
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from console.bench.engine import SweepConfig
from console.bench.records import BenchRecord
from console.core.apply import ApplyResult, PendingApply, plan_apply, plan_restart
from console.core.bench import bench_host
from console.core.change import ApplyState, EditRequest
from console.core.events import ApplyEvent, EventSink, Notice, Reconnecting, ignore
from console.core.session import Session
from console.host.base import ConnectionDropped, HostError

if TYPE_CHECKING:
    from console.core.tune.space import Candidate

# How long to wait for the server to answer again before a retry gives up.
HEALTH_WAIT_S = 120.0
HEALTH_POLL_S = 0.5
# How long the end of a tune waits for the server it put back to answer.
FINAL_HEALTH_WAIT_S = 30.0
# How many times the end of a tune tries to put a unit back (each after the server answers again).
PUT_BACK_ATTEMPTS = 3

Interrupted = Callable[[], "str | None"]


class _Polled(Protocol):
    interrupted: Interrupted

    async def healthy(self) -> bool: ...


async def poll_healthy(target: _Polled, limit_s: float, *, interruptible: bool) -> bool:
    """Whether `target` answers healthy within limit_s, asked every HEALTH_POLL_S (interruptible: not once the tune is
    being stopped)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while loop.time() < deadline and not (interruptible and target.interrupted() is not None):
        if await target.healthy():
            return True
        await asyncio.sleep(HEALTH_POLL_S)
    return False


@dataclass(frozen=True)
class Applied:
    """Where a trial's change (or a restart) ended: its state as a single apply's (a deployment's mapped onto it),
    why it failed, whether it was rolled back, and the journal lines that explain a failed start."""

    state: ApplyState
    error: str | None = None
    rolled_back: bool = False
    journal: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, result: ApplyResult) -> Applied:
        return cls(result.state, result.error, result.rollout.rolled_back, tuple(result.journal_excerpt()))


class TuneTarget(Protocol):
    """What a tune's run asks of what it tunes; `sink` gets each trial's change events (a host's apply's, or a
    deployment's steps and members')."""

    label: str  # whose records the benchmarks are (a host's label; a PD deployment's name)
    unit: str  # the unit(s) it changes, as the result names them
    guarded: bool  # whether the hosts put the original units back by themselves if this console goes away

    def bind(self, interrupted: Interrupted, on_event: EventSink[Reconnecting | Notice]) -> None: ...

    def mask(self, text: str) -> str: ...

    def request_abort(self, why: str) -> None: ...

    async def apply(self, candidate: Candidate, sink: EventSink[Any]) -> Applied: ...

    async def restart(self, sink: EventSink[Any]) -> Applied: ...

    async def healthy(self) -> bool: ...

    async def wait_healthy(self, limit_s: float = HEALTH_WAIT_S, *, interruptible: bool = True) -> bool: ...

    async def put_back(self, candidate: Candidate | None, sink: EventSink[Any]) -> tuple[bool, bool]: ...

    async def runs_original(self) -> bool: ...

    async def bench(self, config: SweepConfig, label: str, on_event: Any) -> list[BenchRecord]: ...


def not_interrupted() -> str | None:
    """What `interrupted` says before a tune is bound to its run: nothing stops it."""
    return None


class TuneHost:
    """The host's unit during one tune (a TuneTarget). `interrupted()` says why the tune is being stopped (None while
    it is not): an apply planned then is asked to stop at once, and the waits for the server end."""

    def __init__(self, session: Session, original: str, *, timeout_s: float, owner: str, guarded: bool = False) -> None:
        self.session = session
        self.original = original
        self.label = session.label
        self.unit = session.service.unit
        self.guarded = guarded
        self.timeout_s = timeout_s
        self.owner = owner
        self.interrupted: Interrupted = not_interrupted
        self.on_event: EventSink[Reconnecting | Notice] = ignore
        self._apply: PendingApply | None = None  # the apply under way, for request_abort

    def bind(self, interrupted: Interrupted, on_event: EventSink[Reconnecting | Notice]) -> None:
        self.interrupted = interrupted
        self.on_event = on_event

    def mask(self, text: str) -> str:
        return self.session.secrets.text(text)

    async def runs_original(self) -> bool:
        try:
            return await self.session.service.read_unit() == self.original
        except HostError:
            return False

    async def bench(self, config: SweepConfig, label: str, on_event: Any) -> list[BenchRecord]:
        return await bench_host(self.session, config, label=label, on_event=on_event)

    def request_abort(self, why: str) -> None:
        """Stop the apply under way, if any (a start in progress is rolled back)."""
        if self._apply is not None:
            self._apply.request_abort(why)

    async def apply(self, candidate: Candidate, sink: EventSink[Any]) -> Applied:
        """The candidate's unit through the validated apply path."""
        return Applied.of(await self.apply_text(candidate.unit_text, sink))

    async def apply_text(self, unit_text: str, sink: EventSink[ApplyEvent]) -> ApplyResult:
        """The unit through the validated apply path, with the tune's lock already held; planning is retried
        while the connection comes back."""
        deadline = asyncio.get_running_loop().time() + HEALTH_WAIT_S
        while True:
            try:
                pending = await self._plan(unit_text)
                break
            except ConnectionDropped as exc:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                self.on_event(Reconnecting("plan the next unit", self.session.secrets.text(str(exc))))
                await asyncio.sleep(HEALTH_POLL_S)  # the transport reconnects meanwhile
        self._apply = pending
        try:
            why = self.interrupted()
            if why is not None:
                pending.request_abort(why)
            return await pending.execute(on_event=sink)
        finally:
            self._apply = None

    async def restart(self, sink: EventSink[Any]) -> Applied:
        """The unit as it is, restarted (no edits): for a server that is not healthy on the unit it should run."""
        pending = await plan_restart(self.session, lock_held=True, timeout_s=self.timeout_s)
        return Applied.of(await pending.execute(on_event=sink))

    async def healthy(self) -> bool:
        try:
            client = await self.session.sglang()
            async with asyncio.timeout(5.0):
                return await client.healthy()
        except Exception:  # a forward being rebuilt, the server down: not healthy now
            return False

    async def wait_healthy(self, limit_s: float = HEALTH_WAIT_S, *, interruptible: bool = True) -> bool:
        """Whether the server answers within limit_s (interruptible: not once the tune is being stopped)."""
        return await poll_healthy(self, limit_s, interruptible=interruptible)

    async def put_back(self, candidate: Candidate | None, sink: EventSink[Any]) -> tuple[bool, bool]:
        """The candidate's unit (None: the original) through the validated path (nothing written when it is on the
        host already), a few times if the host fails on the way: (whether the host runs it, whether that took a start
        of the new unit)."""
        text = candidate.unit_text if candidate is not None else self.original
        for _attempt in range(PUT_BACK_ATTEMPTS):
            try:
                pending = await self._plan(text)
                result = await pending.execute(on_event=sink)
            except HostError as exc:
                self.on_event(Notice(self.session.secrets.text(f"putting the unit back: {exc}; trying again")))
                await self.wait_healthy()
                continue
            if result.state is ApplyState.UNCHANGED:
                if await self.healthy():
                    return True, False
                restarted = await self.restart(sink)
                return restarted.state in (ApplyState.VERIFIED, ApplyState.MISMATCH), False
            if result.state in (ApplyState.VERIFIED, ApplyState.MISMATCH):
                return True, True
            return False, False
        return False, False

    async def _plan(self, unit_text: str) -> PendingApply:
        return await plan_apply(
            self.session, EditRequest(), unit_text=unit_text, lock_held=True, timeout_s=self.timeout_s,
            owner=self.owner,
        )  # fmt: skip
