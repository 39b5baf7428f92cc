"""One full refresh of a host, as a typed `HostStatus` (its JSON is `opsconsole status --json`).

All reads of a refresh run concurrently over the one connection: `systemctl show` with the GPU poll
(both nvidia-smi queries, in one remote command) and the SGLang API through the port forward (/health and
the version first, then /model_info, the load endpoint and /metrics). A part that fails is reported
in its own `error` field; the other parts still show. The console's light refreshes (every second between full
ones) skip /health while its last answer was 200, /metrics answers and systemd says the service runs (read_sglang):
on SGLang it is a one-token generation and a line in the server's log.

JSON keys (stable; SGLang's own names where they exist):

    target                      the TARGET as typed
    connection.transport        ssh | local | demo
    connection.state            connected | reconnecting | failed | local ...
    connection.detail           e.g. "reconnecting (attempt 2, last error: ...)"
    service.unit                e.g. sglang.service
    service.active_state        active | activating | deactivating | inactive | failed
    service.sub_state           running | start | auto-restart | dead | failed ...
    service.main_pid            int or null
    service.started_at          ISO 8601 UTC (ExecMainStartTimestamp) or null
    service.uptime_s            seconds since started_at, null when not running
    service.n_restarts          NRestarts
    service.result              success | exit-code | signal | timeout ...
    service.unit_file_state     enabled | disabled | static ... (is-enabled)
    service.need_daemon_reload  bool
    service.fragment_path       the unit file
    service.last_exit           {code: exited | killed | dumped, status: exit status or signal} of the last
                                main process, null while one runs or when systemd has no record
    service.summary             one line, e.g. "active (running)", "failed (result: exit-code, exit status 1)",
                                "stopped (SGLang exits by SIGKILL on stop)" (console/core/exits.py)
    service.error               why the service could not be read, else absent (and only unit beside it)
    sglang.url                  the local URL used (through the port forward), null when there is none
    sglang.healthy              /health answered 200 (never for a server with no API of its own: see no_api)
    sglang.no_api               true: the server answers but serves no /server_info: a rank >= 1 of a multi-node
                                deployment, whose dummy /health always answers 200 (judge it at rank 0)
    sglang.version              /server_info version
    sglang.model_path, sglang.served_model_name
    sglang.speculative_algorithm, sglang.speculative_draft_model_path, sglang.speculative_num_steps,
    sglang.speculative_eagle_topk, sglang.speculative_num_draft_tokens, sglang.disable_overlap_schedule
                                resolved values (internal_states[0], else the top level)
    sglang.max_running_requests, sglang.effective_max_running_requests_per_dp, sglang.max_total_num_tokens
    sglang.avg_spec_accept_length    lifetime mean accept length (internal_states[0])
    sglang.speculative_adaptive      true with --speculative-adaptive (0.5.23), absent otherwise
    sglang.adaptive_num_steps        the adaptive tier running now (internal_states[0]; steps: the launch config)
    sglang.adaptive_num_draft_tokens its draft tokens
    sglang.last_gen_throughput  tok/s of the last decode log window
    sglang.num_running_reqs, sglang.num_queue_reqs, sglang.gen_throughput   load endpoint, else /metrics
    sglang.spec_accept_length, sglang.spec_accept_rate, sglang.token_usage, sglang.cache_hit_rate
                                /metrics gauges (last window)
    sglang.error                why SGLang could not be read, else absent
    gpus[]                      index, name, uuid, utilization_gpu, utilization_memory, memory_used_mib,
                                memory_total_mib, power_draw_w, power_limit_w, temperature_gpu,
                                clocks_sm_mhz, clocks_mem_mhz, pstate, throttle_reasons[]
    gpu_processes[]             gpu_uuid, pid, process_name, used_memory_mib
    gpu_error                   nvidia-smi / NVML failure text, or null
    refresh_ms                  how long the refresh took
    production                  the host's production snapshot (`opsconsole freeze`) and the drift from it; absent
                                when the host has none: {snapshot, frozen_at, document, in_sync (null while the
                                server's values are unknown), drift: [{key, running, production, text}]}, text e.g.
                                "steps 3, production v2 has 2" (console/core/snapshot/drift.py)
    notices[]                   what the console did on its own and says once, e.g. that it uses the unit's
                                --api-key (no profile names a key; the key itself is never shown); absent when none
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    WrapValidator,
    field_serializer,
    model_serializer,
)

from console.core.exits import exit_json
from console.core.session import Session
from console.core.snapshot import ProductionStatus, production_of_host
from console.host.base import HostError, ServiceState
from console.host.gpu import GpuProcess, GpuSample, GpuSnapshot
from console.sglang.client import NoSglangApi, SglangClient, SglangError, summarize


def _lenient(value: Any, handler: Any) -> Any:
    """A server's figure that is not of the expected type is shown as unknown, never a failed refresh."""
    try:
        return handler(value)
    except ValidationError:
        return None


