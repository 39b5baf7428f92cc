"""One screen watches every long operation of the console: an apply or a restart, a restore, a freeze, a tune.

ProgressScreen runs the core's planned operation (console.core.pending.Pending) in a worker and hands its typed
events to a view of that operation, which draws them; what the operations share is the screen's: `esc` (or ctrl+c)
asks, then aborts an operation that can be stopped (console.core.pending.Interruptible), and closes once it is
over; an operation whose view can be left running (a tune) goes on behind the dashboard (`d`) and is shown again
by the name it was installed under. The views: ApplyView here (apply, restart, restore), FreezeView in
screens/freeze.py, TuneView in screens/tune.py.

ApplyView: each startup phase with its elapsed time and progress, the journal lines live beside it, then the
verification table — or the lines that explain a failure, the rollback's own progress and the state the host is
left in."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import ProgressBar, RichLog, Static

from console.core.apply import ApplyResult, PendingApply
from console.core.change import ApplyState
from console.core.events import ApplyEvent, LogLine, Notice, PhaseChanged, Reconnecting, StepChanged
from console.core.pending import Interruptible, Pending
from console.core.phases import PhaseState, PhaseStatus
from console.tui.presenters.steps import STEP_WORDS
from console.tui.screens.confirm import ConfirmScreen
from console.tui.widgets.footer import FittedFooter
from console.tui.widgets.journal import LineMaker, format_line

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


E = TypeVar("E")  # the operation's events
R = TypeVar("R")  # its result


def _utc_now() -> datetime:
    return datetime.now(UTC)


class ProgressView(Protocol[E, R]):
    """What differs per operation: its widgets, how its events and its outcome read. The screen calls these; the
    view finds its widgets in the screen (query_one) and reads the outcome from it (result, error, aborting)."""

    what: str  # "the apply": said when it cannot be stopped, or when the console is asked to quit meanwhile
    abort_question: str | None  # asked before an abort; None: it cannot be stopped midway
    can_leave: bool  # `d` goes back to the dashboard while it goes on (shown again by its installed name)
    tick_s: float  # how often tick() draws between events (elapsed times move)

    def compose(self) -> ComposeResult: ...

    def feed(self, screen: ProgressScreen[E, R], event: E) -> None:
        """Take one event in (draw() follows)."""
        ...

    def draw(self, screen: ProgressScreen[E, R]) -> None: ...

    def tick(self, screen: ProgressScreen[E, R]) -> None: ...

    def finished(self, screen: ProgressScreen[E, R]) -> None:
        """It is over (screen.result, or screen.error); draw() follows."""
        ...


class ProgressScreen(Screen[R | None], Generic[E, R]):
    """Runs `pending.execute()` in a worker and shows its events as they come, through the operation's view."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,ctrl+c", "abort_or_close", "Abort / close", id="progress-abort", priority=True),
        Binding("d", "dashboard", "Dashboard", id="progress-dashboard"),
    ]

    class Progress(Message):
        def __init__(self, event: Any) -> None:
            super().__init__()
            self.event = event

    class Finished(Message):
        def __init__(self, result: Any, error: str | None = None) -> None:
            super().__init__()
            self.result = result
            self.error = error

    def __init__(
        self,
        pending: Pending[E, R],
        view: ProgressView[E, R],
        *,
        clock: Callable[[], datetime] = _utc_now,
        on_done: Callable[[R], None] | None = None,
    ) -> None:
        super().__init__()
        self.pending = pending
        self.view = view
        self.clock = clock
        self.on_done = on_done
        self.result: R | None = None
        self.error: str | None = None  # execute() raised: what it said
        self.done = False
        self.aborting = False
        self._started = False

    @property
    def running(self) -> bool:
        return self._started and not self.done

    def compose(self) -> ComposeResult:
        yield from self.view.compose()
        yield FittedFooter(keep=("progress-abort",))

    def on_mount(self) -> None:
        if not self._started:  # an installed screen shown again (d, then T): its worker runs already
            self._started = True
            self.set_interval(self.view.tick_s, self._tick)
            self.run_worker(self._execute(), name=self.view.what, group="progress", exclusive=True)
        self._draw()

    async def _execute(self) -> None:
        def forward(event: E) -> None:
            self.post_message(self.Progress(event))

        try:
            result = await self.pending.execute(on_event=forward)
        except Exception as exc:  # the core has put back what it could; the view says what is left
            self.post_message(self.Finished(None, str(exc) or exc.__class__.__name__))
            return
        self.post_message(self.Finished(result))

    def on_progress_screen_progress(self, message: Progress) -> None:
        self.view.feed(self, message.event)
        self._draw()

    def on_progress_screen_finished(self, message: Finished) -> None:
        self.done = True
        self.result, self.error = message.result, message.error
        self.view.finished(self)
        self._draw()
        self.refresh_bindings()
        if self.result is not None and self.on_done is not None:
            self.on_done(self.result)

    def _draw(self) -> None:
        if self.is_mounted:
            self.view.draw(self)

    def _tick(self) -> None:
        if self.is_mounted:
            self.view.tick(self)

    # -- intents ----------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "dashboard":
            return self.view.can_leave  # False: not in the footer either
        return True

    def action_dashboard(self) -> None:
        """Back to the dashboard; the operation goes on here (its key on that host shows it again)."""
        if self.view.can_leave:
            self.app.pop_screen()

    def action_abort_or_close(self) -> None:
        if self.done:
            if self.app.is_screen_installed(self):  # left and shown again by name: closed for good now
                self.app.pop_screen()
                self.app.uninstall_screen(self)
            else:
                self.dismiss(self.result)
            return
        if self.aborting:
            return
        pending, question = self.pending, self.view.abort_question
        if question is None or not isinstance(pending, Interruptible):
            self.notify(f"wait for {self.view.what} to finish", severity="warning", timeout=3)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.aborting = True
                pending.request_abort("aborted from the console")
                self._draw()

        self.app.push_screen(ConfirmScreen(question, danger=True), answered)


