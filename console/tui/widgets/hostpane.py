"""One host's dashboard: header, GPUs, server, journal. Renders the latest HostView; a clock tick re-renders
the ages so that a host that stopped answering visibly goes stale."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from console.core.monitor import HostView
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
    def __init__(self, label: str, *, thresholds: Thresholds, clock: Callable[[], datetime], id: str) -> None:
        super().__init__(id=id, classes="host-pane")
        self.label = label
        self.thresholds = thresholds
        self.clock = clock
        self.view = HostView(label, clock(), ConnectionState("connecting"))
        self.active = False
        self._pending_journal: list[JournalEntry] = []

    def compose(self) -> ComposeResult:
        yield HostHeader(classes="host-header")
        yield GpuPanel(classes="gpu-panel")
        with Horizontal(classes="lower"):
            yield ServerPanel(classes="server-panel")
            yield JournalView(id=f"journal-{self.id}")

    @property
    def journal(self) -> JournalView:
        return self.query_one(JournalView)

    def on_mount(self) -> None:
        self.render_view()

    def show(self, view: HostView) -> None:
        self.view = view
        if self.active:
            self.render_view()

    def add_journal(self, entries: list[JournalEntry]) -> None:
        if self.active:
            self.journal.add(entries)
        else:  # kept until the tab is shown: nobody reads a hidden journal, and rendering lines costs
            self._pending_journal.extend(entries)
            del self._pending_journal[:-MAX_LINES]

    def activate(self, active: bool) -> None:
        self.active = active
        if active:
            if self._pending_journal:
                self.journal.add(self._pending_journal)
                self._pending_journal = []
            self.render_view()

    def tick(self) -> None:
        """Once a second: ages move on even when no refresh arrives."""
        if self.active:
            self.render_view()

    def render_view(self) -> None:
        now = self.clock()
        view = self.view
        width = self.size.width or 120
        gpu_history = max(0, min(60, (width - GPU_FIXED_WIDTH - 2) // 2 - 2))
        if gpu_history < 6:
            gpu_history = 0  # too narrow for a history worth reading: the figures alone
        server_width = self.query_one(ServerPanel).size.width or 50
        spark = max(0, min(30, server_width - SERVER_LABEL_COLUMNS))
        stale = view.status is not None and view.is_stale(view.refreshed_at, now)
        self.set_class(stale, "-stale")
        self.query_one(HostHeader).update(render_header(view, now))
        self.query_one(GpuPanel).update(render_gpus(view, now, self.thresholds, history_width=gpu_history))
        self.query_one(ServerPanel).update(render_server(view, now, history_width=spark))
