"""A deployment's state from what each member shows (pure): up, degraded or down, and the member that makes it so.

    readings = [MemberReading(member, ...), ...]            # console.core.status reads them (systemd, HTTP, journal)
    health = judge(deployment, readings, router=RouterReading(...))
    health.state, health.reason, health.members["rank1"].state

What counts (docs/deployments.md, "status and connect"; shared/research/wave5-facts.md §4, §5):

- a member whose unit is not running (failed, inactive, restarting), or whose journal shows a failure line since its
  start, is `down`, named with why;
- a member that serves the real API (a single host, rank 0, a prefill or decode server) is `up` only when its own
  /health (and /ready, where the version has it) answers 200; while its unit runs but it does not answer it is
  `starting`;
- a rank >= 1 is never judged by its HTTP answer (a dummy 200 that does not reflect its schedulers): it is `up` when
  its unit runs the process it started with, close to rank 0's start; a rank started long after rank 0 was restarted
  alone and cannot rejoin the running group: `down`;
- ranks: the deployment is up only when every rank is up and rank 0 answers; any rank down makes it down;
- PD: up when smg is ready and every member is up and listed ready there; a member down or out of smg makes it
  degraded while smg still has a healthy prefill and a healthy decode; without one of either it is down;
- a member that cannot be read (its host unreachable) is `unknown`: the deployment is at best degraded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from console.core.deployment.model import Deployment, Member

MemberState = Literal["up", "starting", "down", "out", "unknown"]
DeploymentState = Literal["up", "degraded", "down"]
# A rank >= 1 that started this long after rank 0 was restarted on its own (ranks of one start begin within seconds
# of each other: rank 0 serves only once every rank has joined).
STARTED_APART_S = 60.0


@dataclass(frozen=True)
class RouterListing:
    """What smg says of one member's worker: listed or not, its status (pending, ready, draining, ...), healthy."""

    listed: bool
    status: str | None = None
    healthy: bool | None = None

    @property
    def routable(self) -> bool:
        return self.listed and self.healthy is not False and self.status in (None, "ready")

    def to_json(self) -> dict[str, Any]:
        return {"listed": self.listed, "status": self.status, "healthy": self.healthy}


@dataclass(frozen=True)
class MemberReading:
    """One member as read: its unit from systemd, its own HTTP answers (only where they mean something), its journal
    since its start, smg's listing (PD)."""

    member: Member
    error: str | None = None  # its host could not be reached / its unit not read: nothing else is known
    active_state: str | None = None
    sub_state: str | None = None
    main_pid: int | None = None
    started_at: datetime | None = None
    summary: str | None = None  # "failed (result: signal)"
    healthy: bool | None = None  # its own /health: None where not asked (a rank >= 1)
    ready: bool | None = None  # its own /ready: None where not asked or the version has none
    failure: str | None = None  # a failure line of its journal since its start
    router: RouterListing | None = None

    @property
    def running(self) -> bool:
        return self.active_state == "active" and self.sub_state in (None, "running")


@dataclass(frozen=True)
class MemberHealth:
    state: MemberState
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        return {"state": self.state, "reason": self.reason}


@dataclass(frozen=True)
class RouterReading:
    """smg itself: /readiness, and whether it could be asked at all."""

    ready: bool | None
    error: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class DeploymentHealth:
    state: DeploymentState
    reason: str
    members: Mapping[str, MemberHealth] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.state == "up"

    @property
    def down_members(self) -> list[str]:
        return [name for name, h in self.members.items() if h.state in ("down", "unknown", "out")]


