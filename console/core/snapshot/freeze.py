"""Freeze: the running setup becomes the host's production snapshot; and restore: a snapshot is brought back.

    pending = await plan_freeze(session, FreezeRequest("v2", note="steps 2 wins at C=32"))
    show(pending.plan.document, pending.plan.unit_diff, pending.plan.refusals)   # nothing written yet
    result = await pending.execute(on_event=...)    # or: await pending.abort("not confirmed")

    pending, notes = await plan_restore(session, snapshot)    # a PendingApply (console.core.apply)

plan_freeze takes the unit's lock (the same lock apply holds: no apply can change the unit while a freeze
reads and writes it) and reads the running truth: the unit as on disk, the main process's argv and environment,
/server_info, the GPUs and driver, who and where, the benchmark records of this setup in logs/ and the host's
previous production snapshot. The pure part (console/core/snapshot/freeze_plan.py) says whether the server runs what the
unit says (else the freeze is refused, unless forced with a reason) and builds the snapshot and its document.

execute writes, in this order: the document on the host (one atomic remote command, as the SSH user), the unit
(only when it lacks an [Install] WantedBy=, which enabling needs) with daemon-reload, `systemctl enable`; then
verifies: the unit on disk is the frozen text, is-enabled says enabled, /health answers 200, the document reads
back; and only then keeps the snapshot in profiles/snapshots/NAME.toml. Every value that reaches the remote shell
is an argv word (the transports quote them) checked before it goes: the snapshot name, the document's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import getpass
import os
import socket
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from console import __version__, hints
from console.core.apply import PendingApply, default_owner, plan_apply, take_unit_lock
from console.core.events import EventSink, Notice, ignore
from console.core.session import HostInputError, Session
from console.core.snapshot.freeze_plan import (
    DEFAULT_DOCUMENT,
    INSTALL_SECTION,
    Capture,
    FreezePlan,
    FreezeRequest,
    HostFacts,
    ProcessView,
    Refusal,
    build_freeze_plan,
    looks_like_argv,
    restore_edits,
    restored_matches,
)
from console.core.snapshot.model import Snapshot
from console.core.snapshot.store import production_snapshot, save_snapshot, snapshot_path
from console.errors import ExitCode
from console.host.base import HostError, ServiceState
from console.workspace import Workspace

HEALTH_TIMEOUT_S = 10.0
# Written as one `sh -c` so that the document appears whole or not at all: a temp file next to it, then a
# rename. As the SSH user: the document lives in their home (or wherever --doc says they may write).
_DOCUMENT_SCRIPT = (
    'set -e; if [ -d "$1" ]; then echo "$1 is a directory" >&2; exit 1; fi; '
    't=$(mktemp -- "$1.XXXXXX"); trap \'rm -f -- "$t"\' EXIT; cat > "$t"; chmod 644 -- "$t"; '
    'mv -f -- "$t" "$1"; trap - EXIT'
)
# Refusals that say the server is down: a freeze forced past them does not expect it healthy afterwards.
SERVER_DOWN = frozenset({"not-active", "unhealthy", "no-server-info"})
_FACTS_SCRIPT = 'uname -n; id -un; printf "%s\\n" "$HOME"'

FreezeState = Literal["planned", "frozen", "refused", "aborted", "failed", "locked", "error"]
FreezeStepName = Literal[
    "document_written", "unit_written", "daemon_reloaded", "enabled", "verified", "saved", "failed"
]


@dataclass(frozen=True)
class FreezeStep:
    """The freeze did one more thing on the host (or locally), with its UTC time."""

    step: FreezeStepName
    detail: str
    at: datetime

    def to_json(self) -> dict[str, str]:
        return {"step": self.step, "at": self.at.isoformat(), "detail": self.detail}


FreezeEvent = FreezeStep | Notice


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class FreezeResult:
    """Where a freeze ended; `to_json()` is `freeze --json`."""

    target: str
    unit: str
    name: str
    state: FreezeState = "planned"
    plan: FreezePlan | None = None
    history: list[FreezeStep] = field(default_factory=list)
    snapshot_path: str | None = None
    unit_file_state: str | None = None
    healthy: bool | None = None
    backup: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "frozen"

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.ok else ExitCode.FAILED

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        snapshot = plan.snapshot if plan else None
        return {
            "ok": self.ok,
            "target": self.target,
            "unit": self.unit,
            "name": self.name,
            "state": self.state,
            "refusals": [r.to_json() for r in plan.refusals] if plan else [],
            "forced": snapshot.forced.reason if snapshot and snapshot.forced else None,
            "document": plan.document_path if plan else None,
            "snapshot": self.snapshot_path,
            "unit_changed": plan.unit_changed if plan else False,
            "diff": plan.unit_diff if plan else "",
            "backup": self.backup,
            "unit_file_state": self.unit_file_state,
            "healthy": self.healthy,
            "sglang_version": snapshot.server.version if snapshot else None,
            "resolved": snapshot.server.resolved if snapshot else {},
            "previous": snapshot.previous if snapshot else None,
            "benchmarks": len(snapshot.benchmarks) if snapshot else 0,
            "comparison": [r.model_dump() for r in snapshot.comparison] if snapshot else [],
            "history": [s.to_json() for s in self.history],
            "error": self.error,
        }


class PendingFreeze:
    """A planned freeze that holds the unit's lock until it is executed or aborted.

        async with await plan_freeze(session, request) as pending:
            if pending.plan.refused: ...            # say why; execute() would write nothing
            result = await pending.execute(on_event=...)

    Leaving the block without either aborts (nothing written) and releases the lock."""

    def __init__(self, session: Session, capture: Capture, plan: FreezePlan, lock: AsyncExitStack) -> None:
        self.session = session
        self.capture = capture
        self.plan = plan
        self._lock = lock
        self.result = FreezeResult(session.label, session.service.unit, plan.request.name, plan=plan)
        self._emit: EventSink[FreezeEvent] = ignore

    @property
    def needs_confirmation(self) -> bool:
        return not self.plan.refused

    def force(self, reason: str) -> FreezePlan:
        """Plan again, forced for this reason (nothing is read again): the refusals are recorded, not obeyed."""
        request = dataclasses.replace(self.plan.request, force=reason).checked()
        self.plan = build_freeze_plan(self.capture, request)
        self.result.plan = self.plan
        return self.plan

    def _step(self, step: FreezeStepName, detail: str = "") -> None:
        event = FreezeStep(step, self.session.secrets.text(detail), _now())
        self.result.history.append(event)
        self._emit(event)

    def _fail(self, message: str) -> FreezeResult:
        self.result.error = self.session.secrets.text(message)
        self.result.state = "failed"
        self._step("failed", self.result.error)
        return self.result

    async def execute(self, on_event: EventSink[FreezeEvent] = ignore) -> FreezeResult:
        self._emit = on_event
        try:
            if self.plan.refused:
                return self._refuse()
            return await self._execute()
        finally:
            await self._lock.aclose()

    def _refuse(self) -> FreezeResult:
        self.result.state = "refused"
        self.result.error = "; ".join(r.message for r in self.plan.refusals)
        return self.result

    async def _execute(self) -> FreezeResult:
        plan, service, workspace = self.plan, self.session.service, self.session.workspace
        assert workspace is not None
        if snapshot_path(workspace, plan.snapshot.name).exists():
            return self._fail(f"snapshot {plan.snapshot.name!r} exists already; nothing was written")
        try:
            await self._write_document()
            self._step("document_written", plan.document_path)
            if plan.unit_changed:
                backup = await service.write_unit(plan.new_text)
                self.result.backup = backup.path
                self._step("unit_written", f"added {INSTALL_SECTION.strip()!r} (enable needs it); backup {backup.path}")
            if plan.unit_changed or self.capture.state.need_daemon_reload:
                # Forced past a pending daemon-reload: systemd loads the frozen unit (the process runs on as it is).
                await service.daemon_reload()
                self._step("daemon_reloaded")
            await service.enable()
            self._step("enabled", f"systemctl enable {service.unit}")
            problems = await self._verify()
        except HostError as exc:
            return self._fail(str(exc))
        if problems:
            return self._fail("; ".join(problems))
        self._step("verified", f"{service.unit} is the frozen unit, enabled and healthy; the document reads back")
        final = plan.snapshot.model_copy(
            update={"unit": plan.snapshot.unit.model_copy(update={"unit_file_state": self.result.unit_file_state})}
        )
        try:
            path = save_snapshot(workspace, final)
        except (OSError, ValueError) as exc:
            return self._fail(f"the host is frozen, but the snapshot could not be kept locally: {exc}")
        self.result.snapshot_path = str(path)
        self._step("saved", str(path))
        self.result.state = "frozen"
        return self.result

    async def _write_document(self) -> None:
        path = self.plan.document_path
        transport = self.session.host.transport
        done = await transport.run(["sh", "-c", _DOCUMENT_SCRIPT, "sh", path], input=self.plan.document, timeout=60)
        if not done.ok:
            who = self.capture.facts.user or "the SSH user"
            raise HostInputError(
                "{host}: writing the document {path} as {who} failed: {stderr} "
                "(set the {field} path to one that user may write)",
                field="document", host=self.session.label, path=path, who=who, stderr=done.stderr.strip(),
            )  # fmt: skip

    async def _verify(self) -> list[str]:
        """What is not as the freeze means to leave it (empty: all is)."""
        service, plan = self.session.service, self.plan
        problems = []
        if await service.read_unit() != plan.new_text:
            problems.append("the unit on disk is not the frozen unit any more (changed by someone else?)")
        state = await service.state()
        self.result.unit_file_state = state.unit_file_state
        if state.unit_file_state != "enabled":
            problems.append(f"is-enabled says {state.unit_file_state or 'nothing'} after systemctl enable")
        if state.need_daemon_reload:
            problems.append("systemd still has another unit loaded (NeedDaemonReload=yes)")
        self.result.healthy = await _healthy(self.session)
        forced_down = plan.forced and any(r.code in SERVER_DOWN for r in plan.refusals)
        if not self.result.healthy and not forced_down:
            problems.append("the server does not answer /health with 200 any more")
        read = await self.session.host.transport.run(["cat", "--", plan.document_path], timeout=30)
        if not read.ok or read.stdout != plan.document:
            problems.append(f"the document {plan.document_path} does not read back as written")
        return problems

    async def abort(self, why: str = "not confirmed; nothing was written") -> FreezeResult:
        try:
            if self.result.state == "planned":
                if self.plan.refused:
                    self._refuse()
                else:
                    self.result.state = "aborted"
                    self.result.error = why
            return self.result
        finally:
            await self._lock.aclose()

    async def __aenter__(self) -> PendingFreeze:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.result.state == "planned":
            await self.abort("the freeze was left without being executed; nothing was written")
        await self._lock.aclose()


async def _healthy(session: Session) -> bool:
    try:
        client = await session.sglang()
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            return await client.healthy()
    except Exception:  # refused, a forward being rebuilt, a timeout: not healthy now
        return False


# --- reading the host ---------------------------------------------------------------------------------


async def _read_text(session: Session, path: str) -> str | None:
    """A file on the host, as the SSH user and else through sudo (as read_unit does); None when unreadable."""
    transport = session.host.transport
    try:
        done = await transport.run(["cat", "--", path], timeout=30)
        if not done.ok and session.target.sudo:
            done = await transport.run(["cat", "--", path], sudo=True, timeout=30)
    except HostError:
        return None
    return done.stdout if done.ok else None


def _nul_split(text: str) -> list[str]:
    """NUL-separated words; trailing NULs (a renamed process pads its title with them) end the list."""
    stripped = text.rstrip("\0")
    return stripped.split("\0") if stripped else []


async def read_process(session: Session, state: ServiceState) -> ProcessView:
    """What the main process was started with (/proc/PID/cmdline and environ), else the unit file's mtime."""
    notes: list[str] = []
    argv: tuple[str, ...] | None = None
    environ: dict[str, str] | None = None
    pid = state.main_pid
    if pid:
        cmdline = await _read_text(session, f"/proc/{int(pid)}/cmdline")
        if cmdline:
            argv = tuple(_nul_split(cmdline))
        else:
            notes.append(f"the main process's command line (/proc/{pid}/cmdline) could not be read")
        env_text = await _read_text(session, f"/proc/{int(pid)}/environ")
        if env_text is not None:
            environ = dict(w.partition("=")[::2] for w in _nul_split(env_text) if "=" in w)
        else:
            notes.append(f"the main process's environment (/proc/{pid}/environ) could not be read: not compared")
    mtime = None
    if not looks_like_argv(argv) and state.fragment_path:
        with contextlib.suppress(HostError, ValueError):
            done = await session.host.transport.run(["stat", "-c", "%Y", "--", state.fragment_path], timeout=30)
            if done.ok:
                mtime = datetime.fromtimestamp(int(done.stdout.strip()), UTC)
    return ProcessView(argv, environ, mtime, tuple(notes))


