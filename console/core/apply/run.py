"""Validated unit edits and restarts: plan, then execute (or abort), with verification and rollback.

    pending = await plan_apply(session, edits)     # takes the unit's lock, reads unit + version, asks nothing
    show(pending.plan.diff, pending.plan.report)   # the caller decides: confirm, or not
    result = await pending.execute(on_event=...)   # or: await pending.abort("not confirmed")
    result = await restart_service(session)        # restart without edits, the start watched the same way

The pure parts live in console/core/change/ (edits, plan, verification, judging a start from the service
state, the state machine) and console/core/phases.py (startup phases from the journal). The host is reached
only through the session (console/core/session.py): its ServiceManager (systemd over SSH, or the demo's
supervisor) and its SGLang client, so the same orchestration runs on a GPU host, the testbed and the demo.

Order of operations (as Ansible's systemd module does it): back up + write the unit atomically, daemon-reload,
restart, follow the journal for startup phases while polling the service state and /health, then read
/server_info and verify. On systemd the state and journal position from before, the write, daemon-reload and
restart are one command (console.host.unit_switch: each step only after the one before it succeeded), and the
/server_info that is verified is read beside the /health that answers ready: over a long link each round trip is
most of what an apply costs outside the server's own start.
A start that fails (ActiveState failed, the unit restarting in a loop, the process gone) or is not healthy
within the timeout is rolled back: restore the backup, daemon-reload, restart, wait for health.
A dropped SSH connection (ConnectionDropped) is survived: the transport reconnects, reads are retried, and a
write whose outcome is unknown is settled by reading the unit back (write_unit is atomic: old or new).
`request_abort()` (Ctrl-C in the CLI, Esc in the console) while the new unit starts rolls back too: it is an
intent the applier checks at every step, so it cannot be lost in a race with a finishing await.
From plan to result the unit's lock on the host is held (ServiceManager.lock): a second apply on the same
unit is refused at once (UnitLocked), naming the holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import getpass
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from console import hints
from console.core.apply.restarts import (
    RestartCost,
    RestartKind,
    RestartRecord,
    append_restart,
    cost_from_server,
    host_restart_cost,
    restart_record,
    start_options,
)
from console.core.change import (
    ApplyState,
    EditRequest,
    FlagKind,
    Plan,
    Rollout,
    Verification,
    is_new_start,
    mask_plan,
    parse_edits,
    plan_for_version,
    start_failure,
    verify_resolved,
)
from console.core.events import (
    ApplyEvent,
    EventSink,
    LogLine,
    Notice,
    PhaseChanged,
    Reconnecting,
    StartKind,
    StepChanged,
    ignore,
)
from console.core.exits import OldProcessLines
from console.core.phases import PhaseEvent, PhaseTracker, exception_line
from console.core.session import Session
from console.host.base import ConnectionDropped, HostError, JournalEntry, ServiceState, UnitBackup
from console.host.unit_switch import UnitSwitch
from console.secrets import secrets_in_unit
from console.sglang.setup import SpecSetup

T = TypeVar("T")
# What to apply: the edits, or how to make them from the SGLang version the rules check against (values are parsed by
# that version's flag kinds), so that the version is read once, side by side with the lock.
Edits = EditRequest | Callable[[str], EditRequest]

# Between polls of systemd state and /health while a start is in progress. The client notices /health
# turning 200 well within 0.5 s.
POLL_INTERVAL_S = 0.2
# How long to keep retrying one host operation through reconnects before giving up on it.
RECONNECT_GRACE_S = 60.0
# After a failed start, how long to wait for journald to hand over the lines that explain it.
JOURNAL_SETTLE_S = 2.0
# One /health probe; SGLang's own health check gives a generation 20 s, a start needs far less to answer.
HEALTH_PROBE_TIMEOUT_S = 5.0
# How long a healthy server may fail to answer /server_info before the apply reports it.
SERVER_INFO_GRACE_S = 15.0
# The old unit gets longer to come back than the new one got: a rollback must not give up early.
ROLLBACK_TIMEOUT_FACTOR = 2.0
# A service still inactive this long after a restart returned did not start at all.
INACTIVE_GRACE_S = 5.0
DEFAULT_TIMEOUT_S = 900.0

INTERRUPTED = "interrupted before the new unit was verified"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class StartWatch:
    """The outcome of watching one (re)start."""

    healthy: bool
    reason: str = ""
    tracker: PhaseTracker | None = None


@dataclass
class ApplyResult:
    """Where an apply (or restart) ended, with everything it saw; `to_json()` is `apply --json`."""

    rollout: Rollout
    plan: Plan
    target: str
    unit: str
    backup: UnitBackup | None = None
    start: StartWatch | None = None
    rollback: StartWatch | None = None
    verification: Verification | None = None
    error: str | None = None
    # What a restart of this host was said to cost before this one (its recent ones), and what this one's starts
    # cost: the new unit's (or the restarted one's), and the old unit's after a rollback.
    restart_cost: RestartCost | None = None
    restart: RestartRecord | None = None
    rollback_restart: RestartRecord | None = None

    @property
    def ok(self) -> bool:
        return self.rollout.ok

    @property
    def state(self) -> ApplyState:
        return self.rollout.state

    def journal_excerpt(self, limit: int = 20, *, rollback: bool = False) -> list[str]:
        """The journal lines that explain why the new unit's start (or, with rollback, the old one's) failed."""
        watch = self.rollback if rollback else self.start
        if watch is None or watch.tracker is None or watch.healthy:
            return []
        return watch.tracker.explanation(limit)

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "ok": self.ok,
            "target": self.target,
            "unit": self.unit,
            "state": self.rollout.state.value,
            "changed": plan.changed,
            "sglang_version": plan.sglang_version,
            "version_source": plan.version_source,
            "diff": plan.diff,
            "report": plan.report.to_json(),
            "backup": self.backup.path if self.backup else None,
            "history": [t.to_json() for t in self.rollout.history],
            "phases": _phases_json(self.start),
            "verified": self.verification.to_json() if self.verification else None,
            "rolled_back": self.rollout.rolled_back,
            "rollback_phases": _phases_json(self.rollback),
            "error": self.error,
            "journal_excerpt": self.journal_excerpt(),
            "rollback_journal_excerpt": self.journal_excerpt(rollback=True),
            "restart_cost": self.restart_cost.to_json() if self.restart_cost else None,
            "restart": self.restart.to_json() if self.restart else None,
            "rollback_restart": self.rollback_restart.to_json() if self.rollback_restart else None,
        }


def _phases_json(watch: StartWatch | None) -> list[dict[str, object]]:
    if watch is None or watch.tracker is None:
        return []
    return [p.to_json() for p in watch.tracker.phases]


class Applier:
    """Carries one plan through write, restart, watch, verify — and rollback when the start fails.

    With restart_only the unit is not written: the service is restarted as it is and its start watched."""

    def __init__(
        self,
        session: Session,
        plan: Plan,
        *,
        timeout_s: float,
        on_event: EventSink[ApplyEvent] = ignore,
        restart_only: bool = False,
    ) -> None:
        self.session = session
        self.service = session.service
        self.plan = plan
        self.timeout_s = timeout_s
        self.restart_only = restart_only
        self._emit = on_event
        self._abort_reason: str | None = None
        self._abort = asyncio.Event()
        self._ready_info: dict[str, Any] | None = None  # /server_info read beside the /health that said ready
        self._restart_at: datetime | None = None  # when the restart being watched was asked (its cost's start)
        self.result = ApplyResult(
            Rollout.start(_now(), restart_only=restart_only), plan, session.label, session.service.unit
        )

    # -- intents --------------------------------------------------------------------------------------

    def request_abort(self, why: str = INTERRUPTED) -> None:
        """Give up on the new unit: before anything is written nothing happens; afterwards it is rolled back.

        Honoured at the next step; too late once the new unit is verified (the result says so)."""
        if self._abort_reason is None:
            self._abort_reason = why
            self._abort.set()

    @property
    def abort_requested(self) -> bool:
        return self._abort.is_set()

    async def _pause(self, seconds: float) -> None:
        """Wait between polls, waking at once when an abort is requested."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._abort.wait()

    # -- steps ----------------------------------------------------------------------------------------

    def _advance(self, state: ApplyState, detail: str = "") -> None:
        detail = self.session.secrets.text(detail)
        transition = self.result.rollout.advance(state, _now(), detail)
        self._emit(StepChanged(state, detail, transition.at))

    def _fail(self, message: str) -> str:
        """Record an error (masked: it may quote the host's stderr or a journal line)."""
        self.result.error = self.session.secrets.text(message)
        return self.result.error

    async def _retrying(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """Run op, retrying while the connection is being re-established (ConnectionDropped only)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RECONNECT_GRACE_S
        delay = 0.2
        while True:
            try:
                return await op()
            except ConnectionDropped as exc:
                if loop.time() + delay > deadline:
                    raise HostError(f"{what}: the connection to the host did not come back ({exc})") from exc
                self._emit(Reconnecting(what, self.session.secrets.text(str(exc))))
                await asyncio.sleep(delay)  # backoff between reconnect attempts, not a wait for a condition
                delay = min(delay * 2, 2.0)

    def refuse_or_skip(self) -> bool:
        """Record why nothing will be done, if so. True when the apply stops here."""
        if self.restart_only:
            return False
        if not self.plan.ok:
            self._advance(ApplyState.REFUSED, "the version rules report errors; the unit was not touched")
            self._fail("; ".join(e.message for e in self.plan.report.errors))
            return True
        if not self.plan.changed:
            self._advance(ApplyState.UNCHANGED, "the unit already has these settings; nothing to do")
            return True
        return False

    def abort(self, why: str) -> ApplyResult:
        """Nothing was touched and nothing will be: the operator said no."""
        if not self.result.rollout.finished:
            self._advance(ApplyState.ABORTED, why)
            self._fail(why)
        return self.result

    async def execute(self) -> ApplyResult:
        if self.refuse_or_skip():
            return self.result
        if self.abort_requested:
            return self.abort(f"{self._abort_reason}; nothing was changed")
        if self.restart_only:
            before, cursor = await asyncio.gather(
                self._retrying("read the service state", self.service.state), self._journal_cursor()
            )
            return await self._restart_only(before, cursor)
        # The new unit goes on the host in one command where the service manager offers it (systemd: state, cursor,
        # write, daemon-reload, restart, each after the one before it succeeded): one round trip instead of three.
        # Else the service's state and the journal's position, which must be read before the restart, go out
        # together with the write (the write changes neither), then daemon-reload, then restart.
        reads: asyncio.Future[tuple[ServiceState, str | None]] | None = None
        if self.service.switches:
            self._restart_at = _now()  # the switch writes, reloads and restarts in one command
            change: asyncio.Future[Any] = asyncio.ensure_future(self._switch())
        else:
            reads = asyncio.ensure_future(
                asyncio.gather(self._retrying("read the service state", self.service.state), self._journal_cursor())
            )
            change = asyncio.ensure_future(self._write())
        # The change runs to its end even through a cancellation: only then is it known whether the unit changed.
        cancelled = False
        try:
            written = await asyncio.shield(change)
        except asyncio.CancelledError:
            self._uncancel()
            cancelled = True
            written = await change
        if not written:
            if reads is not None:
                reads.cancel()
                await asyncio.gather(reads, return_exceptions=True)
            return self.result
        # From here on the new unit is on the host: every way out either verifies it or rolls it back.
        try:
            if cancelled:
                if reads is not None:
                    reads.cancel()
                raise asyncio.CancelledError
            if isinstance(written, _Written):
                before, cursor = await self._switched(written.switch)
            else:
                assert reads is not None
                before, cursor = await reads
                self._check_abort()
                await self._retrying("daemon-reload", self.service.daemon_reload)
                self._advance(ApplyState.DAEMON_RELOADED)
                self._check_abort()
                self._advance(ApplyState.RESTARTING)
                await self._restart(before)
            self._advance(ApplyState.STARTING)
            watch = await self._watch_start(cursor, before)
            self.result.start = watch
            self._check_abort()
            if watch.healthy:
                self._advance(ApplyState.HEALTHY)
                await self._verify()
                return self.result
            cause = exception_line(watch.tracker.failure_lines) if watch.tracker else None
            failure = f"{watch.reason}: {cause}" if cause else watch.reason
        except _Aborted:
            failure = self._abort_reason or INTERRUPTED
            self._emit(Notice(f"{failure}: rolling back to the previous unit"))
        except HostError as exc:
            failure = str(exc)
        except Exception as exc:  # a bug or an unforeseen error must not leave an unverified unit behind
            failure = f"unexpected error: {type(exc).__name__}: {exc}"
        except asyncio.CancelledError:
            # The task itself was cancelled (the console closing, a second Ctrl-C is handled by the caller):
            # the new unit is not verified, so the last good unit goes back before the task ends.
            if not cancelled:
                self._uncancel()
            failure = INTERRUPTED
            self._emit(Notice(f"{failure}: rolling back to the previous unit"))
        self._fail(failure)
        self._advance(ApplyState.FAILED, failure)
        await self._roll_back()
        return self.result

    def _check_abort(self) -> None:
        if self.abort_requested:
            raise _Aborted

    async def _restart_only(self, before: ServiceState, cursor: str | None) -> ApplyResult:
        try:
            self._advance(ApplyState.RESTARTING)
            await self._restart(before)
            self._advance(ApplyState.STARTING)
            watch = await self._watch_start(cursor, before)
            self.result.start = watch
            if watch.healthy:
                self._advance(ApplyState.HEALTHY)
                await self._verify(everything=True)
                return self.result
            cause = exception_line(watch.tracker.failure_lines) if watch.tracker else None
            failure = f"{watch.reason}: {cause}" if cause else watch.reason
        except HostError as exc:
            failure = str(exc)
        self._advance(ApplyState.RESTART_FAILED, self._fail(failure))
        return self.result

    @staticmethod
    def _uncancel() -> None:
        """Take back a cancellation so the rollback's own waits work normally."""
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()

    async def _journal_cursor(self) -> str | None:
        """The journal's newest cursor now: everything after it belongs to the restart we are about to do."""

        async def newest() -> str | None:
            last: str | None = None
            async for entry in self.service.journal(lines=1):
                last = entry.cursor
            return last

        try:
            return await self._retrying("read the journal", newest)
        except HostError:
            return None

    async def _write(self) -> bool:
        """Back up and write the unit. False (state WRITE_FAILED) when the old unit is still in place."""
        new_text = self.plan.new_text
        try:
            backup: UnitBackup | None = await self.service.write_unit(new_text)
        except ConnectionDropped as exc:
            # The write may or may not have happened; it is atomic, so the unit is either old or new.
            on_host = await self._retrying("read the unit back", self.service.read_unit)
            if on_host != new_text:
                self._advance(ApplyState.WRITE_FAILED, f"the connection dropped before the unit was written ({exc})")
                self._fail(f"could not write the unit: {exc}; the old unit is unchanged")
                return False
            backup = None  # written, but the backup's name was lost with the connection: restore from memory
        except HostError as exc:
            self._advance(ApplyState.WRITE_FAILED, str(exc))
            self._fail(f"could not write the unit: {exc}; the old unit is unchanged")
            return False
        self.result.backup = backup
        self._advance(ApplyState.BACKED_UP, backup.path if backup else "backup name unknown (connection dropped)")
        self._advance(ApplyState.WRITTEN)
        return True

    async def _switch(self) -> _Written | None:
        """The switch to the new unit in one command (MaskedService.switch). None (state WRITE_FAILED) when the old
        unit is still in place; else the unit is written (BACKED_UP, WRITTEN) and how far the switch got."""
        new_text = self.plan.new_text
        try:
            switch: UnitSwitch | None = await self.service.switch(new_text)
        except Exception as exc:
            # How far it got is unknown (a dropped link, a timeout, sudo refusing): the write is atomic, so the unit
            # on the host says whether it happened. Written: daemon-reload and restart are run again (_switched).
            if not await self._new_unit_on_host(new_text):
                self._advance(ApplyState.WRITE_FAILED, str(exc))
                self._fail(f"could not write the unit: {exc}; the old unit is unchanged")
                return None
            switch = None
        if switch is not None and not switch.written:
            what = "read the service state" if switch.failed == "state" else "write the unit"
            self._advance(ApplyState.WRITE_FAILED, switch.error)
            self._fail(f"could not {what}: {switch.error}; the old unit is unchanged")
            return None
        backup = switch.backup if switch is not None else None
        self.result.backup = backup
        self._advance(ApplyState.BACKED_UP, backup.path if backup else "backup name unknown (connection dropped)")
        self._advance(ApplyState.WRITTEN)
        return _Written(switch)

    async def _new_unit_on_host(self, new_text: str) -> bool:
        """Whether the unit on the host is the new one; True when it cannot be read (not known to be the old one:
        the apply goes on, and fails into its rollback if the host stays out of reach)."""
        try:
            return await self._retrying("read the unit back", self.service.read_unit) == new_text
        except HostError:
            return True

    async def _switched(self, switch: UnitSwitch | None) -> tuple[ServiceState, str | None]:
        """After a switch that wrote the unit: the state and journal cursor from before the restart, once the
        service was restarted with the new unit. A failed daemon-reload fails the apply (it is rolled back); where
        the connection dropped (switch None: how far it got is unknown) the rest is done as separate steps, and a
        failed restart is judged as _restart judges it."""
        if switch is not None and switch.failed == "daemon-reload":
            raise HostError(f"{self.session.label}: `systemctl daemon-reload` failed: {switch.error}")
        if switch is None or switch.before is None:
            now, cursor = await asyncio.gather(
                self._retrying("read the service state", self.service.state), self._journal_cursor()
            )
            self._check_abort()
            await self._retrying("daemon-reload", self.service.daemon_reload)
            self._advance(ApplyState.DAEMON_RELOADED)
            self._check_abort()
            self._advance(ApplyState.RESTARTING)
            await self._restart(now)
            return now, cursor
        before = switch.before
        self._advance(ApplyState.DAEMON_RELOADED)
        self._advance(ApplyState.RESTARTING)
        if switch.failed == "restart":
            # systemctl restart also fails when the start job fails: then a new process was tried and the watch
            # explains it. If nothing changed at all, the restart itself was refused.
            self._emit(Notice(self.session.secrets.text(f"restart reported: {switch.error}")))
            now = await self._retrying("read the service state", self.service.state)
            if not is_new_start(before, now) and now.active_state not in ("failed", "activating"):
                raise HostError(f"{self.session.label}: `systemctl restart {self.service.unit}` failed: {switch.error}")
        return before, switch.cursor

    async def _restart(self, before: ServiceState) -> None:
        """Restart; after a dropped connection, find out whether it happened before restarting again."""
        if self._restart_at is None:  # a restart asked again after a dropped link is still the same restart
            self._restart_at = _now()
        try:
            await self.service.restart()
        except ConnectionDropped:
            now = await self._retrying("read the service state", self.service.state)
            if not is_new_start(before, now):
                await self._retrying("restart", self.service.restart)
        except HostError as exc:
            # systemctl restart also fails when the start job fails: then a new process was tried and the
            # watch explains it. If nothing changed at all, the restart itself was refused.
            self._emit(Notice(self.session.secrets.text(f"restart reported: {exc}")))
            now = await self._retrying("read the service state", self.service.state)
            if not is_new_start(before, now) and now.active_state not in ("failed", "activating"):
                raise

    async def _watch_start(
        self, cursor: str | None, before: ServiceState, *, timeout_s: float | None = None, start: StartKind = "new"
    ) -> StartWatch:
        """Follow the journal and poll state and /health until healthy, failed, aborted or out of time."""
        plan = self.plan
        tracker = PhaseTracker.for_start(speculative=plan.speculative, cuda_graph=plan.cuda_graph)
        watch = StartWatch(healthy=False, tracker=tracker)
        seen: set[str] = set()
        old_process = OldProcessLines(before.main_pid)  # its stop (SGLang 0.5.17: killed by its own SIGKILL)

        def take(entry: JournalEntry) -> None:
            if entry.cursor in seen:
                return
            seen.add(entry.cursor)
            self._emit(LogLine(entry, start))
            if old_process.is_old(entry.message, entry.pid):
                return  # shown, but the old process's stop says nothing about the new start
            for event in tracker.feed(entry.message, entry.timestamp):
                self._emit_phase(event, tracker, start)

        follower = asyncio.create_task(self._follow_journal(cursor, take))
        crashed = False  # also read in `finally` when the watch is interrupted
        try:
            watch.healthy, watch.reason, crashed = await self._poll_until_healthy(
                before, timeout_s or self.timeout_s, abortable=start == "new"
            )
        finally:
            if not watch.healthy:
                # A crash is explained by lines journald may not have handed over yet: wait for them a little.
                await self._settle_journal(cursor, take, tracker, JOURNAL_SETTLE_S if crashed else 0.0)
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, HostError):
                await follower
        if watch.healthy:
            ready = _now()
            tracker.mark_ready(ready)
            self._record_start(tracker, ready, start)
        self._restart_at = None
        return watch

    def _record_start(self, tracker: PhaseTracker, ready: datetime, start: StartKind) -> None:
        """Keep what this start cost in the workspace (console/core/apply/restarts.py): every path that restarts a
        unit comes through here, once per start that reached ready."""
        workspace = self.session.workspace
        if self._restart_at is None or workspace is None:
            return
        plan = self.plan
        report = plan.old_report if start == "rollback" else plan.report
        kind: RestartKind = "rollback" if start == "rollback" else "restart" if self.restart_only else "apply"
        info = self._ready_info or {}
        record = restart_record(
            host=self.session.label,
            unit=self.service.unit,
            began=self._restart_at,
            ready=ready,
            startup_time=info.get("startup_time"),
            journal_phases=tracker.phases,
            sglang_version=str(info.get("version") or plan.sglang_version),
            setup=SpecSetup.from_server_args(report.resolved, report.spec_mode).name(),
            start=kind,
            options=start_options(report.resolved, plan.old_text if start == "rollback" else plan.new_text,
                                  plan.sglang_version),
        )  # fmt: skip
        if start == "rollback":
            self.result.rollback_restart = record
        else:
            self.result.restart = record
        try:
            append_restart(workspace.logs, record)
        except OSError as exc:  # the restart itself went well: say the figure was not kept, go on
            self._emit(Notice(f"this restart's cost was not kept in {workspace.logs}: {exc}"))

    async def _poll_until_healthy(
        self, before: ServiceState, timeout_s: float, *, abortable: bool
    ) -> tuple[bool, str, bool]:
        """(healthy, why not, crashed). Healthy counts only for a process started after `before` (the old one
        may answer until it stops). An abort request ends the watch (the caller rolls back)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        baseline: int | None = None
        last_state = "unknown"
        seen_running = False
        grace_until = loop.time() + INACTIVE_GRACE_S
        self._ready_info = None
        new_process_active = False
        while loop.time() < deadline:
            if abortable and self.abort_requested:
                return False, self._abort_reason or INTERRUPTED, False
            # The state and /health are read together (one round trip per poll); /health counts only for a new
            # process in state active. Once that process is active, /server_info is asked beside /health: read by
            # the same server that answers ready, it is what the verification reads, without a round trip more.
            info_read = self._server_info_once() if new_process_active else _nothing()
            state_read, healthy, info = await asyncio.gather(
                self.service.state(), self._healthy(), info_read, return_exceptions=True
            )
            state: ServiceState | None = None
            if isinstance(state_read, BaseException):
                if not isinstance(state_read, Exception):
                    raise state_read
                # a dropped connection being re-established: keep watching until the deadline
                self._emit(Reconnecting("watch the start", self.session.secrets.text(str(state_read))))
                last_state = f"unknown ({state_read})"
            else:
                state = state_read
            if state is not None:
                last_state = f"{state.active_state}/{state.sub_state}"
                if baseline is None:
                    baseline = state.n_restarts
                seen_running = seen_running or state.running or loop.time() > grace_until
                failure = start_failure(state, baseline, seen_running=seen_running, before=before)
                if failure:
                    return False, failure, True
                new_process_active = state.active_state == "active" and is_new_start(before, state)
                if new_process_active and healthy is True:
                    self._ready_info = info if isinstance(info, dict) else None
                    return True, "", False
            await self._pause(POLL_INTERVAL_S) if abortable else await asyncio.sleep(POLL_INTERVAL_S)
        return False, f"not healthy within {timeout_s:g} s (service {last_state})", False

    async def _healthy(self) -> bool:
        try:
            client = await self.session.sglang()
            # SGLang's /health runs a real generation and may hang while the server is busy: bound each probe.
            async with asyncio.timeout(HEALTH_PROBE_TIMEOUT_S):
                return await client.healthy()
        except Exception:  # connection refused while uvicorn is not up yet, a forward being rebuilt, ...
            return False

    async def _server_info_once(self) -> dict[str, Any] | None:
        """One /server_info, None when it is not answered (the server is not listening yet, a forward rebuilt)."""
        try:
            client = await self.session.sglang()
            async with asyncio.timeout(HEALTH_PROBE_TIMEOUT_S):
                return await client.server_info()
        except Exception:
            return None

    async def _follow_journal(self, cursor: str | None, take: Callable[[JournalEntry], None]) -> None:
        after = cursor
        while True:
            try:
                async for entry in self.service.journal(
                    lines=0 if after is None else 1000, follow=True, after_cursor=after
                ):
                    after = entry.cursor
                    take(entry)
                return
            except ConnectionDropped:
                await asyncio.sleep(POLL_INTERVAL_S)  # the transport reconnects; resume from the last cursor
            except Exception as exc:  # phases are a nicety: the start is judged by state and /health
                self._emit(Notice(self.session.secrets.text(f"stopped following the journal: {exc}")))
                return

    async def _settle_journal(
        self, cursor: str | None, take: Callable[[JournalEntry], None], tracker: PhaseTracker, wait_s: float
    ) -> None:
        """A start failed: read the journal's backlog until it explains why (or briefly, if it never does)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        after = cursor  # the first read catches up on the whole start, later ones only on what came since
        while True:
            with contextlib.suppress(Exception):
                async for entry in self.service.journal(lines=1000, after_cursor=after):
                    after = entry.cursor
                    take(entry)
            if tracker.failed or loop.time() >= deadline:
                return
            await asyncio.sleep(POLL_INTERVAL_S)

    def _emit_phase(self, event: PhaseEvent, tracker: PhaseTracker, start: StartKind) -> None:
        phases = tuple(dataclasses.replace(p) for p in tracker.phases)
        self._emit(
            PhaseChanged(event.kind, event.phase, event.at, event.line, tracker.progress, phases, start)  # type: ignore[arg-type]
        )

    async def _verify(self, *, everything: bool = False) -> None:
        info, self._ready_info = self._ready_info, None
        try:
            info = info or await self._server_info()
        except Exception as exc:
            self._advance(ApplyState.MISMATCH, self._fail(f"healthy, but /server_info could not be read: {exc}"))
            return
        verification = verify_resolved(self.plan.expectations(everything=everything), info)
        self.result.verification = verification
        if verification.ok:
            self._advance(ApplyState.VERIFIED)
            return
        wrong = ", ".join(f"{v.dest}={v.actual!r} (expected {v.expected!r})" for v in verification.mismatches)
        self._advance(ApplyState.MISMATCH, self._fail(f"the server runs the new unit but resolved {wrong}"))

    async def _server_info(self) -> dict[str, Any]:
        """/server_info, retried for a while: the port forward may be being rebuilt after a reconnect."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SERVER_INFO_GRACE_S
        while True:
            try:
                client = await self.session.sglang()
                async with asyncio.timeout(HEALTH_PROBE_TIMEOUT_S):
                    return await client.server_info()
            except Exception:
                if loop.time() >= deadline:
                    raise
            await asyncio.sleep(POLL_INTERVAL_S)

    async def _roll_back(self) -> None:
        self._advance(ApplyState.ROLLING_BACK)
        try:
            before = await self._retrying("read the service state", self.service.state)
            cursor = await self._journal_cursor()
            backup = self.result.backup
            if backup is not None:
                await self._retrying("restore the unit", lambda: self.service.restore_unit(backup))
            else:
                await self._retrying("restore the unit", lambda: self.service.write_unit(self.plan.old_text))
            await self._retrying("daemon-reload", self.service.daemon_reload)
            self._restart_at = None  # the old unit's start is a restart of its own (the new one's may not have ended)
            await self._restart(before)
        except HostError as exc:
            self._advance(ApplyState.ROLLBACK_FAILED, f"could not restore the old unit: {exc}")
            return
        self._advance(ApplyState.RESTORED)
        watch = await self._watch_start(
            cursor, before, timeout_s=self.timeout_s * ROLLBACK_TIMEOUT_FACTOR, start="rollback"
        )
        self.result.rollback = watch
        if watch.healthy:
            self._advance(ApplyState.HEALTHY_ON_OLD)
        else:
            self._advance(ApplyState.ROLLBACK_FAILED, f"the old unit did not come back: {watch.reason}")


async def _nothing() -> None:
    return None


@dataclass(frozen=True)
class _Written:
    """The new unit is on the host after a switch (Applier._switch); `switch` says how far it got, None where the
    connection dropped under it (the unit was read back: written; whether it was reloaded and restarted is unknown)."""

    switch: UnitSwitch | None


class _Aborted(Exception):
    """The operator asked to abort while the new unit was on its way: roll back."""


# --- the application API -------------------------------------------------------------------------------


def lock_owner(user: str, host: str, pid: int, at: datetime, *, verb: str = hints.verb("apply")) -> str:
    """What the unit's lock records about its holder, for the operator whose apply it refuses."""
    return f"{user}@{host} ({verb}, pid {pid}) since {at.strftime('%Y-%m-%d %H:%M:%S %Z')}".strip()


