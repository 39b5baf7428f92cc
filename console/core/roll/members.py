"""What a deployment's change is made of, shared by its two ways of restarting (together.py: the ranks of one model;
pd.py: prefill and decode servers one at a time) and its plan (deployment.py): each member's part, the events, the
result."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from console.core.change import Plan, Verification, VersionSource
from console.core.deployment import Deployment, Member, Mismatch, RestartOrder, Step
from console.core.events import ApplyEvent
from console.core.phases import PhaseTracker
from console.core.session import Session
from console.host.base import ServiceState, UnitBackup

Operation = Literal["apply", "restart", "restore"]


@dataclass(frozen=True)
class StepEvent:
    """A step of the deployment's restart order began, ended or failed (console.core.deployment.order)."""

    step: Step
    state: Literal["begun", "done", "failed"]
    detail: str
    at: datetime
    rollback: bool = False


@dataclass(frozen=True)
class MemberEvent:
    """One member's own event (its journal line, a phase of its start, its apply's step), tagged with the member."""

    member: str
    event: ApplyEvent


@dataclass
class MemberChange:
    """A member's part in a deployment's change: its session, its plan (masked), its unit lock, and what happened."""

    member: Member
    session: Session
    plan: Plan
    restart_only: bool = False
    backup: UnitBackup | None = None
    written: bool = False
    restored: bool = False
    starts: int = 0  # how many times the change started it (a rollback's start counts too)
    pid_before: int | None = None
    pid_after: int | None = None
    tracker: PhaseTracker | None = None
    rollback_tracker: PhaseTracker | None = None
    outcome: str = "not_started"  # done, unchanged, rolled_back, failed, not_started
    detail: str = ""
    result: dict[str, Any] | None = None  # a member's own apply --json (one at a time)
    verification: Verification | None = None
    before: ServiceState | None = field(default=None, repr=False)
    cursor: str | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.member.name

    @property
    def changed(self) -> bool:
        return self.plan.changed

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        out: dict[str, Any] = {
            **self.member.to_json(),
            "outcome": self.outcome,
            "detail": self.detail,
            "changed": plan.changed,
            "diff": plan.diff,
            "report": plan.report.to_json(),
            "backup": self.backup.path if self.backup else None,
            "starts": self.starts,
            "main_pid_before": self.pid_before,
            "main_pid_after": self.pid_after,
            "phases": [p.to_json() for p in self.tracker.phases] if self.tracker else [],
            "journal_excerpt": self.tracker.explanation() if self.tracker and self.tracker.failed else [],
            "verified": self.verification.to_json() if self.verification else None,
        }
        if self.result is not None:
            out["apply"] = self.result
        return out


@dataclass
class DeploymentResult:
    """Where a deployment's change ended; `to_json()` is `apply|restart DEPLOYMENT --json`."""

    deployment: Deployment
    operation: Operation
    state: str
    order: RestartOrder
    members: list[MemberChange]
    checks: list[Mismatch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sglang_version: str = ""
    version_source: VersionSource = "newest"
    error: str | None = None
    failed_member: str | None = None
    downtime_s: float | None = None
    rolled_back: bool = False
    started: datetime | None = None
    finished: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.state in ("verified", "unchanged")

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "deployment": self.deployment.name,
            "kind": self.deployment.kind,
            "operation": self.operation,
            "state": self.state,
            "sglang_version": self.sglang_version,
            "version_source": self.version_source,
            "order": self.order.to_json(),
            "downtime": self.order.downtime,
            "notes": list(self.notes),
            "checks": [c.to_json() for c in self.checks],
            "members": {m.name: m.to_json() for m in self.members},
            "failed_member": self.failed_member,
            "rolled_back": self.rolled_back,
            "downtime_s": self.downtime_s,
            "error": self.error,
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
        }