async def read_facts(session: Session) -> HostFacts:
    try:
        done = await session.host.transport.run(["sh", "-c", _FACTS_SCRIPT], timeout=30)
    except HostError:
        return HostFacts()
    lines = done.stdout.splitlines() if done.ok else []
    lines += [""] * (3 - len(lines))
    return HostFacts(lines[0].strip() or None, lines[1].strip() or None, lines[2].strip() or None)


async def read_driver_version(session: Session) -> str | None:
    from console.host.registry import service_provider

    command = session.target.gpu_command
    provider = service_provider(session.target.transport)
    if command is None and provider is not None:
        command = provider.gpu_command
    argv = [*(command or ("nvidia-smi",)), "--query-gpu=driver_version", "--format=csv,noheader"]
    try:
        done = await session.host.transport.run(argv, timeout=30)
    except HostError:
        return None
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return lines[0] if done.ok and lines else None


def _records(workspace: Workspace) -> list[Any]:
    from console.bench.records import read_records

    out = []
    for path in sorted(workspace.logs.glob("bench-*.jsonl")):
        with contextlib.suppress(ValueError, OSError):  # a damaged log is not this freeze's business
            out.extend(read_records(path))
    return out


def operator() -> str:
    """user@machine of the console."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


async def capture_host(session: Session, request: FreezeRequest) -> Capture:
    """Read the running truth (the caller holds the unit's lock)."""
    workspace = session.workspace
    assert workspace is not None, "a freeze needs a workspace to keep its snapshot"
    version, _source = await session.sglang_version()
    state = await session.service.state()
    unit_text = await session.service.read_unit()
    healthy = await _healthy(session)
    info: dict[str, Any] | None = None
    error: str | None = None
    try:
        client = await session.sglang()
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            info = await client.server_info()
    except Exception as exc:  # the refusal says it; the rest of the capture still shows
        error = session.secrets.text(str(exc) or type(exc).__name__)
    facts, process, gpus, driver = await asyncio.gather(
        read_facts(session), read_process(session, state), session.gpus(), read_driver_version(session)
    )
    template = request.document or session.target.production_doc or DEFAULT_DOCUMENT
    return Capture(
        label=session.label,
        unit_name=session.service.unit,
        transport=session.target.transport,
        state=state,
        unit_text=unit_text,
        version=version,
        healthy=healthy,
        server_info=info,
        server_error=error,
        facts=facts,
        process=process,
        gpus=list(gpus.gpus),
        driver_version=driver,
        records=_records(workspace),
        previous=production_snapshot(workspace, session.label, session.service.unit),
        frozen_at=_now(),
        frozen_by=operator(),
        opsconsole_version=__version__,
        document_template=template,
        secrets=session.secrets,
    )


async def plan_freeze(session: Session, request: FreezeRequest, *, owner: str | None = None) -> PendingFreeze:
    """Take the unit's lock (UnitLocked if an apply holds it), read the running truth and plan the freeze.
    Writes nothing. Raises UsageError (bad name or path), FileExistsError (the name is taken), UnitError (the
    unit is not an SGLang unit) and HostError, with the lock released."""
    request = request.checked()
    workspace = session.workspace
    if workspace is None:
        raise HostError("a freeze needs a workspace (profiles/snapshots/) to keep its snapshot")
    existing = snapshot_path(workspace, request.name)
    if existing.exists():
        raise FileExistsError(f"snapshot {request.name!r} exists ({existing}); choose another name")
    stack = await take_unit_lock(session, owner or default_owner(hints.verb("freeze")))
    try:
        capture = await capture_host(session, request)
        plan = build_freeze_plan(capture, request)
    except BaseException:
        await stack.aclose()
        raise
    return PendingFreeze(session, capture, plan, stack)


# --- restore ---------------------------------------------------------------------------------------------


async def plan_restore(
    session: Session, snapshot: Snapshot, *, timeout_s: float = 900.0
) -> tuple[PendingApply, list[str]]:
    """The validated apply (console.core.apply) that writes the snapshot's flags and environment into the host's
    unit, with notes on what it keeps (secrets) and where the snapshot came from. The caller executes or aborts
    the PendingApply as for any apply; it holds the unit's lock."""
    from console.sglang.unit import UnitFile

    version, _source = await session.sglang_version()
    current = UnitFile.parse(await session.service.read_unit(), version)
    planned = restore_edits(snapshot, current, version)
    notes = list(planned.notes)
    if (snapshot.host.label, snapshot.host.unit) != (session.label, session.service.unit):
        notes.append(
            f"snapshot {snapshot.name} was frozen on {snapshot.host.label} ({snapshot.host.unit}); its flags and "
            f"environment go into {session.service.unit} on {session.label}"
        )
    pending = await plan_apply(session, planned.edits, timeout_s=timeout_s, owner=default_owner(hints.verb("restore")))
    # The unit was read again under the lock: if it changed in between, the edits may not restore all of it.
    left = restored_matches(snapshot, UnitFile.parse(pending.plan.new_text, version), version)
    if left:
        await pending.abort(f"the unit changed while the restore was planned ({', '.join(left)}); run it again")
    return pending, notes


__all__ = [
    "FreezeEvent",
    "FreezePlan",
    "FreezeRequest",
    "FreezeResult",
    "FreezeStep",
    "PendingFreeze",
    "Refusal",
    "plan_freeze",
    "plan_restore",
]
