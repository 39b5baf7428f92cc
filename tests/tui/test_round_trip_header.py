"""The link's round trip in each host's header (pure rendering of the core's HostView)."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from console.core.status import Monitor
from console.host.ssh import ConnectionState
from console.tui.widgets.panels import render_header
from tests.tui.support import NOW, status, view


def _text(renderable: object) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_header_shows_the_links_round_trip() -> None:
    far = dataclasses.replace(view("gpu-far"), round_trip_ms=302.4)
    assert "connected · rtt 302 ms  gpu-far" in _text(render_header(far, NOW))
    assert "rtt" not in _text(render_header(view("gpu-near"), NOW))  # local and demo hosts have no link


def test_no_round_trip_while_not_connected() -> None:
    down = dataclasses.replace(view("gpu-far"), round_trip_ms=302.4, connection=ConnectionState("reconnecting", 2, "x"))
    assert "rtt" not in _text(render_header(down, NOW))


def test_a_refresh_without_a_new_figure_keeps_the_last_one() -> None:
    monitor = Monitor("gpu-far")
    monitor.refreshed(status("gpu-far"), round_trip_ms=301.0)
    assert monitor.refreshed(status("gpu-far")).round_trip_ms == 301.0
    assert monitor.refreshed(status("gpu-far"), round_trip_ms=150.0).round_trip_ms == 150.0
