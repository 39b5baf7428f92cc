"""Every host on one table (dolphie's host groups, k9s's contexts): state, version, setup, throughput,
acceptance, GPU power, alerts. Enter opens the host; space selects hosts for a rolling change (e / r / F, see
console/tui/widgets/selection.py)."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey

from console.core.status import HostView, setup_label
from console.tui.format import DASH, age, num
from console.tui.widgets.selection import SELECTION_BINDINGS, HostSelection

COLUMNS = ("host", "state", "SGLang", "setup", "gen tok/s", "accept", "GPU power W", "alerts")


def overview_row(view: HostView, now: datetime, *, dummy_health: bool = False) -> list[Text]:
    """The host's row; dummy_health: a rank >= 1 of a multi-node deployment, whose /health is a dummy 200 (its state
    says only that its unit runs: the deployment's panel judges it)."""
    status = view.status
    if status is None:
        state = Text(view.connection.phase if not view.error else "unreachable", style="yellow")
        return [Text(view.label, style="bold"), state, *(Text(DASH) for _ in range(5)), _alerts(view, now)]
    svc, sg = status.service, status.sglang
    if view.connection.phase == "reconnecting":
        state = Text("reconnecting", style="bold red")
    elif svc.error is not None:
        state = Text("unknown", style="yellow")
    elif dummy_health and svc.active_state == "active":
        state = Text("runs (rank ≥ 1)", style="cyan")
    elif svc.active_state == "active" and sg.healthy:
        state = Text("healthy", style="green")
    else:
        state = Text(f"{svc.active_state}" + ("" if sg.healthy else ", unhealthy"), style="bold red")
    power = [g.power_draw_w for g in status.gpus if g.power_draw_w is not None]
    accept = sg.spec_accept_length or sg.avg_spec_accept_length
    dim = "dim" if view.is_stale(view.refreshed_at, now) else ""
    return [
        Text(view.label, style="bold"),
        state,
        Text(num(sg.version), style=dim),
        Text(setup_label(view) or DASH, style=dim),
        Text(num(sg.gen_throughput, 0), style=dim, justify="right"),
        Text(num(accept, 2), style=dim, justify="right"),
        Text(num(sum(power), 0) if power else DASH, style=dim, justify="right"),
        _alerts(view, now),
    ]


def _alerts(view: HostView, now: datetime) -> Text:
    alerts = list(view.alerts)
    if view.status is not None and view.is_stale(view.refreshed_at, now):
        alerts.insert(0, f"stale {age(view.age_s(view.refreshed_at, now))}")
    return Text(", ".join(alerts) or DASH, style="bold yellow" if alerts else "dim")


def _cell_key(cell: Text) -> tuple[object, ...]:
    # Text's own == compares the characters and spans only, not the base style (dim when stale)
    return (cell.plain, str(cell.style), cell.justify, tuple(cell.spans))


class Overview(HostSelection, DataTable[Text]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_host", "Open host", id="open-host"),
        *SELECTION_BINDINGS,
    ]

    class OpenHost(Message):
        def __init__(self, label: str) -> None:
            super().__init__()
            self.label = label

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: dict[str, list[tuple[object, ...]]] = {}  # per host, what each cell shows now
        self._rows: dict[str, list[Text]] = {}  # per host, its latest row as overview_row wrote it (no mark)
        self.dummy_health: set[str] = set()  # ranks >= 1 of a deployment: their /health says nothing
        self.init_selection()

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for column in COLUMNS:
            self.add_column(column, key=column)

    def show(self, view: HostView, now: datetime) -> None:
        """Only the cells that read otherwise are updated: every updated cell has the table measure its column
        again, which with 16 hosts a second was the console's largest single cost."""
        row = overview_row(view, now, dummy_health=view.label in self.dummy_health)
        self._rows[view.label] = row
        self._put(view.label, row)

    def _put(self, label: str, row: list[Text]) -> None:
        row = [self.host_cell(label, row[0]), *row[1:]]
        keys = [_cell_key(cell) for cell in row]
        shown = self._shown.get(label)
        if shown == keys:
            return
        if shown is not None and label in self.rows:
            for column, cell, key, before in zip(COLUMNS, row, keys, shown, strict=True):
                if key != before:
                    self.update_cell(label, column, cell, update_width=True)
            # DataTable measures the updated columns when it next goes idle, and update_cell (unlike add_row)
            # does not ask for that: without a message of its own the table kept the old width, cutting
            # "stale 42 s" to "stale" until something else reached it.
            self.check_idle()
        else:
            self.add_row(*row, key=label)
        self._shown[label] = keys

    def _update_column_widths(self, updated_cells: set[CellKey]) -> None:
        # Textual widens a column when the table next goes idle, but caches a drawn cell by its content, not by
        # its width: a frame drawn in between (the screen's refresh, a busy machine) kept "stale 42 s" cut to
        # "stale" until that cell changed again (Textual #3533). A width that changed drops the drawn cells.
        before = [column.content_width for column in self.ordered_columns]
        super()._update_column_widths(updated_cells)
        if [column.content_width for column in self.ordered_columns] != before:
            self._clear_caches()
            self.refresh()

    # -- the selection (console/tui/widgets/selection.py) ---------------------------------------------------

    def host_order(self) -> list[str]:
        return [str(row.key.value) for row in self.ordered_rows]

    def host_under_cursor(self) -> str | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return None if key is None else str(key)

    def next_row(self) -> None:
        self.move_cursor(row=min(self.cursor_row + 1, self.row_count - 1))

    def marks_changed(self, hosts: list[str]) -> None:
        for host in hosts:
            if host in self._rows:
                self._put(host, self._rows[host])

    def action_open_host(self) -> None:
        if self.row_count:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
            if key is not None:
                self.post_message(self.OpenHost(str(key)))