def default_owner(verb: str = hints.verb("apply")) -> str:
    """user@machine (verb, pid N) since TIME: what the unit's lock tells whoever it refuses."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no $USER: still say which machine and process
        user = f"uid {os.getuid()}"
    return lock_owner(user, socket.gethostname(), os.getpid(), _now(), verb=verb)


def flag_kinds(version: str) -> Callable[[str], FlagKind | None]:
    """How that SGLang version's flags take values (for parse_edits): bool, list, or one value."""
    from console.sglang.flags import flag_table

    table = flag_table(version)

    def kind(flag: str) -> FlagKind | None:
        spec = table.lookup(flag)
        if spec is None:
            return None
        return "bool" if spec.is_boolean else "list" if spec.is_list else "value"

    return kind


class PendingApply:
    """A planned apply (or restart) that holds the unit's lock until it is executed or aborted.

        async with await plan_apply(session, edits) as pending:
            if confirmed: result = await pending.execute(on_event=...)
            else: result = await pending.abort("not confirmed; nothing was changed")

    Leaving the block without either aborts (nothing changed) and releases the lock."""

    def __init__(
        self,
        session: Session,
        plan: Plan,
        lock: AsyncExitStack,
        *,
        timeout_s: float,
        restart_only: bool = False,
        restart_cost: RestartCost | None = None,
    ) -> None:
        self.session = session
        self.plan = plan
        self.restart_only = restart_only
        self._lock = lock
        self._applier = Applier(session, plan, timeout_s=timeout_s, restart_only=restart_only)
        self._applier.result.restart_cost = restart_cost

    @property
    def restart_cost(self) -> RestartCost | None:
        """What a restart of this host costs, by its recent ones (None: none recorded and the server says nothing),
        for the confirmation to say before it starts (console/core/apply/restarts.py)."""
        return self._applier.result.restart_cost

    @property
    def needs_confirmation(self) -> bool:
        """False when execute() would change nothing (refused by the rules, or nothing to change)."""
        return self.restart_only or (self.plan.ok and self.plan.changed)

    @property
    def result(self) -> ApplyResult:
        return self._applier.result

    def request_abort(self, why: str = INTERRUPTED) -> None:
        """Abort from another task while execute() runs (Ctrl-C, Esc): it rolls back at its next step."""
        self._applier.request_abort(why)

    async def execute(self, on_event: EventSink[ApplyEvent] = ignore) -> ApplyResult:
        self._applier._emit = on_event
        try:
            return await self._applier.execute()
        finally:
            await self._lock.aclose()

    async def abort(self, why: str = "not confirmed; nothing was changed") -> ApplyResult:
        try:
            if not self._applier.refuse_or_skip():
                self._applier.abort(why)
            return self._applier.result
        finally:
            await self._lock.aclose()

    async def __aenter__(self) -> PendingApply:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._applier.result.rollout.finished:
            await self.abort("the apply was left without being executed; nothing was changed")
        await self._lock.aclose()


