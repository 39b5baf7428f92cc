"""The fleet overview's rows, banner and host-header note (pure functions of a FleetView)."""

from __future__ import annotations

from console.fleet.rows import figures_cells
from console.fleet.telemetry import FleetView, HostFigures
from console.tui.widgets.fleet_overview import COLUMNS, banner, fleet_row, header_note
from tests.tui.support import view as ssh_view

FIGURES = {"throughput": 1234.4, "running": 12, "queued": 3, "accept_length": 2.714, "token_usage": 0.456,
           "ttft_p50": 0.1204, "ttft_p99": 0.9, "itl_p50": 0.012, "itl_p99": 0.031, "gpu_util": 87.4,
           "fb_used_mib": 100, "fb_total_mib": 400, "power_w": 3200.2, "temp_c": 71}  # fmt: skip


def _row(fleet: FleetView, host: str, ssh: object = None) -> dict[str, str]:
    return dict(zip(COLUMNS, (c.plain for c in fleet_row(host, fleet, ssh)), strict=True))  # type: ignore[arg-type]


def test_a_fresh_hosts_figures_as_the_overview_writes_them() -> None:
    figures = HostFigures("a", FIGURES, {"sglang": 1, "dcgm": 1}, 99.0)
    assert figures_cells(figures) == ["1,234", "12/3", "2.71", "46", "900", "31", "87", "25", "3,200", "71"]
    fleet = FleetView("http://p", 100.0, None, {"a": figures}, ("b",))
    assert _row(fleet, "a")["state"] == "up" and _row(fleet, "a")["notes"] == "–"
    assert _row(fleet, "b")["state"] == "unknown" and _row(fleet, "b")["notes"] == "not in Prometheus"
    assert (
        "not in Prometheus (1): b" in banner(fleet, 2, 103.0).plain and "asked 3s ago" in banner(fleet, 2, 103.0).plain
    )
    note = header_note(fleet, "a")
    assert (
        note.plain == "  Prometheus: TTFT p50/p99 120/900 ms · ITL p50/p99 12/31 ms · KV 46 %" and note.style == "cyan"
    )
    assert header_note(fleet, "b").plain == ""


def test_old_figures_are_dimmed_and_say_why() -> None:
    stale = HostFigures("a", FIGURES, {"sglang": 1, "dcgm": 0}, 90.0, stale="scrape failing: dcgm")
    fleet = FleetView("http://p", 100.0, None, {"a": stale})
    cells = fleet_row("a", fleet, None)
    assert cells[1].plain == "down" and cells[2].style == "dim" and cells[-1].plain == "scrape failing: dcgm"
    assert header_note(fleet, "a").plain.endswith("(scrape failing: dcgm)")


def test_prometheus_down_open_hosts_show_their_ssh_figures_and_the_rest_are_dimmed() -> None:
    fresh = HostFigures("a", FIGURES, {"sglang": 1}, 99.0)
    down = FleetView("http://p", 100.0, "http://p cannot be reached (connection refused)", {"a": fresh}, ())
    assert banner(down, 2, 200.0).plain.startswith("Prometheus DOWN: http://p cannot be reached (connection refused)")
    assert _row(down, "a")["state"] == "stale" and _row(down, "a")["notes"] == "Prometheus down"
    open_host = ssh_view("b")
    row = _row(down, "b", open_host)
    assert row["state"] == "via SSH" and row["gen tok/s"] != "–"
    never = FleetView("http://p", None, "http://p cannot be reached (connection refused)")
    assert _row(never, "a")["notes"] == "Prometheus down"
    assert _row(FleetView("http://p"), "a")["notes"] == "waiting for Prometheus"
