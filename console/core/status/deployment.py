"""`status DEPLOYMENT` and the console's deployment row: every member read side by side, the deployment judged as one
(console.core.deployment.health: rank 0's health, never a rank >= 1's dummy 200).

    async with open_members(deployment, workspace) as sessions:           # one session per member (errors kept)
        status = await read_deployment(deployment, sessions)              # DeploymentStatus: to_json(), ok
    status = await read_deployment_status(deployment, workspace)          # the same, sessions opened and closed

Per member, in one round: the unit and the GPUs (one command over SSH), the journal's tail (its failure lines since the
process started), and the member's own HTTP answers where they mean something: /health, /ready and the rest of
read_status for a single host, rank 0, a prefill or a decode server; for a rank >= 1 only its /metrics (never its
/health: a dummy 200). With `checks` the units are read too and held to each other (console.core.deployment.checks).
PD: smg's /readiness and worker list, each member's listing there, and its smg_pd_* counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from console.core.deployment import (
    Deployment,
    DeploymentHealth,
    Member,
    MemberHealth,
    MemberLaunch,
    MemberReading,
    Mismatch,
    RouterListing,
    RouterReading,
    SideReadings,
    check_members,
    judge,
    launch_from_unit,
)
from console.core.phases import is_failure_line
from console.core.session import Session, open_session
from console.core.status.host import HostStatus, ServiceStatus, read_status
from console.host.base import HostError
from console.host.gpu import GpuSample
from console.sglang.client import SglangError, parse_metrics_text
from console.sglang.flags import NEWEST_VERSION
from console.sglang.router import normalize_url
from console.workspace import Workspace

JOURNAL_TAIL = 20  # journal lines kept per member
JOURNAL_SCAN = 200  # lines read back to find a failure since the process started
ROUTER_TIMEOUT_S = 5.0
PD_METRIC_PREFIXES = ("smg_pd_",)
ENGINE_PD_METRICS = (
    "sglang:num_bootstrap_failed_reqs_total",
    "sglang:num_transfer_failed_reqs_total",
    "sglang:num_prefill_retries_total",
    "sglang:num_prefill_bootstrap_queue_reqs",
    "sglang:num_prefill_inflight_queue_reqs",
    "sglang:num_decode_prealloc_queue_reqs",
    "sglang:num_decode_transfer_queue_reqs",
)

# A member's session, or why there is none (its host could not be reached).
Opened = Mapping[str, "Session | HostError"]


@dataclass(frozen=True)
class MemberStatus:
    """One member as status shows it."""

    member: Member
    reading: MemberReading
    health: MemberHealth
    host: HostStatus | None = None  # read_status's, for a member that serves the real API
    service: ServiceStatus | None = None
    gpus: tuple[GpuSample, ...] = ()
    gpu_error: str | None = None
    journal_tail: tuple[str, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)  # its PD queues and counters, where it serves them
    worker_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.member.to_json(), **self.health.to_json()}
        reading = self.reading
        source = "own" if self.member.serves_api else "unit and journal (its own /health is a dummy 200)"
        out["health"] = {"source": source, "healthy": reading.healthy, "ready": reading.ready}
        out["service"] = self.service.model_dump(mode="json") if self.service is not None else {"error": reading.error}
        out["gpus"] = [g.model_dump(mode="json") for g in self.gpus]
        out["gpu_error"] = self.gpu_error
        out["journal_tail"] = list(self.journal_tail)
        out["failure"] = reading.failure
        if self.host is not None:
            out["sglang"] = self.host.sglang.model_dump(mode="json")
        if self.metrics:
            out["pd_metrics"] = dict(self.metrics)
        if reading.router is not None:
            out["router"] = {"url": self.worker_url, **reading.router.to_json()}
        return out


@dataclass(frozen=True)
class RouterStatus:
    url: str
    reading: RouterReading
    workers: tuple[dict[str, Any], ...] = ()
    pd_metrics: Mapping[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "ready": self.reading.ready,
            "error": self.reading.error,
            "detail": self.reading.detail,
            "workers": list(self.workers),
            "pd_metrics": dict(self.pd_metrics),
        }


@dataclass(frozen=True)
class DeploymentStatus:
    deployment: Deployment
    members: tuple[MemberStatus, ...]
    health: DeploymentHealth
    checks: tuple[Mismatch, ...] = ()
    router: RouterStatus | None = None
    version: str | None = None
    refresh_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.health.ok

    def member(self, name: str) -> MemberStatus:
        return next(m for m in self.members if m.member.name == name)

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        front = d.front_door
        return {
            "deployment": d.name,
            "kind": d.kind,
            "description": d.description,
            "state": self.health.state,
            "reason": self.health.reason,
            "front_door": front.name if front is not None else (d.router.url if d.router else None),
            "sglang_version": self.version,
            "members": [m.to_json() for m in self.members],
            "checks": [c.to_json() for c in self.checks],
            "router": self.router.to_json() if self.router is not None else None,
            "refresh_ms": self.refresh_ms,
        }


@contextlib.asynccontextmanager
async def open_members(
    deployment: Deployment, workspace: Workspace, *, ssh_config: str | None = None
) -> AsyncIterator[dict[str, Session | HostError]]:
    """A session per member, opened side by side; a member whose host cannot be reached gets its HostError instead
    (the others are still read). All closed afterwards."""
    async with AsyncExitStack() as stack:

        async def one(member: Member) -> Session | HostError:
            try:
                return await stack.enter_async_context(open_session(member.target, workspace, ssh_config=ssh_config))
            except HostError as exc:
                return exc

        opened = await asyncio.gather(*(one(m) for m in deployment.members))
        yield {m.name: s for m, s in zip(deployment.members, opened, strict=True)}


async def read_deployment_status(
    deployment: Deployment, workspace: Workspace, *, ssh_config: str | None = None, checks: bool = True
) -> DeploymentStatus:
    """One refresh of the whole deployment, its sessions opened for it and closed after."""
    async with open_members(deployment, workspace, ssh_config=ssh_config) as sessions:
        return await read_deployment(deployment, sessions, checks=checks)


async def read_deployment(
    deployment: Deployment, sessions: Opened, *, checks: bool = True, journal: bool = True
) -> DeploymentStatus:
    """Every member side by side, smg (PD) beside them, then the deployment judged; with `checks` the units held to
    each other too. Never raises for a member that cannot be read: it is `unknown`, the others still show."""
    started = time.monotonic()
    router_read = asyncio.ensure_future(read_router(deployment)) if deployment.router is not None else None
    read = await asyncio.gather(*(_read_member(m, sessions[m.name], journal=journal) for m in deployment.members))
    router: RouterStatus | None = None
    if router_read is not None:
        router = await router_read
        read = [_with_listing(r, router) for r in read]
    readings = [r.reading for r in read]
    health = judge(deployment, readings, router=router.reading if router else None)
    version = _version(read)
    found: tuple[Mismatch, ...] = ()
    if checks and not deployment.is_single:
        found = tuple(await _checks(deployment, sessions, read, version))
    members = tuple(
        MemberStatus(r.member, r.reading, health.members[r.member.name], r.host, r.service, r.gpus, r.gpu_error,
                     r.journal_tail, r.metrics, r.worker_url)
        for r in read
    )  # fmt: skip
    return DeploymentStatus(deployment, members, health, found, router, version,
                            round((time.monotonic() - started) * 1000, 1))  # fmt: skip


@dataclass
class _Read:
    member: Member
    reading: MemberReading
    host: HostStatus | None = None
    service: ServiceStatus | None = None
    gpus: tuple[GpuSample, ...] = ()
    gpu_error: str | None = None
    journal_tail: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    worker_url: str | None = None
    server_version: str | None = None


async def _read_member(member: Member, session: Session | HostError, *, journal: bool) -> _Read:
    if isinstance(session, HostError):
        return _Read(member, MemberReading(member, error=str(session)))
    url = member.worker_url(session.host.peer_address())
    if member.serves_api:
        status, ready, tail = await asyncio.gather(
            read_status(session), _ready(session), _journal(session, journal), return_exceptions=False
        )
        service, gpus, gpu_error = status.service, tuple(status.gpus), status.gpu_error
        healthy: bool | None = status.sglang.healthy
        metrics: dict[str, float] = {}
        if member.role in ("prefill", "decode"):
            metrics = await _engine_pd_metrics(session)
        host: HostStatus | None = status
        version = status.sglang.version
    else:
        poll, tail, metrics = await asyncio.gather(session.poll(), _journal(session, journal), _rank_metrics(session))
        if poll.state is None:
            service = ServiceStatus(unit=session.service.unit, error=session.secrets.text(poll.service_error or "?"))
        else:
            service = ServiceStatus.from_state(poll.state, datetime.now(UTC))
        gpus, gpu_error, healthy, ready, host, version = tuple(poll.gpus.gpus), poll.gpus.error, None, None, None, None
    if service.error is not None:
        return _Read(member, MemberReading(member, error=service.error), host, service, gpus, gpu_error,
                     worker_url=url)  # fmt: skip
    lines, failure = _since_start(tail, service.started_at, service.main_pid)
    reading = MemberReading(
        member,
        active_state=service.active_state,
        sub_state=service.sub_state,
        main_pid=service.main_pid,
        started_at=service.started_at,
        summary=service.summary,
        healthy=healthy,
        ready=ready if member.serves_api else None,
        failure=failure,
    )
    return _Read(member, reading, host, service, gpus, gpu_error, lines, metrics, url, version)


def member_reading(
    member: Member,
    status: HostStatus | None,
    *,
    error: str | None = None,
    failure: str | None = None,
    ready: bool | None = None,
) -> MemberReading:
    """A member's reading from a refresh of its host (read_status's, the console's HostWatcher's): its unit, and its
    own /health only where that means something (never a rank >= 1's dummy 200)."""
    if status is None or status.service.error is not None:
        why = error or (status.service.error if status is not None else None) or "not read yet"
        return MemberReading(member, error=why)
    service = status.service
    return MemberReading(
        member,
        active_state=service.active_state,
        sub_state=service.sub_state,
        main_pid=service.main_pid,
        started_at=service.started_at,
        summary=service.summary,
        healthy=status.sglang.healthy if member.serves_api else None,
        ready=ready if member.serves_api else None,
        failure=failure,
    )


def failure_since(
    lines: Sequence[tuple[datetime, str, int | None]], started_at: datetime | None, main_pid: int | None
) -> str | None:
    """The first failure line of the process running now (its own lines, or any from a second after its start)."""
    return _since_start(lines, started_at, main_pid)[1]


async def _ready(session: Session) -> bool | None:
    try:
        client = await session.sglang()
        return await client.ready()
    except (HostError, SglangError, OSError):
        return None


async def _journal(session: Session, wanted: bool) -> list[tuple[datetime, str, int | None]]:
    """The journal's last lines (time, text), masked; [] when not wanted or unreadable."""
    if not wanted:
        return []
    lines: list[tuple[datetime, str, int | None]] = []
    with contextlib.suppress(HostError, OSError):
        async for entry in session.service.journal(lines=JOURNAL_SCAN):
            lines.append((entry.timestamp, entry.message, entry.pid))
    return lines


def _since_start(
    tail: Sequence[tuple[datetime, str, int | None]], started_at: datetime | None, main_pid: int | None
) -> tuple[tuple[str, ...], str | None]:
    """The last lines to show, and the first failure line of the process running now: its own lines, or any line
    from a second after its start (systemd gives the start to the second: a line of the process before it may share
    that second)."""
    shown = tuple(text for _at, text, _pid in tail[-JOURNAL_TAIL:])
    if started_at is None:
        return shown, None
    after = started_at + timedelta(seconds=1)
    since = [text for at, text, pid in tail if (main_pid is not None and pid == main_pid) or at >= after]
    return shown, next((text for text in since if is_failure_line(text)), None)


async def _rank_metrics(session: Session) -> dict[str, float]:
    """A rank >= 1's /metrics where it serves them (--enable-metrics; its schedulers' gauges only with
    --enable-metrics-for-all-schedulers): what it says of its scheduler, never of its health."""
    try:
        client = await session.sglang()
        values = await client.metrics()
    except (HostError, SglangError, OSError):
        return {}
    return dict(values or {})


async def _engine_pd_metrics(session: Session) -> dict[str, float]:
    """A prefill or decode server's PD queues and its bootstrap and transfer failures (SGLang's /metrics)."""
    try:
        client = await session.sglang()
        response = await client.http.get("/metrics")
    except (HostError, httpx.HTTPError, OSError):
        return {}
    if response.status_code != 200:
        return {}
    with contextlib.suppress(ValueError):
        values, _ = parse_metrics_text(response.text, frozenset(ENGINE_PD_METRICS), ())
        return dict(values)
    return {}


async def read_router(deployment: Deployment) -> RouterStatus:
    """smg's /readiness, its worker list (each worker's url, worker_type, status, is_healthy) and its smg_pd_*
    counters (its --prometheus-port, where the profile names it)."""
    spec = deployment.router
    assert spec is not None
    workers: tuple[dict[str, Any], ...] = ()
    async with httpx.AsyncClient(base_url=spec.url, timeout=ROUTER_TIMEOUT_S) as http:
        try:
            answer = await http.get("/readiness")
            ready = answer.status_code == 200
            detail = _readiness_detail(answer)
            listed = await http.get("/workers")
            if listed.status_code == 200:
                payload = listed.json()
                workers = tuple(w for w in payload.get("workers", []) if isinstance(w, dict))
            reading = RouterReading(ready, None, detail)
        except (httpx.HTTPError, ValueError) as exc:
            reading = RouterReading(None, f"{type(exc).__name__}: {exc}")
    metrics: dict[str, float] = {}
    if spec.metrics is not None:
        metrics = await _router_pd_metrics(spec.metrics)
    return RouterStatus(spec.url, reading, workers, metrics)


async def read_sides(deployment: Deployment, sessions: Mapping[str, Session]) -> SideReadings:
    """smg's smg_pd_* counters and each member's /metrics now (a PD benchmark reads them before and after it:
    console.core.deployment.pd_sides)."""
    spec = deployment.router
    router = await _router_pd_metrics(spec.metrics) if spec is not None and spec.metrics else {}

    async def member(name: str) -> dict[str, float]:
        try:
            client = await sessions[name].sglang()
            answer = await client.http.get("/metrics")
            if answer.status_code != 200:
                return {}
            values, _ = parse_metrics_text(answer.text, None, ())
            return dict(values)
        except (HostError, httpx.HTTPError, OSError, ValueError):
            return {}

    names = [m.name for m in deployment.members if m.name in sessions]
    values = await asyncio.gather(*(member(n) for n in names))
    return SideReadings(router, dict(zip(names, values, strict=True)))


def _readiness_detail(answer: httpx.Response) -> str:
    with contextlib.suppress(ValueError):
        body = answer.json()
        if isinstance(body, dict):
            if answer.status_code == 200:
                return f"{body.get('healthy_workers', '?')} of {body.get('total_workers', '?')} workers healthy"
            return str(body.get("reason") or body.get("status") or "")
    return answer.text.strip()[:200]


async def _router_pd_metrics(url: str) -> dict[str, float]:
    try:
        async with httpx.AsyncClient(timeout=ROUTER_TIMEOUT_S) as http:
            answer = await http.get(url.rstrip("/") + "/metrics")
    except httpx.HTTPError:
        return {}
    if answer.status_code != 200:
        return {}
    out: dict[str, float] = {}
    for line in answer.text.splitlines():
        if not line.startswith(PD_METRIC_PREFIXES) or " " not in line:
            continue
        name, _, value = line.rpartition(" ")
        base = name.split("{", 1)[0]
        if base.endswith(("_bucket",)):
            continue
        with contextlib.suppress(ValueError):
            out[base] = out.get(base, 0.0) + float(value)
    return out


def listing_for(url: str, router: RouterStatus) -> RouterListing:
    """What smg says of the worker at `url`: listed or not, its status, its health."""
    wanted = normalize_url(url)
    worker = next((w for w in router.workers if normalize_url(str(w.get("url", ""))) == wanted), None)
    if worker is None:
        return RouterListing(False)
    healthy, status = worker.get("is_healthy"), worker.get("status")
    return RouterListing(
        True, status if isinstance(status, str) else None, healthy if isinstance(healthy, bool) else None
    )


def _with_listing(read: _Read, router: RouterStatus) -> _Read:
    if read.member.worker_type is None or router.reading.ready is None:
        return read
    read.reading = dataclasses.replace(read.reading, router=listing_for(read.worker_url or "", router))
    return read


def _version(read: Sequence[_Read]) -> str | None:
    return next((r.server_version for r in read if r.server_version), None)


async def _checks(
    deployment: Deployment, sessions: Opened, read: Sequence[_Read], version: str | None
) -> list[Mismatch]:
    """The members' units read and held to each other, by the rules of the version they run."""
    rules_version = version or deployment.sglang_version or NEWEST_VERSION
    launches: list[MemberLaunch] = []
    for r in read:
        session = sessions[r.member.name]
        if isinstance(session, HostError):
            continue
        try:
            text = await session.service.read_unit()
            launches.append(launch_from_unit(r.member, text, rules_version, server_version=r.server_version))
        except (HostError, ValueError):
            continue  # a unit that cannot be read is that member's own trouble, shown on its row
    return check_members(deployment, launches)
