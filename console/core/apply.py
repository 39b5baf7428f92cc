"""`opsconsole apply TARGET --set FLAG=VALUE ...`: validated unit edits, restart, verification, rollback.

The pure parts live in console/core/rollout.py (edits, plan, verification, judging a start from the service
state, state machine) and
console/core/phases.py (startup phases from the journal). This module talks to the host through the
ServiceManager protocol (systemd over SSH, or the demo's supervisor) and to SGLang through a `ServerProbe`,
so the same orchestration runs on a GPU host, on the nspawn testbed and on the demo host.

Order of operations (anchors.md D3): back up + write the unit atomically, daemon-reload, restart, follow the
journal for startup phases while polling the service state and /health, then read /server_info and verify.
A start that fails (ActiveState failed, the unit restarting in a loop, the process gone) or is not healthy
within --timeout is rolled back: restore the backup, daemon-reload, restart, wait for health.
A dropped SSH connection (ConnectionDropped) is survived: the transport reconnects, reads are retried, and a
write whose outcome is unknown is settled by reading the unit back (write_unit is atomic: old or new, never half).
Ctrl-C while the new unit starts rolls back too.
The whole apply, from reading the unit to the end of verification or rollback, holds the unit's lock on the
host (ServiceManager.lock): a second apply on the same unit is refused at once, naming the holder.

`--json` prints exactly one object (exit 0 = verified or nothing to change, 1 = refused / failed / rolled back):

    ok               true when the new unit runs and /server_info shows what the rules predicted
    target, unit     the host as named on the command line, and the unit that was edited
    state            final state: verified | unchanged | refused | aborted | write_failed | mismatch |
                     healthy_on_old (rolled back, old unit healthy) | rollback_failed | error (host unreachable) |
                     locked (another apply holds the unit's lock; nothing was read or changed)
    changed          whether the edit changes the unit text at all
    sglang_version   the version the rules checked against; version_source: server | profile | newest
    diff             unified diff of the unit (old -> new)
    report           the rules' report for the new unit, in `check-args --json` shape
    backup           path of the unit backup on the host (null when nothing was written)
    history          [{state, at, detail}] every step with its UTC time
    phases           [{name, label, state, started_at, ended_at, duration_s, progress}] of the new unit's start:
                     load_weights, kv_cache, cuda_graph, draft_cuda_graph, draft_extend_cuda_graph, warmup
    verified         {ok, values: {DEST: {requested, expected, actual, status, reason}}} with status
                     as_requested | adjusted (SGLang changed it silently, as predicted) | mismatch | not_reported
    rolled_back      whether the old unit was put back; rollback_phases: the old unit's start
    error            why it failed (with the exception line from the journal), else null
    journal_excerpt  the journal lines that explain a failure (traceback, exception, systemd exit lines)
    rollback_journal_excerpt  the same for the old unit's start, when the rollback did not come up
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar

from console.core.exits import OldProcessLines
from console.core.phases import PhaseEvent, PhaseTracker, exception_line
from console.core.rollout import (
    ApplyState,
    EditError,
    EditRequest,
    FlagKind,
    Plan,
    Rollout,
    Verification,
    VersionSource,
    build_plan,
    choose_version,
    is_new_start,
    lock_owner,
    parse_edits,
    start_failure,
    verify_resolved,
)
from console.host.base import (
    ConnectionDropped,
    HostError,
    JournalEntry,
    ServiceManager,
    ServiceState,
    UnitBackup,
    UnitLocked,
)
from console.secrets import RedactingWriter, secret_values

if TYPE_CHECKING:
    from console.workspace import Workspace

T = TypeVar("T")

EventSink = Callable[[str, dict[str, Any]], None]

# Between polls of systemd state and /health while a start is in progress. The client notices /health
# turning 200 well within 0.5 s (issue 4).
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


class ServerProbe(Protocol):
    """The SGLang HTTP API as apply needs it (console.sglang.client through the host's port forward)."""

    async def healthy(self) -> bool: ...

    async def server_info(self) -> dict[str, Any]: ...


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
    rollout: Rollout
    plan: Plan
    target: str
    unit: str
    backup: UnitBackup | None = None
    start: StartWatch | None = None
    rollback: StartWatch | None = None
    verification: Verification | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.rollout.ok

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
        }


