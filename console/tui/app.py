"""The console app: one tab per host (and an overview of all of them), keys with ids, the command palette. On the
overview, hosts selected with space get a rolling change (e / r / F: console/tui/screens/roll.py).

Every remote call runs in a worker (console.core.status.HostWatcher per host: its refresh loop and its
journal); workers post messages, widgets render them. A dead or slow host slows only its own tab.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from typing import Any, ClassVar, Protocol

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import TabbedContent, TabPane

from console.core.apply import plan_restart
from console.core.change import EditRequest
from console.core.deployment import GATE_DEST, Deployment, DeploymentHealth, judge
from console.core.phases import is_failure_line
from console.core.session import Session
from console.core.status import HostView, RouterStatus, failure_since, listing_for, member_reading, read_router
from console.errors import UsageError
from console.fleet.telemetry import FleetView
from console.host.base import HostError, JournalEntry, UnitLocked
from console.tui.bench_run import BenchRun
from console.tui.context import ConsoleOptions
from console.tui.screens.bench import open_bench, running_mark
from console.tui.screens.confirm import ConfirmScreen, cost_line
from console.tui.screens.edit import EditScreen
from console.tui.screens.freeze import open_freeze
from console.tui.screens.help import HelpScreen, KeyRow
from console.tui.screens.progress import ProgressScreen, apply_progress
from console.tui.screens.roll import RollScreen, RollSetup
from console.tui.screens.runs import open_runs
from console.tui.screens.snapshots import open_snapshots
from console.tui.screens.tune import open_tune, tune_running
from console.tui.widgets.deployment import DeploymentPanel
from console.tui.widgets.fleet_overview import FleetOverview, FleetTable, header_note
from console.tui.widgets.footer import FittedFooter
from console.tui.widgets.hostpane import HostPane
from console.tui.widgets.journal import CONSOLE_REQUESTS_ID, JournalLog
from console.tui.widgets.overview import Overview
from console.tui.widgets.selection import HostSelection, RollRequested, SelectionBar, SelectionChanged
from console.workspace import Workspace

OVERVIEW_TAB = "overview"
READ_ONLY = "read-only console: Apply is off"
READ_ONLY_ACTIONS = {
    "restart": "read-only: restarting changes the host",
    "freeze": "read-only: freezing writes the unit and enables it",
    "benchmark": "read-only: a benchmark flushes the server's cache and loads it",
    "tune": "read-only: a tune restarts the service with each setup",
}
HOST_ACTIONS = {"edit", "restart", "benchmark", "freeze", "search", "refresh", "tune", "console_requests"}
# The rolling changes over the hosts selected on the overview (the overview table's actions).
READ_ONLY_ROLLS = {
    "roll('apply')": "read-only: a rolling set writes each selected host's unit and restarts it",
    "roll('restart')": "read-only: a rolling restart restarts each selected host",
    "roll('freeze')": "read-only: a fleet freeze writes each selected host's unit and enables it",
}
SELECT_FIRST = "select hosts on the overview first (o, then space on each; a selects all)"

# What Rich's SVG template names of the outside world: `,\n  url("https://...") format("woff2")` in its
# @font-face rules (local() stays) and the `<!-- Generated with Rich https://... -->` comment.
_OUTSIDE_LINKS = re.compile(r',\s*url\("[^"]*"\) format\("[^"]*"\)|\n\s*<!-- Generated with Rich [^>]*-->')


class HostSource(Protocol):
    """What the app needs of a host: console.core.status.HostWatcher (or a scripted one in tests)."""

    label: str
    session: Session | None

    async def run(self) -> None: ...

    async def follow_journal(self) -> None: ...

    def refresh_now(self) -> None: ...


SourceFactory = Callable[[str, Callable[[HostView], None], Callable[[list[JournalEntry]], None]], HostSource]


class FleetSource(Protocol):
    """What the app needs of the fleet's telemetry: console.core.status.FleetWatcher."""

    async def run(self) -> None: ...

    def refresh_now(self) -> None: ...


FleetFactory = Callable[[Callable[[FleetView], None]], FleetSource]


class FleetViewChanged(Message):
    def __init__(self, view: FleetView) -> None:
        super().__init__()
        self.view = view


class HostViewChanged(Message):
    def __init__(self, view: HostView) -> None:
        super().__init__()
        self.view = view


class RouterChanged(Message):
    def __init__(self, deployment: str, status: RouterStatus) -> None:
        super().__init__()
        self.deployment = deployment
        self.status = status


class JournalArrived(Message):
    def __init__(self, label: str, entries: list[JournalEntry]) -> None:
        super().__init__()
        self.label = label
        self.entries = entries


