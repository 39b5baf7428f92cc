"""The fleet's overview (a [fleet] prometheus is set): every host of the fleet on one table, its figures read from
Prometheus (console.core.fleet_watch), one line above saying where they come from and what Prometheus lacks.
Enter opens the host's tab, which connects over SSH for its journal, unit and actions.

A host's row: Prometheus's figures while they are fresh; its last figures dimmed, with the reason, when they are
not; while Prometheus is down, an open host's figures from its own SSH polling (said "via SSH"), others dimmed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from console.core.monitor import HostView
from console.fleet.telemetry import FleetView, HostFigures
from console.tui.format import DASH, num

COLUMNS = ("host", "state", "gen tok/s", "run/queue", "accept", "KV %", "TTFT p99 ms", "ITL p99 ms",
           "GPU util %", "GPU mem %", "power W", "temp °C", "notes")  # fmt: skip


def _ms(seconds: float | None) -> str:
    return num(None if seconds is None else seconds * 1000, 0)


def _pct(part: float | None, whole: float | None) -> str:
    return num(part / whole * 100, 0) if part is not None and whole else DASH


def figures_cells(f: HostFigures) -> list[str]:
    """The figure cells of a host (columns 3..12), as the overview writes them (pure)."""
    running, queued = f.get("running"), f.get("queued")
    usage = f.get("token_usage")
    return [
        num(f.get("throughput"), 0),
        DASH if running is None else f"{running:.0f}/{num(queued, 0)}",
        num(f.get("accept_length"), 2),
        num(None if usage is None else usage * 100, 0),
        _ms(f.get("ttft_p99")),
        _ms(f.get("itl_p99")),
        num(f.get("gpu_util"), 0),
        _pct(f.get("fb_used_mib"), f.get("fb_total_mib")),
        num(f.get("power_w"), 0),
        num(f.get("temp_c"), 0),
    ]


def _ssh_cells(view: HostView) -> list[str]:
    status = view.status
    if status is None:
        return [DASH] * 10
    sg, gpus = status.sglang, status.gpus
    util = [g.utilization_gpu for g in gpus if g.utilization_gpu is not None]
    used = sum(g.memory_used_mib or 0 for g in gpus)
    total = sum(g.memory_total_mib or 0 for g in gpus)
    power = [g.power_draw_w for g in gpus if g.power_draw_w is not None]
    temps = [g.temperature_gpu for g in gpus if g.temperature_gpu is not None]
    usage = sg.token_usage
    return [
        num(sg.gen_throughput, 0),
        DASH if sg.num_running_reqs is None else f"{sg.num_running_reqs}/{num(sg.num_queue_reqs, 0)}",
        num(sg.spec_accept_length or sg.avg_spec_accept_length, 2),
        num(None if usage is None else usage * 100, 0),
        DASH,
        DASH,
        num(sum(util) / len(util), 0) if util else DASH,
        _pct(used, total),
        num(sum(power), 0) if power else DASH,
        num(max(temps), 0) if temps else DASH,
    ]


def fleet_row(host: str, fleet: FleetView, ssh: HostView | None) -> list[Text]:
    """One host's row (pure): what Prometheus says, or why it says nothing, or the SSH figures of an open tab."""
    figures = fleet.hosts.get(host)
    name = Text(host, style="bold")
    if fleet.down and ssh is not None and ssh.status is not None:
        return [name, Text("via SSH", style="cyan"), *(Text(c, justify="right") for c in _ssh_cells(ssh)),
                Text("Prometheus down: this open host's own polling", style="dim")]  # fmt: skip
    if figures is None:
        if fleet.asked_at is None:
            state, note = Text("…", style="dim"), ("Prometheus down" if fleet.down else "waiting for Prometheus")
        else:
            state, note = Text("unknown", style="yellow"), "not in Prometheus"
        return [name, state, *(Text(DASH, style="dim") for _ in range(10)), Text(note, style="bold yellow")]
    failing = any(up == 0 for up in figures.up.values())
    if failing:
        state = Text("down", style="bold red")
    elif figures.stale or fleet.down:
        state = Text("stale", style="yellow")
    else:
        state = Text("up", style="green")
    dim = "dim" if figures.stale or fleet.down else ""
    notes = [n for n in (figures.stale, "Prometheus down" if fleet.down else "") if n]
    cells = [Text(c, style=dim, justify="right") for c in figures_cells(figures)]
    return [name, state, *cells, Text(", ".join(notes) or DASH, style="bold yellow" if notes else "dim")]


def banner(fleet: FleetView, hosts: int, now: float) -> Text:
    """The line above the table: where the figures come from, how old, and what Prometheus lacks (pure)."""
    text = Text()
    if fleet.down:
        text.append(f"Prometheus DOWN: {fleet.error}", style="bold red")
        text.append(" · open hosts are polled over SSH; the rest keep their last figures", style="yellow")
    elif fleet.asked_at is None:
        text.append(f"Prometheus {fleet.prometheus}: asking…", style="dim")
    else:
        text.append(f"Prometheus {fleet.prometheus}", style="bold")
        text.append(f" · {hosts} hosts · asked {max(0.0, now - fleet.asked_at):.0f}s ago", style="dim")
    if fleet.unknown:
        shown = ", ".join(fleet.unknown[:8]) + (f" (+{len(fleet.unknown) - 8})" if len(fleet.unknown) > 8 else "")
        text.append(f"\nnot in Prometheus ({len(fleet.unknown)}): {shown}", style="yellow")
    return text


def _cell_key(cell: Text) -> tuple[object, ...]:
    return (cell.plain, str(cell.style), cell.justify, tuple(cell.spans))


class FleetTable(DataTable[Text]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "open_host", "Open host", id="open-host")]

    class OpenHost(Message):
        def __init__(self, label: str) -> None:
            super().__init__()
            self.label = label

    def action_open_host(self) -> None:
        if self.row_count:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
            if key is not None:
                self.post_message(self.OpenHost(str(key)))


class FleetOverview(Vertical):
    """The banner and the table; show() redraws only the cells that read otherwise (200 rows at each refresh)."""

    def __init__(self, hosts: list[str], title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hosts = hosts
        self.title = title
        self._shown: dict[str, list[tuple[object, ...]]] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title, style="bold"), classes="fleet-title")
        yield Static(classes="fleet-banner")
        yield FleetTable(id="fleet-table")

    @property
    def table(self) -> FleetTable:
        return self.query_one(FleetTable)

    def on_mount(self) -> None:
        table = self.table
        table.cursor_type = "row"
        table.zebra_stripes = True
        for column in COLUMNS:
            table.add_column(column, key=column)

    def show_banner(self, fleet: FleetView, now: datetime) -> None:
        self.query_one(".fleet-banner", Static).update(banner(fleet, len(self.hosts), now.timestamp()))

    def show(self, fleet: FleetView, ssh_views: Mapping[str, HostView], now: datetime) -> None:
        self.show_banner(fleet, now)
        table = self.table
        for host in self.hosts:
            row = fleet_row(host, fleet, ssh_views.get(host))
            keys = [_cell_key(cell) for cell in row]
            shown = self._shown.get(host)
            if shown == keys:
                continue
            if shown is not None:
                for column, cell, key, before in zip(COLUMNS, row, keys, shown, strict=True):
                    if key != before:
                        table.update_cell(host, column, cell, update_width=True)
            else:
                table.add_row(*row, key=host)
            self._shown[host] = keys