def _phases_json(watch: StartWatch | None) -> list[dict[str, object]]:
    if watch is None or watch.tracker is None:
        return []
    return [p.to_json() for p in watch.tracker.phases]


class Applier:
    """Carries one validated plan through write, restart, watch, verify — and rollback when the start fails."""

    def __init__(
        self,
        service: ServiceManager,
        probe: ServerProbe,
        plan: Plan,
        *,
        target: str,
        timeout_s: float,
        on_event: EventSink | None = None,
    ) -> None:
        self.service = service
        self.probe = probe
        self.plan = plan
        self.timeout_s = timeout_s
        self._emit: EventSink = on_event or (lambda _kind, _data: None)
        self.result = ApplyResult(Rollout.start(_now()), plan, target, service.unit)

    def _advance(self, state: ApplyState, detail: str = "") -> None:
        transition = self.result.rollout.advance(state, _now(), detail)
        self._emit("state", {"state": state.value, "detail": detail, "at": transition.at.isoformat()})

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
                self._emit("reconnecting", {"operation": what, "error": str(exc)})
                await asyncio.sleep(delay)  # backoff between reconnect attempts, not a wait for a condition
                delay = min(delay * 2, 2.0)

    def refuse_or_skip(self) -> bool:
        """Record why nothing will be done, if so. True when the apply stops here."""
        if not self.plan.ok:
            self._advance(ApplyState.REFUSED, "the version rules report errors; the unit was not touched")
            self.result.error = "; ".join(e.message for e in self.plan.report.errors)
            return True
        if not self.plan.changed:
            self._advance(ApplyState.UNCHANGED, "the unit already has these settings; nothing to do")
            return True
        return False

    def abort(self, why: str) -> ApplyResult:
        self._advance(ApplyState.ABORTED, why)
        self.result.error = why
        return self.result

    async def execute(self) -> ApplyResult:
        if self.refuse_or_skip():
            return self.result
        before = await self._retrying("read the service state", self.service.state)
        cursor = await self._journal_cursor()
        # The write runs to its end even through Ctrl-C: only then is it known whether the unit changed.
        write = asyncio.ensure_future(self._write())
        interrupted = False
        try:
            written = await asyncio.shield(write)
        except asyncio.CancelledError:
            self._uncancel()
            interrupted = True
            written = await write
        if not written:
            return self.result
        # From here on the new unit is on the host: every way out either verifies it or rolls it back.
        try:
            if interrupted:
                raise asyncio.CancelledError
            await self._retrying("daemon-reload", self.service.daemon_reload)
            self._advance(ApplyState.DAEMON_RELOADED)
            self._advance(ApplyState.RESTARTING)
            await self._restart(before)
            self._advance(ApplyState.STARTING)
            watch = await self._watch_start(cursor, before)
            self.result.start = watch
            if watch.healthy:
                self._advance(ApplyState.HEALTHY)
                await self._verify()
                return self.result
            cause = exception_line(watch.tracker.failure_lines) if watch.tracker else None
            failure = f"{watch.reason}: {cause}" if cause else watch.reason
        except HostError as exc:
            failure = str(exc)
        except Exception as exc:  # a bug or an unforeseen error must not leave an unverified unit behind
            failure = f"unexpected error: {type(exc).__name__}: {exc}"
        except asyncio.CancelledError:
            # Ctrl-C while the new unit starts: the operator gave up on it, so the last good unit goes back.
            if not interrupted:
                self._uncancel()
            failure = "interrupted before the new unit was verified"
            self._emit("warning", {"message": "interrupted: rolling back to the previous unit (Ctrl-C again abandons)"})
        self.result.error = failure
        self._advance(ApplyState.FAILED, failure)
        await self._roll_back()
        return self.result

    @staticmethod
    def _uncancel() -> None:
        """Take back a Ctrl-C's cancellation so the rollback's own waits work normally."""
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
            backup = await self.service.write_unit(new_text)
        except ConnectionDropped as exc:
            # The write may or may not have happened; it is atomic, so the unit is either old or new.
            on_host = await self._retrying("read the unit back", self.service.read_unit)
            if on_host != new_text:
                self._advance(ApplyState.WRITE_FAILED, f"the connection dropped before the unit was written ({exc})")
                self.result.error = f"could not write the unit: {exc}; the old unit is unchanged"
                return False
            backup = None  # written, but the backup's name was lost with the connection: restore from memory
        except HostError as exc:
            self._advance(ApplyState.WRITE_FAILED, str(exc))
            self.result.error = f"could not write the unit: {exc}; the old unit is unchanged"
            return False
        self.result.backup = backup
        self._advance(ApplyState.BACKED_UP, backup.path if backup else "backup name unknown (connection dropped)")
        self._advance(ApplyState.WRITTEN)
        return True

    async def _restart(self, before: ServiceState) -> None:
        """Restart; after a dropped connection, find out whether it happened before restarting again."""
        try:
            await self.service.restart()
        except ConnectionDropped:
            now = await self._retrying("read the service state", self.service.state)
            if not is_new_start(before, now):
                await self._retrying("restart", self.service.restart)
        except HostError as exc:
            # systemctl restart also fails when the start job fails: then a new process was tried and the
            # watch explains it. If nothing changed at all, the restart itself was refused.
            self._emit("warning", {"message": f"restart reported: {exc}"})
            now = await self._retrying("read the service state", self.service.state)
            if not is_new_start(before, now) and now.active_state not in ("failed", "activating"):
                raise

    async def _watch_start(
        self, cursor: str | None, before: ServiceState, *, timeout_s: float | None = None
    ) -> StartWatch:
        """Follow the journal and poll state and /health until healthy, failed, or out of time."""
        plan = self.plan
        tracker = PhaseTracker.for_start(speculative=plan.speculative, cuda_graph=plan.cuda_graph)
        watch = StartWatch(healthy=False, tracker=tracker)
        seen: set[str] = set()
        old_process = OldProcessLines(before.main_pid)  # its stop (SGLang 0.5.17: killed by its own SIGKILL)

        def take(entry: JournalEntry) -> None:
            if entry.cursor in seen:
                return
            seen.add(entry.cursor)
            if old_process.is_old(entry.message, entry.pid):
                return
            for event in tracker.feed(entry.message, entry.timestamp):
                self._emit_phase(event, tracker)

        follower = asyncio.create_task(self._follow_journal(cursor, take))
        crashed = False  # also read in `finally` when Ctrl-C interrupts the poll
        try:
            watch.healthy, watch.reason, crashed = await self._poll_until_healthy(before, timeout_s or self.timeout_s)
        finally:
            if not watch.healthy:
                # A crash is explained by lines journald may not have handed over yet: wait for them a little.
                await self._settle_journal(cursor, take, tracker, JOURNAL_SETTLE_S if crashed else 0.0)
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, HostError):
                await follower
        if watch.healthy:
            tracker.mark_ready(_now())
        return watch

    async def _poll_until_healthy(self, before: ServiceState, timeout_s: float) -> tuple[bool, str, bool]:
        """(healthy, why not, crashed). Healthy counts only for a process started after `before` (the old one
        may answer until it stops)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        baseline: int | None = None
        last_state = "unknown"
        seen_running = False
        grace_until = loop.time() + INACTIVE_GRACE_S
        while loop.time() < deadline:
            try:
                state = await self.service.state()
            except Exception as exc:  # a dropped connection being re-established: keep watching until the deadline
                self._emit("reconnecting", {"operation": "watch the start", "error": str(exc)})
                last_state = f"unknown ({exc})"
                state = None
            if state is not None:
                last_state = f"{state.active_state}/{state.sub_state}"
                if baseline is None:
                    baseline = state.n_restarts
                seen_running = seen_running or state.running or loop.time() > grace_until
                failure = start_failure(state, baseline, seen_running=seen_running, before=before)
                if failure:
                    return False, failure, True
                if state.active_state == "active" and is_new_start(before, state) and await self._healthy():
                    return True, "", False
            await asyncio.sleep(POLL_INTERVAL_S)
        return False, f"not healthy within {timeout_s:g} s (service {last_state})", False

    async def _healthy(self) -> bool:
        try:
            # SGLang's /health runs a real generation and may hang while the server is busy: bound each probe.
            return await asyncio.wait_for(self.probe.healthy(), timeout=HEALTH_PROBE_TIMEOUT_S)
        except Exception:  # connection refused while uvicorn is not up yet, a forward being rebuilt, ...
            return False

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
                self._emit("warning", {"message": f"stopped following the journal: {exc}"})
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

    def _emit_phase(self, event: PhaseEvent, tracker: PhaseTracker) -> None:
        self._emit(
            "phase",
            {
                "kind": event.kind,
                "phase": event.phase,
                "at": event.at.isoformat(),
                "line": event.line,
                "progress": tracker.progress,
                "current": tracker.current.to_json() if tracker.current else None,
            },
        )

    async def _verify(self) -> None:
        try:
            info = await self._server_info()
        except Exception as exc:
            self.result.error = f"healthy, but /server_info could not be read: {exc}"
            self._advance(ApplyState.MISMATCH, self.result.error)
            return
        verification = verify_resolved(self.plan.expectations(), info)
        self.result.verification = verification
        if verification.ok:
            self._advance(ApplyState.VERIFIED)
            return
        wrong = ", ".join(f"{v.dest}={v.actual!r} (expected {v.expected!r})" for v in verification.mismatches)
        self.result.error = f"the server runs the new unit but resolved {wrong}"
        self._advance(ApplyState.MISMATCH, self.result.error)

    async def _server_info(self) -> dict[str, Any]:
        """/server_info, retried for a while: the port forward may be being rebuilt after a reconnect."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SERVER_INFO_GRACE_S
        while True:
            try:
                return await asyncio.wait_for(self.probe.server_info(), timeout=HEALTH_PROBE_TIMEOUT_S)
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
            await self._restart(before)
        except HostError as exc:
            self._advance(ApplyState.ROLLBACK_FAILED, f"could not restore the old unit: {exc}")
            return
        self._advance(ApplyState.RESTORED)
        watch = await self._watch_start(cursor, before, timeout_s=self.timeout_s * ROLLBACK_TIMEOUT_FACTOR)
        self.result.rollback = watch
        if watch.healthy:
            self._advance(ApplyState.HEALTHY_ON_OLD)
        else:
            self._advance(ApplyState.ROLLBACK_FAILED, f"the old unit did not come back: {watch.reason}")