def _console_warnings(session: Session, plan: Plan) -> list[str]:
    """What the rules cannot know: a new API key locks out every client that does not send it, and the console
    itself where its profile names another key (without one it follows the unit's --api-key)."""
    new_key = plan.report.resolved.get("api_key")
    old_key = plan.old_report.resolved.get("api_key")
    if not new_key or new_key == old_key:
        return []
    profile = session.target.profile_path
    where = f"api_key_env in {profile}" if profile else "a profile with api_key_env for this host"
    if not session.has_api_key:
        return [
            f"the new unit sets --api-key: after the restart {session.label}'s server answers 401 to every client "
            "that does not send it; this console takes it from the unit (no api_key_env names a key), other clients "
            "need it too"
        ]
    if new_key != session.profile_api_key:
        return [
            f"the new unit's --api-key differs from the key this console sends to {session.label}: after the "
            f"restart the server answers 401; put the new key in the variable named by {where} first"
        ]
    return []


# The weight-cache daemon's sockets on the host: the unit's --weight-cache-socket, else SGLang's default template
# (/tmp/sglang_weight_cache_{device_uuid}.sock, one per GPU: SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE, environ.py:2174).
_SOCKETS_SCRIPT = (
    'if [ -n "$1" ]; then [ -S "$1" ] && echo "$1"; '
    'else for s in /tmp/sglang_weight_cache_*.sock; do [ -S "$s" ] && echo "$s"; done; fi; true'
)


