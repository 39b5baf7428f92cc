"""SVG snapshots of the console's screens at 80×24, 120×40 and 200×60 (pytest-textual-snapshot).

Clock, host names and figures are fixed: the hosts are scripted HostViews built by the core's own Monitor
from fixed refreshes, and the app's clock is frozen (tests/tui/support.py). `pytest --snapshot-update`
rewrites them after an intended change; look at the report before committing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from textual.pilot import Pilot

from console.host.ssh import ConnectionState
from tests.tui.support import NOW, screen_text, scripted_app, startup_journal, view, wait_until


def _settled(*needles: str) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        await wait_until(pilot, lambda: all(n in screen_text(pilot.app) for n in needles), f"{needles} on screen")  # type: ignore[arg-type]

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
def test_dashboard(snap_compare: Any, size: tuple[int, int]) -> None:
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": startup_journal()})
    assert snap_compare(app, terminal_size=size, run_before=_settled("server is fired", "TTFT"))


def test_dashboard_eight_gpus_one_throttled(snap_compare: Any) -> None:
    shown = view(gpus=8)
    status = shown.status
    assert status is not None
    hot = status.gpus[5].model_copy(update={"temperature_gpu": 88.0, "throttle_reasons": ["sw_thermal_slowdown"]})
    gpus = [*status.gpus[:5], hot, *status.gpus[6:]]
    shown = replace(shown, status=status.model_copy(update={"gpus": gpus}))
    app = scripted_app(views={"gpu-a": shown}, journal={"gpu-a": startup_journal()})
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settled("thermal", "server is fired"))


def test_overview_of_three_hosts(snap_compare: Any) -> None:
    views = {
        "gpu-a": view("gpu-a"),
        "gpu-b": replace(view("gpu-b", active="failed", healthy=False)),
        "gpu-c": replace(view("gpu-c"), connection=ConnectionState("reconnecting", 2, "Connection lost")),
    }
    app = scripted_app(("gpu-a", "gpu-b", "gpu-c"), views=views)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("o")
        await wait_until(
            pilot, lambda: "GPU power W" in screen_text(app) and "reconnecting" in screen_text(app), "overview"
        )

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_help(snap_compare: Any) -> None:
    app = scripted_app(views={"gpu-a": view()}, read_only=True)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys — host gpu-a" in screen_text(app), "help")

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_reconnecting(snap_compare: Any) -> None:
    shown = replace(view(), connection=ConnectionState("reconnecting", 4, "Connection lost"))
    app = scripted_app(views={"gpu-a": shown}, clock=lambda: NOW + timedelta(seconds=20))
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settled("reconnecting (attempt 4)", "STALE"))


def test_service_failed_and_server_unhealthy(snap_compare: Any) -> None:
    app = scripted_app(views={"gpu-a": view(active="failed", healthy=False)})
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settled("failed/failed", "unhealthy"))


def test_no_gpu_tool(snap_compare: Any) -> None:
    app = scripted_app(views={"gpu-a": view(gpu_error="nvidia-smi: command not found (exit 127)")})
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settled("command not found"))