def main_json(result: ApplyResult) -> str:
    return json.dumps(result.to_json(), default=str)


# --- the CLI verb ---------------------------------------------------------------------------------------

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Usage(Exception):
    """A usage error: exit 2 with the message."""


class HumanProgress:
    """Prints the apply's progress as lines a terminal (or a log) can follow."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._last_percent: dict[str, int] = {}

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        stamp = _now().strftime("%H:%M:%S")
        if kind == "state":
            detail = f": {data['detail']}" if data.get("detail") else ""
            self._print(f"[{stamp}] {data['state'].replace('_', ' ')}{detail}")
        elif kind == "phase":
            self._phase(stamp, data)
        elif kind == "reconnecting":
            self._print(f"[{stamp}] connection lost during {data['operation']}; reconnecting ({data['error']})")
        elif kind == "warning":
            self._print(f"[{stamp}] warning: {data['message']}")

    def _phase(self, stamp: str, data: dict[str, Any]) -> None:
        overall = round(100 * float(data.get("progress", 0.0)))
        current = data.get("current") or {}
        if data["kind"] == "started":
            self._print(f"[{stamp}]   {current.get('label', data['phase'])} ... ({overall}% of startup)")
        elif data["kind"] == "progress" and current:
            step = int(float(current.get("progress", 0.0)) * 4) * 25  # every 25 %: enough to see it move
            if step != self._last_percent.get(current["name"]):
                self._last_percent[current["name"]] = step
                self._print(f"[{stamp}]   {current['label']} {step}%")
        elif data["kind"] == "ready":
            self._print(f"[{stamp}]   ready: {data['line'].strip()}")
        elif data["kind"] == "failure":
            self._print(f"[{stamp}]   ! {data['line'].rstrip()}")

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)


@dataclass
class HostHandle:
    """What apply needs of a host: its service, a probe of its SGLang API, and how to let go of it."""

    label: str
    service: ServiceManager
    probe: ServerProbe
    close: Callable[[], Awaitable[None]]
    profile_sglang_version: str | None = None


def _profile_sglang_version(profile_path: Path | None) -> str | None:
    """`[sglang] sglang_version = "0.5.9"` in the profile: the version to check against when the server is down."""
    import tomllib

    if profile_path is None:
        return None
    try:
        data = tomllib.loads(profile_path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    section = data.get("sglang", {})
    value = section.get("sglang_version") if isinstance(section, dict) else None
    return value if isinstance(value, str) and value else None


async def _server_version(probe: ServerProbe) -> str | None:
    """The running server's version from /server_info, or None when it does not answer (it may be down)."""
    detect = getattr(probe, "detect_version", None)  # SglangClient: also picks that version's endpoints
    try:
        if detect is not None:
            version = await asyncio.wait_for(detect(), timeout=10.0)
        else:
            version = (await asyncio.wait_for(probe.server_info(), timeout=10.0)).get("version")
    except Exception:
        return None
    return str(version) if version else None


