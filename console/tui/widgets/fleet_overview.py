"""The fleet's overview (a [fleet] prometheus is set): every host of the fleet on one table, its figures read from
Prometheus (console.core.status.fleet), one line above saying where they come from and what Prometheus lacks.
Enter opens the host's tab, which connects over SSH for its journal, unit and actions; space selects hosts for a
rolling change (e / r / F, see console/tui/widgets/selection.py).

A host's row: Prometheus's figures while they are fresh; its last figures dimmed, with the reason, when they are
not; while Prometheus is down, an open host's figures from its own SSH polling (said "via SSH"), others dimmed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import ClassVar

from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from console.core.status import HostView
from console.fleet.rows import FIGURE_COLUMNS, figures_cells, host_state, ms_cell, pct_cell, router_note, taken_out_line
from console.fleet.telemetry import FleetView
from console.tui.format import DASH, num
from console.tui.widgets.selection import MARK, SELECTION_BINDINGS, HostSelection, SelectionBar

COLUMNS = ("host", "state", *FIGURE_COLUMNS, "notes")
# Column widths (the host column: its longest name); a cell longer than its column ends in an ellipsis.
WIDTHS = {"state": 7, "gen tok/s": 9, "run/queue": 9, "accept": 6, "KV %": 4, "TTFT p99 ms": 11, "ITL p99 ms": 10,
          "GPU util %": 10, "GPU mem %": 9, "power W": 7, "temp °C": 7, "notes": 36}  # fmt: skip
_STATE_STYLES = {"down": "bold red", "stale": "yellow", "up": "green"}


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
        pct_cell(used, total),
        num(sum(power), 0) if power else DASH,
        num(max(temps), 0) if temps else DASH,
    ]


def fleet_row(host: str, fleet: FleetView, ssh: HostView | None) -> list[Text]:
    """One host's row (pure): what Prometheus says, or why it says nothing, or the SSH figures of an open tab."""
    figures = fleet.hosts.get(host)
    name = Text(host, style="bold")
    routed_around = router_note(fleet.routers.get(host))  # smg left it out of routing: said first
    if fleet.down and ssh is not None and ssh.status is not None:
        return [name, Text("via SSH", style="cyan"), *(Text(c, justify="right") for c in _ssh_cells(ssh)),
                Text("Prometheus down: this open host's own polling", style="dim")]  # fmt: skip
    if figures is None:
        if fleet.asked_at is None:
            state, note = Text("…", style="dim"), ("Prometheus down" if fleet.down else "waiting for Prometheus")
        else:
            state, note = Text("unknown", style="yellow"), "not in Prometheus"
        note = ", ".join(n for n in (routed_around, note) if n)
        return [name, state, *(Text(DASH, style="dim") for _ in range(10)), Text(note, style="bold yellow")]
    word = host_state(figures, prometheus_down=fleet.down)
    state = Text(word, style=_STATE_STYLES[word])
    dim = "dim" if figures.stale or fleet.down else ""
    notes = [n for n in (routed_around, figures.stale, "Prometheus down" if fleet.down else "") if n]
    cells = [Text(c, style=dim, justify="right") for c in figures_cells(figures)]
    style = "bold red" if routed_around else "bold yellow" if notes else "dim"
    return [name, state, *cells, Text(", ".join(notes) or DASH, style=style)]


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
    around = taken_out_line(fleet)
    if around and not fleet.down:
        text.append(f"\n{around}", style="bold red")
    if fleet.unknown:
        shown = ", ".join(fleet.unknown[:8]) + (f" (+{len(fleet.unknown) - 8})" if len(fleet.unknown) > 8 else "")
        text.append(f"\nnot in Prometheus ({len(fleet.unknown)}): {shown}", style="yellow")
    return text


