"""`freeze DEPLOYMENT --name NAME`: one production snapshot of a deployment: every member frozen as NAME.MEMBER (its
document on its host, its unit the running setup and enabled, its snapshot kept: freeze.py), the set's index
(profiles/snapshot-sets/NAME.toml, the deployment as its group), and one production document for the deployment
beside it (profiles/snapshot-sets/NAME.md): its members with their roles and hosts, the restart order and why, and
every member's unit as frozen. `restore DEPLOYMENT NAME` reads the set back (deployment_snapshots, member_restore):
each member's own snapshot, the edits that bring its unit back to it; the change itself is the deployment's
(console.core.roll's plan_deployment_restore).

    pending = await plan_deployment_freeze(deployment, sessions, FreezeRequest("v2"))  # every member planned
    result = await pending.execute(on_event)                                            # or: await pending.abort()

Every member is planned first (its unit's lock held); a refusal on any member (its server not healthy, its unit not
what runs) freezes none. A freeze restarts nothing, so the members are frozen one after the other in the profile's
order.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from console.core.deployment import Deployment, restart_order
from console.core.events import EventSink, ignore
from console.core.session import Session
from console.core.snapshot.freeze import FreezeResult, PendingFreeze, plan_freeze
from console.core.snapshot.freeze_plan import FreezeRequest, RestoreEdits, restore_edits, restored_matches
from console.core.snapshot.model import Snapshot, SnapshotError
from console.core.snapshot.sets import load_snapshot_set, member_names, save_snapshot_set, set_path, snapshot_set_of
from console.core.snapshot.store import load_snapshot
from console.errors import UsageError
from console.workspace import Workspace


@dataclass
class DeploymentFreezeResult:
    deployment: Deployment
    name: str
    members: dict[str, FreezeResult] = field(default_factory=dict)
    state: str = "planned"  # frozen | refused | aborted | failed
    error: str | None = None
    set_path: str | None = None
    document_path: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "frozen"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "deployment": self.deployment.name,
            "name": self.name,
            "state": self.state,
            "error": self.error,
            "set": self.set_path,
            "document": self.document_path,
            "members": {name: r.to_json() for name, r in self.members.items()},
        }


def deployment_document(deployment: Deployment, name: str, units: Mapping[str, str], at: datetime, note: str) -> str:
    """The deployment's production document (Markdown): members, roles, order, every member's unit (pure)."""
    lines = [f"# Production snapshot {name} of {deployment.name}", ""]
    lines += [f"Frozen {at:%Y-%m-%d %H:%M:%S} UTC. {deployment.kind}, {len(deployment.members)} members."]
    if deployment.description:
        lines += ["", deployment.description]
    if note:
        lines += ["", f"Why: {note}"]
    lines += ["", "| member | host | unit | role | snapshot |", "|---|---|---|---|---|"]
    snapshots = member_names(name, [m.name for m in deployment.members])
    for m in deployment.members:
        role = f"rank {m.rank}" if m.rank is not None else m.role
        lines.append(f"| {m.name} | {m.host} | {m.unit} | {role} | {snapshots[m.name]} |")
    if deployment.router is not None:
        lines += ["", f"Front door: smg at {deployment.router.url}."]
    order = restart_order(deployment, write=False)
    lines += ["", "## Restart order", ""]
    lines += [f"{i}. {step.describe()}" for i, step in enumerate(order.steps, start=1)]
    lines += [f"   - {note}" for note in order.notes]
    lines += ["", "## Units", ""]
    for m in deployment.members:
        lines += [f"### {m.name} ({m.host}, {m.unit})", "", "```ini", units.get(m.name, "").rstrip(), "```", ""]
    return "\n".join(lines)


class PendingDeploymentFreeze:
    def __init__(
        self, deployment: Deployment, name: str, note: str, pendings: dict[str, PendingFreeze], workspace: Workspace
    ) -> None:
        self.deployment = deployment
        self.name = name
        self.note = note
        self.pendings = pendings
        self.workspace = workspace
        self.result = DeploymentFreezeResult(deployment, name)

    @property
    def refusals(self) -> list[str]:
        return [f"{n}: {r.message}" for n, p in self.pendings.items() for r in p.plan.refusals if p.plan.refused]

    async def abort(self, why: str = "not confirmed; nothing was written") -> DeploymentFreezeResult:
        for name, pending in self.pendings.items():
            self.result.members[name] = await pending.abort(why)
        if self.result.state == "planned":
            self.result.state = "refused" if self.refusals else "aborted"
            self.result.error = "; ".join(self.refusals) if self.refusals else why
        return self.result

    async def execute(self, on_event: EventSink[Any] = ignore) -> DeploymentFreezeResult:
        if self.refusals:
            return await self.abort("a member's freeze is refused: nothing was written")
        units: dict[str, str] = {}
        for name, pending in self.pendings.items():
            result = await pending.execute(on_event)
            self.result.members[name] = result
            if not result.ok:
                self.result.state, self.result.error = "failed", f"{name}: {result.error}"
                for rest, other in self.pendings.items():
                    if rest not in self.result.members:
                        self.result.members[rest] = await other.abort(f"{name}'s freeze failed")
                return self.result
            with contextlib.suppress(Exception):
                units[name] = await pending.session.service.read_unit()
        at = datetime.now(UTC)
        outcomes = {n: (r.ok, r.error or "") for n, r in self.result.members.items()}
        self.result.set_path = str(save_snapshot_set(self.workspace, snapshot_set_of(self.name, self.deployment.name,
                                                                                        at, outcomes)))  # fmt: skip
        document = set_path(self.workspace, self.name).with_suffix(".md")
        document.write_text(deployment_document(self.deployment, self.name, _masked(units, self.pendings), at,
                                                self.note))  # fmt: skip
        self.result.document_path = str(document)
        self.result.state = "frozen"
        return self.result


def _masked(units: Mapping[str, str], pendings: Mapping[str, PendingFreeze]) -> dict[str, str]:
    """Each unit as a person may read it (its secrets masked by its own session)."""
    return {n: pendings[n].session.secrets.text(text) for n, text in units.items()}


async def plan_deployment_freeze(
    deployment: Deployment, sessions: Mapping[str, Session], request: FreezeRequest, workspace: Workspace
) -> PendingDeploymentFreeze:
    """Every member's freeze planned as NAME.MEMBER (each holding its unit's lock); UsageError for a set name that is
    taken. A member that cannot be planned lets go of the others' locks and raises."""
    names = member_names(request.name, [m.name for m in deployment.members])
    if set_path(workspace, request.name).exists():
        raise UsageError(f"snapshot set {request.name!r} exists already: choose another name")
    planned = await asyncio.gather(
        *(plan_freeze(sessions[m.name], dataclasses.replace(request, name=names[m.name])) for m in deployment.members),
        return_exceptions=True,
    )
    failure = next((p for p in planned if isinstance(p, BaseException)), None)
    if failure is not None:
        for p in planned:
            if isinstance(p, PendingFreeze):
                with contextlib.suppress(Exception):
                    await p.abort("another member could not be planned")
        raise failure
    pendings = {m.name: p for m, p in zip(deployment.members, planned, strict=True) if isinstance(p, PendingFreeze)}
    for member in deployment.members:
        pending = pendings[member.name]
        codes = {r.code for r in pending.plan.refusals}
        # A rank >= 1 serves no /server_info (and a dummy /health): what it runs is rank 0's command but for its rank,
        # which rank 0's own freeze checks against its server and the deployment's checks hold the units to.
        if not member.serves_api and pending.plan.refused and codes <= RANK_UNREADABLE and request.force is None:
            pending.force(RANK_FORCE)
    return PendingDeploymentFreeze(deployment, request.name, request.note, pendings, workspace)


