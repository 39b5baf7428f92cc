"""`opsconsole status TARGET [--json]`: one refresh of the host (console.core.status), printed.

Exit status: 0 when the service could be read and SGLang answers /health with 200, else 1 (the JSON is
still printed); 1 without output when the host cannot be reached (the reason on stderr).

`status @GROUP` reads every member at once (a few at a time) and prints them in the group's order; with --json one
object `{"group", "ok", "hosts": {label: status, or {"error": reason} for a host that cannot be reached}}`.
Exit 0 only when every member is ok.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, TextIO

from console.cli.common import run_verb, workspace_of
from console.core.session import open_session
from console.core.status import HostStatus, read_status
from console.errors import ExitCode
from console.fleet.groups import is_group_ref, resolve_group_targets
from console.host.base import HostError

GROUP_CONCURRENCY = 16  # members read at once


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


def render_text(status: HostStatus) -> str:
    lines = [f"{status.target}  [{status.connection.detail}]"]
    svc = status.service
    if svc.error is not None:
        lines.append(f"  service  {svc.unit}: {svc.error}")
    else:
        lines.append(
            f"  service  {svc.unit} {svc.summary} pid {_fmt(svc.main_pid)} "
            f"up {format_uptime(svc.uptime_s)} restarts {svc.n_restarts} {svc.unit_file_state}"
            + (" (needs daemon-reload)" if svc.need_daemon_reload else "")
        )
    sg = status.sglang
    health = "healthy" if sg.healthy else "not healthy"
    lines.append(f"  sglang   {health} version {_fmt(sg.version)} model {_fmt(sg.model_path)}")
    if sg.speculative_algorithm:
        lines.append(
            f"           {sg.speculative_algorithm} steps {_fmt(sg.speculative_num_steps)} "
            f"topk {_fmt(sg.speculative_eagle_topk)} draft tokens "
            f"{_fmt(sg.speculative_num_draft_tokens)} accept len "
            # 0 until a decode window has been aggregated: show it as unknown, not as "no gain"
            f"{_fmt(sg.avg_spec_accept_length or sg.spec_accept_length or None, '', 2)}"
        )
    max_running, effective = sg.max_running_requests, sg.effective_max_running_requests_per_dp
    lines.append(
        f"           running {_fmt(sg.num_running_reqs)} queued {_fmt(sg.num_queue_reqs)} "
        f"max running {_fmt(max_running)}"
        + (f" (effective {effective})" if effective and effective != max_running else "")
        + f" throughput {_fmt(sg.gen_throughput, ' tok/s', 1)}"
    )
    if sg.error:
        lines.append(f"           error: {sg.error}")
    for gpu in status.gpus:
        lines.append(
            f"  gpu {gpu.index}    {_fmt(gpu.name)} util {_fmt(gpu.utilization_gpu, '%')} "
            f"mem {_fmt(gpu.memory_used_mib)}/{_fmt(gpu.memory_total_mib)} MiB "
            f"power {_fmt(gpu.power_draw_w)}/{_fmt(gpu.power_limit_w)} W "
            f"{_fmt(gpu.temperature_gpu, ' °C')} sm {_fmt(gpu.clocks_sm_mhz, ' MHz')}"
        )
    if status.gpu_error:
        lines.append(f"  gpus     {status.gpu_error}")
    lines.extend(production_lines(status))
    lines.extend(f"  note     {notice}" for notice in status.notices)
    return "\n".join(lines)


def production_lines(status: HostStatus) -> list[str]:
    """The production snapshot line (`opsconsole freeze`), when the host has one."""
    prod = status.production
    if prod is None:
        return []
    if prod.in_sync is None:
        return [f"  production  {prod.snapshot} (the server's values are unknown now)"]
    if prod.in_sync:
        return [f"  production  {prod.snapshot}: runs it"]
    return [f"  production  {prod.snapshot}: DRIFT: {prod.summary}"]


async def status_main(args: argparse.Namespace, out: TextIO) -> int:
    if is_group_ref(args.target):
        return await group_status_main(args, out)
    async with open_session(args.target, workspace_of(args), ssh_config=args.ssh_config) as session:
        status = await read_status(session)
    print(json.dumps(status.to_json(), indent=2) if args.json else render_text(status), file=out)
    return ExitCode.OK if status.ok else ExitCode.FAILED


async def group_status_main(args: argparse.Namespace, out: TextIO) -> int:
    workspace = workspace_of(args)
    members, _groups = resolve_group_targets([args.target], workspace.profiles)
    gate = asyncio.Semaphore(GROUP_CONCURRENCY)

    async def one(label: str) -> HostStatus | str:
        async with gate:
            try:
                async with open_session(label, workspace, ssh_config=args.ssh_config) as session:
                    return await read_status(session)
            except HostError as exc:
                return str(exc)

    results = dict(zip(members, await asyncio.gather(*(one(m) for m in members)), strict=True))
    ok = all(isinstance(r, HostStatus) and r.ok for r in results.values())
    if args.json:
        hosts = {m: r.to_json() if isinstance(r, HostStatus) else {"error": r} for m, r in results.items()}
        print(json.dumps({"group": args.target[1:], "ok": ok, "hosts": hosts}, indent=2), file=out)
    else:
        blocks = [render_text(r) if isinstance(r, HostStatus) else f"{m}  [cannot be reached: {r}]"
                  for m, r in results.items()]  # fmt: skip
        print("\n\n".join(blocks), file=out)
    return ExitCode.OK if ok else ExitCode.FAILED


def run(args: argparse.Namespace) -> int:
    return run_verb("status", lambda: status_main(args, sys.stdout))
