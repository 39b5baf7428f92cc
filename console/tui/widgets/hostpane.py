"""One host's dashboard: header, GPUs, server, journal. Renders the latest HostView; a clock tick re-renders
the ages so that a host that stopped answering visibly goes stale."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches

from console.core.status import HostView
from console.host.base import JournalEntry
from console.host.ssh import ConnectionState
from console.tui.config import Thresholds
from console.tui.widgets.journal import MAX_LINES, JournalView
from console.tui.widgets.panels import (
    GPU_FIXED_WIDTH,
    GpuPanel,
    HostHeader,
    ServerPanel,
    render_gpus,
    render_header,
    render_server,
)

SERVER_LABEL_COLUMNS = 26


class HostPane(Vertical):
    def __init__(
        self,
        label: str,
        *,
        thresholds: Thresholds,
        clock: Callable[[], datetime],
        backlog: Callable[[], tuple[HostView | None, list[JournalEntry]]],
        running: Callable[[], str] = lambda: "",
        fleet_note: Callable[[], Text] = Text,
        id: str,
    ) -> None:
        super().__init__(id=id, classes="host-pane")
        self.label = label
        self.backlog = backlog  # what arrived for this host while the pane was being mounted
        self.running = running  # what this console runs on the host now ("" when nothing), for the header's mark
        self.fleet_note = fleet_note  # what Prometheus says of the host, after the header's second line (or nothing)
        self.thresholds = thresholds
        self.clock = clock
        self.view = HostView(label, clock(), ConnectionState("connecting"))
        self.active = False
        self._pending_journal: list[JournalEntry] = []
        self._drawn_stale: tuple[bool, ...] = ()
        self._gpu_rows: tuple[int, bool] | None = None
        self._gpu_key: object = None
        self._server_key: object = None
        self._header: Text | None = None
        # kept, not queried: a DOM query for each panel at each refresh was a twentieth of an idle console's CPU
        self.header_panel = HostHeader(classes="host-header")
        self.gpu_panel = GpuPanel(classes="gpu-panel")
        self.server_panel = ServerPanel(classes="server-panel")
        self._journal = JournalView(id=f"journal-{id}")

    def compose(self) -> ComposeResult:
        yield self.header_panel
        yield self.gpu_panel
        with Horizontal(classes="lower"):
            yield self.server_panel
            yield self._journal

    @property
    def journal(self) -> JournalView:
        return self._journal

    def on_mount(self) -> None:
        latest, early = self.backlog()
        if latest is not None:  # arrived while the tabs were being mounted
            self.view = latest
        if early:
            self._pending_journal.extend(early)
        self.render_view()

    def show(self, view: HostView) -> None:
        self.view = view
        if self.active:
            with contextlib.suppress(NoMatches):  # quitting: the children go first, a last view may still come
                self.render_view()

    def add_journal(self, entries: list[JournalEntry]) -> None:
        if self.active:
            with contextlib.suppress(NoMatches):  # quitting: the journal went first, a last batch may still come
                self.journal.add(entries)
        else:  # kept until the tab is shown: nobody reads a hidden journal, and rendering lines costs
            self._pending_journal.extend(entries)
            del self._pending_journal[:-MAX_LINES]

    def on_resize(self) -> None:
        if self.active:  # history lengths and where values wrap follow the panels' widths
            self.render_view()

    def on_server_panel_resized(self) -> None:
        """The server panel's rows follow its height, which more or fewer GPU rows change without a resize here."""
        if self.active:
            self.render_view()

    def activate(self, active: bool) -> None:
        self.active = active
        if active:
            if self._pending_journal:
                self.journal.add(self._pending_journal)
                self._pending_journal = []
            self.render_view()

    def tick(self) -> None:
        """Once a second: ages move on even when no refresh arrives. The header carries them (and the mark of a
        benchmark, gone within a second of its end); the panels are drawn again only when a part's staleness
        changed."""
        # not mounted yet: a busy machine can tick between the pane entering the DOM and its children's compose
        if not self.active or not self.is_mounted:
            return
        now = self.clock()
        if self._stale_parts(now) != self._drawn_stale:
            self.render_view()
        else:
            self._draw_header(now)

    def _draw_header(self, now: datetime) -> None:
        """Drawn again only when it reads otherwise: each redraw is a repaint of the screen's changed lines,
        and the header mostly repeats itself from one second to the next (ages read in whole units)."""
        header = render_header(self.view, now, self.running())
        header.append_text(self.fleet_note())
        if header != self._header:
            self._header = header
            self.header_panel.show(header)

    def _stale_parts(self, now: datetime) -> tuple[bool, ...]:
        view = self.view
        return tuple(view.is_stale(at, now) for at in (view.refreshed_at, view.sglang_at, view.gpus_at))

    def render_view(self) -> None:
        if self.server_panel.parent is None:
            return  # not composed yet: on_mount draws it
        now = self.clock()
        view = self.view
        width = self.size.width or 120
        gpu_history = max(0, min(60, (width - GPU_FIXED_WIDTH - 2) // 2 - 2))
        if gpu_history < 6:
            gpu_history = 0  # too narrow for a history worth reading: the figures alone
        server_size = self.server_panel.size
        server_width = server_size.width or 50
        server_height = server_size.height or None  # None before the first layout: every row
        spark = max(0, min(30, server_width - SERVER_LABEL_COLUMNS))
        self._drawn_stale = self._stale_parts(now)
        self.set_class(view.status is not None and self._drawn_stale[0], "-stale")
        # Fixed-size panels are redrawn without a layout pass (the whole screen's), which would cost more than
        # the drawing; only a change in the number of GPU rows moves anything.
        self._draw_header(now)
        # The panels are drawn again only when what they show changed: an idle host mostly repeats itself,
        # and drawing a table is most of what a refresh costs the console.
        gpus = _gpu_key(view, gpu_history, self._drawn_stale)
        if gpus != self._gpu_key:
            rows = (len(view.status.gpus), bool(view.status.gpu_error)) if view.status else (0, False)
            self.gpu_panel.show(
                render_gpus(view, now, self.thresholds, history_width=gpu_history), layout=rows != self._gpu_rows
            )
            self._gpu_key, self._gpu_rows = gpus, rows
        server = _server_key(view, spark, self._drawn_stale, server_width, server_height)
        if server != self._server_key or self._drawn_stale[1]:  # a stale server panel shows its age
            self.server_panel.show(
                render_server(view, now, history_width=spark, width=server_width, height=server_height)
            )
            self._server_key = server


def _gpu_key(view: HostView, history: int, stale: tuple[bool, ...]) -> object:
    """Everything the GPU table shows, to tell whether it must be drawn again."""
    status = view.status
    if status is None:
        return None
    tails = tuple(
        (tuple(view.gpu_util.get(g.index, ())[-history:]), tuple(view.gpu_power.get(g.index, ())[-history:]))
        for g in status.gpus
    )
    return (tuple(status.gpus), status.gpu_error, history, stale, tails, view.gpus_at if status.gpu_error else None)


def _server_key(view: HostView, spark: int, stale: tuple[bool, ...], width: int, height: int | None) -> object:
    """Everything the server panel shows, to tell whether it must be drawn again."""
    status = view.status
    if status is None:
        return None
    return (
        status.sglang,
        view.setup,
        view.spec_v2,
        view.latency,
        tuple(view.throughput[-spark:]),
        tuple(view.accept_length[-spark:]),
        spark,
        stale,
        width,
        height,
    )