RANK_UNREADABLE = frozenset({"no-server-info", "unhealthy"})
RANK_FORCE = (
    "a rank >= 1 of a multi-node deployment: it serves no /server_info; what it runs is rank 0's command but for its "
    "rank (rank 0's freeze read it from the server)"
)


# --- restore ---------------------------------------------------------------------------------------------------


def deployment_snapshots(deployment: Deployment, workspace: Workspace, name: str) -> dict[str, Snapshot]:
    """Every member's snapshot in the set NAME that `freeze DEPLOYMENT --name NAME` wrote; UsageError (nothing to
    restore: no such set, the set of another deployment or group, a member it did not freeze) naming what to do."""
    try:
        found = load_snapshot_set(workspace, name)
    except SnapshotError as exc:
        raise UsageError(str(exc)) from None
    if found is None:
        raise UsageError(
            f"no snapshot set {name!r} in {set_path(workspace, name).parent}: freeze the deployment first "
            f"(freeze {deployment.name} --name {name}), or give the name of one of its sets"
        )
    if found.group != deployment.name:
        raise UsageError(
            f"snapshot set {name!r} was frozen of {found.group}, not of the deployment {deployment.name}: give a set "
            f"of {deployment.name}"
        )
    missing = [m.name for m in deployment.members if m.name not in found.members]
    if missing:
        why = "; ".join(f"{m}: {found.not_frozen.get(m, 'not in the set')}" for m in missing)
        raise UsageError(f"snapshot set {name!r} has no snapshot of {', '.join(missing)} ({why}): nothing to restore")
    out: dict[str, Snapshot] = {}
    for member in deployment.members:
        try:
            out[member.name] = load_snapshot(workspace, found.members[member.name])
        except (LookupError, SnapshotError) as exc:
            raise UsageError(f"snapshot set {name!r}: {member.name}'s snapshot: {exc}") from None
    return out


def member_restore(snapshot: Snapshot, unit_text: str, version: str) -> RestoreEdits:
    """The edits that bring a member's unit (its text, as read) back to its snapshot (a secret the snapshot holds
    masked is kept: the notes say so)."""
    from console.sglang.unit import UnitFile

    return restore_edits(snapshot, UnitFile.parse(unit_text, version), version)


def left_after(snapshot: Snapshot, new_text: str, version: str) -> list[str]:
    """What still differs between a planned unit and the member's snapshot (empty: restored)."""
    from console.sglang.unit import UnitFile

    return restored_matches(snapshot, UnitFile.parse(new_text, version), version)