async def _weight_cache_warnings(session: Session, plan: Plan) -> list[str]:
    """What the rules cannot see of `--weight-cache-mode client`: whether a daemon's socket is there on the host.
    Without one SGLang loads the weights from disk and says so in a warning line only (weight_cache/ipc_loader.py:
    50-66): the restart would be no faster than before."""
    resolved = plan.report.resolved
    if resolved.get("weight_cache_mode") != "client" or not plan.ok:
        return []
    path = str(resolved.get("weight_cache_socket") or "")
    try:
        done = await session.host.transport.run(["sh", "-c", _SOCKETS_SCRIPT, "sh", path], timeout=30)
    except HostError:
        return []  # unknown: the start will say
    if done.stdout.strip():
        return []
    where = path or "/tmp/sglang_weight_cache_<GPU UUID>.sock"
    return [
        f"no weight-cache daemon's socket at {where} on {session.label}: SGLang loads the weights from disk, so the "
        "restart is no faster. Start the daemon there first (python -m sglang.srt.weight_cache.daemon --model-path "
        "MODEL --tp-size N, as a service of its own)"
    ]


async def _take_lock(session: Session, owner: str) -> AsyncExitStack:
    """The unit's lock; UnitLocked when another console holds it (a lock this very process let go of a moment ago,
    its release still on its way to the host, is waited for: console.core.session's MaskedService.lock)."""
    stack = AsyncExitStack()
    await stack.enter_async_context(session.service.lock(owner))
    return stack