def header_note(fleet: FleetView | None, host: str) -> Text:
    """What Prometheus says of an open host, for the end of its header (pure): its latency percentiles and KV use,
    which the host's own /metrics polling does not give as percentiles over a window; dim and said when old."""
    figures = fleet.hosts.get(host) if fleet is not None else None
    if fleet is None or figures is None:
        return Text()
    old = bool(figures.stale) or fleet.down
    usage = figures.get("token_usage")
    text = Text(
        f"  Prometheus: TTFT p50/p99 {ms_cell(figures.get('ttft_p50'))}/{ms_cell(figures.get('ttft_p99'))} ms"
        f" · ITL p50/p99 {ms_cell(figures.get('itl_p50'))}/{ms_cell(figures.get('itl_p99'))} ms"
        f" · KV {num(None if usage is None else usage * 100, 0)} %",
        style="dim" if old else "cyan",
    )
    if old:
        text.append(f" ({figures.stale or 'Prometheus down'})", style="yellow")
    return text


def _cell_key(cell: Text) -> tuple[object, ...]:
    return (cell.plain, str(cell.style), cell.justify, tuple(cell.spans))


class FleetTable(HostSelection, ScrollView, can_focus=True):
    """The fleet's rows, drawn line by line: a row is rendered to a strip when it is first shown after a change
    and kept, so a refresh that changes 200 rows costs what the visible ones cost, and a key that moves the
    cursor redraws two lines. (Textual's DataTable re-rendered every visible cell after each update and measured
    its columns again: over 100 ms a refresh, which a key pressed meanwhile waited for.) The header stays on the
    first line; the rows scroll under it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_host", "Open host", id="open-host"),
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor(-1000000)", "First host", show=False),
        Binding("end", "cursor(1000000)", "Last host", show=False),
        *SELECTION_BINDINGS,
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"fleet-table--header", "fleet-table--cursor", "fleet-table--even"}
    DEFAULT_CSS = """
    FleetTable { height: 1fr; }
    FleetTable > .fleet-table--header { text-style: bold; background: $panel; }
    FleetTable > .fleet-table--cursor { background: $block-cursor-blurred-background; }
    FleetTable:focus > .fleet-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    FleetTable > .fleet-table--even { background: $surface-lighten-1 20%; }
    """

    class OpenHost(Message):
        def __init__(self, label: str) -> None:
            super().__init__()
            self.label = label

    def __init__(self, hosts: list[str], widths: Mapping[str, int], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.order = list(hosts)
        self.widths = [widths[c] for c in COLUMNS]
        self.cursor_row = 0
        self._cells: dict[str, list[Text]] = {}
        self._strips: dict[str, Strip] = {}  # rendered rows, dropped when a row changes
        self._header: Strip | None = None
        self.virtual_size = Size(sum(self.widths) + len(self.widths) - 1, len(self.order) + 1)
        self.init_selection()

    @property
    def row_count(self) -> int:
        return len(self.order)

    def get_row(self, host: str) -> list[Text]:
        return self._cells[host]

    def set_row(self, host: str, cells: list[Text]) -> None:
        self._cells[host] = cells
        self._strips.pop(host, None)

    def _line(self, cells: list[Text]) -> Text:
        line = Text(no_wrap=True, end="")
        for index, (cell, width) in enumerate(zip(cells, self.widths, strict=True)):
            if index:
                line.append(" ")
            if cell.cell_len > width:
                cell = cell.copy()
                cell.truncate(width, overflow="ellipsis")
            gap = " " * (width - cell.cell_len)
            if cell.justify == "right":
                line.append(gap)
                line.append_text(cell)
            else:
                line.append_text(cell)
                line.append(gap)
        return line

    def _strip_of(self, text: Text) -> Strip:
        segments = list(text.render(self.app.console))
        return Strip(segments, text.cell_len)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = int(self.scroll_x), int(self.scroll_y)
        base = self.rich_style
        if y == 0:
            if self._header is None:
                self._header = self._strip_of(self._line([Text(c, justify="left") for c in COLUMNS]))
            header = self.get_component_rich_style("fleet-table--header")
            return self._header.apply_style(base + header).crop_extend(scroll_x, scroll_x + width, base + header)
        index = scroll_y + y - 1
        if index >= len(self.order):
            return Strip.blank(width, base)
        host = self.order[index]
        strip = self._strips.get(host)
        if strip is None:
            cells = self._cells.get(host) or [Text(host), *(Text("") for _ in COLUMNS[1:])]
            cells = [self.host_cell(host, cells[0]), *cells[1:]]
            strip = self._strips[host] = self._strip_of(self._line(cells))
        style = base
        if index % 2:
            style = base + self.get_component_rich_style("fleet-table--even")
        if index == self.cursor_row:
            cursor = self.get_component_rich_style("fleet-table--cursor")
            return Strip(Segment.apply_style(strip, style, cursor)).crop_extend(
                scroll_x, scroll_x + width, style + cursor
            )
        return strip.apply_style(style).crop_extend(scroll_x, scroll_x + width, style)

    def refresh_rows(self) -> None:
        self.refresh()

    def move_cursor(self, *, row: int) -> None:
        before, self.cursor_row = self.cursor_row, max(0, min(row, len(self.order) - 1))
        visible = max(1, self.size.height - 1)
        if self.cursor_row < self.scroll_y:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= self.scroll_y + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)
        for index in (before, self.cursor_row):
            self.refresh(Region(0, index - int(self.scroll_y) + 1, self.size.width, 1))

    def action_cursor(self, step: int) -> None:
        self.move_cursor(row=self.cursor_row + step)

    def action_page(self, direction: int) -> None:
        self.move_cursor(row=self.cursor_row + direction * max(1, self.size.height - 2))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_y) + event.y - 1
        if event.y >= 1 and 0 <= index < len(self.order):
            self.move_cursor(row=index)
            if event.chain >= 2:
                self.action_open_host()

    def action_open_host(self) -> None:
        if self.order:
            self.post_message(self.OpenHost(self.order[self.cursor_row]))

    # -- the selection (console/tui/widgets/selection.py) ---------------------------------------------------

    def host_order(self) -> list[str]:
        return self.order

    def host_under_cursor(self) -> str | None:
        return self.order[self.cursor_row] if self.order else None

    def next_row(self) -> None:
        self.move_cursor(row=self.cursor_row + 1)

    def marks_changed(self, hosts: list[str]) -> None:
        for host in hosts:
            self._strips.pop(host, None)
        self.refresh()


class FleetOverview(Vertical):
    """The banner and the table; show() redraws only the cells that read otherwise (200 rows at each refresh)."""

    def __init__(self, hosts: list[str], title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hosts = hosts
        self.title = title
        self._shown: dict[str, list[tuple[object, ...]]] = {}
        self._banner: Text | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title, style="bold"), classes="fleet-title")
        yield Static(classes="fleet-banner")
        yield SelectionBar(id="fleet-selection")
        # the host column has room for a selection's mark
        widths = {**WIDTHS, "host": max(len("host"), *(len(h) for h in self.hosts)) + len(MARK)}
        yield FleetTable(self.hosts, widths, id="fleet-table")

    @property
    def table(self) -> FleetTable:
        return self.query_one(FleetTable)

    def show_banner(self, fleet: FleetView, now: datetime) -> None:
        text = banner(fleet, len(self.hosts), now.timestamp())
        if text != self._banner:  # Text's == compares the characters and their styles
            self._banner = text
            self.query_one(".fleet-banner", Static).update(text)

    def show(self, fleet: FleetView, ssh_views: Mapping[str, HostView], now: datetime) -> None:
        self.show_banner(fleet, now)
        table = self.table
        changed = False
        for host in self.hosts:
            row = fleet_row(host, fleet, ssh_views.get(host))
            keys = [_cell_key(cell) for cell in row]
            if self._shown.get(host) != keys:
                table.set_row(host, row)
                self._shown[host] = keys
                changed = True
        if changed:
            table.refresh_rows()