HOST_TAB_PREFIX = "host-"


def _pane_id(index: int) -> str:
    return f"{HOST_TAB_PREFIX}{index}"


class DashboardScreen(Screen[object]):
    """The hosts' tabs (and the overview). Its keys move between hosts and start the host actions."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "app.edit", "Edit", id="edit"),
        Binding("r", "app.restart", "Restart", id="restart"),
        Binding("b", "app.benchmark", "Bench", id="benchmark"),
        Binding("c", "app.compare", "Compare", id="compare"),
        Binding("F", "app.freeze", "Freeze", id="freeze"),
        Binding("T", "app.tune", "Tune", id="tune"),
        Binding("slash", "app.search", "Search", id="search"),
        Binding("o", "app.overview", "Overview", id="overview"),
        Binding("tab", "app.next_host", "Next host", id="next-host", show=False),
        Binding("shift+tab", "app.previous_host", "Previous host", id="previous-host", show=False),
        *(Binding(str(n), f"app.show_host({n})", f"Host {n}", id=f"host-{n}", show=False) for n in range(1, 10)),
        Binding("ctrl+r", "app.refresh", "Refresh now", id="refresh", show=False),
        # the journal's status line names it, with the count of what it folds
        Binding(
            "p",
            "app.console_requests",
            "Journal: show or fold the console's own requests",
            id=CONSOLE_REQUESTS_ID,
            show=False,
        ),
        Binding("q", "app.quit", "Quit", id="quit"),  # here only: on a form, q is a letter
    ]

    _tabs: TabbedContent | None = None

    def compose(self) -> ComposeResult:
        app = self.app
        assert isinstance(app, OpsConsoleApp)
        if app.fleet_hosts:  # the fleet's overview; a host's tab is added when it is opened
            with TabbedContent(id="hosts", initial=OVERVIEW_TAB), TabPane(app.overview_title, id=OVERVIEW_TAB):
                yield FleetOverview(app.fleet_hosts, app.fleet_title, id="fleet-overview")
            yield FittedFooter(keep=("quit",))
            return
        # One host: no tab bar (two more rows for the figures on a small terminal).
        with TabbedContent(id="hosts", classes="-single" if len(app.labels) == 1 else ""):
            for index, label in enumerate(app.labels, start=1):
                with TabPane(f"{index} {label}", id=_pane_id(index)):
                    yield HostPane(label, thresholds=app.config.thresholds, clock=app.clock,
                                   backlog=partial(app.backlog, label), running=partial(app.running_on, label),
                                   id=f"pane-{index}")  # fmt: skip
            if len(app.labels) > 1:
                with TabPane(app.overview_title, id=OVERVIEW_TAB):
                    for index, deployment in enumerate(app.options.deployments, start=1):
                        yield DeploymentPanel(deployment, id=f"deployment-{index}")
                    yield SelectionBar(id="overview-selection")  # shown while hosts are selected
                    yield Overview(id="overview-table")
        yield FittedFooter(keep=("quit",))  # at 80 columns the keys of least use give way, never quit or help

    def on_mount(self) -> None:
        app = self.app
        assert isinstance(app, OpsConsoleApp)
        app.start_hosts()

    @property
    def tabs(self) -> TabbedContent:
        """The hosts' tabs, found once: they live as long as the screen."""
        if self._tabs is None:
            self._tabs = self.query_one(TabbedContent)
        return self._tabs