Num = Annotated[float | None, WrapValidator(_lenient)]
Int = Annotated[int | None, WrapValidator(_lenient)]
Flag = Annotated[bool | None, WrapValidator(_lenient)]
Text = Annotated[str | None, WrapValidator(_lenient)]


def _without_absent_error(data: dict[str, Any]) -> dict[str, Any]:
    if data.get("error") is None:
        data.pop("error", None)
    return data


class ConnectionStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    transport: str
    state: str
    detail: str


class ServiceStatus(BaseModel):
    """What systemd (or the demo supervisor) says about the unit; only `unit` and `error` when unreadable."""

    model_config = ConfigDict(frozen=True)

    unit: str
    active_state: str | None = None
    sub_state: str | None = None
    main_pid: int | None = None
    started_at: datetime | None = None
    uptime_s: float | None = None
    n_restarts: int | None = None
    result: str | None = None
    unit_file_state: str | None = None
    need_daemon_reload: bool | None = None
    fragment_path: str | None = None
    last_exit: dict[str, Any] | None = None
    summary: str | None = None
    error: str | None = None

    @classmethod
    def from_state(cls, state: ServiceState, now: datetime) -> ServiceStatus:
        uptime = None
        if state.started_at is not None and state.running:
            uptime = round(max(0.0, (now - state.started_at).total_seconds()), 1)
        return cls(
            unit=state.unit,
            active_state=state.active_state,
            sub_state=state.sub_state,
            main_pid=state.main_pid,
            started_at=state.started_at,
            uptime_s=uptime,
            n_restarts=state.n_restarts,
            result=state.result,
            unit_file_state=state.unit_file_state,
            need_daemon_reload=state.need_daemon_reload,
            fragment_path=state.fragment_path,
            **exit_json(state),  # type: ignore[arg-type]
        )

    @field_serializer("started_at")
    def _iso(self, value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.error is not None:
            return {"unit": self.unit, "error": self.error}
        return _without_absent_error(data)


class SglangStatus(BaseModel):
    """The server as its HTTP API shows it, under SGLang's own names."""

    model_config = ConfigDict(frozen=True)

    url: str | None = None
    healthy: bool = False
    no_api: Flag = None  # answers, but no /server_info: a rank >= 1's dummy server (its /health means nothing)
    version: Text = None
    model_path: Text = None
    served_model_name: Text = None
    speculative_algorithm: Text = None
    speculative_draft_model_path: Text = None
    speculative_num_steps: Int = None
    speculative_eagle_topk: Int = None
    speculative_num_draft_tokens: Int = None
    disable_overlap_schedule: Flag = None
    # --speculative-adaptive: on (else absent), and the tier the server runs now (internal_states[0]); the steps and
    # draft tokens above stay the launch config
    speculative_adaptive: Flag = None
    adaptive_num_steps: Int = None
    adaptive_num_draft_tokens: Int = None
    max_running_requests: Int = None
    effective_max_running_requests_per_dp: Int = None
    max_total_num_tokens: Int = None
    avg_spec_accept_length: Num = None
    last_gen_throughput: Num = None
    num_running_reqs: Int = None
    num_queue_reqs: Int = None
    gen_throughput: Num = None
    spec_accept_length: Num = None
    spec_accept_rate: Num = None
    token_usage: Num = None
    cache_hit_rate: Num = None
    error: str | None = None

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_absent_error(handler(self))


class HostStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    target: str
    connection: ConnectionStatus
    service: ServiceStatus
    sglang: SglangStatus
    gpus: list[GpuSample]
    gpu_processes: list[GpuProcess]
    gpu_error: str | None
    refresh_ms: float
    production: ProductionStatus | None = None
    notices: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The service could be read and SGLang answers /health with 200."""
        return self.service.error is None and self.sglang.healthy

    def to_json(self) -> dict[str, Any]:
        absent = {"production"} if self.production is None else set()
        return self.model_dump(mode="json", exclude=absent | ({"notices"} if not self.notices else set()))


async def read_sglang(
    client: SglangClient, *, light: bool = False, health_stands: Callable[[], Awaitable[bool]] | None = None
) -> SglangStatus:
    """Health, version-dependent endpoints, metrics; the first call detects the version (and reuses that
    /server_info payload), later calls read everything in one concurrent round. `light` reads only what moves
    every second (/health, the load endpoint, /metrics) and takes /server_info and /model_info from the last
    full read: the resolved server args change only with a restart.

    `health_stands` (light reads): /health last answered 200, /metrics answers now and `health_stands()` says
    nothing else changed: then /health is not asked, its answer stands; otherwise it is asked at once. SGLang's
    /health is a one-token generation (about a second on 0.5.17) and a line in the server's log every time, while
    what can turn it to 503 with /metrics still answering (a SIGTERM's drain) shows in systemd's state first:
    read_status says whether the service still runs."""
    info: Any
    healthy: Any
    if light and client.version is not None and client.last_server_info is not None:
        carry = health_stands is not None and client.last_healthy is True
        health = health_stands() if carry and health_stands is not None else client.healthy()
        if client.metrics_carry_load:  # the load endpoint would repeat /metrics' gauges: one request less
            healthy, metrics = await asyncio.gather(health, client.metrics(), return_exceptions=True)
            load = None
        else:
            healthy, load, metrics = await asyncio.gather(
                health, client.load(), client.metrics(), return_exceptions=True
            )
        if carry and not (healthy is True and isinstance(metrics, dict)):  # something moved: what does /health say
            healthy = await client.healthy()
        info, model = client.last_server_info, client.last_model_info
        if isinstance(healthy, BaseException):
            healthy = False
    elif client.version is None:
        healthy, version = await asyncio.gather(client.healthy(), _version_or_error(client))
        if isinstance(version, SglangError):
            # A server with no API of its own (a rank >= 1's dummy) answers /health 200 whatever its schedulers do.
            if isinstance(version, NoSglangApi):
                return SglangStatus(url=client.base_url, healthy=False, no_api=True, error=str(version))
            return SglangStatus(url=client.base_url, healthy=healthy, error=str(version))
        info = client.last_server_info
        model, load, metrics = await asyncio.gather(
            client.model_info(), client.load(), client.metrics(), return_exceptions=True
        )
    else:
        healthy, info, model, load, metrics = await asyncio.gather(
            client.healthy(),
            client.server_info(),
            client.model_info(),
            client.load(),
            client.metrics(),
            return_exceptions=True,
        )
        if isinstance(healthy, BaseException):
            healthy = False
        if isinstance(info, BaseException):
            # Not answering (a restart): the last payload is another process's. Forget it, so that the light reads
            # that follow read /server_info again instead of showing the old process's values as what runs now.
            client.last_server_info = None
    summary = summarize(
        info if isinstance(info, dict) else None,
        model if isinstance(model, dict) else None,
        None if isinstance(load, BaseException) else load,
        metrics if isinstance(metrics, dict) else None,
    )
    # /metrics missing or an absent load route are normal; server_info is not
    error = str(info) if isinstance(info, BaseException) else None
    return SglangStatus(url=client.base_url, healthy=bool(healthy), **summary, error=error)


async def _version_or_error(client: SglangClient) -> str | SglangError | None:
    try:
        return await client.detect_version()
    except SglangError as exc:
        return exc


async def read_status(session: Session, *, light: bool = False) -> HostStatus:
    """One refresh (everything concurrently); never raises for a part that fails. `light`: see read_sglang."""
    started = time.monotonic()

    async def service_and_gpus() -> tuple[ServiceStatus, GpuSnapshot]:
        poll = await session.poll()  # the unit and the GPUs in one remote command
        if poll.state is None:
            error = session.secrets.text(poll.service_error or "unknown")
            return ServiceStatus(unit=session.service.unit, error=error), poll.gpus
        return ServiceStatus.from_state(poll.state, datetime.now(UTC)), poll.gpus

    service_read = asyncio.ensure_future(service_and_gpus())

    async def service_runs_on() -> bool:
        """systemd says the service runs (a refresh that finds it otherwise asks /health at once)."""
        service, _gpus = await asyncio.shield(service_read)
        return service.error is None and service.active_state == "active" and service.sub_state == "running"

    async def sglang() -> SglangStatus:
        try:
            client = await session.sglang()
        except HostError as exc:
            return SglangStatus(error=session.secrets.text(str(exc)))
        return await read_sglang(client, light=light, health_stands=service_runs_on if light else None)

    (service_part, snapshot), sglang_part = await asyncio.gather(service_read, sglang())
    connection = session.connection
    return HostStatus(
        target=session.label,
        connection=ConnectionStatus(
            transport=session.target.transport, state=connection.phase, detail=connection.describe()
        ),
        service=service_part,
        sglang=sglang_part,
        gpus=snapshot.gpus,
        gpu_processes=snapshot.processes,
        gpu_error=snapshot.error,
        refresh_ms=round((time.monotonic() - started) * 1000, 1),
        production=production_of_host(session.workspace, session.label, session.service.unit, sglang_part),
        notices=tuple(session.take_notices()),
    )
