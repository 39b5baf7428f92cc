"""What the screens may ask of the console: its options, its hosts (their sessions and latest views), the workspace,
the benchmarks it holds, why an action is off, and the few Textual calls they make to open a screen or say
something. The screens take a ConsoleContext instead of the app, so that what they use is written down here;
OpsConsoleApp (console/tui/app.py) is the one implementation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from textual.notifications import SeverityLevel
from textual.screen import Screen, ScreenResultCallbackType, ScreenResultType

from console.core.deployment import Deployment
from console.core.session import Session
from console.core.status import HostView, RouterStatus
from console.tui.bench_run import BenchRun
from console.tui.config import ConsoleConfig
from console.tui.runners import Runners
from console.workspace import Workspace

if TYPE_CHECKING:
    from textual.worker import Worker, WorkType


@dataclass(frozen=True)
class ConsoleOptions:
    targets: tuple[str, ...]
    config: ConsoleConfig
    read_only: bool = False
    workspace: Workspace | None = None  # profiles/ and logs/: where the snapshots view reads
    runners: Runners = field(default_factory=Runners)  # what freeze, bench, restore and tune run (tests: scripted)
    groups: tuple[str, ...] = ()  # the groups the targets came from (`@prod`), named on the overview
    fleet: bool = False  # the overview reads Prometheus ([fleet]); hosts get a tab (and SSH) when opened
    ssh_config: str | None = None  # --ssh-config: how a roll's own sessions reach the hosts
    deployments: tuple[Deployment, ...] = ()  # `connect DEPLOYMENT`: its members are the tabs, it is one panel
    # how a PD deployment's smg is read each refresh (None: console.core.status.read_router; tests: a scripted smg)
    read_router: Callable[[Deployment], Awaitable[RouterStatus]] | None = None


class ConsoleContext(Protocol):
    options: ConsoleOptions
    labels: list[str]  # the hosts, in their tabs' order
    views: dict[str, HostView]  # the latest of each host
    bench_runs: dict[str, BenchRun]  # each host's benchmark: it outlives the screen that shows it
    clock: Callable[[], datetime]

    @property
    def current_host(self) -> str | None:
        """The host whose tab is shown; None on the overview."""
        ...

    def session(self, label: str) -> Session:
        """The host's open session in this console, or HostError saying why there is none."""
        ...

    def workspace(self, label: str | None = None) -> Workspace | None:
        """profiles/ and logs/: the console's own, else the session's of `label` (else of the shown or first host)."""
        ...

    def refresh_host(self, label: str) -> None:
        """Read the host again now (the header shows what an operation changed at once)."""
        ...

    def why_disabled(self, action: str) -> str:
        """Why an action (an id of the dashboard's keys) does nothing here; "" when it runs."""
        ...

    # -- Textual's own (console.tui.app.OpsConsoleApp is a textual App) ---------------------------------------

    @property
    def screen(self) -> Screen[object]: ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...

    def push_screen(
        self,
        screen: Screen[ScreenResultType] | str,
        callback: ScreenResultCallbackType[ScreenResultType] | None = None,
    ) -> Any: ...

    def install_screen(self, screen: Screen[Any], name: str) -> None: ...

    def is_screen_installed(self, screen: Screen[Any] | str) -> bool: ...

    def get_screen(self, screen: str) -> Screen[Any]: ...

    def run_worker(
        self,
        work: WorkType[Any],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker[Any]: ...
