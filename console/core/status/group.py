"""`status @GROUP`: every member's status, from Prometheus where one is configured, over SSH for the rest.

With a Prometheus ([fleet] prometheus, or --prometheus) the group is one PromQL query, as the console's overview asks
it (fleet.py): a member Prometheus has figures of is not opened over SSH at all. SSH reads only what
Prometheus cannot say: a member it does not know, every member while it cannot be asked, or every member when the
operator asks for the unit's side (`--ssh`: systemd's state, the resolved setup, each GPU). Members read over SSH
go a few at a time.

A member is ok when its Prometheus state is `up` (every scrape of it succeeds and its newest sample is fresh), or,
read over SSH, when its service could be read and SGLang answers /health with 200 (HostStatus.ok). Where smg's
metrics are in the same Prometheus, each member also carries smg's view of its worker (`router`, console.fleet.router:
whether smg routes to it, and why not); that says where requests go, not whether the host is ok."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from console.core.session import open_session
from console.core.status.fleet import fleet_view_once, host_names
from console.core.status.host import HostStatus, read_status
from console.fleet.router import WorkerAtRouter
from console.fleet.rows import host_state
from console.fleet.settings import FleetSettings
from console.fleet.telemetry import FleetView, HostFigures
from console.host.base import HostError
from console.host.targets import Target, resolve_target
from console.workspace import Workspace

SSH_CONCURRENCY = 16  # members read over SSH at once

Source = Literal["prometheus", "ssh"]


@dataclass(frozen=True)
class MemberStatus:
    label: str
    source: Source
    figures: HostFigures | None = None  # source prometheus
    status: HostStatus | None = None  # source ssh, when the host could be read
    error: str | None = None  # source ssh, why the host could not be reached
    why_ssh: str | None = None  # with a Prometheus: why this member was read over SSH
    router: WorkerAtRouter | None = None  # smg's view of its worker, where Prometheus has smg's metrics

    @property
    def state(self) -> str | None:
        return host_state(self.figures) if self.figures is not None else None

    @property
    def ok(self) -> bool:
        if self.figures is not None:
            return self.state == "up"
        return self.status is not None and self.status.ok

    def to_json(self) -> dict[str, Any]:
        if self.figures is not None:
            f = self.figures
            data: dict[str, Any] = {"source": "prometheus", "state": self.state, "seen_at": f.seen_at,
                                    "up": dict(f.up), "figures": dict(f.figures)}  # fmt: skip
            if f.stale:
                data["stale"] = f.stale
        else:
            data = self.status.to_json() if self.status is not None else {"error": self.error}
            data["source"] = "ssh"
            if self.why_ssh is not None:
                data["why_ssh"] = self.why_ssh
        if self.router is not None:
            data["router"] = self.router.to_json()
        return data


@dataclass(frozen=True)
class GroupStatus:
    group: str
    members: tuple[MemberStatus, ...]
    prometheus: FleetView | None = None  # the answer the members' figures come from; None: none was asked

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.members)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"group": self.group, "ok": self.ok}
        if self.prometheus is not None:
            view = self.prometheus
            data["prometheus"] = {"url": view.prometheus, "asked_at": view.asked_at, "error": view.error}
        data["hosts"] = {m.label: m.to_json() for m in self.members}
        return data


async def read_group_status(
    group: str,
    members: Sequence[str],
    workspace: Workspace,
    *,
    fleet: FleetSettings | None,
    ssh_config: str | None = None,
    concurrency: int = SSH_CONCURRENCY,
) -> GroupStatus:
    """The group's members in their order. `fleet`: where Prometheus is (None, or one without a URL: every member over
    SSH)."""
    view: FleetView | None = None
    why_ssh: dict[str, str | None] = dict.fromkeys(members)
    if fleet is not None and fleet.prometheus is not None:
        view = await fleet_view_once(fleet, host_names(_targets(members, workspace, ssh_config)))
        for label in members:
            if view.down:
                why_ssh[label] = f"Prometheus could not be asked ({view.error})"
            elif label not in view.hosts:
                why_ssh[label] = "not in Prometheus"
    over_ssh = [m for m in members if view is None or m not in view.hosts]
    gate = asyncio.Semaphore(concurrency)

    async def read(label: str) -> MemberStatus:
        router = view.routers.get(label) if view is not None else None
        async with gate:
            try:
                async with open_session(label, workspace, ssh_config=ssh_config) as session:
                    status = await read_status(session)
            except HostError as exc:
                return MemberStatus(label, "ssh", error=str(exc), why_ssh=why_ssh[label], router=router)
        return MemberStatus(label, "ssh", status=status, why_ssh=why_ssh[label], router=router)

    read_over_ssh = dict(zip(over_ssh, await asyncio.gather(*(read(m) for m in over_ssh)), strict=True))
    statuses = []
    for label in members:
        if label in read_over_ssh:
            statuses.append(read_over_ssh[label])
        else:
            assert view is not None
            statuses.append(
                MemberStatus(label, "prometheus", figures=view.hosts[label], router=view.routers.get(label))
            )
    return GroupStatus(group, tuple(statuses), view)


def _targets(members: Sequence[str], workspace: Workspace, ssh_config: str | None) -> dict[str, Target]:
    """The members' targets, for the names Prometheus may know them by; one that does not resolve is left out (read
    over SSH, it then says why)."""
    targets = {}
    for label in members:
        try:
            targets[label] = resolve_target(label, profiles_dir=workspace.profiles, ssh_config=ssh_config)
        except HostError:
            continue
    return targets