def _confirm(stdin: TextIO, stderr: TextIO, question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=stderr, flush=True)
    answer = stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


def render_plan(plan: Plan, out: TextIO) -> None:
    """The diff and the rule report, for a person."""
    report = plan.report
    source = {"server": "the running server", "profile": "the profile", "newest": "the newest supported"}
    print(f"SGLang {plan.sglang_version} (version from {source[plan.version_source]})", file=out)
    if plan.diff:
        print(plan.diff, end="", file=out)
    else:
        print("(the unit already has these settings)", file=out)
    for error in report.errors:
        print(f"error [{error.code}]: {error.message}", file=out)
    for warning in report.warnings:
        print(f"warning [{warning.code}]: {warning.message}", file=out)
    for adjustment in report.adjustments:
        print(
            f"adjusted by SGLang: {adjustment.flag} {adjustment.from_value!r} -> {adjustment.to_value!r} "
            f"({adjustment.reason})",
            file=out,
        )


def render_result(result: ApplyResult, out: TextIO) -> None:
    state = result.rollout.state
    if result.verification is not None:
        for value in result.verification.values:
            note = f" (adjusted by SGLang: {value.reason})" if value.status == "adjusted" and value.reason else ""
            print(f"  {value.dest} = {value.actual!r} [{value.status.replace('_', ' ')}]{note}", file=out)
    if result.ok:
        print(f"{result.target}: {state.value.replace('_', ' ')}", file=out)
        return
    print(f"{result.target}: apply failed ({state.value.replace('_', ' ')}): {result.error}", file=out)
    if result.rollout.rolled_back:
        outcome = "healthy on the old unit" if state is ApplyState.HEALTHY_ON_OLD else "NOT healthy"
        print(f"rolled back to the previous unit; the service is {outcome}", file=out)
    for title, excerpt in (
        ("journal lines that explain it:", result.journal_excerpt()),
        ("why the old unit did not come back:", result.journal_excerpt(rollback=True)),
    ):
        if excerpt:
            print(title, file=out)
            for line in excerpt:
                print(f"  {line}", file=out)


