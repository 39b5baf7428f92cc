"""SVG snapshots of `connect DEPLOYMENT`'s overview: the deployment's panel above the members' table, for the demo's
two deployments (two-node: rank 0 and rank 1, rank 1 judged by its unit, never its dummy /health; pd: a prefill and a
decode server behind smg, smg's line with its workers and counters), and the PD pair with its decode server killed
(down, the member named). The members are scripted HostViews built by the core's own Monitor, smg a scripted
reading (console.tui.context.ConsoleOptions.read_router), the clock frozen (tests/tui/support.py).
`pytest --snapshot-update` rewrites them after an intended change; look at them before committing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from console.core.deployment import Deployment, RouterReading, parse_deployment
from console.core.status import HostView, RouterStatus
from console.host.targets import SglangEndpoint, Target
from tests.tui.support import screen_text, scripted_app, view, wait_until

TWO_NODE = {
    "description": "the Kimi K2.5 profile over two nodes (TP 8 = 2 x 4 GPUs)",
    "member": [
        {"host": "demo-rank0", "role": "rank", "rank": 0},
        {"host": "demo-rank1", "role": "rank", "rank": 1},
    ],
}
PD = {
    "description": "the Qwen 3.5 profile as a prefill and a decode server behind smg",
    "router": {"url": "http://127.0.0.1:30000", "metrics": "http://127.0.0.1:29000"},
    "member": [
        {"host": "demo-prefill", "role": "prefill", "url": "http://127.0.0.1:41001", "bootstrap_port": 8998},
        {"host": "demo-decode", "role": "decode", "url": "http://127.0.0.1:41002"},
    ],
}


def deployment(data: dict[str, Any]) -> Deployment:
    def target_of(host: str) -> Target:
        return Target(label=host, transport="local", unit=f"sglang-{host}.service", sglang=SglangEndpoint(port=41000))

    return parse_deployment(data, name="demo", where="profiles/deployments/demo.toml", target_of=target_of)


def member_view(label: str, *, killed: bool = False) -> HostView:
    """A member as its host's refresh shows it: its own unit, running (or killed: failed by a signal)."""
    shown = view(label, active="failed" if killed else "active", healthy=not killed)
    status = shown.status
    assert status is not None
    summary = "failed (result: signal, killed by SIGKILL)" if killed else "active (running)"
    result = "signal" if killed else "success"
    pid = None if killed else 4200 + sum(map(ord, label)) % 100
    service = status.service.model_copy(update={"unit": f"sglang-{label}.service", "summary": summary,
                                                "result": result, "main_pid": pid})  # fmt: skip
    return replace(shown, status=status.model_copy(update={"service": service}))


def smg(deployment: Deployment, *, decode_healthy: bool = True) -> Any:
    workers = tuple(
        {"url": m.url, "worker_type": m.role, "status": "ready", "is_healthy": m.role != "decode" or decode_healthy}
        for m in deployment.members
    )
    ready = (
        RouterReading(True, None, "2 of 2 workers healthy")
        if decode_healthy
        else RouterReading(False, None, "no healthy decode worker")
    )
    counters = {"smg_pd_admission_window": 48.0, "smg_pd_bootstrap_failures_total": 0.0}
    status = RouterStatus("http://127.0.0.1:30000", ready, workers, counters)

    async def read(_deployment: Deployment) -> RouterStatus:
        return status

    return read


def overview(*needles: str) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("o")
        await wait_until(pilot, lambda: all(n in screen_text(pilot.app) for n in needles), f"{needles} on screen")  # type: ignore[arg-type]

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_a_two_node_deployment(snap_compare: Any, size: tuple[int, int]) -> None:
    d = deployment(TWO_NODE)
    labels = tuple(m.name for m in d.members)
    app = scripted_app(labels, views={n: member_view(n) for n in labels}, deployments=(d,))
    assert snap_compare(app, terminal_size=size, run_before=overview("demo (multinode, 2 members) UP"))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_a_pd_deployment_behind_smg(snap_compare: Any, size: tuple[int, int]) -> None:
    d = deployment(PD)
    labels = tuple(m.name for m in d.members)
    app = scripted_app(labels, views={n: member_view(n) for n in labels}, deployments=(d,), read_router=smg(d))
    assert snap_compare(app, terminal_size=size, run_before=overview("demo (pd, 2 members) UP", "ready"))


def test_a_pd_deployment_with_its_decode_server_killed(snap_compare: Any) -> None:
    d = deployment(PD)
    views = {"demo-prefill": member_view("demo-prefill"), "demo-decode": member_view("demo-decode", killed=True)}
    app = scripted_app(tuple(views), views=views, deployments=(d,), read_router=smg(d, decode_healthy=False))
    assert snap_compare(app, terminal_size=(120, 40), run_before=overview("DOWN", "demo-decode"))
