"""A deployment changed (apply) or restarted as one: planned on every member first, checked across members, then
restarted in the order console.core.deployment.order gives, verified as one, rolled back as one.

    change = await plan_deployment_change(deployment, sessions, edits, owner=...)   # every member planned, locked
    show(change.members, change.refusals, change.order)                             # one diff per member
    result = await change.execute(on_event=show)                                    # or: await change.abort(...)

Planning takes every member's unit lock, reads its unit, makes the member's part of the edit (fanout.py) with the
deployment's SGLang version (its front door's, else the profile's, else the newest) and holds the new launches to each
other (checks.py). The rules refusing a member, a mismatch across members, or nothing to change: nothing is written
anywhere. A member that cannot be planned (its host unreachable, its lock held elsewhere) fails the planning with
every lock let go of.

Executing runs the order: the ranks of one model together (together.py), prefill and decode servers one at a time
behind smg (each its own apply: console.core.apply), a single host its own apply. On a failure every member that was
changed goes back to its previous unit, in the same order, and the result says whether the deployment came back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime

from console.core.apply import ApplyResult, PendingApply, take_unit_lock
from console.core.change import EditRequest, Plan, VersionSource, choose_version, mask_plan, plan_for_version
from console.core.deployment import (
    GATE_DEST,
    Deployment,
    MemberLaunch,
    Mismatch,
    RestartOrder,
    check_members,
    errors,
    gate_note,
    member_edits,
    restart_order,
)
from console.core.events import EventSink, Notice, ignore
from console.core.roll.members import DeploymentResult, MemberChange, MemberEvent, Operation, StepEvent
from console.core.roll.pd import OneAtATime
from console.core.roll.together import Together
from console.core.session import Session
from console.core.snapshot import deployment_snapshots, left_after, member_restore
from console.secrets import secrets_in_unit
from console.sglang.flags import NEWEST_VERSION
from console.workspace import Workspace

DeploymentEvent = StepEvent | MemberEvent | Notice
# The edit, or how to make it once the deployment's version is known (console.core.apply.edits_by_version).
Edits = EditRequest | Callable[[str], EditRequest]
# Each member's own edit, made from its unit as read under its lock and the deployment's version (a restore: each
# member back to its own snapshot): (member's name, its unit's text, version) -> its edit.
EditsOf = Callable[[str, str, str], EditRequest]


def _now() -> datetime:
    return datetime.now(UTC)


class DeploymentChange:
    """A planned change of a deployment: every member planned and its unit lock held, nothing changed yet."""

    def __init__(
        self,
        deployment: Deployment,
        operation: Operation,
        members: list[MemberChange],
        locks: Mapping[str, AsyncExitStack],
        order: RestartOrder,
        *,
        checks: list[Mismatch],
        notes: list[str],
        version: str,
        version_source: VersionSource,
        timeout_s: float,
        owner: str,
        locks_held: bool = False,
    ) -> None:
        self.deployment = deployment
        self.owner = owner
        # The caller holds every member's unit lock for longer than this change (a tune, for all its trials): none
        # is taken or let go of here.
        self.locks_held = locks_held
        self.operation = operation
        self.members = members
        self.by_name = {m.name: m for m in members}
        self._locks = dict(locks)
        self.order = order
        self.timeout_s = timeout_s
        self.result = DeploymentResult(deployment, operation, "planned", order, members, checks, notes, version,
                                       version_source)  # fmt: skip
        self._emit: EventSink[DeploymentEvent] = ignore
        self._abort_reason: str | None = None
        self._running: PendingApply | None = None

    @property
    def refusals(self) -> list[str]:
        out = [f"{m.member.describe()}: {e.message}" for m in self.members for e in m.plan.report.errors]
        return out + [c.message for c in errors(self.result.checks)]

    @property
    def changed(self) -> bool:
        return self.operation == "restart" or any(m.plan.changed for m in self.members)

    @property
    def needs_confirmation(self) -> bool:
        return not self.refusals and self.changed

    def request_abort(self, why: str = "interrupted") -> None:
        """Ctrl-C / Esc: before anything stopped nothing happens; during the start every member goes back."""
        if self._abort_reason is None:
            self._abort_reason = why
        if self._running is not None:
            self._running.request_abort(why)

    async def abort(self, why: str = "not confirmed; nothing was changed") -> DeploymentResult:
        if self.result.state == "planned":
            self.result.state = "refused" if self.refusals else ("unchanged" if not self.changed else "aborted")
            self.result.error = "; ".join(self.refusals) if self.refusals else why
        await self._release()
        return self.result

    async def __aenter__(self) -> DeploymentChange:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.result.state == "planned":
            await self.abort("the change was left without being executed; nothing was changed")
        await self._release()

    async def _release(self) -> None:
        for lock in list(self._locks.values()):
            with contextlib.suppress(Exception):
                await lock.aclose()
        self._locks.clear()

    async def execute(self, on_event: EventSink[DeploymentEvent] = ignore) -> DeploymentResult:
        self._emit = on_event
        result = self.result
        result.started = _now()
        try:
            if self.refusals or not self.changed:
                await self.abort("nothing to change")
                return result
            if self._abort_reason is not None:
                await self.abort(f"{self._abort_reason}; nothing was changed")
                return result
            if self.deployment.kind == "multinode":
                await self._together()
            elif self.deployment.kind == "pd":
                await self._one_at_a_time()
            else:
                await self._single()
        finally:
            await self._release()
            result.finished = _now()
        return result

    # -- ranks: together ------------------------------------------------------------------------------------------

    async def _together(self) -> None:
        result = self.result
        run = Together(self.deployment, self.members, self.order, timeout_s=self.timeout_s, emit=self._emit,
                       aborted=lambda: self._abort_reason is not None)  # fmt: skip
        try:
            ok = await run.run()
        except asyncio.CancelledError:
            _uncancel()
            ok, run.failure = False, "interrupted while the ranks started"
        result.downtime_s = run.downtime_s
        if ok:
            result.state = "verified"
            for m in self.members:
                m.outcome = "done"
            return
        result.error = run.failure
        result.failed_member = _named_in(run.failure or "", self.members)
        touched = any(m.written for m in self.members) or run.stopped_at is not None
        if not touched:
            result.state = "aborted" if self._abort_reason else "write_failed"
            return
        self._emit(Notice(f"{run.failure}: every rank goes back to its previous unit, restarted together"))
        back = restart_order(self.deployment, write=any(m.written for m in self.members), gated=_gated(self.members),
                             rollback=True)  # fmt: skip
        came_back = await run.roll_back(back)
        result.rolled_back = True
        for m in self.members:
            m.outcome = "rolled_back" if came_back else "failed"
        result.state = "healthy_on_old" if came_back else "rollback_failed"
        if not came_back:
            result.error = f"{result.error}; the rollback failed too: {run.failure}"

    # -- prefill and decode: one at a time behind smg -------------------------------------------------------------

    async def _one_at_a_time(self) -> None:
        await OneAtATime(self, self._emit).run()

    @property
    def abort_reason(self) -> str | None:
        return self._abort_reason

    # -- a single host: its apply ---------------------------------------------------------------------------------

    async def _single(self) -> None:
        member = self.members[0]
        ended = await self.apply_member(member)
        self.result.state = ended.state.value
        self.result.error = ended.error
        self.result.rolled_back = ended.rollout.rolled_back

    async def apply_member(self, member: MemberChange, *, replacement: str | None = None) -> ApplyResult:
        """The member's own apply (or restart) with its plan and its lock, its events tagged with it; `replacement`:
        put this unit text back instead (a rollback of a member already changed: its lock taken again)."""
        lock = self._locks.pop(member.name, None)
        plan = member.plan
        if replacement is not None or lock is None:
            lock = AsyncExitStack() if self.locks_held else await take_unit_lock(member.session, self.owner)
            current = await member.session.service.read_unit()
            plan = mask_plan(
                plan_for_version(current, unit_name=member.member.unit, version=self.result.sglang_version,
                                 replacement=replacement if replacement is not None else plan.new_text),
                member.session.secrets,
            )  # fmt: skip
        pending = PendingApply(member.session, plan, lock, timeout_s=self.timeout_s,
                               restart_only=member.restart_only and replacement is None)  # fmt: skip
        self._running = pending
        try:
            ended = await pending.execute(on_event=lambda e: self._emit(MemberEvent(member.name, e)))
        finally:
            self._running = None
        member.starts += 1 if ended.rollout.touched_host or member.restart_only else 0
        member.result = ended.to_json()
        member.backup = member.backup or ended.backup
        return ended


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def _named_in(text: str, members: Sequence[MemberChange]) -> str | None:
    return next((m.name for m in members if text.startswith(m.member.describe()) or text.startswith(m.name)), None)


def _gated(members: Sequence[MemberChange]) -> bool:
    return any(m.plan.report.resolved.get("gated_launch_port") is not None for m in members)


# --- planning ------------------------------------------------------------------------------------------------------


async def deployment_version(deployment: Deployment, sessions: Mapping[str, Session]) -> tuple[str, VersionSource]:
    """The version the rules check every member against: the front door's server (PD: the first member that says),
    else the deployment profile's, else its members' profiles', else the newest."""
    serving = [m for m in deployment.members if m.serves_api]
    front = deployment.front_door
    if front is not None:
        serving = [front, *(m for m in serving if m != front)]
    versions = await asyncio.gather(*(sessions[m.name].server_version() for m in serving))
    server = next((v for v in versions if v), None)
    profile = deployment.sglang_version or next((m.target.sglang_version for m in deployment.members
                                                 if m.target.sglang_version), None)  # fmt: skip
    return choose_version(server, profile, NEWEST_VERSION)