# The same lock for the other operations that change the unit (freeze): one holder per unit, whatever it does.
take_unit_lock = _take_lock


def edits_by_version(
    sets: Sequence[str], unsets: Sequence[str] = (), envs: Sequence[str] = (), unset_envs: Sequence[str] = ()
) -> Callable[[str], EditRequest]:
    """`--set`/`--unset`/`--env`/`--unset-env` as plan_apply takes them: parsed once the version is known (the
    syntax can be checked before: parse_edits without flag kinds)."""
    return lambda version: parse_edits(sets, unsets, envs, unset_envs, flag_kind=flag_kinds(version))


async def _planned(
    session: Session,
    edits: Edits,
    *,
    timeout_s: float,
    owner: str,
    restart_only: bool,
    lock_held: bool = False,
    unit_text: str | None = None,
) -> PendingApply:
    from console.core.deployment import refuse_member_change
    from console.sglang.rules import Finding

    if session.workspace is not None:  # one member of a deployment is changed with the deployment, never alone
        refuse_member_change(session.target, session.workspace.profiles, "a restart" if restart_only else "a change")
    # The version (an HTTP read) and the lock (a channel on the host) go out together: one round trip, not two.
    # lock_held: the caller holds the unit's lock for longer than this apply (a tune holds it for all its trials).
    version_read = asyncio.ensure_future(session.sglang_version())
    try:
        stack = AsyncExitStack() if lock_held else await _take_lock(session, owner)
    except BaseException:
        version_read.cancel()
        raise
    try:
        version, source = await version_read
        current = await session.service.read_unit()
        plan = plan_for_version(
            current,
            edits(version) if callable(edits) else edits,
            unit_name=session.service.unit,
            version=version,
            version_source=source,
            replacement=unit_text,
        )
        cost = known_restart_cost(session)
        warnings = [Finding("console-api-key", m, ("--api-key",)) for m in _console_warnings(session, plan)]
        warnings += [
            Finding("weight-cache-no-daemon", m, ("--weight-cache-mode",))
            for m in await _weight_cache_warnings(session, plan)
        ]
        session.secrets.learn(secrets_in_unit(plan.new_text))  # the edit's own keys, before anything shows it
        plan = mask_plan(plan, session.secrets)
        plan.report.warnings.extend(warnings)
    except BaseException:
        await stack.aclose()
        raise
    return PendingApply(session, plan, stack, timeout_s=timeout_s, restart_only=restart_only, restart_cost=cost)


