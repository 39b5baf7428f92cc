"""A deployment changed or restarted as one, from the console (`e` or `r` on a member's tab, or on the overview of
`connect DEPLOYMENT`): the confirmation shows one diff per member, what must match across them and the restart order;
the progress shows the order's steps as they begin and end, each member's start (its phases), the members' journal
lines (each under its name), then the outcome member by member (and the downtime, for ranks)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import RichLog, Static

from console.core.events import LogLine, Notice, PhaseChanged
from console.core.phases import PhaseStatus
from console.core.roll import DeploymentChange, DeploymentEvent, DeploymentResult, MemberEvent, StepEvent
from console.tui.screens.confirm import diff_text
from console.tui.screens.progress import ProgressScreen, phase_table
from console.tui.widgets.journal import LineMaker, format_line

OK_STATES = ("verified", "unchanged")


def change_body(change: DeploymentChange) -> RenderableType:
    """What the confirmation shows: each member's diff, the checks across them, the notes, the order."""
    parts: list[RenderableType] = []
    for member in change.members:
        m = member.member
        role = f"rank {m.rank}" if m.rank is not None else m.role
        parts.append(Text(f"{m.name} ({m.host}, {role})", style="bold"))
        if member.plan.diff:
            parts.append(diff_text(member.plan.diff))
        else:
            parts.append(Text("  restarted as it is" if member.restart_only else "  unchanged", style="dim"))
        parts.extend(Text(f"  ✖ {e.message}", style="red") for e in member.plan.report.errors)
    for check in change.result.checks:
        style = "bold red" if check.level == "error" else "yellow"
        parts.append(Text(f"{'✖' if check.level == 'error' else '!'} {check.message}", style=style))
    parts.extend(Text(f"! {note}", style="yellow") for note in change.result.notes)
    if change.needs_confirmation:
        parts.append(Text("restart order:", style="bold"))
        parts.extend(Text(f"  {step.describe()}", style="dim") for step in change.order.steps)
    return Group(*parts)


class DeploymentView:
    """The order's steps, each member's start, the journals; then the outcome member by member."""

    can_leave = False
    tick_s = 0.5

    def __init__(self, title: str, *, restart_only: bool) -> None:
        self.title = title
        self.what = "the deployment's restart" if restart_only else "the deployment's change"
        self.abort_question: str | None = "Abort? Every member changed goes back to its previous unit."
        self.steps: list[StepEvent] = []
        self.phases: dict[str, tuple[PhaseStatus, ...]] = {}
        self.notes: list[str] = []
        self.lines = LineMaker()

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title, style="bold"), id="progress-title")
        with Horizontal(id="progress-body"):
            with VerticalScroll(id="progress-left"):
                yield Static("", id="progress-result")
                yield Static("", id="progress-steps")
                yield Static("", id="progress-phases")
            yield RichLog(id="progress-journal", max_lines=2000, wrap=False, markup=False)

    def feed(self, screen: ProgressScreen[DeploymentEvent, DeploymentResult], event: DeploymentEvent) -> None:
        if isinstance(event, StepEvent):
            self.steps.append(event)
        elif isinstance(event, MemberEvent):
            inner = event.event
            if isinstance(inner, PhaseChanged):
                self.phases[event.member] = inner.phases
            elif isinstance(inner, LogLine):
                line = format_line(inner.entry, self.lines)
                screen.query_one(RichLog).write(Text(f"{event.member}: ", style="bold") + line)
            elif isinstance(inner, Notice):
                self.notes.append(f"{event.member}: {inner.message}")
        elif isinstance(event, Notice):
            self.notes.append(event.message)

    def finished(self, screen: ProgressScreen[DeploymentEvent, DeploymentResult]) -> None:
        pass

    def tick(self, screen: ProgressScreen[DeploymentEvent, DeploymentResult]) -> None:
        self.draw(screen)

    def draw(self, screen: ProgressScreen[DeploymentEvent, DeploymentResult]) -> None:
        now = screen.clock()
        steps = Text()
        for step in self.steps[-16:]:
            back = "rollback: " if step.rollback else ""
            style = {"begun": "", "done": "green", "failed": "bold red"}[step.state]
            steps.append(f"{step.at.astimezone(UTC):%H:%M:%S} ", style="dim")
            steps.append(f"{back}{step.step.kind.replace('_', ' ')} {', '.join(step.step.members)}", style=style)
            if step.state != "begun" and step.detail:
                steps.append(f": {step.detail}", style="dim")
            steps.append("\n")
        for note in self.notes[-4:]:
            steps.append(f"! {note}\n", style="yellow")
        screen.query_one("#progress-steps", Static).update(steps)
        parts: list[RenderableType] = []
        for member, phases in self.phases.items():
            parts.append(Text(member, style="bold"))
            parts.append(phase_table(phases, now))
        screen.query_one("#progress-phases", Static).update(Group(*parts) if parts else Text(""))
        screen.query_one("#progress-result", Static).update(self._result(screen))

    def _result(self, screen: ProgressScreen[DeploymentEvent, DeploymentResult]) -> RenderableType:
        back = Text("esc: back to the dashboard", style="dim")
        result = screen.result
        if result is None and screen.error is not None:
            return Group(Text(f"✖ {screen.error}", style="bold red"), back)
        if result is None:
            hint = "aborting: every member changed goes back ..." if screen.aborting else "esc: abort and roll back"
            return Text(hint, style="dim")
        ok = result.state in OK_STATES
        parts: list[RenderableType] = [
            Text(
                f"{'✔' if ok else '✖'} {result.deployment.name}: {result.state.replace('_', ' ')}",
                style="bold green" if ok else "bold red",
            )
        ]
        if result.error:
            parts.append(Text(result.error, style="red"))
        for member in result.members:
            line = Text(f"  {member.name}: {member.outcome.replace('_', ' ')}")
            if member.pid_before is not None or member.pid_after is not None:
                line.append(f"  pid {member.pid_before} → {member.pid_after}", style="dim")
            parts.append(line)
        if result.downtime_s is not None:
            parts.append(Text(f"  down {result.downtime_s:g} s (rank 0 stopped → rank 0 ready)", style="dim"))
        parts.append(back)
        return Group(*parts)


def deployment_progress(
    change: DeploymentChange,
    *,
    title: str,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    on_done: Callable[[DeploymentResult], None] | None = None,
) -> ProgressScreen[DeploymentEvent, DeploymentResult]:
    view = DeploymentView(title, restart_only=change.operation == "restart")
    return ProgressScreen(change, view, clock=clock, on_done=on_done)