async def plan_deployment_change(
    deployment: Deployment,
    sessions: Mapping[str, Session],
    edits: Edits | None,
    *,
    owner: str,
    only: Sequence[str] = (),
    timeout_s: float = 900.0,
    units: Mapping[str, str] | None = None,
    edits_of: EditsOf | None = None,
    locks_held: bool = False,
    operation: Operation | None = None,
) -> DeploymentChange:
    """Plan the change (edits) or a restart as it is (None) on every member; see the module's docstring. Raises
    EditError (the edit, or a member's own flag), UnitLocked / HostError (a member that cannot be planned, every
    lock let go of) and UnitError.

    Instead of one edit fanned out to the members: `units`, each member's whole new unit text (a tune's trial, its
    units put back), or `edits_of`, each member's own edit from its unit as read under its lock (a restore of each
    member's snapshot); a member either leaves out keeps its unit. Either way the new units are held to each other
    and restarted in the deployment's order, as an apply's. `locks_held`: the caller holds every member's unit lock
    (for longer than this change); none is taken here."""
    version, source = await deployment_version(deployment, sessions)
    restart = edits is None and units is None and edits_of is None
    operation = operation or ("restart" if restart else "apply")
    request = EditRequest() if edits is None else (edits(version) if callable(edits) else edits)
    per_member = member_edits(deployment, request, only=only)
    locks: dict[str, AsyncExitStack] = {}

    async def plan_one(name: str) -> tuple[Plan, AsyncExitStack]:
        member = deployment.member(name)
        session = sessions[name]
        lock = AsyncExitStack() if locks_held else await take_unit_lock(session, owner)
        try:
            current = await session.service.read_unit()
            own = edits_of(name, current, version) if edits_of is not None else per_member.per_member.get(name)
            plan = plan_for_version(current, own or EditRequest(), unit_name=member.unit, version=version,
                                    version_source=source,
                                    replacement=units.get(name) if units is not None else None)  # fmt: skip
            session.secrets.learn(secrets_in_unit(plan.new_text))
            return mask_plan(plan, session.secrets), lock
        except BaseException:
            await lock.aclose()
            raise

    names = [m.name for m in deployment.members]
    planned = await asyncio.gather(*(plan_one(n) for n in names), return_exceptions=True)
    failure = next((p for p in planned if isinstance(p, BaseException)), None)
    for name, p in zip(names, planned, strict=True):
        if not isinstance(p, BaseException):
            locks[name] = p[1]
    if failure is not None:
        for lock in locks.values():
            with contextlib.suppress(Exception):
                await lock.aclose()
        raise failure
    members: list[MemberChange] = []
    for name, p in zip(names, planned, strict=True):
        assert not isinstance(p, BaseException)
        members.append(MemberChange(deployment.member(name), sessions[name], p[0], restart_only=restart))
    launches = [_launch(m, version) for m in members]
    checks = check_members(deployment, launches)
    restarting = [m.name for m in members if m.restart_only or m.plan.changed]
    order = restart_order(deployment, restarting or None, write=not restart, gated=_gated(members))
    notes = list(per_member.notes) + list(order.notes)
    if deployment.kind == "multinode":
        rank0 = next(m for m in members if m.name == deployment.ranks[0].name)
        gate = gate_note(deployment.name, rank0.plan.old_report.resolved.get(GATE_DEST),
                         rank0.plan.report.resolved.get(GATE_DEST))  # fmt: skip
        if gate is not None:
            notes.append(gate)
    change = DeploymentChange(deployment, operation, members, locks, order, checks=checks, notes=notes,
                              version=version, version_source=source, timeout_s=timeout_s, owner=owner,
                              locks_held=locks_held)  # fmt: skip
    return change


