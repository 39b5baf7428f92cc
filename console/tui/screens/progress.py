"""An apply or a restart, watched: each startup phase with its elapsed time and progress, the journal lines live
beside it, then the verification table — or the lines that explain a failure, the rollback's own progress and
the state the host is left in. `esc` (or ctrl+c) aborts and rolls back, after a confirmation."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, ProgressBar, RichLog, Static

from console.core.apply import ApplyResult, PendingApply
from console.core.events import ApplyEvent, LogLine, Notice, PhaseChanged, Reconnecting, StepChanged
from console.core.phases import PhaseState, PhaseStatus
from console.core.rollout import ApplyState
from console.tui.screens.confirm import ConfirmScreen
from console.tui.widgets.journal import format_line

STATE_WORDS = {
    ApplyState.VALIDATED: "checked",
    ApplyState.BACKED_UP: "unit backed up",
    ApplyState.WRITTEN: "new unit written",
    ApplyState.DAEMON_RELOADED: "daemon-reload done",
    ApplyState.RESTARTING: "restarting",
    ApplyState.STARTING: "starting",
    ApplyState.HEALTHY: "healthy",
    ApplyState.VERIFIED: "verified",
    ApplyState.MISMATCH: "running, but not as predicted",
    ApplyState.FAILED: "the new unit did not come up",
    ApplyState.ROLLING_BACK: "rolling back",
    ApplyState.RESTORED: "previous unit restored",
    ApplyState.HEALTHY_ON_OLD: "healthy on the previous unit",
    ApplyState.ROLLBACK_FAILED: "ROLLBACK FAILED",
    ApplyState.RESTART_FAILED: "the restart did not come up",
    ApplyState.ABORTED: "aborted, nothing changed",
    ApplyState.REFUSED: "refused by the rules, nothing changed",
    ApplyState.UNCHANGED: "nothing to change",
    ApplyState.WRITE_FAILED: "the unit could not be written, nothing changed",
}
BAR_WIDTH = 20


def phase_table(phases: tuple[PhaseStatus, ...], now: datetime) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=True)
    table.add_column("phase", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("s", justify="right", no_wrap=True)
    for phase in phases:
        if phase.state is PhaseState.DONE:
            mark, style, fraction = "✔", "green", 1.0
        elif phase.state is PhaseState.RUNNING:
            mark, style, fraction = "▶", "bold cyan", phase.progress
        elif phase.state is PhaseState.SKIPPED:
            mark, style, fraction = "–", "dim", 0.0
        else:
            mark, style, fraction = "·", "dim", 0.0
        filled = round(fraction * BAR_WIDTH)
        bar = Text("█" * filled, style=style) + Text("░" * (BAR_WIDTH - filled), style="dim")
        elapsed = ""
        if phase.started_at is not None:
            end = phase.ended_at or now
            elapsed = f"{(end - phase.started_at).total_seconds():.1f}"
        table.add_row(Text(f"{mark} {phase.label}", style=style), bar, elapsed)
    return table


def verification_table(result: ApplyResult) -> RenderableType:
    """requested / expected / actual per value; SGLang's reasons for what it changed go under the table, where
    they may wrap, so that the columns of figures keep their width."""
    verification = result.verification
    if verification is None:
        return Text("")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("value", "requested", "expected", "actual", ""):
        table.add_column(column, no_wrap=True)
    reasons = []
    for value in verification.values:
        note = {
            "as_requested": Text("as requested", style="green"),
            "adjusted": Text("* by SGLang", style="yellow"),
            "mismatch": Text("MISMATCH", style="bold red"),
            "not_reported": Text("not reported", style="dim"),
            "secret": Text("a secret: not compared", style="dim"),
        }[value.status]
        name = value.dest.removeprefix("speculative_").removeprefix("num_")  # the table is narrow; "steps" says it
        table.add_row(name, str(value.requested), str(value.expected), str(value.actual), note)
        if value.status == "adjusted" and value.reason:
            reasons.append(Text(f"* {name}: {value.reason}", style="yellow"))
    return Group(table, *reasons)


class ProgressScreen(Screen[ApplyResult | None]):
    """Runs `pending.execute()` in a worker and shows its events as they come."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,ctrl+c", "abort_or_close", "Abort / close", id="progress-abort", priority=True),
    ]

    class Progress(Message):
        def __init__(self, event: ApplyEvent) -> None:
            super().__init__()
            self.event = event

    class Finished(Message):
        def __init__(self, result: ApplyResult) -> None:
            super().__init__()
            self.result = result

    def __init__(
        self,
        pending: PendingApply,
        *,
        title: str,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_done: Callable[[ApplyResult], None] | None = None,
    ) -> None:
        super().__init__()
        self.pending = pending
        self.title_text = title
        self.clock = clock
        self.on_done = on_done
        self.result: ApplyResult | None = None
        self.steps: list[StepChanged] = []
        self.phases: tuple[PhaseStatus, ...] = ()
        self.rollback_phases: tuple[PhaseStatus, ...] = ()
        self.notes: list[str] = []
        self.aborting = False

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title_text, style="bold"), id="progress-title")
        yield ProgressBar(total=1.0, show_eta=False, id="progress-bar")
        with Horizontal(id="progress-body"):
            with VerticalScroll(id="progress-left"):
                yield Static("", id="progress-result")  # first: once it is over, the outcome is what matters
                yield Static("", id="progress-phases")
                yield Static("", id="progress-steps")
            yield RichLog(id="progress-journal", max_lines=2000, wrap=False, markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self._draw()
        self.set_interval(0.5, self._draw)  # elapsed times move between events
        self._execute()

    @work(exclusive=True, group="apply")
    async def _execute(self) -> None:
        def forward(event: ApplyEvent) -> None:
            self.post_message(self.Progress(event))

        result = await self.pending.execute(on_event=forward)
        self.post_message(self.Finished(result))

    def on_progress_screen_progress(self, message: Progress) -> None:
        event = message.event
        if isinstance(event, StepChanged):
            self.steps.append(event)
        elif isinstance(event, PhaseChanged):
            if event.start == "rollback":
                self.rollback_phases = event.phases
            else:
                self.phases = event.phases
                self.query_one(ProgressBar).update(progress=event.progress)
        elif isinstance(event, LogLine):
            self.query_one(RichLog).write(format_line(event.entry))
        elif isinstance(event, Reconnecting):
            self.notes.append(f"connection lost during {event.operation}; reconnecting ({event.error})")
        elif isinstance(event, Notice):
            self.notes.append(event.message)
        self._draw()

    def on_progress_screen_finished(self, message: Finished) -> None:
        self.result = message.result
        if message.result.ok:
            self.query_one(ProgressBar).update(progress=1.0)
        self._draw()
        self.refresh_bindings()
        if self.on_done is not None:
            self.on_done(message.result)

    def _draw(self) -> None:
        now = self.clock()
        parts: list[RenderableType] = []
        if self.phases:
            parts.append(Text("the new start", style="bold"))
            parts.append(phase_table(self.phases, now))
        if self.rollback_phases:
            parts.append(Text("the previous unit's start (rollback)", style="bold"))
            parts.append(phase_table(self.rollback_phases, now))
        self.query_one("#progress-phases", Static).update(Group(*parts) if parts else Text("starting ...", style="dim"))
        steps = Text()
        for step in self.steps[-12:]:
            steps.append(f"{step.at.astimezone(UTC):%H:%M:%S} ", style="dim")
            steps.append(STATE_WORDS.get(step.state, step.state.value), style=_state_style(step.state))
            if step.detail:
                steps.append(f": {step.detail}", style="dim")
            steps.append("\n")
        for note in self.notes[-3:]:
            steps.append(f"! {note}\n", style="yellow")
        self.query_one("#progress-steps", Static).update(steps)
        self.query_one("#progress-result", Static).update(self._result_text())

    def _result_text(self) -> RenderableType:
        result = self.result
        if result is None:
            hint = "aborting: rolling back ..." if self.aborting else "esc: abort and roll back"
            return Text(hint, style="dim")
        state = result.state
        if result.ok:
            head = Text(f"✔ {STATE_WORDS.get(state, state.value)}", style="bold green")
            return Group(head, verification_table(result), Text("esc: back to the dashboard", style="dim"))
        parts: list[RenderableType] = [Text(f"✖ {STATE_WORDS.get(state, state.value)}", style="bold red")]
        if result.error:
            parts.append(Text(result.error, style="red"))
        if result.verification is not None:
            parts.append(verification_table(result))
        excerpt = result.journal_excerpt(8)
        if excerpt:
            parts.append(Text("why (journal):", style="bold"))
            parts.extend(Text(f"  {line}", style="red") for line in excerpt)
        if state is ApplyState.HEALTHY_ON_OLD:
            parts.append(Text("The host is healthy on the previous unit; nothing else to do.", style="green"))
        elif state is ApplyState.ROLLBACK_FAILED:
            parts.append(
                Text(
                    "The previous unit did not come back either. Read its journal below, fix the unit on the host "
                    "(the backup is next to it), then restart it (r).",
                    style="bold red",
                )
            )
            parts.extend(Text(f"  {line}", style="red") for line in result.journal_excerpt(6, rollback=True))
        elif state is ApplyState.RESTART_FAILED:
            parts.append(
                Text("Nothing was changed in the unit: fix what the journal says, then restart.", style="yellow")
            )
        parts.append(Text("esc: back to the dashboard", style="dim"))
        return Group(*parts)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return True

    def action_abort_or_close(self) -> None:
        if self.result is not None:
            self.dismiss(self.result)
            return
        if self.aborting:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.aborting = True
                self.pending.request_abort("aborted from the console")
                self._draw()

        what = "stop watching the restart" if self.pending.restart_only else "abort and roll back to the previous unit"
        self.app.push_screen(ConfirmScreen(f"{what[0].upper()}{what[1:]}?", danger=True), answered)


def _state_style(state: ApplyState) -> str:
    if state in (ApplyState.VERIFIED, ApplyState.HEALTHY, ApplyState.HEALTHY_ON_OLD):
        return "green"
    if state in (ApplyState.FAILED, ApplyState.ROLLBACK_FAILED, ApplyState.RESTART_FAILED, ApplyState.MISMATCH):
        return "bold red"
    if state in (ApplyState.ROLLING_BACK, ApplyState.RESTORED):
        return "yellow"
    return ""