def known_restart_cost(session: Session) -> RestartCost | None:
    """What a restart of the session's host costs: the median of its recent restarts kept in the workspace, else the
    running server's own account of its last start (0.5.23's startup_time, as last read), else None."""
    # getattr: a session made for a screen's own tests (no workspace, no server read) is asked the same
    workspace = getattr(session, "workspace", None)
    try:
        cost = host_restart_cost(workspace.logs if workspace else None, session.label, session.service.unit)
    except OSError:  # an unreadable workspace file: the restart goes on, its cost unsaid
        cost = None
    if cost is None:
        info = getattr(session, "last_server_info", None) or {}
        cost = cost_from_server(session.label, info.get("startup_time"))
    return cost


async def plan_apply(
    session: Session,
    edits: Edits,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    owner: str | None = None,
    lock_held: bool = False,
    unit_text: str | None = None,
) -> PendingApply:
    """Take the unit's lock (UnitLocked if another holds it), read the unit and the SGLang version, apply the
    edits through the unit model and check them with that version's rules. Asks nothing, changes nothing.
    `edits` may be a function of the version (edits_by_version): the version is read once, beside the lock.

    lock_held: the caller already holds the unit's lock (ServiceManager.lock) and keeps it past this apply;
    none is taken or released here. unit_text: write this whole unit text instead of editing the current one
    (edits are then ignored); it is checked with the rules the same way.
    Raises UnitError (the unit cannot be read as an SGLang unit) and HostError, with the lock released."""
    return await _planned(
        session,
        edits,
        timeout_s=timeout_s,
        owner=owner or default_owner(),
        restart_only=False,
        lock_held=lock_held,
        unit_text=unit_text,
    )


async def plan_restart(
    session: Session, *, timeout_s: float = DEFAULT_TIMEOUT_S, owner: str | None = None, lock_held: bool = False
) -> PendingApply:
    """The same for a restart without edits: execute() restarts the unit as it is, watches the phases, waits
    for health and checks that the server resolved what the rules predict. Nothing is written, so a failed
    start is reported (RESTART_FAILED, with the journal lines that explain it), not rolled back."""
    return await _planned(
        session,
        EditRequest(),
        timeout_s=timeout_s,
        owner=owner or default_owner(hints.verb("restart")),
        restart_only=True,
        lock_held=lock_held,
    )
