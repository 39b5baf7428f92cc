"""`opsconsole status TARGET [--json]`: one refresh of the host (console.core.status.read_status), printed.

Exit status: 0 when the service could be read and SGLang answers /health with 200, else 1 (the JSON is
still printed); 1 without output when the host cannot be reached (the reason on stderr).

`status @GROUP` (console.core.status.group) prints the members in the group's order. With a Prometheus ([fleet]
prometheus in console.toml, or --prometheus URL) their figures come from it, one query for the group, in a table as
the console's overview shows them, and only a member it does not know (every member while it cannot be asked) is
read over SSH; `--ssh`, or no Prometheus, reads every member over SSH, a few at a time. With --json one object
`{"group", "ok", "prometheus": {"url", "asked_at", "error"} (when asked), "hosts": {label: ...}}`, each member
`{"source": "prometheus", "state", "seen_at", "up", "figures", "stale"?}` or its status over SSH with
`"source": "ssh"` (`{"error": reason, "source": "ssh"}` when it cannot be reached; `why_ssh` where a Prometheus was
asked); where Prometheus has smg's metrics, `"router": {url, healthy, circuit, stalled, waiting, token_usage, model,
overloaded, out}` (smg's view of its worker; `out`: why smg does not route to it). Exit 0 only when every member is
ok (what smg routes to does not change that).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from console import hints
from console.cli.common import run_verb, workspace_of
from console.core.session import open_session
from console.core.status import HostStatus, read_status
from console.errors import ExitCode, UsageError
from console.fleet.groups import is_group_ref, resolve_group_targets
from console.fleet.rows import DASH, FIGURE_COLUMNS, figures_cells, router_note, taken_out_line

if TYPE_CHECKING:
    from console.core.status import DeploymentStatus, GroupStatus, MemberStatus
    from console.fleet.settings import FleetSettings


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
    health = "healthy" if sg.healthy else "no API of its own (a rank >= 1?)" if sg.no_api else "not healthy"
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
    if args.ssh or args.prometheus:
        raise UsageError(f"{'--ssh' if args.ssh else '--prometheus'} is for @GROUP: one host is always read over SSH")
    from console.core.deployment import is_deployment

    if is_deployment(args.target, workspace_of(args).profiles):
        return await deployment_status_main(args, out)
    async with open_session(args.target, workspace_of(args), ssh_config=args.ssh_config) as session:
        status = await read_status(session)
    print(json.dumps(status.to_json(), indent=2) if args.json else render_text(status), file=out)
    return ExitCode.OK if status.ok else ExitCode.FAILED


async def group_status_main(args: argparse.Namespace, out: TextIO) -> int:
    from console.core.status import read_group_status

    workspace = workspace_of(args)
    members, _groups = resolve_group_targets([args.target], workspace.profiles)
    fleet = None if args.ssh else _fleet_settings(args, workspace.root)
    report = await read_group_status(args.target[1:], members, workspace, fleet=fleet, ssh_config=args.ssh_config)
    print(json.dumps(report.to_json(), indent=2) if args.json else render_group_text(report), file=out)
    return ExitCode.OK if report.ok else ExitCode.FAILED


def _fleet_settings(args: argparse.Namespace, root: Path) -> FleetSettings:
    """console.toml's [fleet], its Prometheus replaced by --prometheus (a usage error when it is not a URL)."""
    from console.fleet.settings import check_prometheus_url
    from console.tui.config import load_config  # pydantic and the settings' models only, not textual

    fleet = load_config(root).fleet
    if args.prometheus:
        try:
            fleet = fleet.model_copy(update={"prometheus": check_prometheus_url(args.prometheus)})
        except ValueError as exc:
            raise UsageError(f"--prometheus: {exc}") from None
    return fleet


