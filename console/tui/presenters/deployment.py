"""A deployment as the console shows it (pure): one line for the deployment (its kind, its state and why), a row per
member (its role, its state and why, its unit, its GPUs), smg's line for PD. The state is the core's judgement
(console.core.deployment.health): rank 0's health, never a rank >= 1's dummy 200."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.core.deployment import Deployment, DeploymentHealth
from console.core.status import HostView, RouterStatus

STATE_STYLES = {"up": "green", "degraded": "bold yellow", "down": "bold red", "starting": "yellow",
                "out": "yellow", "unknown": "yellow"}  # fmt: skip


def deployment_panel(
    deployment: Deployment,
    health: DeploymentHealth | None,
    views: Mapping[str, HostView],
    router: RouterStatus | None = None,
) -> RenderableType:
    head = Text()
    head.append(f"{deployment.name} ", style="bold")
    head.append(f"({deployment.kind}, {len(deployment.members)} members) ", style="dim")
    if health is None:
        head.append("reading its members ...", style="dim")
    else:
        head.append(health.state.upper(), style=STATE_STYLES[health.state])
        head.append(f"  {health.reason}", style="dim" if health.ok else STATE_STYLES[health.state])
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=True)
    for column in ("member", "role", "state", "unit", "pid", "GPUs"):
        # the unit's state gives way first (ellipsis) on a narrow terminal: the reason is what the row is for
        table.add_column(column, no_wrap=True, overflow="ellipsis", ratio=1 if column == "unit" else None)
    table.add_column("why", overflow="fold", ratio=2)
    for member in deployment.members:
        judged = health.members.get(member.name) if health is not None else None
        view = views.get(member.name)
        status = view.status if view is not None else None
        service = status.service if status is not None else None
        role = f"rank {member.rank}" if member.rank is not None else member.role
        state = judged.state if judged is not None else "…"
        table.add_row(
            Text(member.name, style="bold"),
            role,
            Text(state, style=STATE_STYLES.get(state, "")),
            Text(service.summary or "–" if service is not None else "–", style="dim"),
            str(service.main_pid) if service is not None and service.main_pid else "–",
            str(len(status.gpus)) if status is not None and status.gpus else "–",
            Text(judged.reason if judged is not None else "", style="dim"),
        )
    parts: list[RenderableType] = [head, table]
    if router is not None:
        ready = {True: ("ready", "green"), False: ("not ready", "bold red"), None: ("cannot be asked", "yellow")}
        word, style = ready[router.reading.ready]
        line = Text(f"smg {router.url}: ", style="dim")
        line.append(word, style=style)
        if router.reading.detail or router.reading.error:
            line.append(f" ({router.reading.detail or router.reading.error})", style="dim")
        if router.pd_metrics:
            counters = sorted(router.pd_metrics.items())
            line.append("  " + ", ".join(f"{k.removeprefix('smg_pd_')} {v:g}" for k, v in counters), style="dim")
        parts.append(line)
    return Group(*parts)