# --- an apply, a restart, a restore --------------------------------------------------------------------------


class ApplyView:
    """The phases of the start (and of the rollback's), the steps, the journal; then the verification, or why it
    failed and where the host is left."""

    abort_question: str | None
    can_leave = False
    tick_s = 0.5

    def __init__(
        self, title: str, *, restart_only: bool = False, what: str = "", back_to: str = "the dashboard"
    ) -> None:
        self.title = title
        self.what = what or ("the restart" if restart_only else "the apply")
        what_abort = "stop watching the restart" if restart_only else "abort and roll back to the previous unit"
        self.abort_question = f"{what_abort[0].upper()}{what_abort[1:]}?"
        self.back_to = back_to
        self.steps: list[StepChanged] = []
        self.phases: tuple[PhaseStatus, ...] = ()
        self.rollback_phases: tuple[PhaseStatus, ...] = ()
        self.notes: list[str] = []
        self.lines = LineMaker()  # the journal's lines: SGLang's date said once, where it changes

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title, style="bold"), id="progress-title")
        yield ProgressBar(total=1.0, show_eta=False, id="progress-bar")
        with Horizontal(id="progress-body"):
            with VerticalScroll(id="progress-left"):
                yield Static("", id="progress-result")  # first: once it is over, the outcome is what matters
                yield Static("", id="progress-phases")
                yield Static("", id="progress-steps")
            yield RichLog(id="progress-journal", max_lines=2000, wrap=False, markup=False)

    def feed(self, screen: ProgressScreen[ApplyEvent, ApplyResult], event: ApplyEvent) -> None:
        if isinstance(event, StepChanged):
            self.steps.append(event)
        elif isinstance(event, PhaseChanged):
            if event.start == "rollback":
                self.rollback_phases = event.phases
            else:
                self.phases = event.phases
                screen.query_one(ProgressBar).update(progress=event.progress)
        elif isinstance(event, LogLine):
            screen.query_one(RichLog).write(format_line(event.entry, self.lines))
        elif isinstance(event, Reconnecting):
            self.notes.append(f"connection lost during {event.operation}; reconnecting ({event.error})")
        elif isinstance(event, Notice):
            self.notes.append(event.message)

    def finished(self, screen: ProgressScreen[ApplyEvent, ApplyResult]) -> None:
        if screen.result is not None and screen.result.ok:
            screen.query_one(ProgressBar).update(progress=1.0)

    def tick(self, screen: ProgressScreen[ApplyEvent, ApplyResult]) -> None:
        self.draw(screen)

    def draw(self, screen: ProgressScreen[ApplyEvent, ApplyResult]) -> None:
        now = screen.clock()
        parts: list[RenderableType] = []
        if self.phases:
            parts.append(Text("the new start", style="bold"))
            parts.append(phase_table(self.phases, now))
        if self.rollback_phases:
            parts.append(Text("the previous unit's start (rollback)", style="bold"))
            parts.append(phase_table(self.rollback_phases, now))
        phases = Group(*parts) if parts else Text("starting ...", style="dim")
        screen.query_one("#progress-phases", Static).update(phases)
        steps = Text()
        for step in self.steps[-12:]:
            steps.append(f"{step.at.astimezone(UTC):%H:%M:%S} ", style="dim")
            steps.append(STEP_WORDS.get(step.state, step.state.value), style=_state_style(step.state))
            if step.detail:
                steps.append(f": {step.detail}", style="dim")
            steps.append("\n")
        for note in self.notes[-3:]:
            steps.append(f"! {note}\n", style="yellow")
        screen.query_one("#progress-steps", Static).update(steps)
        screen.query_one("#progress-result", Static).update(self._result_text(screen))

    def _result_text(self, screen: ProgressScreen[ApplyEvent, ApplyResult]) -> RenderableType:
        result = screen.result
        back = Text(f"esc: back to {self.back_to}", style="dim")
        if result is None and screen.error is not None:
            return Group(Text(f"✖ {screen.error}", style="bold red"), back)
        if result is None:
            hint = "aborting: rolling back ..." if screen.aborting else "esc: abort and roll back"
            return Text(hint, style="dim")
        state = result.state
        if result.ok:
            head = Text(f"✔ {STEP_WORDS.get(state, state.value)}", style="bold green")
            return Group(head, verification_table(result), back)
        parts: list[RenderableType] = [Text(f"✖ {STEP_WORDS.get(state, state.value)}", style="bold red")]
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
        parts.append(back)
        return Group(*parts)


def apply_progress(
    pending: PendingApply,
    *,
    title: str,
    what: str = "",
    back_to: str = "the dashboard",
    clock: Callable[[], datetime] = _utc_now,
    on_done: Callable[[ApplyResult], None] | None = None,
) -> ProgressScreen[ApplyEvent, ApplyResult]:
    """The progress of an apply, a restart (restart_only) or a restore: dismissed with its ApplyResult."""
    view = ApplyView(title, restart_only=pending.restart_only, what=what, back_to=back_to)
    return ProgressScreen(pending, view, clock=clock, on_done=on_done)


def _state_style(state: ApplyState) -> str:
    if state in (ApplyState.VERIFIED, ApplyState.HEALTHY, ApplyState.HEALTHY_ON_OLD):
        return "green"
    if state in (ApplyState.FAILED, ApplyState.ROLLBACK_FAILED, ApplyState.RESTART_FAILED, ApplyState.MISMATCH):
        return "bold red"
    if state in (ApplyState.ROLLING_BACK, ApplyState.RESTORED):
        return "yellow"
    return ""