def member_health(reading: MemberReading, rank0: MemberReading | None = None) -> MemberHealth:
    """One member's own state (see the module's docstring)."""
    member = reading.member
    if reading.error is not None:
        return MemberHealth("unknown", f"cannot be read: {reading.error}")
    if _stopped(reading):
        return MemberHealth("down", reading.summary or f"{reading.active_state} ({reading.sub_state})")
    if reading.failure:
        return MemberHealth("down", f"its journal since its start: {reading.failure}")
    if not member.serves_api:
        if not reading.running:
            return MemberHealth("starting", reading.summary or f"{reading.active_state} ({reading.sub_state})")
        if rank0 is not None and _stopped(rank0):
            # rank 0 gone takes the group with it (and a rank that died first is back running, restarted by systemd,
            # by the time rank 0 has followed it): a running rank >= 1 serves nothing and cannot rejoin
            return MemberHealth("down", "its unit runs, but rank 0 is down: it cannot rejoin (restart the deployment)")
        apart = _started_apart(reading, rank0)
        if apart is not None:
            return MemberHealth(
                "down",
                f"started {apart:.0f} s after rank 0: restarted on its own, it cannot rejoin the running group "
                "(restart the deployment)",
            )
        return MemberHealth("up", "its unit runs (its own /health is a dummy 200: not read)")
    if not reading.running:
        return MemberHealth("starting", reading.summary or f"{reading.active_state} ({reading.sub_state})")
    if reading.healthy is not True:
        return MemberHealth("starting", "its unit runs; /health does not answer 200 yet")
    if reading.ready is False:
        return MemberHealth("starting", "/health answers 200; /ready does not yet")
    return MemberHealth("up", "/health and /ready answer 200" if reading.ready else "/health answers 200")


def _stopped(reading: MemberReading) -> bool:
    return reading.active_state in ("failed", "inactive", "deactivating") or reading.sub_state == "auto-restart"


def _started_apart(reading: MemberReading, rank0: MemberReading | None) -> float | None:
    if rank0 is None or rank0.started_at is None or reading.started_at is None:
        return None
    apart = (reading.started_at - rank0.started_at).total_seconds()
    return apart if apart > STARTED_APART_S else None


def judge(
    deployment: Deployment, readings: Sequence[MemberReading], *, router: RouterReading | None = None
) -> DeploymentHealth:
    """The deployment's state: up, degraded or down, and why (naming the members)."""
    by_name = {r.member.name: r for r in readings}
    rank0 = by_name.get(deployment.ranks[0].name) if deployment.kind == "multinode" else None
    members = {r.member.name: member_health(r, rank0) for r in readings}
    if deployment.kind == "pd":
        members = {name: _routed(by_name[name], h) for name, h in members.items()}
        return _pd(deployment, members, router)
    bad = [(n, h) for n, h in members.items() if h.state != "up"]
    if not bad:
        return DeploymentHealth("up", _up_reason(deployment), members)
    worst: DeploymentState = "degraded" if all(h.state == "unknown" for _, h in bad) else "down"
    said = "; ".join(f"{deployment.member(n).describe()}: {_word(h)}" for n, h in bad)
    return DeploymentHealth(worst, said, members)


def _word(health: MemberHealth) -> str:
    return f"{health.state}, {health.reason}" if health.reason else health.state


def _up_reason(deployment: Deployment) -> str:
    if deployment.kind == "multinode":
        return f"rank 0 answers /health and /ready; all {len(deployment.ranks)} ranks run"
    return "answers /health"


def _routed(reading: MemberReading, health: MemberHealth) -> MemberHealth:
    """A PD member that is up but not routable at smg is `out`."""
    listing = reading.router
    if health.state != "up" or listing is None:
        return health
    if not listing.listed:
        return MemberHealth("out", "up, but smg does not list it: it gets no requests")
    if not listing.routable:
        return MemberHealth("out", f"up, but smg lists it {listing.status or 'unhealthy'}")
    return health


def _pd(deployment: Deployment, members: Mapping[str, MemberHealth], router: RouterReading | None) -> DeploymentHealth:
    bad = [(n, h) for n, h in members.items() if h.state != "up"]
    said = "; ".join(f"{deployment.member(n).describe()}: {_word(h)}" for n, h in bad)
    if router is None or router.ready is not True:
        why = "smg is not ready" if router is None or router.error is None else f"smg cannot be asked: {router.error}"
        detail = f" ({router.detail})" if router is not None and router.detail else ""
        return DeploymentHealth("down", f"{why}{detail}" + (f"; {said}" if said else ""), members)
    missing = [role for role, group in (("prefill", deployment.prefill), ("decode", deployment.decode))
               if not any(members[m.name].state == "up" for m in group)]  # fmt: skip
    if missing:
        return DeploymentHealth("down", f"no {' and no '.join(missing)} server serves behind smg; {said}", members)
    if bad:
        return DeploymentHealth("degraded", said, members)
    return DeploymentHealth("up", "smg is ready; every prefill and decode server is up and routed", members)
