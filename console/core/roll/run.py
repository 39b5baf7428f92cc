"""Rolling changes over a group: apply, restart or restore host by host, canary first, behind the group's router.

    async with group_lock(workspace, "prod", owner):                        # one rolling change per group
        roll = await plan_roll(sessions, plan_host, spec=spec, router=router)  # every host planned, nothing changed
        show(roll.hosts, roll.refusals)
        report = await roll.execute(on_event=show)                           # or: await roll.abort("not confirmed")

Planning first plans the change on every host (each plan holds that host's unit lock until its host is done or
the roll ends) and checks the group's router lists every host's worker, so that a refusal on any host (the rules,
a lock held by another, a worker the router does not know) touches none. Then the batches of
plan.py run in order: the canary first, then waves (the hosts of one batch side by side).

Per host, when the group names its router and the change restarts the server: the worker is removed from the
router (no router drains it: smg's removal only waits a fixed settle time, which the roll sets to 0), its own
running + queued count is waited on until 0 (bounded by drain_timeout_s; a notice says when it ran out), the
host's apply runs as a single apply does (verify, or roll back), and the worker is added back, with the type and
bootstrap port it had (PD), once the host is healthy (verified, or back on its old unit); the roll goes on when the
router routes to it again (smg: its new id, `ready`). The router's worker list is read before the roll and after
it (`RollReport.router_before/after`).

With a CanaryGate (--gate bench, gate.py), a canary host that was verified is benchmarked before
it goes back into the router: passed, it stays on the new setup; failed (or interrupted), the roll stops (cause
"gate") and the gate rolls it back. A group freeze drives FreezeChange the same way (nothing restarts: no router
steps).

The first failure (beyond --max-failures) stops the roll: no new host starts; the hosts of the batch already
running finish on their own. `request_abort()` (Ctrl-C) between hosts stops cleanly; during a host it is passed to
that host's apply, which rolls back as a single apply does. Hosts not reached are aborted (nothing written, their
locks let go of) and reported as not started.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from console.core.apply import ApplyResult, PendingApply
from console.core.events import ApplyEvent, EventSink, Notice, ignore
from console.core.roll.gate_plan import GateBaseline
from console.core.roll.plan import (
    Batch,
    GateVerdict,
    HostEnded,
    HostOutcome,
    RollLedger,
    RollSpec,
    batches,
    may_start,
    outcome_of_apply,
)
from console.core.session import Session
from console.core.snapshot import FreezeEvent, FreezeResult, PendingFreeze
from console.host.base import HostError, UnitLocked
from console.sglang.client import summarize
from console.sglang.router import RouterClient, RouterError, RouterWorker, normalize_url
from console.workspace import Workspace

# How long a removed worker's in-flight requests get to finish before it restarts anyway.
DRAIN_TIMEOUT_S = 120.0
DRAIN_POLL_S = 0.2


def _now() -> datetime:
    return datetime.now(UTC)


def _took(started: float) -> str:
    """How long a router step took, for its line in the report (where a roll's time goes: docs/fleet.md)."""
    return f"in {time.monotonic() - started:.1f} s"


# --- events ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchStarted:
    """A batch (the canary, or a wave) begins."""

    batch: Batch
    at: datetime


@dataclass(frozen=True)
class HostStarted:
    host: str
    batch: Batch
    at: datetime


# What one host's own operation says while it runs: an apply's (restart's, restore's) events, or a freeze's steps.
HostEvent = ApplyEvent | FreezeEvent


@dataclass(frozen=True)
class HostProgress:
    """One of the host's own events (an apply's, console.core.events; a freeze's steps), tagged with the host."""

    host: str
    event: HostEvent


RouterAction = Literal["removed", "draining", "drained", "drain_timeout", "added", "kept_out"]


@dataclass(frozen=True)
class RouterStep:
    """What was done at the group's router for a host (or learnt about its worker)."""

    host: str
    action: RouterAction
    detail: str
    at: datetime


@dataclass(frozen=True)
class HostFinished:
    host: str
    outcome: HostOutcome
    detail: str
    at: datetime


@dataclass(frozen=True)
class RollStopped:
    """The roll stops before its next host: why."""

    reason: str
    at: datetime


@dataclass(frozen=True)
class GateStarted:
    """--gate bench: the canary's short benchmark begins, against this earlier run of the same host."""

    host: str
    baseline: GateBaseline
    at: datetime


@dataclass(frozen=True)
class GateJudged:
    """--gate bench: the canary's benchmark against its baseline (both figures in the verdict); a failed one halts
    the roll and rolls the canary back."""

    host: str
    verdict: GateVerdict
    at: datetime


RollEvent = (
    BatchStarted
    | HostStarted
    | HostProgress
    | RouterStep
    | GateStarted
    | GateJudged
    | HostFinished
    | RollStopped
    | Notice
)


# --- the group's lock ------------------------------------------------------------------------------------------


class GroupLocked(UnitLocked):
    """Another rolling change of the same group is running (this workspace's group lock); holder says who."""

    def __init__(self, group: str, holder: str) -> None:
        self.holder = holder
        who = f"held by {holder}" if holder else "its holder did not say who it is"
        HostError.__init__(
            self,
            f"@{group}: another rolling change of this group is running ({who}); wait for it to finish, "
            "then run this one again",
        )


def group_lock_path(workspace: Workspace, group: str) -> Path:
    return workspace.logs / "locks" / f"group-{group}.lock"


@contextlib.asynccontextmanager
async def group_lock(workspace: Workspace, group: str, owner: str) -> AsyncIterator[None]:
    """The group's lock in the workspace (beside the hosts' unit locks, which each host's plan takes): an flock on
    logs/locks/group-NAME.lock that holds its owner's line. The kernel lets go of it when the process ends, so a
    crashed roll leaves no stale lock. GroupLocked (naming the holder) when another process holds it."""
    path = group_lock_path(workspace, group)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            raise GroupLocked(group, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, (" ".join(owner.split()) + "\n").encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# --- one host's change -----------------------------------------------------------------------------------------


class HostChange(Protocol):
    """What the roll drives on one host: a planned apply (or restart, restore), holding the host's unit lock."""

    @property
    def restarts(self) -> bool:
        """Whether executing it restarts the server (the router takes the worker out first)."""
        ...

    @property
    def refusal(self) -> str | None:
        """Why it must not run (the rules refuse it), else None."""
        ...

    async def run(self, on_event: EventSink[Any]) -> HostEnded:
        """Carry the change out, its own events (HostEvent) to on_event; how it ended (with its --json object)."""
        ...

    def request_abort(self) -> None: ...

    async def abort(self, why: str) -> None: ...


@dataclass
class ApplyChange:
    """A PendingApply (apply, restart, restore) as one host's change in a roll."""

    pending: PendingApply

    @property
    def restarts(self) -> bool:
        return self.pending.restart_only or (self.pending.plan.ok and self.pending.plan.changed)

    @property
    def refusal(self) -> str | None:
        if self.pending.restart_only or self.pending.plan.ok:
            return None
        return "; ".join(e.message for e in self.pending.plan.report.errors) or "the version rules refuse it"

    async def run(self, on_event: EventSink[Any]) -> HostEnded:
        result: ApplyResult = await self.pending.execute(on_event=on_event)
        outcome = outcome_of_apply(result.state.value, restart_only=self.pending.restart_only)
        detail = result.state.value.replace("_", " ")
        if result.error:
            detail = f"{detail}: {result.error}"
        return HostEnded(outcome, detail, result.to_json())

    def request_abort(self) -> None:
        self.pending.request_abort()

    async def abort(self, why: str) -> None:
        await self.pending.abort(why)


@dataclass
class FreezeChange:
    """A PendingFreeze as one host's part in a group freeze: nothing restarts (the document written, the unit
    enabled), so the router is left alone; a host whose freeze fails is reported failed (nothing to roll back)."""

    pending: PendingFreeze

    @property
    def restarts(self) -> bool:
        return False

    @property
    def refusal(self) -> str | None:
        plan = self.pending.plan
        return "; ".join(r.message for r in plan.refusals) if plan.refused else None

    async def run(self, on_event: EventSink[Any]) -> HostEnded:
        result: FreezeResult = await self.pending.execute(on_event=on_event)
        if result.ok:
            return HostEnded(HostOutcome.DONE, f"frozen as {result.name}", result.to_json())
        return HostEnded(HostOutcome.FAILED, f"{result.state}: {result.error}", result.to_json())

    def request_abort(self) -> None:
        """A freeze's steps are short and leave nothing to roll back: Ctrl-C stops the roll after them."""

    async def abort(self, why: str) -> None:
        await self.pending.abort(why)


class CanaryGate(Protocol):
    """--gate bench (gate.py): the canary's benchmark after its verified change, and the canary
    rolled back when it fails."""

    def to_json(self) -> dict[str, Any]: ...

    async def judge(self, host: RollHost, emit: EventSink[RollEvent]) -> tuple[GateVerdict, dict[str, Any]]:
        """The verdict and what the report keeps of it (baseline run, both runs' values); emits GateStarted."""
        ...

    async def roll_back(self, host: RollHost, emit: EventSink[RollEvent]) -> HostEnded:
        """Put the canary back on the unit it had before the roll (verified, as an apply's rollback is)."""
        ...


@dataclass
class RollHost:
    """A member of the group in this roll: its session, its planned change, its worker URL at the router."""

    label: str
    session: Session
    change: HostChange
    worker_url: str | None = None
    worker: RouterWorker | None = None  # the router's entry before the roll (re-added with its type, bootstrap port)


# --- the report ------------------------------------------------------------------------------------------------


@dataclass
class RollReport:
    """Where a rolling change ended; `to_json()` is the rolling verbs' --json object."""

    group: str
    operation: str
    spec: RollSpec
    ledger: RollLedger
    router: str | None = None
    router_before: list[RouterWorker] = field(default_factory=list)
    router_after: list[RouterWorker] | None = None
    router_api: str | None = None  # which router: smg's release ("smg-1.13.0"), or "sglang-router 0.3"
    refusals: list[str] = field(default_factory=list)
    gate: dict[str, Any] | None = None  # --gate bench: its spec and baselines
    snapshot_set: dict[str, Any] | None = None  # a group freeze: the set's index (console.core.snapshot.sets)
    started: datetime | None = None
    finished: datetime | None = None

    @property
    def ok(self) -> bool:
        return not self.refusals and self.ledger.ok and self.router_whole is not False

    @property
    def router_whole(self) -> bool | None:
        """Whether every worker the router listed before the roll is listed (and routable) after it."""
        if self.router is None or self.router_after is None:
            return None
        after = {w.url: w for w in self.router_after}
        return all(w.url in after and after[w.url].routable for w in self.router_before)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def seconds(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "group": self.group,
            "operation": self.operation,
            "canary": self.spec.canary,
            "wave": str(self.spec.wave),
            "max_failures": self.spec.max_failures,
            "stopped": self.ledger.stop_reason(),
            "refusals": list(self.refusals),
            "hosts": [self.ledger.records[h].to_json() for h in self.ledger.hosts],
            "router": self.router,
            "router_api": self.router_api,
            "router_before": [w.to_json() for w in self.router_before],
            "router_after": None if self.router_after is None else [w.to_json() for w in self.router_after],
            "router_whole": self.router_whole,
            "gate": self.gate,
            "snapshot_set": self.snapshot_set,
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
            "seconds": self.seconds,
        }


# --- planning and running the roll ------------------------------------------------------------------------------


def worker_url(session: Session) -> str:
    """The URL the group's router knows this host's server by: the address the SSH connection reached and the
    profile's SGLang port (loopback for a local or demo host)."""
    address = session.host.peer_address() or "127.0.0.1"
    host = f"[{address}]" if ":" in address else address
    return normalize_url(f"http://{host}:{session.target.sglang.port}")


async def running_requests(session: Session) -> int | None:
    """The worker's own running + queued requests (its load endpoint, else /metrics); None when it says neither."""
    client = await session.sglang()
    load: Any = None
    metrics: dict[str, float] | None = None
    with contextlib.suppress(Exception):
        load = await client.load()
    figures = summarize(None, load=load)
    if figures["num_running_reqs"] is None:
        with contextlib.suppress(Exception):
            metrics = await client.metrics()
        figures = summarize(None, metrics=metrics)
    running, queued = figures["num_running_reqs"], figures["num_queue_reqs"]
    if running is None and queued is None:
        return None
    return int(running or 0) + int(queued or 0)


class PendingRoll:
    """A planned rolling change: every host planned (its unit lock held), nothing changed yet."""

    def __init__(
        self,
        group: str,
        operation: str,
        hosts: Sequence[RollHost],
        spec: RollSpec,
        *,
        router: RouterClient | None,
        router_before: list[RouterWorker],
        refusals: list[str],
        drain_timeout_s: float,
        gate: CanaryGate | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.group = group
        self._clock = clock  # the events' and the report's times (a fixed one for the console's snapshots)
        self.gate = gate
        self.hosts = list(hosts)
        self.spec = spec
        self.router = router
        self.drain_timeout_s = drain_timeout_s
        self.batches = batches([h.label for h in hosts], spec)
        ledger = RollLedger([h.label for h in hosts], spec.max_failures)
        for host in hosts:
            ledger.records[host.label].worker_url = host.worker_url
        self.report = RollReport(
            group, operation, spec, ledger, router.url if router else None, router_before, refusals=refusals
        )
        self.report.gate = gate.to_json() if gate is not None else None
        self.report.router_api = router.name if router is not None else None
        self._emit: EventSink[RollEvent] = ignore
        self._abort_reason: str | None = None
        self._running: dict[str, HostChange] = {}
        self._gating: dict[str, asyncio.Task[tuple[GateVerdict, dict[str, Any]]]] = {}
        self._closed = False

    @property
    def refused(self) -> bool:
        return bool(self.report.refusals)

    def request_abort(self, why: str = "interrupted") -> None:
        """Ctrl-C: no new host starts; a host being changed rolls back as a single apply does."""
        if self._abort_reason is None:
            self._abort_reason = why
        for change in list(self._running.values()):
            change.request_abort()
        for benchmark in list(self._gating.values()):  # the canary's gate: stopped, and the canary rolled back
            benchmark.cancel()

    async def abort(self, why: str) -> RollReport:
        """Nothing is changed on any host (the operator said no, or a plan was refused)."""
        self.report.ledger.stop("refused" if self.refused else "interrupted", why)
        await self._release_unstarted(why)
        return self.report

    async def execute(self, on_event: EventSink[RollEvent] = ignore) -> RollReport:
        self._emit = on_event
        ledger = self.report.ledger
        self.report.started = self._clock()
        try:
            if self.refused:
                ledger.stop("refused", "; ".join(self.report.refusals))
                return self.report
            by_label = {h.label: h for h in self.hosts}
            group_size = len(self.hosts)
            wave = self.spec.wave.hosts(group_size)
            for batch in self.batches:
                if self._abort_reason is not None:
                    ledger.stop("interrupted", f"{self._abort_reason}: stopped before {batch.kind} {batch.index}")
                if ledger.stopped is not None:
                    break
                members = [by_label[h] for h in batch.hosts]
                if self.router is not None and not await self._router_allows(members, group_size, wave):
                    break
                self._emit(BatchStarted(batch, self._clock()))
                await asyncio.gather(*(self._roll_host(host, batch) for host in members))
            if ledger.stopped is not None:
                self._emit(RollStopped(ledger.stopped[1], self._clock()))
        finally:
            await self._release_unstarted(ledger.stop_reason() or "the roll ended before this host")
            if self.router is not None:
                try:
                    self.report.router_after = await self.router.workers()
                except RouterError as exc:
                    self._emit(Notice(f"the router's worker list after the roll could not be read: {exc}"))
            self.report.finished = self._clock()
        return self.report

    async def _router_allows(self, members: list[RollHost], group_size: int, wave: int) -> bool:
        """Never fewer than N - wave workers serving: count the router's healthy workers of this group."""
        assert self.router is not None
        ledger = self.report.ledger
        try:
            listed = {w.url: w for w in await self.router.workers()}
        except RouterError as exc:
            ledger.stop("router", f"the router's worker list could not be read: {exc}")
            return False
        ours = {h.worker_url for h in self.hosts}
        serving = sum(1 for url, w in listed.items() if url in ours and w.routable)
        restarting = sum(1 for h in members if h.change.restarts)
        if may_start(restarting, serving, group_size, wave):
            return True
        ledger.stop(
            "router",
            f"only {serving} of {group_size} workers serve at the router; taking {restarting} more out would leave "
            f"fewer than {group_size - wave} (N - wave)",
        )
        return False

    async def _roll_host(self, host: RollHost, batch: Batch) -> None:
        ledger = self.report.ledger
        record = ledger.begin(host.label, batch, self._clock())
        self._emit(HostStarted(host.label, batch, record.started or self._clock()))
        behind_router = self.router is not None and host.worker_url is not None and host.change.restarts
        ended = HostEnded(HostOutcome.FAILED, "")
        self._running[host.label] = host.change
        try:
            if behind_router:
                await self._take_out(host)
            ended = await host.change.run(lambda event: self._emit(HostProgress(host.label, event)))
            record.result = ended.result
            if self.gate is not None and batch.kind == "canary" and ended.outcome is HostOutcome.DONE:
                ended = await self._gated(host, ended.detail)
            if behind_router:
                await self._put_back(host, ended.outcome)
        except (HostError, RouterError) as exc:
            ended = HostEnded(HostOutcome.FAILED, str(exc))
            if behind_router and host.worker_url is not None:
                await self._put_back(host, None)
        finally:
            self._running.pop(host.label, None)
        ledger.finish(host.label, ended.outcome, ended.detail, self._clock())
        self._emit(HostFinished(host.label, ended.outcome, ended.detail, self._clock()))

    async def _gated(self, host: RollHost, detail: str) -> HostEnded:
        """The canary's benchmark after its verified change (while it is still out of the router): passed, it stays
        on the new setup; failed (or interrupted), the roll halts and the canary is rolled back."""
        assert self.gate is not None
        ledger = self.report.ledger
        record = ledger.records[host.label]
        if self._abort_reason is not None:
            verdict = GateVerdict(False, f"{self._abort_reason} before the canary's benchmark")
        else:
            benchmark = asyncio.ensure_future(self.gate.judge(host, self._emit))
            self._gating[host.label] = benchmark
            try:
                verdict, kept = await benchmark
                record.gate = {**verdict.to_json(), **kept}
            except asyncio.CancelledError:
                if not benchmark.cancelled() or self._abort_reason is None:
                    raise  # the roll itself is cancelled (a second Ctrl-C): leave at once
                verdict = GateVerdict(False, f"{self._abort_reason} during the canary's benchmark")
            except (HostError, RouterError) as exc:
                verdict = GateVerdict(False, f"the canary's benchmark failed: {exc}")
            finally:
                self._gating.pop(host.label, None)
        if record.gate is None:
            record.gate = verdict.to_json()
        self._emit(GateJudged(host.label, verdict, self._clock()))
        if verdict.passed:
            return HostEnded(HostOutcome.DONE, f"{detail}; gate passed: {verdict.message}")
        ledger.stop("gate", f"{host.label}: the gate halted the roll: {verdict.message}")
        try:
            back = await self.gate.roll_back(host, self._emit)
        except HostError as exc:
            back = HostEnded(HostOutcome.FAILED, f"rolling it back failed: {exc}")
        return HostEnded(back.outcome, f"gate failed: {verdict.message}; {back.detail}")

    def _router_step(self, host: RollHost, action: RouterAction, detail: str) -> None:
        self.report.ledger.records[host.label].router.append(f"{action}: {detail}" if detail else action)
        self._emit(RouterStep(host.label, action, detail, self._clock()))

    async def _take_out(self, host: RollHost) -> None:
        """Out of the router at once (smg's settle set to 0: it waits a fixed time for nothing in particular), then
        the worker's own requests waited on (_drain)."""
        assert self.router is not None and host.worker_url is not None
        started = time.monotonic()
        removed = await self.router.remove(host.worker_url, settle_s=0)
        host.worker = removed or host.worker
        took = _took(started)
        self._router_step(host, "removed", f"{host.worker_url} left {self.router.url}'s worker list {took}")
        await self._drain(host)

    async def _drain(self, host: RollHost) -> None:
        """The router does not drain a removed worker: wait until its own running + queued count is 0 (bounded)."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        deadline = loop.time() + self.drain_timeout_s
        first = True
        zeros = 0
        while True:
            try:
                left = await running_requests(host.session)
            except HostError:
                left = None
            # Twice 0 in a row: a request the router sent just before the removal may still be on its way.
            zeros = zeros + 1 if left == 0 else 0
            if zeros >= 2:
                self._router_step(host, "drained", f"no request running or queued on the worker {_took(started)}")
                return
            if left is None:
                self._router_step(host, "drain_timeout", "the worker does not say how many requests it runs")
                return
            if first and left:
                self._router_step(host, "draining", f"{left} requests still running or queued on the worker")
                first = False
            if loop.time() >= deadline:
                self._router_step(
                    host,
                    "drain_timeout",
                    f"{left} requests still running or queued after {self.drain_timeout_s:g} s; restarting anyway",
                )
                return
            await asyncio.sleep(DRAIN_POLL_S)  # polling the worker's own count: the condition itself

    async def _put_back(self, host: RollHost, outcome: HostOutcome | None) -> None:
        """Add the worker back when it serves (verified, or healthy on its old unit); else keep it out, say so."""
        assert self.router is not None and host.worker_url is not None
        healthy = outcome in (HostOutcome.DONE, HostOutcome.ROLLED_BACK, HostOutcome.UNCHANGED)
        if not healthy:
            with contextlib.suppress(Exception):
                client = await host.session.sglang()
                healthy = await client.healthy()
        if not healthy:
            self._router_step(host, "kept_out", f"{host.worker_url} is not healthy; it stays out of the router")
            return
        kind = host.worker.worker_type if host.worker is not None else "regular"
        port = host.worker.bootstrap_port if host.worker is not None else None
        started = time.monotonic()
        try:
            back = await self.router.add(host.worker_url, worker_type=kind, bootstrap_port=port)
        except RouterError as exc:
            self._router_step(host, "kept_out", f"adding it back failed: {exc}")
            raise
        as_what = "" if kind == "regular" else f" as {kind}"
        ready = f" (id {back.id}, {back.status})" if back.status is not None else ""
        self._router_step(
            host,
            "added",
            f"{host.worker_url} is back in {self.router.url}'s worker list{as_what}{ready} {_took(started)}",
        )

    async def _release_unstarted(self, why: str) -> None:
        """Abort the plans of the hosts the roll did not reach: nothing written, their unit locks let go of."""
        if self._closed:
            return
        self._closed = True
        ledger = self.report.ledger
        for host in self.hosts:
            record = ledger.records[host.label]
            if record.started is None:
                record.detail = record.detail or why
                with contextlib.suppress(Exception):
                    await host.change.abort(f"not started: {why}")


PlanHost = Callable[[Session], Awaitable[HostChange]]


async def plan_roll(
    group: str,
    operation: str,
    sessions: Sequence[Session],
    plan_host: PlanHost,
    *,
    spec: RollSpec,
    router: RouterClient | None = None,
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
    gate: CanaryGate | None = None,
    clock: Callable[[], datetime] = _now,
) -> PendingRoll:
    """Plan the change on every host side by side (each plan takes its host's unit lock) and check the router
    knows every host's worker. A host that cannot be planned (locked by another, unreachable) raises after the
    plans already made are aborted; what the rules refuse, and workers the router does not list, become refusals
    (execute() then changes nothing). Nothing is changed here."""
    spec.check(len(sessions))
    planned = await asyncio.gather(*(plan_host(s) for s in sessions), return_exceptions=True)
    failure = next((p for p in planned if isinstance(p, BaseException)), None)
    if failure is not None:
        for p in planned:
            if not isinstance(p, BaseException):
                with contextlib.suppress(Exception):
                    await p.abort("another host of the group could not be planned; nothing was changed")
        raise failure
    changes: list[HostChange] = [p for p in planned if not isinstance(p, BaseException)]
    hosts = [RollHost(s.label, s, c) for s, c in zip(sessions, changes, strict=True)]
    refusals = [f"{h.label}: {h.change.refusal}" for h in hosts if h.change.refusal]
    before: list[RouterWorker] = []
    if router is not None:
        for host in hosts:
            host.worker_url = worker_url(host.session)
        try:
            before = await router.workers()
        except RouterError as exc:
            refusals.append(f"the group's router: {exc}")
        else:
            listed = {w.url: w for w in before}
            known = ", ".join(sorted(listed)) or "none"
            for host in hosts:
                worker = listed.get(host.worker_url or "")
                host.worker = worker
                if worker is None:
                    refusals.append(
                        f"{host.label}: the router {router.url} does not list its worker {host.worker_url} "
                        f"(it lists {known}); add it to the router first"
                    )
                elif worker.healthy is False:
                    refusals.append(f"{host.label}: the router reports its worker {host.worker_url} unhealthy")
                elif not worker.routable:
                    refusals.append(
                        f"{host.label}: the router does not route to its worker {host.worker_url} now (status "
                        f"{worker.status}); wait until it is ready"
                    )
    return PendingRoll(
        group,
        operation,
        hosts,
        spec,
        router=router,
        router_before=before,
        refusals=refusals,
        drain_timeout_s=drain_timeout_s,
        gate=gate,
        clock=clock,
    )