def render_group_text(report: GroupStatus) -> str:
    """The members from Prometheus as one table (the overview's columns), then each member read over SSH."""
    view = report.prometheus
    over_ssh = [m for m in report.members if m.figures is None]
    blocks: list[str] = []
    if view is not None and view.down:
        blocks.append(f"Prometheus {view.prometheus} could not be asked ({view.error}): every host read over SSH")
    elif view is not None and view.asked_at is not None:
        from_prometheus = [m for m in report.members if m.figures is not None]
        asked = datetime.fromtimestamp(view.asked_at, UTC).strftime("%H:%M:%S UTC")
        blocks.append(
            f"@{report.group} from Prometheus {view.prometheus}, asked at {asked}: "
            f"{len(from_prometheus)} of {len(report.members)} hosts\n"
            + _table(from_prometheus)
            + f"\n(each host's unit, resolved setup and GPUs: {hints.STATUS_OVER_SSH.line(GROUP='@' + report.group)})"
        )
        around = taken_out_line(view)
        if around:
            blocks.append(around)
        if over_ssh:
            blocks.append(f"over SSH, not in Prometheus: {', '.join(m.label for m in over_ssh)}")
    blocks += [render_text(m.status) if m.status is not None else f"{m.label}  [cannot be reached: {m.error}]"
               for m in over_ssh]  # fmt: skip
    return "\n\n".join(blocks)


def _notes(member: MemberStatus) -> str:
    notes = [router_note(member.router), member.figures.stale if member.figures else ""]
    return ", ".join(n for n in notes if n) or DASH


def _table(members: list[MemberStatus]) -> str:
    header = ("host", "state", *FIGURE_COLUMNS, "notes")
    rows = [header] + [(m.label, m.state or "", *figures_cells(m.figures), _notes(m)) for m in members if m.figures]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    numeric = range(2, 2 + len(FIGURE_COLUMNS))
    return "\n".join(
        "  ".join(
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


async def deployment_status_main(args: argparse.Namespace, out: TextIO) -> int:
    """`status DEPLOYMENT`: every member side by side, the deployment judged as one (docs/deployments.md)."""
    from console.core.deployment import load_deployment
    from console.core.status import read_deployment_status

    workspace = workspace_of(args)
    deployment = load_deployment(args.target, workspace.profiles, ssh_config=args.ssh_config)
    status = await read_deployment_status(deployment, workspace, ssh_config=args.ssh_config)
    print(json.dumps(status.to_json(), indent=2) if args.json else render_deployment_text(status), file=out)
    return ExitCode.OK if status.ok else ExitCode.FAILED


def render_deployment_text(status: DeploymentStatus) -> str:
    """The deployment's line, a table of its members (state, unit, process, GPUs, health), then what must match and
    each member's trouble (its failure line, the end of its journal)."""
    d = status.deployment
    lines = [f"{d.name}  {d.kind}  {status.health.state.upper()}: {status.health.reason}"]
    if d.description:
        lines.append(f"  {d.description}")
    header = ("member", "host", "role", "state", "service", "pid", "gpus", "health")
    rows = [header]
    for m in status.members:
        member, reading = m.member, m.reading
        role = f"rank {member.rank}" if member.rank is not None else member.role
        gpus = f"{len(m.gpus)}" if m.gpus else ("?" if m.gpu_error else "–")
        rows.append((member.name, member.host, role, m.health.state, reading.summary or (reading.error or "?"),
                     _fmt(reading.main_pid), gpus, m.health.reason))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows]
    if status.router is not None:
        router = status.router
        ready = {True: "ready", False: "not ready", None: f"cannot be asked ({router.reading.error})"}[
            router.reading.ready
        ]
        lines.append(f"  smg {router.url}: {ready}" + (f" ({router.reading.detail})" if router.reading.detail else ""))
        if router.pd_metrics:
            lines.append("    " + ", ".join(f"{k} {v:g}" for k, v in sorted(router.pd_metrics.items())))
    for check in status.checks:
        lines.append(f"  {check.level}: {check.message}")
    for m in status.members:
        if m.health.state != "up" and m.journal_tail:
            lines.append(f"  journal {m.member.name}: {m.journal_tail[-1]}")
    lines.append(f"  (each member in full: {hints.STATUS_MEMBER.line(HOST=d.members[0].host)})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    return run_verb("status", lambda: status_main(args, sys.stdout))
