"""`opsconsole status TARGET [--json]`: one full refresh of a host.

All reads of a refresh run concurrently over the one connection: `systemctl show`, the GPU poll
(both nvidia-smi queries on one channel) and the SGLang API through the port forward (/health and
the version first, then /model_info, the load endpoint and /metrics). A part that fails is reported
in its own `error` field; the other parts still show.

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
    service.last_exit           {code: exited | killed | dumped, status: exit status or signal} of the last
                                main process, null while it runs
    service.summary             one line, e.g. "active (running)", "failed (result: exit-code, exit status 1)",
                                "stopped (SGLang exits by SIGKILL on stop)" (a stop SGLang 0.5.17 ends by
                                SIGKILLing itself leaves the unit failed with Result=signal: not a crash)
    service.unit_file_state     enabled | disabled | static ... (is-enabled)
    service.need_daemon_reload  bool
    service.fragment_path       the unit file
    service.error               why the service could not be read, else absent
    sglang.url                  the local URL used (through the port forward)
    sglang.healthy              /health answered 200
    sglang.version              /server_info version
    sglang.model_path, sglang.served_model_name
    sglang.speculative_algorithm, sglang.speculative_draft_model_path, sglang.speculative_num_steps,
    sglang.speculative_eagle_topk, sglang.speculative_num_draft_tokens, sglang.disable_overlap_schedule
                                resolved values (internal_states[0], else the top level)
    sglang.max_running_requests, sglang.effective_max_running_requests_per_dp, sglang.max_total_num_tokens
    sglang.avg_spec_accept_length    lifetime mean accept length (internal_states[0])
    sglang.spec_accept_length, sglang.spec_accept_rate, sglang.token_usage   /metrics gauges (last window)
    sglang.num_running_reqs, sglang.num_queue_reqs, sglang.gen_throughput   load endpoint, else /metrics
    sglang.last_gen_throughput  tok/s of the last decode log window
    sglang.error                why SGLang could not be read, else absent
    gpus[]                      index, name, uuid, utilization_gpu, utilization_memory, memory_used_mib,
                                memory_total_mib, power_draw_w, power_limit_w, temperature_gpu,
                                clocks_sm_mhz, clocks_mem_mhz, pstate, throttle_reasons[]
    gpu_processes[]             gpu_uuid, pid, process_name, used_memory_mib
    gpu_error                   nvidia-smi / NVML failure text, or null
    refresh_ms                  how long the refresh took

Exit status: 0 when the service could be read and SGLang answers /health with 200, else 1 (the JSON
is still printed); 1 without output when the host cannot be reached (the reason on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any, TextIO

from console.core.exits import exit_json
from console.host.base import HostError, ServiceState
from console.host.connect import HostSession, open_host
from console.host.targets import resolve_target
from console.sglang.client import SglangClient, SglangError, summarize
from console.workspace import Workspace

EXIT_OK, EXIT_FAILED = 0, 1


def service_json(state: ServiceState, now: datetime) -> dict[str, Any]:
    uptime = None
    if state.started_at is not None and state.running:
        uptime = max(0.0, (now - state.started_at).total_seconds())
    return {
        "unit": state.unit,
        "active_state": state.active_state,
        "sub_state": state.sub_state,
        "main_pid": state.main_pid,
        "started_at": state.started_at.isoformat() if state.started_at else None,
        "uptime_s": round(uptime, 1) if uptime is not None else None,
        "n_restarts": state.n_restarts,
        "result": state.result,
        "unit_file_state": state.unit_file_state,
        "need_daemon_reload": state.need_daemon_reload,
        "fragment_path": state.fragment_path,
        **exit_json(state),
    }


async def read_sglang(client: SglangClient) -> dict[str, Any]:
    """Health, version-dependent endpoints, metrics; the first call detects the version (and reuses that
    /server_info payload), later calls read everything in one concurrent round."""
    out: dict[str, Any] = {"url": client.base_url}
    info: Any
    if client.version is None:
        healthy, version = await asyncio.gather(client.healthy(), _version_or_error(client))
        out["healthy"] = healthy
        if isinstance(version, SglangError):
            return {**out, **summarize(None), "error": str(version)}
        info = client.last_server_info
        model, load, metrics = await asyncio.gather(
            client.model_info(), client.load(), client.metrics(), return_exceptions=True
        )
    else:
        out["healthy"], info, model, load, metrics = await asyncio.gather(
            client.healthy(),
            client.server_info(),
            client.model_info(),
            client.load(),
            client.metrics(),
            return_exceptions=True,
        )
        if isinstance(out["healthy"], BaseException):
            out["healthy"] = False
    summary = summarize(
        info if isinstance(info, dict) else None,
        model if isinstance(model, dict) else None,
        None if isinstance(load, BaseException) else load,
        metrics if isinstance(metrics, dict) else None,
    )
    out.update(summary)
    if isinstance(info, BaseException):  # /metrics missing or an absent load route are normal; server_info is not
        out["error"] = str(info)
    return out


async def _version_or_error(client: SglangClient) -> str | SglangError | None:
    try:
        return await client.detect_version()
    except SglangError as exc:
        return exc


async def collect_status(session: HostSession) -> dict[str, Any]:
    """One full refresh (everything concurrently); never raises for a part that fails."""
    started = time.monotonic()

    async def service() -> dict[str, Any]:
        try:
            return service_json(await session.service.state(), datetime.now(UTC))
        except HostError as exc:
            return {"unit": session.service.unit, "error": str(exc)}

    async def sglang() -> dict[str, Any]:
        try:
            client = await session.sglang()
        except HostError as exc:
            return {"healthy": False, **summarize(None), "error": str(exc)}
        return await read_sglang(client)

    service_part, sglang_part, snapshot = await asyncio.gather(service(), sglang(), session.gpus())
    connection = session.connection
    return {
        "target": session.label,
        "connection": {
            "transport": session.target.transport,
            "state": connection.phase,
            "detail": connection.describe(),
        },
        "service": service_part,
        "sglang": sglang_part,
        "gpus": [g.model_dump() for g in snapshot.gpus],
        "gpu_processes": [p.model_dump() for p in snapshot.processes],
        "gpu_error": snapshot.error,
        "refresh_ms": round((time.monotonic() - started) * 1000, 1),
    }


def _fmt(value: Any, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def format_uptime(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}:{minutes:02d}:{secs:02d}" if days else f"{hours:02d}:{minutes:02d}:{secs:02d}"


def render_text(status: dict[str, Any]) -> str:
    lines = [f"{status['target']}  [{status['connection']['detail']}]"]
    svc = status["service"]
    if "error" in svc:
        lines.append(f"  service  {svc['unit']}: {svc['error']}")
    else:
        lines.append(
            f"  service  {svc['unit']} {svc['summary']} pid {_fmt(svc['main_pid'])} "
            f"up {format_uptime(svc['uptime_s'])} restarts {svc['n_restarts']} {svc['unit_file_state']}"
            + (" (needs daemon-reload)" if svc["need_daemon_reload"] else "")
        )
    sg = status["sglang"]
    health = "healthy" if sg.get("healthy") else "not healthy"
    lines.append(f"  sglang   {health} version {_fmt(sg.get('version'))} model {_fmt(sg.get('model_path'))}")
    if sg.get("speculative_algorithm"):
        lines.append(
            f"           {sg['speculative_algorithm']} steps {_fmt(sg.get('speculative_num_steps'))} "
            f"topk {_fmt(sg.get('speculative_eagle_topk'))} draft tokens "
            f"{_fmt(sg.get('speculative_num_draft_tokens'))} accept len "
            # 0 until a decode window has been aggregated: show it as unknown, not as "no gain"
            f"{_fmt(sg.get('avg_spec_accept_length') or sg.get('spec_accept_length') or None, '', 2)}"
        )
    max_running, effective = sg.get("max_running_requests"), sg.get("effective_max_running_requests_per_dp")
    lines.append(
        f"           running {_fmt(sg.get('num_running_reqs'))} queued {_fmt(sg.get('num_queue_reqs'))} "
        f"max running {_fmt(max_running)}"
        + (f" (effective {effective})" if effective and effective != max_running else "")
        + f" throughput {_fmt(sg.get('gen_throughput'), ' tok/s', 1)}"
    )
    if sg.get("error"):
        lines.append(f"           error: {sg['error']}")
    for gpu in status["gpus"]:
        lines.append(
            f"  gpu {gpu['index']}    {_fmt(gpu['name'])} util {_fmt(gpu['utilization_gpu'], '%')} "
            f"mem {_fmt(gpu['memory_used_mib'])}/{_fmt(gpu['memory_total_mib'])} MiB "
            f"power {_fmt(gpu['power_draw_w'])}/{_fmt(gpu['power_limit_w'])} W "
            f"{_fmt(gpu['temperature_gpu'], ' °C')} sm {_fmt(gpu['clocks_sm_mhz'], ' MHz')}"
        )
    if status["gpu_error"]:
        lines.append(f"  gpus     {status['gpu_error']}")
    return "\n".join(lines)


async def status_main(args: argparse.Namespace, out: TextIO) -> int:
    workspace = Workspace.resolve(args.workspace)
    target = resolve_target(args.target, profiles_dir=workspace.profiles, ssh_config=args.ssh_config)
    session = await open_host(target, logs_dir=workspace.logs)
    try:
        status = await collect_status(session)
    finally:
        await session.close()
    print(json.dumps(status, indent=2) if args.json else render_text(status), file=out)
    ok = "error" not in status["service"] and bool(status["sglang"].get("healthy"))
    return EXIT_OK if ok else EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(status_main(args, sys.stdout))
    except HostError as exc:
        print(f"opsconsole status: {exc}", file=sys.stderr)
        return EXIT_FAILED