class OpsConsoleApp(App[int]):
    """The console; what its screens may use of it is console.tui.context.ConsoleContext."""

    CSS_PATH = "app.tcss"
    TITLE = "opsconsole"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "help", "Help", id="help"),  # f1 where a field takes `?` as a letter
        Binding("ctrl+p", "command_palette", "Commands", id="command-palette", show=False),
    ]

    def __init__(
        self,
        options: ConsoleOptions,
        make_source: SourceFactory,
        *,
        clock: Callable[[], datetime] | None = None,
        make_fleet: FleetFactory | None = None,
    ) -> None:
        super().__init__()
        self.options = options
        self.config = options.config
        self.clock = clock or (lambda: datetime.now(UTC))
        # With the fleet's overview (Prometheus) the hosts get a tab, and an SSH connection, only when opened.
        self.fleet_hosts = list(options.targets) if options.fleet and make_fleet is not None else []
        self.labels = [] if self.fleet_hosts else list(options.targets)
        self._make_fleet = make_fleet
        self.fleet_view: FleetView | None = None
        self.sources: dict[str, HostSource] = {}
        self.views: dict[str, HostView] = {}  # the latest of each host, for a pane mounted after it arrived
        self._panes: dict[str, HostPane] = {}
        self._overview: Overview | None = None
        self.early_journal: dict[str, list[JournalEntry]] = {}
        self._make_source = make_source
        self.bench_runs: dict[str, BenchRun] = {}  # host -> its benchmark, outliving the screen that shows it
        # `connect DEPLOYMENT`: each member's deployment, the failure lines of its journal, smg's last answer
        self.member_of: dict[str, Deployment] = {m.name: d for d in options.deployments for m in d.members}
        self.member_failures: dict[str, list[tuple[datetime, str, int | None]]] = {}
        self.routers: dict[str, RouterStatus] = {}
        self._deployment_panels: dict[str, DeploymentPanel] = {}
        if self.config.theme:
            self.theme = self.config.theme

    # -- layout -----------------------------------------------------------------------------------------

    def get_default_screen(self) -> Screen[object]:
        return DashboardScreen()

    @property
    def overview_title(self) -> str:
        return " ".join(["overview", *(f"@{g}" for g in self.options.groups)])

    @property
    def fleet_title(self) -> str:
        groups = " ".join(f"@{g}" for g in self.options.groups) or "fleet"
        return f"{groups}: {len(self.fleet_hosts)} hosts (Enter opens one over SSH)"

    @classmethod
    def binding_ids(cls) -> set[str]:
        """Every remappable binding id (console.toml [keys])."""
        bindings = [*cls.BINDINGS, *DashboardScreen.BINDINGS, *JournalLog.BINDINGS, *Overview.BINDINGS]
        return {b.id for b in bindings if isinstance(b, Binding) and b.id}

    def on_mount(self) -> None:
        self.set_keymap(dict(self.config.keys))

    def start_hosts(self) -> None:
        """One refresh worker and one journal worker per host, once the dashboard's panes exist (with the fleet's
        overview: its one Prometheus worker, the hosts' own workers when each is opened)."""
        for label in self.labels:
            self._start_host(label)
        overview = self.hosts_overview()
        if overview is not None:
            overview.dummy_health = {m.name for d in self.options.deployments for m in d.members if not m.serves_api}
        for deployment in self.options.deployments:
            if deployment.router is not None:
                self.run_worker(self._poll_router(deployment), name=f"smg {deployment.name}", group="hosts",
                                exit_on_error=False)  # fmt: skip
        if self.fleet_hosts and self._make_fleet is not None:
            fleet = self._make_fleet(self._fleet_from_worker)
            self.run_worker(fleet.run(), name="fleet", group="fleet", exit_on_error=False)
            self.query_one(FleetTable).focus()
        self.set_interval(1.0, self._tick)
        self._activate(self.dashboard.tabs.active)

    def _start_host(self, label: str) -> None:
        source = self._make_source(label, partial(self._view_from_worker), partial(self._journal_from, label))
        self.sources[label] = source
        self.run_worker(source.run(), name=f"refresh {label}", group="hosts", exit_on_error=False)
        self.run_worker(source.follow_journal(), name=f"journal {label}", group="hosts", exit_on_error=False)

    def _fleet_from_worker(self, view: FleetView) -> None:
        self.post_message(FleetViewChanged(view))

    def on_fleet_view_changed(self, message: FleetViewChanged) -> None:
        self.fleet_view = message.view
        self._show_fleet()

    def _show_fleet(self) -> None:
        if self.fleet_view is None or not self.screen_stack:
            return
        overview = next(iter(self.dashboard.query(FleetOverview).results(FleetOverview)), None)
        if overview is not None:
            overview.show(self.fleet_view, self.views, self.clock())

    async def on_fleet_table_open_host(self, message: FleetTable.OpenHost) -> None:
        """Enter on the fleet's overview: the host's tab, added (and connected over SSH) the first time."""
        label = message.label
        if label not in self.labels:
            self.labels.append(label)
            index = len(self.labels)
            pane = HostPane(label, thresholds=self.config.thresholds, clock=self.clock,
                            backlog=partial(self.backlog, label), running=partial(self.running_on, label),
                            fleet_note=lambda: header_note(self.fleet_view, label), id=f"pane-{index}")  # fmt: skip
            await self.dashboard.tabs.add_pane(TabPane(f"{index} {label}", pane, id=_pane_id(index)))
            self._start_host(label)
        self.action_show_host(self.labels.index(label) + 1)

    def _view_from_worker(self, view: HostView) -> None:
        self.post_message(HostViewChanged(view))

    def _journal_from(self, label: str, entries: list[JournalEntry]) -> None:
        self.post_message(JournalArrived(label, entries))

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        # Rich's SVG template also fetches its font from a CDN and links its maker; our screenshots use the
        # viewer's own fonts and name no outside host.
        svg = super().export_screenshot(title=title, simplify=simplify)
        return _OUTSIDE_LINKS.sub("", svg)

    @property
    def dashboard(self) -> DashboardScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, DashboardScreen)
        return screen

    def pane_for(self, label: str) -> HostPane | None:
        """The host's pane, or None while the tabs are still being mounted (it takes the latest view then).
        Found once and kept: a DOM query per host per refresh was most of the console's CPU with 16 hosts."""
        pane = self._panes.get(label)
        if not self.screen_stack:  # shutting down: a last view or journal batch arrived after the screens went
            return None
        if pane is None or not pane.is_attached:
            found = self.dashboard.query(f"#pane-{self.labels.index(label) + 1}").results(HostPane)
            pane = next(iter(found), None)
            if pane is not None:
                self._panes[label] = pane
        return pane

    async def _poll_router(self, deployment: Deployment) -> None:
        """smg's readiness, worker list and PD counters, once a refresh, for the deployment's panel."""
        read = self.options.read_router or read_router
        while True:
            status = await read(deployment)
            self.post_message(RouterChanged(deployment.name, status))
            await asyncio.sleep(self.config.refresh_s)  # the refresh interval between reads, as the hosts' own

    def on_router_changed(self, message: RouterChanged) -> None:
        self.routers[message.deployment] = message.status
        deployment = next((d for d in self.options.deployments if d.name == message.deployment), None)
        if deployment is not None:
            self._show_deployment(deployment)

    def deployment_health(self, deployment: Deployment) -> DeploymentHealth:
        """The deployment judged from its members' latest refreshes (console.core.deployment.judge)."""
        router = self.routers.get(deployment.name)
        readings = []
        for member in deployment.members:
            view = self.views.get(member.name)
            status = view.status if view is not None else None
            service = status.service if status is not None else None
            failure = None
            if service is not None:
                failure = failure_since(self.member_failures.get(member.name, []), service.started_at, service.main_pid)
            reading = member_reading(member, status, error=view.error if view is not None else None, failure=failure)
            if router is not None and member.worker_type is not None and router.reading.ready is not None:
                source = self.sources.get(member.name)
                peer = source.session.host.peer_address() if source is not None and source.session else None
                reading = dataclasses.replace(reading, router=listing_for(member.worker_url(peer), router))
            readings.append(reading)
        return judge(deployment, readings, router=router.reading if router is not None else None)

    def _show_deployment(self, deployment: Deployment) -> None:
        if not self.screen_stack:
            return
        panel = self._deployment_panels.get(deployment.name)
        if panel is None or not panel.is_attached:
            index = self.options.deployments.index(deployment) + 1
            panel = next(iter(self.dashboard.query(f"#deployment-{index}").results(DeploymentPanel)), None)
            if panel is None:
                return
            self._deployment_panels[deployment.name] = panel
        panel.show(self.deployment_health(deployment), self.views, self.routers.get(deployment.name))

    def on_host_view_changed(self, message: HostViewChanged) -> None:
        self.views[message.view.label] = message.view
        deployment = self.member_of.get(message.view.label)
        if deployment is not None:
            self._show_deployment(deployment)
        pane = self.pane_for(message.view.label)
        if pane is not None:
            pane.show(message.view)
        overview = self.hosts_overview()
        if overview is not None:
            overview.show(message.view, self.clock())
        if self.fleet_view is not None and self.fleet_view.down:  # the open hosts' rows come from SSH now
            self._show_fleet()

    def hosts_overview(self) -> Overview | None:
        """The hosts' overview (None with one host, or while the dashboard is being taken down); found once."""
        overview = self._overview
        if len(self.labels) < 2 or self.fleet_hosts:
            return None  # the dashboard has none: not looked for at every refresh
        if overview is None or not overview.is_attached:
            found = self.dashboard.query(Overview).results(Overview) if self.screen_stack else ()
            overview = self._overview = next(iter(found), None)
        return overview

    def backlog(self, label: str) -> tuple[HostView | None, list[JournalEntry]]:
        """What arrived for a host while its pane was being mounted (its latest view, its journal lines)."""
        return self.views.get(label), self.early_journal.pop(label, [])

    def running_on(self, label: str) -> str:
        """What this console runs on the host now, for its header's mark ("" when nothing)."""
        run = self.bench_runs.get(label)
        return running_mark(run.live) if run is not None and run.running else ""

    def on_journal_arrived(self, message: JournalArrived) -> None:
        deployment = self.member_of.get(message.label)
        if deployment is not None:
            failures = [(e.timestamp, e.message, e.pid) for e in message.entries if is_failure_line(e.message)]
            if failures:
                kept = self.member_failures.setdefault(message.label, [])
                kept.extend(failures)
                del kept[:-50]
                self._show_deployment(deployment)
        pane = self.pane_for(message.label)
        if pane is not None:
            pane.add_journal(message.entries)
        else:
            self.early_journal.setdefault(message.label, []).extend(message.entries)

    def _tick(self) -> None:
        if not self.screen_stack:  # shutting down: the timer fired after the screens went
            return
        # the panes and the overview as found and kept by pane_for and hosts_overview: a query walks the whole DOM
        panes = [pane for label in self.labels if (pane := self.pane_for(label)) is not None]
        for pane in panes:
            pane.tick()
        overview = self.hosts_overview()
        if overview is not None:
            for pane in panes:
                overview.show(pane.view, self.clock())
        if self.fleet_view is not None and self.fleet_view.asked_at is not None:
            for fleet in self.dashboard.query(FleetOverview).results(FleetOverview):
                fleet.show_banner(self.fleet_view, self.clock())

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._activate(event.pane.id or "")

    def _activate(self, pane_id: str) -> None:
        for index, pane in enumerate(self.dashboard.query(HostPane), start=1):
            pane.activate(_pane_id(index) == pane_id)
        self.refresh_bindings()

    def on_overview_open_host(self, message: Overview.OpenHost) -> None:
        self.action_show_host(self.labels.index(message.label) + 1)

    # -- where the operator is --------------------------------------------------------------------------

    @property
    def current_pane(self) -> HostPane | None:
        """The open host's pane, from the active tab's id (host-N shows pane-N): every key and every footer
        refresh asks (check_action), and two walks of the whole DOM per ask were a tenth of a form's CPU."""
        active = self.dashboard.tabs.active
        if not active.startswith(HOST_TAB_PREFIX):
            return None
        index = int(active.removeprefix(HOST_TAB_PREFIX))
        return self.pane_for(self.labels[index - 1]) if 0 < index <= len(self.labels) else None

    @property
    def current_host(self) -> str | None:
        pane = self.current_pane
        return pane.label if pane is not None else None

    def session(self, label: str) -> Session:
        source = self.sources.get(label)
        session = source.session if source is not None else None
        if session is None:
            why = "is not open in this console" if source is None else "is not connected (see its header)"
            raise HostError(f"{label} {why}")
        return session

    def workspace(self, label: str | None = None) -> Workspace | None:
        if self.options.workspace is not None:
            return self.options.workspace
        label = label or self.current_host or (self.labels[0] if self.labels else None)
        source = self.sources.get(label) if label is not None else None
        return source.session.workspace if source is not None and source.session is not None else None

    def refresh_host(self, label: str) -> None:
        source = self.sources.get(label)
        if source is not None:
            source.refresh_now()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """On the overview the host actions are dimmed. In read-only mode the keys that would change a host stay
        live and say why they do nothing (`?` says it too): a key that silently does nothing reads as broken."""
        if action in HOST_ACTIONS and self.current_pane is None and not self._deployment_action(action):
            return None
        return True

    def _deployment_action(self, action: str) -> bool:
        """On the overview of one deployment, e and r are the deployment's (its edit, its restart as one)."""
        return action in ("edit", "restart") and self.current_pane is None and self._deployment_here() is not None

    def why_disabled(self, action: str) -> str:
        if action in HOST_ACTIONS and self.current_pane is None and not self._deployment_action(action):
            if action in ("edit", "restart", "freeze"):
                return "select hosts (space) to roll it, or open one (Enter)"
            return "open a host first (its number, or Enter on the overview)"
        if self.options.read_only and action in READ_ONLY_ACTIONS:
            return READ_ONLY_ACTIONS[action]
        if self.options.read_only and action in READ_ONLY_ROLLS:
            return READ_ONLY_ROLLS[action]
        return ""

    # -- actions ----------------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self._screen_title(), self.key_rows(self.screen)))

    def _screen_title(self) -> str:
        pane = self.current_pane
        return f"host {pane.label}" if pane is not None else "overview"

    def key_rows(self, screen: Screen[object]) -> list[KeyRow]:
        """Every binding of the screen (focused widget first), with its keys as remapped, once per id."""
        keys: dict[str, list[str]] = {}
        rows: dict[str, KeyRow] = {}
        for active in screen.active_bindings.values():
            binding = active.binding
            if not binding.description:
                continue
            ident = binding.id or binding.action
            description = binding.description
            if ident.startswith("host-") and ident.removeprefix("host-").isdigit():
                number = int(ident.removeprefix("host-"))
                if number > len(self.labels):
                    continue  # no such host: no such key
                description = f"Host {number}: {self.labels[number - 1]}"
            shown = keys.setdefault(ident, [])
            display = self.get_key_display(binding)
            if display not in shown:
                shown.append(display)
            why = self.why_disabled(binding.action.removeprefix("app."))
            known_id = binding.id or (rows[ident][2] if ident in rows else "")
            rows[ident] = (", ".join(shown), description, known_id, why)
        return list(rows.values())

    def action_next_host(self) -> None:
        self._cycle(+1)

    def action_previous_host(self) -> None:
        self._cycle(-1)

    def _cycle(self, step: int) -> None:
        tabs = self.dashboard.tabs
        order = [_pane_id(i) for i in range(1, len(self.labels) + 1)]
        if len(self.labels) > 1 or self.fleet_hosts:
            order.append(OVERVIEW_TAB)
        current = order.index(tabs.active) if tabs.active in order else 0
        tabs.active = order[(current + step) % len(order)]

    def action_show_host(self, number: int) -> None:
        if 1 <= number <= len(self.labels):
            self.dashboard.tabs.active = _pane_id(number)

    def action_overview(self) -> None:
        if self.fleet_hosts:
            self.dashboard.tabs.active = OVERVIEW_TAB
            self.dashboard.query_one(FleetTable).focus()
        elif len(self.labels) > 1:
            self.dashboard.tabs.active = OVERVIEW_TAB
            self.dashboard.query_one(Overview).focus()
        else:
            self.notify("one host: its tab is the overview", timeout=3)

    def action_search(self) -> None:
        pane = self.current_pane
        if pane is not None:
            pane.journal.open_search()

    def action_console_requests(self) -> None:
        pane = self.current_pane
        if pane is not None:
            pane.journal.toggle_console_requests()

    def action_refresh(self) -> None:
        pane = self.current_pane
        if pane is not None:
            self.sources[pane.label].refresh_now()

    def _connected_session(self) -> tuple[HostPane, Session] | None:
        """The current host's open session, or None (and a notice saying why)."""
        pane = self.current_pane
        if pane is None:
            self.notify(self.why_disabled("edit"), severity="warning")
            return None
        session = self.sources[pane.label].session
        if session is None:
            self.notify(
                f"{pane.label} is not connected yet; try again once the header says connected", severity="warning"
            )
            return None
        return pane, session

    def action_edit(self) -> None:
        deployment = self._deployment_here()
        if deployment is not None and self.current_pane is None:  # the overview: the front door's (or first) unit
            self.action_show_host(self.labels.index(deployment.members[0].name) + 1)
        found = self._connected_session()
        if found is None:
            return
        pane, session = found
        source = self.sources[pane.label]
        resolved = session.last_server_info or {}
        deployment = self.member_of.get(pane.label)
        self.push_screen(
            EditScreen(
                session,
                label=pane.label if deployment is None else f"{pane.label} of {deployment.name}",
                read_only=READ_ONLY if self.options.read_only else "",
                resolved=dict(resolved),
                on_applied=source.refresh_now,
                apply_to_deployment=None if deployment is None else partial(self.change_deployment, deployment),
                # a rank's editor offers the gate, its cost said under it (never added for the operator)
                extra_fields=(GATE_DEST,) if deployment is not None and deployment.kind == "multinode" else (),
            )
        )

    def action_restart(self) -> None:
        deployment = self._deployment_here()
        if deployment is not None:
            if self.options.read_only:
                self.notify(READ_ONLY_ACTIONS["restart"], severity="warning")
            else:
                self._restart_deployment(deployment)
            return
        if self.why_disabled("restart"):
            self.notify(self.why_disabled("restart"), severity="warning")
            return
        found = self._connected_session()
        if found is not None:
            self._restart(*found)

    def _deployment_here(self) -> Deployment | None:
        """The deployment the open tab belongs to (a member's tab), or the one deployment on the overview."""
        label = self.current_host
        if label is not None:
            return self.member_of.get(label)
        return self.options.deployments[0] if len(self.options.deployments) == 1 else None

    @work(exclusive=True, group="restart")
    async def _restart_deployment(self, deployment: Deployment) -> None:
        await self.change_deployment(deployment, None)

    async def change_deployment(self, deployment: Deployment, edits: EditRequest | None) -> None:
        """The deployment changed (edits) or restarted (None) as one, from a worker: planned on every member (each
        member's session in this console), the confirmation with each member's diff and the restart order, then
        the progress until it is over (console.core.roll.plan_deployment_change)."""
        from console.core.apply import default_owner
        from console.core.roll import plan_deployment_change
        from console.tui.screens.deployment import change_body, deployment_progress

        sessions: dict[str, Session] = {}
        for member in deployment.members:
            source = self.sources.get(member.name)
            if source is None or source.session is None:
                self.notify(f"{member.name} is not connected yet: nothing was changed", severity="warning")
                return
            sessions[member.name] = source.session
        verb = "restart" if edits is None else "apply"
        try:
            change = await plan_deployment_change(deployment, sessions, edits, owner=default_owner(verb))
        except UnitLocked as exc:
            self.notify(f"A unit is locked: {exc}", title="locked", severity="error", timeout=10)
            return
        except (HostError, ValueError, UsageError) as exc:
            self.notify(f"Cannot plan it: {exc}; nothing was changed", severity="error", timeout=10)
            return
        if not change.needs_confirmation:
            result = await change.abort("nothing to change")
            self.notify(result.error or "nothing to change", severity="warning", timeout=10)
            return
        what = "Restart" if edits is None else "Write these units and restart"
        question = f"{what} {deployment.name} in this order?"
        if not await self.push_screen_wait(ConfirmScreen(question, change_body(change), danger=True)):
            await change.abort("not confirmed; nothing was changed")
            return

        def done(_result: object) -> None:
            for member in deployment.members:
                source = self.sources.get(member.name)
                if source is not None:
                    source.refresh_now()

        title = f"{'Restarting' if edits is None else 'Changing'} {deployment.name} ({deployment.kind})"
        await self.push_screen_wait(deployment_progress(change, title=title, on_done=done))

    @work(exclusive=True, group="restart")
    async def _restart(self, pane: HostPane, session: Session) -> None:
        try:
            pending = await plan_restart(session)
        except UnitLocked as exc:
            self.notify(f"The unit is locked: {exc.holder or 'another console'}", title="locked", severity="error")
            return
        except (HostError, ValueError) as exc:
            self.notify(f"Cannot restart: {exc}", severity="error")
            return
        status = pane.view.status
        body = Text("The unit is not changed.", style="dim")
        if status is not None and status.service.need_daemon_reload:
            body = Text("The unit on disk changed and is not loaded: the restart runs the loaded one.", style="yellow")
        unit = session.service.unit
        said = Group(body, Text(""), cost_line(pending.restart_cost, pane.label))
        if not await self.push_screen_wait(ConfirmScreen(f"Restart {unit} on {pane.label}?", said, danger=True)):
            await pending.abort("not confirmed; nothing was restarted")
            return
        source = self.sources[pane.label]
        title = f"Restarting {unit} on {pane.label}"
        await self.push_screen_wait(apply_progress(pending, title=title, on_done=lambda _r: source.refresh_now()))

    def action_quit(self) -> None:  # type: ignore[override]
        # a tune goes on off screen (installed, d): said below, with how to get back to it
        watched = [s for s in self.screen_stack if isinstance(s, ProgressScreen) and s.running
                   and not self.is_screen_installed(s)]  # fmt: skip
        if watched:
            view = watched[-1].view
            then = "let it finish, or esc to abort it first" if view.abort_question else "let it finish"
            self.notify(f"{view.what} is running: {then}", severity="warning")
            return
        tuning = tune_running(self)
        if tuning is not None:
            self.notify(f"a tune is running on {tuning}: T shows it; esc there aborts it first", severity="warning")
            return
        benching = [label for label, run in self.bench_runs.items() if run.running]
        if benching:
            hosts = ", ".join(benching)
            self.notify(f"a benchmark runs on {hosts}: b shows it, x cancels it (the finished levels are kept)",
                        severity="warning")  # fmt: skip
            return
        self.exit()

    def action_benchmark(self) -> None:
        open_bench(self)

    def action_compare(self) -> None:
        open_runs(self)

    def action_freeze(self) -> None:
        open_freeze(self)

    def action_tune(self) -> None:
        open_tune(self)

    def action_snapshots(self) -> None:
        open_snapshots(self)

    # -- hosts selected on the overview, and the rolling changes over them ---------------------------------------

    def overview_table(self) -> HostSelection | None:
        """The overview's table while the overview is shown (the fleet's, or the hosts'), else None."""
        if not self.screen_stack or self.current_pane is not None:
            return None
        found = self.dashboard.query(FleetTable).results(FleetTable) if self.fleet_hosts else ()
        table: HostSelection | None = next(iter(found), None)
        if table is None:
            table = next(iter(self.dashboard.query(Overview).results(Overview)), None)
        return table

    def on_selection_changed(self, message: SelectionChanged) -> None:
        total = len(self.fleet_hosts) if self.fleet_hosts else len(self.labels)
        for bar in self.dashboard.query(SelectionBar).results(SelectionBar):
            bar.show_selection(message.hosts, total)

    def on_roll_requested(self, message: RollRequested) -> None:
        self.open_roll(message.operation, message.hosts)

    def _on_overview_table(self, act: Callable[[HostSelection], None]) -> None:
        table = self.overview_table()
        if table is None:
            self.notify("the overview's keys: o shows it (space selects a host there)", severity="warning")
            return
        act(table)

    def action_select_host(self) -> None:
        self._on_overview_table(lambda table: table.action_toggle_selected())

    def action_select_all_hosts(self) -> None:
        self._on_overview_table(lambda table: table.action_select_all())

    def action_roll(self, operation: str) -> None:
        """The palette's rolling changes: over the overview's selection."""
        table = self.overview_table()
        hosts = table.selected_hosts() if table is not None else ()
        if not hosts:
            self.notify(SELECT_FIRST, severity="warning")
            return
        self.open_roll(operation, hosts)

    def open_roll(self, operation: str, hosts: tuple[str, ...]) -> None:
        """The roll's form over the selected hosts (their group: the one the console was opened with)."""
        from console.core.apply import default_owner
        from console.core.roll import free_set_name
        from console.core.session import open_session
        from console.fleet.groups import GroupError, group_for, load_groups

        why = self.why_disabled(f"roll('{operation}')")
        if why:
            self.notify(why, severity="warning")
            return
        workspace = self.options.workspace or self.workspace()
        if workspace is None:
            self.notify("no workspace: the roll needs profiles/groups.toml and logs/", severity="error")
            return
        try:
            group = group_for(hosts, load_groups(workspace.profiles), self.options.groups)
        except GroupError as exc:
            self.notify(str(exc), title="Rolling change", severity="error", timeout=10)
            return
        ssh_config = self.options.ssh_config

        def open_host(label: str) -> Any:
            return open_session(label, workspace, ssh_config=ssh_config)

        def done(_report: object) -> None:
            for host in hosts:
                self.refresh_host(host)

        setup = RollSetup(
            operation,
            group,
            hosts,
            workspace,
            self.options.runners.roll,
            open_host,
            owner=default_owner(f"opsconsole connect: rolling {operation} @{group.name}"),
            suggested_set=free_set_name(workspace, hosts) if operation == "freeze" else "v1",
            clock=self.clock,
            on_done=done,
        )
        self.push_screen(RollScreen(setup))

    # -- the command palette: every action, with its key --------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        palette = (
            ("Edit parameters", "Edit the speculative and serving flags, checked live by the rules", "edit"),
            ("Restart", "Restart the service without edits and watch it come back", "restart"),
            ("Benchmark", "Run a benchmark sweep on this host and watch it live (b)", "benchmark"),
            ("Compare", "Benchmark runs from logs/ side by side: plots, crossovers, export (c)", "compare"),
            ("Freeze", "Freeze the running setup as a production snapshot", "freeze"),
            ("Tune", "Try speculative setups: restart, benchmark, recommend per level; the original goes back", "tune"),
            ("Snapshots", "Production snapshots: which is production, diff two, restore one", "snapshots"),
            ("Search the journal", "Filter the journal lines (/)", "search"),
            ("Console requests", "Show or fold this console's own requests in the journal (p)", "console_requests"),
            ("Refresh now", "Refresh this host without waiting for the interval", "refresh"),
            ("Overview", "All hosts on one table", "overview"),
            ("Select host", "Select the overview's host under the cursor for a rolling change (space)", "select_host"),
            ("Select all / none", "Select every host of the overview, or none (a)", "select_all_hosts"),
            ("Help", "Every key of this screen", "help"),
        )
        for title, help_text, action in palette:
            why = self.why_disabled(action)
            yield SystemCommand(title, f"{help_text}" + (f" — {why}" if why else ""), getattr(self, f"action_{action}"))
        rolls = (
            ("Rolling set", "Set flags on the selected hosts, one batch at a time, canary first (e)", "apply"),
            ("Rolling restart", "Restart the selected hosts, one batch at a time, canary first (r)", "restart"),
            ("Fleet freeze", "Freeze the selected hosts as one snapshot set (F)", "freeze"),
        )
        for title, help_text, operation in rolls:
            why = self.why_disabled(f"roll('{operation}')")
            yield SystemCommand(title, help_text + (f" — {why}" if why else ""), partial(self.action_roll, operation))
        for number, label in enumerate(self.labels, start=1):
            yield SystemCommand(f"Host {number}: {label}", f"Show {label}", partial(self.action_show_host, number))
