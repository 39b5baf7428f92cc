"""The ranks of one model restarted together, as console.core.deployment.order says, and rolled back the same way.

    run = Together(deployment, changes, order, timeout_s=900, emit=on_event)
    ok = await run.run()                  # the order's steps; False: the failure is in run.failure
    await run.roll_back()                 # previous units on every written rank, the same steps again

Each step of the order (write, stop, wait_down, start, open_gate, wait_ready, verify) is one method here; what a step
means and why it comes where it does is order.py's. Every rank is watched from its stop to rank 0's ready: its unit's
state (a rank that fails or loops fails the start at once, named) and its journal (its phases, its failure lines).
Rank 0's /health and /ready say the model serves; a rank >= 1's own /health is never asked (a dummy 200).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from console.core.change import Plan, is_new_start, start_failure, verify_resolved
from console.core.deployment import Deployment, RestartOrder, Step
from console.core.events import LogLine, Notice, PhaseChanged
from console.core.phases import PhaseTracker, exception_line
from console.core.roll.members import MemberChange, MemberEvent, StepEvent
from console.core.session import Session
from console.host.base import ConnectionDropped, HostError, JournalEntry, ServiceState

POLL_S = 0.2
GATE_TIMEOUT_S = 5.0
HEALTH_TIMEOUT_S = 5.0
JOURNAL_SETTLE_S = 2.0


def _now() -> datetime:
    return datetime.now(UTC)


class StartFailed(Exception):
    """A rank's start (or rank 0's readiness) failed: the message names the rank and why."""


Emit = Callable[[Any], None]


class Together:
    """The ranks' restart order carried out (and, on failure, the same order with the previous units)."""

    def __init__(
        self,
        deployment: Deployment,
        changes: Sequence[MemberChange],
        order: RestartOrder,
        *,
        timeout_s: float,
        emit: Emit,
        aborted: Callable[[], bool] = lambda: False,
    ) -> None:
        self.deployment = deployment
        self.changes = list(changes)
        self.by_name = {c.name: c for c in changes}
        self.order = order
        self.timeout_s = timeout_s
        self.emit = emit
        self.aborted = aborted
        self.failure: str | None = None
        self.stopped_at: float | None = None  # monotonic: rank 0's stop was sent
        self.ready_at: float | None = None  # monotonic: rank 0 answered healthy and ready
        self.rollback = False
        self._followers: list[asyncio.Task[None]] = []
        self._baselines: dict[str, int] = {}  # NRestarts as first seen after the start (a loop counts from there)

    @property
    def rank0(self) -> MemberChange:
        return self.by_name[self.deployment.ranks[0].name]

    @property
    def downtime_s(self) -> float | None:
        if self.stopped_at is None or self.ready_at is None:
            return None
        return round(self.ready_at - self.stopped_at, 2)

    async def run(self, order: RestartOrder | None = None) -> bool:
        """Every step in turn; False at the first that fails (self.failure says why)."""
        steps = {
            "write": self._write,
            "stop": self._stop,
            "wait_down": self._wait_down,
            "start": self._start,
            "open_gate": self._open_gate,
            "wait_ready": self._wait_ready,
            "verify": self._verify,
        }
        for step in (order or self.order).steps:
            if self.aborted() and step.kind in ("write", "stop") and not self.rollback:
                self.failure = "interrupted before anything was stopped"
                return False
            self.emit(StepEvent(step, "begun", step.why, _now(), self.rollback))
            try:
                detail = await steps[step.kind](step)
            except (StartFailed, HostError) as exc:
                self.failure = str(exc)
                self.emit(StepEvent(step, "failed", self.failure, _now(), self.rollback))
                return False
            self.emit(StepEvent(step, "done", detail, _now(), self.rollback))
        return True

    # -- the steps ---------------------------------------------------------------------------------------------

    async def _write(self, step: Step) -> str:
        """Every changed rank's new unit (backed up) and a daemon-reload on each; a failed write puts back the ones
        already written and fails the step (nothing stopped yet)."""
        if self.rollback:
            return await self._restore(step)
        targets = [self.by_name[n] for n in step.members if self.by_name[n].changed]

        async def write(change: MemberChange) -> None:
            change.backup = await change.session.service.write_unit(change.plan.new_text)
            change.written = True
            await change.session.service.daemon_reload()

        done = await asyncio.gather(*(write(c) for c in targets), return_exceptions=True)
        failed = [(c, e) for c, e in zip(targets, done, strict=True) if isinstance(e, BaseException)]
        if failed:
            self.rollback = True
            await self._restore(step, quiet=True)
            self.rollback = False
            said = "; ".join(f"{c.member.describe()}: {e}" for c, e in failed)
            raise HostError(f"the new units could not be written ({said}); the units written are back, nothing stopped")
        return f"{len(targets)} units written and reloaded" if targets else "no unit changes: restarted as they are"

    async def _restore(self, step: Step, *, quiet: bool = False) -> str:
        written = [c for c in self.changes if c.written and not c.restored]

        async def restore(change: MemberChange) -> None:
            service = change.session.service
            if change.backup is not None:
                await service.restore_unit(change.backup)
            else:
                await service.write_unit(change.plan.old_text)
            await service.daemon_reload()
            change.restored = True

        done = await asyncio.gather(*(restore(c) for c in written), return_exceptions=True)
        failed = [f"{c.member.describe()}: {e}" for c, e in zip(written, done, strict=True) if isinstance(e, Exception)]
        if failed and not quiet:
            raise HostError(f"the previous units could not be put back: {'; '.join(failed)}")
        return f"previous units back on {', '.join(c.name for c in written)}" if written else "no unit was written"

    async def _stop(self, step: Step) -> str:
        """Read every rank's state and journal position (what follows belongs to this start), then stop rank 0."""
        states = await asyncio.gather(*(self._state(c) for c in self.changes))
        cursors = await asyncio.gather(*(_cursor(c.session) for c in self.changes))
        for change, state, cursor in zip(self.changes, states, cursors, strict=True):
            change.before, change.cursor = state, cursor
            if not self.rollback:
                change.pid_before = state.main_pid
        self.stopped_at = time.monotonic()
        for name in step.members:
            await self.by_name[name].session.service.stop()
        return f"{', '.join(step.members)} stopped"

    async def _wait_down(self, step: Step) -> str:
        """Every rank's unit inactive or failed; one still up after the deployment's stop timeout is stopped through
        systemd (its control group ended); failing that within as long again, the step fails."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        bound = self.deployment.stop_timeout_s
        forced: list[str] = []
        looping: set[str] = set()
        while True:
            states = await asyncio.gather(*(self._state(self.by_name[n]) for n in step.members))
            # A rank whose start failed and that systemd restarts in a loop goes down only when told to.
            again = [n for n, s in zip(step.members, states, strict=True)
                     if s.sub_state == "auto-restart" and n not in looping]  # fmt: skip
            if again:
                looping.update(again)
                await asyncio.gather(*(self.by_name[n].session.service.stop() for n in again))
                continue
            up = [n for n, s in zip(step.members, states, strict=True) if s.active_state not in ("inactive", "failed")]
            if not up:
                took = loop.time() - started
                extra = f"; stopped through systemd: {', '.join(forced)}" if forced else ""
                return f"every rank down after {took:.1f} s{extra}"
            elapsed = loop.time() - started
            if elapsed >= bound and not forced:
                forced = up
                said = f"{', '.join(up)} still up {bound:g} s after rank 0 stopped: stopping through systemd"
                self.emit(Notice(said))
                await asyncio.gather(*(_force_stop(self.by_name[n].session) for n in up))
            if elapsed >= 2 * bound:
                raise StartFailed(f"{', '.join(up)} did not go down within {2 * bound:g} s")
            await asyncio.sleep(POLL_S)  # polling the units' own state

    async def _start(self, step: Step) -> str:
        """Every rank's unit started side by side (one command per host): they rendezvous at --dist-init-addr."""
        members = [self.by_name[n] for n in step.members]
        for change in members:
            tracker = PhaseTracker.for_start(speculative=change.plan.speculative, cuda_graph=change.plan.cuda_graph)
            if self.rollback:
                change.rollback_tracker = tracker
            else:
                change.tracker = tracker
        self._baselines.clear()
        done = await asyncio.gather(*(c.session.service.restart() for c in members), return_exceptions=True)
        for change, outcome in zip(members, done, strict=True):
            change.starts += 1
            if isinstance(outcome, BaseException) and not isinstance(outcome, HostError):
                raise outcome
            if isinstance(outcome, HostError):  # a start job that failed at once: the watch says why
                self.emit(MemberEvent(change.name, Notice(f"start reported: {outcome}")))
        self._followers = [asyncio.create_task(self._follow(c)) for c in members]
        return f"{len(members)} ranks started"

    async def _open_gate(self, step: Step) -> str:
        """Rank 0's gate answers only once every rank has joined: then open it (POST /gate/activate)."""
        rank0 = self.by_name[step.members[0]]
        port = rank0.plan.report.resolved.get("gated_launch_port")
        if port is None:
            return "the units have no gate"
        local = await rank0.session.host.transport.forward_port(_gate_host(rank0.plan), int(port))
        base = f"http://127.0.0.1:{local}"
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        async with httpx.AsyncClient(base_url=base, timeout=GATE_TIMEOUT_S) as http:
            while True:
                await self._check_ranks("waiting for every rank to join")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get("/health")).status_code == 200:
                        answer = await http.post("/gate/activate")
                        if answer.status_code != 200:
                            raise StartFailed(f"rank 0's gate refused to open: HTTP {answer.status_code}")
                        return "every rank joined; the gate is open"
                if asyncio.get_running_loop().time() >= deadline:
                    raise StartFailed(f"rank 0's gate did not answer within {self.timeout_s:g} s")
                await asyncio.sleep(POLL_S)

    async def _wait_ready(self, step: Step) -> str:
        """Rank 0's /health and /ready 200 with every rank's unit running its new process; a rank that fails fails
        the step at once, named."""
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        client = await self.rank0.session.sglang()
        while True:
            states = await self._check_ranks("starting")
            healthy, ready = await asyncio.gather(_healthy(client), client.ready())
            fresh = all(s.active_state == "active" and c.before is not None and is_new_start(c.before, s)
                        for c, s in zip(self.changes, states, strict=True))  # fmt: skip
            if healthy and ready is not False and fresh:
                self.ready_at = time.monotonic()
                for change, state in zip(self.changes, states, strict=True):
                    change.pid_after = state.main_pid
                    tracker = change.rollback_tracker if self.rollback else change.tracker
                    if tracker is not None and change.member.serves_api:
                        tracker.mark_ready(_now())
                await self._stop_following()
                return f"rank 0 healthy and ready after {self.downtime_s:g} s down" if self.downtime_s else "ready"
            if asyncio.get_running_loop().time() >= deadline:
                raise StartFailed(f"rank 0 not healthy and ready within {self.timeout_s:g} s")
            await asyncio.sleep(POLL_S)

    async def _verify(self, step: Step) -> str:
        """Rank 0's /server_info against what the rules predicted for it; every rank still on the process it
        started (no rank fell away after rank 0 said ready)."""
        rank0 = self.rank0
        states = await asyncio.gather(*(self._state(c) for c in self.changes))
        moved = [c.member.describe() for c, s in zip(self.changes, states, strict=True)
                 if s.main_pid != c.pid_after or s.active_state != "active"]  # fmt: skip
        if moved:
            raise StartFailed(f"{', '.join(moved)} did not keep running after rank 0 said ready")
        if self.rollback:  # back on the previous units: healthy is what a rollback asks (as a single apply's does)
            return "every rank runs its previous unit; rank 0 healthy and ready"
        client = await rank0.session.sglang()
        info = await client.server_info()
        verification = verify_resolved(rank0.plan.expectations(everything=rank0.restart_only), info)
        rank0.verification = verification
        if not verification.ok:
            wrong = ", ".join(f"{v.dest}={v.actual!r} (expected {v.expected!r})" for v in verification.mismatches)
            raise StartFailed(f"rank 0 runs the new units but resolved {wrong}")
        return "rank 0 resolved what the rules predicted; every rank runs its new process"

    # -- watching ----------------------------------------------------------------------------------------------

    async def _check_ranks(self, doing: str) -> list[ServiceState]:
        """Every rank's state now; StartFailed naming the first rank whose start failed (its exception line)."""
        states = await asyncio.gather(*(self._state(c) for c in self.changes))
        for change, state in zip(self.changes, states, strict=True):
            tracker = change.rollback_tracker if self.rollback else change.tracker
            baseline = self._baselines.setdefault(change.name, state.n_restarts)
            failure = start_failure(state, baseline, before=change.before)
            if not failure and tracker is not None and tracker.failed and not state.running:
                failure = "its start failed"
            if failure:
                await self._settle(change, tracker)
                cause = exception_line(tracker.failure_lines) if tracker else None
                why = f"{change.member.describe()} {failure} while {doing}"
                raise StartFailed(why + (f": {cause}" if cause else ""))
        if self.aborted() and not self.rollback:
            raise StartFailed("interrupted while the ranks started")
        return list(states)

    async def _state(self, change: MemberChange) -> ServiceState:
        return await _retrying(change.session.service.state)

    async def _follow(self, change: MemberChange) -> None:
        """The rank's journal from its stop on: each line to the operator, into its start's phases."""
        tracker = change.rollback_tracker if self.rollback else change.tracker
        after = change.cursor
        start: Literal["new", "rollback"] = "rollback" if self.rollback else "new"
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                try:
                    async for entry in change.session.service.journal(lines=0 if after is None else 1000, follow=True,
                                                                      after_cursor=after):  # fmt: skip
                        after = entry.cursor
                        self._take(change, tracker, entry, start)
                    return
                except ConnectionDropped:
                    await asyncio.sleep(POLL_S)
                except HostError as exc:
                    self.emit(MemberEvent(change.name, Notice(f"stopped following the journal: {exc}")))
                    return

    def _take(self, change: MemberChange, tracker: PhaseTracker | None, entry: JournalEntry, start: Any) -> None:
        self.emit(MemberEvent(change.name, LogLine(entry, start)))
        if tracker is None:
            return
        for event in tracker.feed(entry.message, entry.timestamp):
            phases = tuple(p for p in tracker.phases)
            self.emit(MemberEvent(change.name, PhaseChanged(event.kind, event.phase, event.at, event.line,  # type: ignore[arg-type]
                                                            tracker.progress, phases, start)))  # fmt: skip

    async def _settle(self, change: MemberChange, tracker: PhaseTracker | None) -> None:
        """A failed start is explained by lines journald may not have handed over yet: read them (briefly)."""
        if tracker is None:
            return
        deadline = asyncio.get_running_loop().time() + JOURNAL_SETTLE_S
        while not tracker.failed and asyncio.get_running_loop().time() < deadline:
            with contextlib.suppress(HostError):
                async for entry in change.session.service.journal(lines=200, after_cursor=change.cursor):
                    if entry.message not in tracker.lines_seen:
                        tracker.feed(entry.message, entry.timestamp)
            if not tracker.failed:
                await asyncio.sleep(POLL_S)

    async def _stop_following(self) -> None:
        for task in self._followers:
            task.cancel()
        for task in self._followers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._followers = []

    # -- rolling back -------------------------------------------------------------------------------------------

    async def roll_back(self, order: RestartOrder) -> bool:
        """The previous units on every rank written, then the same order again; True when rank 0 is healthy and
        ready on them with every rank running."""
        await self._stop_following()
        self.rollback = True
        for change in self.changes:
            change.restored = False
        try:
            return await self.run(order)
        finally:
            await self._stop_following()


async def _retrying(op: Callable[[], Awaitable[ServiceState]], grace_s: float = 30.0) -> ServiceState:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while True:
        try:
            return await op()
        except ConnectionDropped:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(POLL_S)


async def _cursor(session: Session) -> str | None:
    last: str | None = None
    with contextlib.suppress(HostError):
        async for entry in session.service.journal(lines=1):
            last = entry.cursor
    return last


async def _healthy(client: Any) -> bool:
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            return bool(await client.healthy())
    except TimeoutError:
        return False


async def _force_stop(session: Session) -> None:
    """Stop a rank that did not go down with rank 0: through systemd, its control group ended at once (a rank >= 1
    ignores SIGTERM), without a restart of it (the stop job is queued first)."""
    inner = session.service.inner
    force = getattr(inner, "force_stop", None)
    if force is not None:
        await force()
    else:
        await session.service.stop()


def _gate_host(plan: Plan) -> str:
    """Where rank 0's gate listens, as seen from its host: its --host (loopback for an unspecified address)."""
    host = str(plan.report.resolved.get("host") or "127.0.0.1")
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