OpenHost = Callable[[argparse.Namespace, "Workspace"], Awaitable[HostHandle]]


def run(args: argparse.Namespace) -> int:
    """`opsconsole apply`: exit 0 applied and verified (or nothing to change), 1 refused/failed, 2 usage."""
    return run_cli(args, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr)


def run_cli(
    args: argparse.Namespace,
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    open_host: OpenHost | None = None,
) -> int:
    try:
        edits = parse_edits(args.set, args.unset, args.env, args.unset_env)  # syntax only; kinds come later
    except EditError as exc:
        print(f"opsconsole apply: {exc}", file=stderr)
        return EXIT_USAGE
    if edits.empty:
        print(
            "opsconsole apply: nothing to apply; give --set FLAG=VALUE, --unset FLAG, --env K=V or --unset-env K",
            file=stderr,
        )
        return EXIT_USAGE
    if not args.timeout > 0:
        print(f"opsconsole apply: --timeout must be a positive number of seconds, not {args.timeout}", file=stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(
            _apply(args, stdin=stdin, stdout=stdout, stderr=stderr, open_host=open_host or open_host_for)
        )
    except _Usage as exc:
        print(f"opsconsole apply: {exc}", file=stderr)
        return EXIT_USAGE


async def _apply(
    args: argparse.Namespace, *, stdin: TextIO, stdout: TextIO, stderr: TextIO, open_host: OpenHost
) -> int:
    from console.sglang.flags import NEWEST_VERSION, UnsupportedVersionError, flag_table
    from console.sglang.unit import UnitError
    from console.workspace import Workspace

    human = stderr if args.json else stdout
    try:
        host = await open_host(args, Workspace.resolve(args.workspace))
    except HostError as exc:
        return _early_failure(args, stdout, stderr, str(exc))
    try:
        version, source = choose_version(await _server_version(host.probe), host.profile_sglang_version, NEWEST_VERSION)
        try:
            table = flag_table(version)
        except UnsupportedVersionError as exc:
            return _early_failure(args, stdout, stderr, str(exc))

        def kind(flag: str) -> FlagKind | None:
            spec = table.lookup(flag)
            if spec is None:
                return None
            return "bool" if spec.is_boolean else "list" if spec.is_list else "value"

        try:
            edits = parse_edits(args.set, args.unset, args.env, args.unset_env, flag_kind=kind)
        except EditError as exc:
            raise _Usage(str(exc)) from exc
        # One apply per unit at a time, from reading the unit to the end of verification or rollback.
        async with host.service.lock(_lock_owner()):
            unit_text = await host.service.read_unit()
            try:
                plan = _plan(unit_text, edits, host.service.unit, version, source)
            except UnitError as exc:
                return _early_failure(args, stdout, stderr, f"{host.label}: {exc}; the unit was not touched")
            # From here on everything printed may quote the unit (diff, journal lines): mask its secrets.
            secrets = _unit_secrets(plan)
            stdout, stderr, human = (RedactingWriter(s, secrets) for s in (stdout, stderr, human))  # type: ignore[assignment]
            if not args.json:
                render_plan(plan, human)
            progress = None if args.json else HumanProgress(human)
            applier = Applier(
                host.service, host.probe, plan, target=host.label, timeout_s=args.timeout, on_event=progress
            )
            if not applier.refuse_or_skip() and not args.yes:
                if not _is_tty(stdin):
                    applier.abort("stdin is not a terminal, so apply cannot ask for confirmation; re-run with --yes")
                elif not _confirm(stdin, stderr, f"Write this unit to {host.label} and restart {host.service.unit}?"):
                    applier.abort("not confirmed; nothing was changed")
            result = applier.result if applier.result.rollout.finished else await applier.execute()
            if args.json:
                print(main_json(result), file=stdout)
            else:
                render_result(result, human)
            return result.rollout.exit_code
    except UnitLocked as exc:
        return _early_failure(args, stdout, stderr, str(exc), state="locked")
    except HostError as exc:
        return _early_failure(args, stdout, stderr, str(exc))
    finally:
        await host.close()


def _early_failure(
    args: argparse.Namespace, stdout: TextIO, stderr: TextIO, message: str, *, state: str = "error"
) -> int:
    """Nothing was changed: say why (with --json, still as the one JSON object)."""
    print(f"opsconsole apply: {message}", file=stderr)
    if args.json:
        doc = {"ok": False, "target": args.target, "state": state, "rolled_back": False, "error": message}
        print(json.dumps(doc), file=stdout)
    return EXIT_FAILED


def _plan(unit_text: str, edits: EditRequest, unit_name: str, version: str, source: VersionSource) -> Plan:
    from console.sglang.rules import check_launch
    from console.sglang.unit import UnitFile

    return build_plan(
        unit_text,
        edits,
        unit_name=unit_name,
        version=version,
        version_source=source,
        parse_unit=lambda text: UnitFile.parse(text, version),
        check=check_launch,
    )


def _unit_secrets(plan: Plan) -> set[str]:
    """Secret values (API keys, tokens) in the unit before and after the edit."""
    from console.sglang.unit import UnitFile

    found: set[str] = set()
    for text in (plan.old_text, plan.new_text):
        unit = UnitFile.parse(text, plan.sglang_version)
        found |= secret_values(unit.flags(), unit.environment())
    return found


def _lock_owner() -> str:
    import getpass
    import os
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no $USER: still say which machine and process
        user = f"uid {os.getuid()}"
    return lock_owner(user, socket.gethostname(), os.getpid(), _now())


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


async def open_host_for(args: argparse.Namespace, workspace: Workspace) -> HostHandle:
    """TARGET -> the host's service manager and SGLang client, through the host layer's session."""
    from console.host.connect import open_host
    from console.host.targets import resolve_target

    target = resolve_target(args.target, profiles_dir=workspace.profiles, ssh_config=args.ssh_config)
    session = await open_host(target, logs_dir=workspace.logs)
    try:
        client = await session.sglang()
    except BaseException:
        await session.close()
        raise
    return HostHandle(
        target.label, session.service, client, session.close, _profile_sglang_version(target.profile_path)
    )