def _launch(member: MemberChange, version: str) -> MemberLaunch:
    """The member's launch as the change would leave it (the new unit, resolved by the rules)."""
    from console.sglang.unit import UnitFile

    report = member.plan.report
    env = UnitFile.parse(member.plan.new_text, version).environment()
    return MemberLaunch(member.member, report.resolved, env, None, report.explicit)


async def plan_deployment_restore(
    deployment: Deployment,
    sessions: Mapping[str, Session],
    name: str,
    workspace: Workspace,
    *,
    owner: str,
    timeout_s: float = 900.0,
) -> tuple[DeploymentChange, list[str]]:
    """`restore DEPLOYMENT NAME`: every member back to its own snapshot in the set NAME (`freeze DEPLOYMENT --name
    NAME`) through the deployment's change: each member's edits from its unit as read under its lock, the new units
    held to each other, restarted in the deployment's order, rolled back as one. With the notes of what is kept (a
    secret the snapshot holds masked). UsageError when there is nothing to restore (console.core.snapshot's
    deployment_snapshots); a unit that changed while it was planned aborts the change (nothing written)."""
    snapshots = deployment_snapshots(deployment, workspace, name)
    notes: list[str] = []

    def edits_of(member: str, unit_text: str, version: str) -> EditRequest:
        restored = member_restore(snapshots[member], unit_text, version)
        notes.extend(f"{member}: {note}" for note in restored.notes)
        return restored.edits

    change = await plan_deployment_change(deployment, sessions, None, owner=owner, timeout_s=timeout_s,
                                          edits_of=edits_of, operation="restore")  # fmt: skip
    version = change.result.sglang_version
    left = {m.name: left_after(snapshots[m.name], m.plan.new_text, version) for m in change.members}
    left = {member: flags for member, flags in left.items() if flags}
    if left:
        said = "; ".join(f"{member}: {', '.join(flags)}" for member, flags in left.items())
        await change.abort(f"the units would still differ from the snapshots after the restore ({said}); run it again")
    for name_of, snapshot in snapshots.items():
        member = deployment.member(name_of)
        if (snapshot.host.label, snapshot.host.unit) != (member.host, member.unit):
            notes.append(f"{name_of}: snapshot {snapshot.name} was frozen on {snapshot.host.label} "
                         f"({snapshot.host.unit}); it goes into {member.unit} on {member.host}")  # fmt: skip
    return change, notes
