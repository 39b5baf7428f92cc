"""`F`: freeze the host's running setup as its production snapshot (console.core.snapshot.freeze).

The screen asks for a name and a note (the document's path is the profile's or ~/production_NAME.md unless
given), plans the freeze in a worker (the unit's lock is held from then on: no apply can change the unit while
the operator reads), and shows what will be written: why it is refused (with a field for --force's reason), the
unit diff if the freeze must add [Install], and the whole document. Freeze writes it, watched on the console's
progress screen (FreezeView: each step, then where it ended); Cancel or Esc writes nothing and lets go of the
lock. The TUI holds no logic: the planner is console.core.snapshot.plan_freeze on the host's session (the console's
options can give another: console/tui/runners.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC
from functools import partial
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, Input, Label, Static

from console.core.events import Notice
from console.core.snapshot import FreezeEvent, FreezePlan, FreezeRequest, FreezeResult, FreezeStep
from console.tui.context import ConsoleContext
from console.tui.runners import FreezePending
from console.tui.screens import FORM_FOCUS_BINDINGS
from console.tui.screens.progress import ProgressScreen
from console.tui.widgets.footer import FittedFooter
from console.tui.widgets.inputs import OrderedInput

# the host's planner, its label bound: console.tui.runners.FreezePlanner
Planner = Callable[[FreezeRequest], Awaitable[FreezePending]]
FORCE_HINT = "a reason to freeze anyway (recorded in the snapshot and the document)"
PREVIEW_HINT = "Preview (Enter) shows what will be written; nothing is written before Freeze."


def preview(plan: FreezePlan) -> Text:
    """Refusals, the unit diff and the document, as the freeze would write them."""
    out = Text()
    if plan.refusals:
        title = "Forced despite:" if plan.forced else "Refused: nothing will be written until this is fixed (or forced)"
        out.append(title + "\n", style="bold red" if not plan.forced else "bold yellow")
        for refusal in plan.refusals:
            out.append(f"  [{refusal.code}] ", style="bold")
            out.append(refusal.message + "\n")
        out.append("\n")
    if plan.unit_changed:
        out.append("Unit change (enable needs an [Install] section):\n", style="bold")
        for line in plan.unit_diff.splitlines():
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            out.append(line + "\n", style=style)
        out.append("\n")
    else:
        out.append("Unit: unchanged (it is the running setup); it will be enabled.\n\n", style="bold")
    out.append(f"Document {plan.document_path}:\n", style="bold")
    out.append(plan.document)
    return out


class FreezeScreen(Screen[bool]):
    """Dismissed with True when the host was frozen (once its progress screen is closed)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="freeze-cancel"),
        *FORM_FOCUS_BINDINGS,
    ]

    class Planned(Message):
        def __init__(self, pending: FreezePending | None, error: str | None = None) -> None:
            super().__init__()
            self.pending = pending
            self.error = error

    def __init__(self, label: str, planner: Planner, *, suggested_name: str = "v1") -> None:
        super().__init__()
        self.label = label
        self.planner = planner
        self.suggested_name = suggested_name
        self.pending: FreezePending | None = None
        self.running = False  # planning
        self.done = False  # handed to the progress screen

    def compose(self) -> ComposeResult:
        with Vertical(id="freeze-box"):
            yield Static(Text(f"Freeze {self.label} as a production snapshot", style="bold"), id="freeze-title")
            with Horizontal(classes="freeze-row"):
                yield Label("name ", classes="freeze-label")
                yield OrderedInput(self.suggested_name, id="freeze-name", classes="freeze-name")
                yield Label(" note ", classes="freeze-label")
                yield OrderedInput(placeholder="why this setup (goes into the document)", id="freeze-note")
            with Horizontal(classes="freeze-row"):
                yield Label("doc  ", classes="freeze-label")
                yield OrderedInput(placeholder="the profile's, else ~/production_{name}.md", id="freeze-doc")
            with Horizontal(classes="freeze-row", id="freeze-force-row"):
                yield Label("force", classes="freeze-label")
                yield OrderedInput(placeholder=FORCE_HINT, id="freeze-force")
            yield Static("", id="freeze-status")
            with VerticalScroll(id="freeze-preview"):
                hint = Text(
                    "Preview (Enter) shows what will be written; nothing is written before Freeze.", style="dim"
                )
                yield Static(hint, id="freeze-text")
            with Horizontal(id="freeze-buttons"):
                yield Button("Preview", id="freeze-plan", variant="primary")
                yield Button("Freeze", id="freeze-go", variant="warning", disabled=True)
                yield Button("Cancel", id="freeze-close")
        yield FittedFooter(keep=("freeze-cancel",))

    def on_mount(self) -> None:
        self.query_one("#freeze-force-row").display = False
        self.query_one("#freeze-note", Input).focus()

    # -- the plan -------------------------------------------------------------------------------------------

    def request(self) -> FreezeRequest:
        doc = self.query_one("#freeze-doc", Input).value.strip() or None
        return FreezeRequest(
            self.query_one("#freeze-name", Input).value.strip(), self.query_one("#freeze-note", Input).value, doc
        )

    def _status(self, text: str, style: str = "") -> None:
        self.query_one("#freeze-status", Static).update(Text(text, style=style))

    def action_preview(self) -> None:
        if self.running or self.done:
            return
        self.running = True
        self.query_one("#freeze-go", Button).disabled = True
        self._status("reading the host (the unit's lock is held until Freeze or Cancel) ...", "yellow")
        self.run_worker(self._plan(self.request()), exclusive=True, group="freeze", exit_on_error=False)

    async def _plan(self, request: FreezeRequest) -> None:
        previous, self.pending = self.pending, None
        if previous is not None:
            await previous.abort("planned again")
        try:
            pending = await self.planner(request.checked())
        except Exception as exc:  # a usage error, a taken name, the lock, the host: said, nothing written
            self.post_message(self.Planned(None, str(exc)))
            return
        self.post_message(self.Planned(pending))

    def on_freeze_screen_planned(self, message: Planned) -> None:
        self.running = False
        if message.pending is None:
            self._status(f"not planned: {message.error}", "bold red")
            return
        self.pending = message.pending
        self._show(message.pending.plan)

    def _show(self, plan: FreezePlan) -> None:
        self.query_one("#freeze-text", Static).update(preview(plan))
        self.query_one("#freeze-force-row").display = bool(plan.refusals)
        go = self.query_one("#freeze-go", Button)
        if plan.refused:
            self._status(f"refused ({len(plan.refusals)}): see below; a force reason unlocks Freeze", "bold red")
            go.disabled = not self.query_one("#freeze-force", Input).value.strip()
            go.label = "Freeze anyway"
        else:
            lines = plan.document.count("\n") + 1
            self._status(f"ready: {lines} lines to {plan.document_path}; nothing written yet", "green")
            go.disabled = False

    @on(Input.Changed, "#freeze-force")
    def _force_changed(self, event: Input.Changed) -> None:
        if self.pending is not None and self.pending.plan.refused and not self.done:
            self.query_one("#freeze-go", Button).disabled = not event.value.strip()

    @on(Input.Changed, "#freeze-name, #freeze-note, #freeze-doc")
    def _request_changed(self) -> None:
        """The preview no longer shows what Freeze would write: it must be made again."""
        if self.pending is not None and not self.running and not self.done:
            self.query_one("#freeze-go", Button).disabled = True
            self._status("changed since the preview: Enter (or Preview) to see it again", "yellow")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "freeze-force" and self.pending is not None:
            self._freeze()
        else:
            self.action_preview()

    # -- freezing -----------------------------------------------------------------------------------------

    @on(Button.Pressed, "#freeze-plan")
    def _plan_pressed(self) -> None:
        self.action_preview()

    @on(Button.Pressed, "#freeze-go")
    def _go_pressed(self) -> None:
        self._freeze()

    def _freeze(self) -> None:
        pending = self.pending
        if pending is None or self.running or self.done or self.query_one("#freeze-go", Button).disabled:
            return
        reason = self.query_one("#freeze-force", Input).value.strip()
        if pending.plan.refusals and reason:
            pending.force(reason)
        elif pending.plan.refused:
            return
        self.pending, self.done = None, True  # execute() lets go of the unit's lock, whatever happens
        for button in self.query(Button):
            button.disabled = True
        self._status("freezing ...", "yellow")
        self.app.push_screen(ProgressScreen(pending, FreezeView(self.label, pending.plan)), self._frozen)

    def _frozen(self, result: FreezeResult | None) -> None:
        """Its progress closed: the dialog has nothing left to do (the outcome was read there)."""
        self.dismiss(result is not None and result.ok)

    @on(Button.Pressed, "#freeze-close")
    def _close_pressed(self) -> None:
        self.action_cancel()

    def action_cancel(self) -> None:
        if self.running:
            self.notify("wait for the freeze to finish", severity="warning", timeout=3)
            return
        pending, self.pending = self.pending, None
        if pending is not None:  # the app's worker: it outlives this screen, and lets go of the unit's lock
            self.app.run_worker(pending.abort("not confirmed; nothing was written"), group="freeze-abort")
        self.dismiss(False)


class FreezeView:
    """A freeze on the progress screen (console/tui/screens/progress.py): each step it takes, then where it ended.
    Its few writes run to the end: esc waits for them."""

    what = "the freeze"
    abort_question: str | None = None
    can_leave = False
    tick_s = 1.0

    def __init__(self, label: str, plan: FreezePlan) -> None:
        self.label = label
        self.plan = plan
        self.lines = Text()

    def compose(self) -> ComposeResult:
        title = f"Freezing {self.label} as {self.plan.request.name}"
        yield Static(Text(title, style="bold"), id="progress-title")
        with VerticalScroll(id="freeze-progress"):
            yield Static("", id="progress-result")
            yield Static("", id="progress-steps")

    def feed(self, screen: ProgressScreen[FreezeEvent, FreezeResult], event: FreezeEvent) -> None:
        if isinstance(event, FreezeStep):
            self.lines.append(f"{event.at.astimezone(UTC):%H:%M:%S} ", style="dim")
            self.lines.append(event.step.replace("_", " "), style="bold red" if event.step == "failed" else "")
            self.lines.append(f": {event.detail}\n" if event.detail else "\n", style="dim")
        elif isinstance(event, Notice):
            self.lines.append(f"! {event.message}\n", style="yellow")

    def finished(self, screen: ProgressScreen[FreezeEvent, FreezeResult]) -> None:
        pass

    def tick(self, screen: ProgressScreen[FreezeEvent, FreezeResult]) -> None:
        pass

    def draw(self, screen: ProgressScreen[FreezeEvent, FreezeResult]) -> None:
        screen.query_one("#progress-result", Static).update(self._outcome(screen))
        screen.query_one("#progress-steps", Static).update(self.lines)

    def _outcome(self, screen: ProgressScreen[FreezeEvent, FreezeResult]) -> RenderableType:
        result = screen.result
        if result is None and screen.error is None:
            return Text("freezing: the document, the unit, the snapshot ...", style="yellow")
        if result is None:
            head = Text(f"failed: {screen.error}", style="bold red")
        elif result.ok:
            head = Text(
                f"frozen as {result.name}: {result.unit} {result.unit_file_state}, document "
                f"{self.plan.document_path}, snapshot {result.snapshot_path}",
                style="bold green",
            )
        else:
            head = Text(f"not frozen ({result.state}): {result.error}", style="bold red")
        return Group(head, Text("esc: back to the dashboard", style="dim"))


# --- how the console opens it ---------------------------------------------------------------------------------


def open_freeze(console: ConsoleContext) -> None:
    """F / the palette: the freeze screen for the current host (not on the overview, not read-only)."""
    from console.core.snapshot import load_snapshots, next_name

    label = console.current_host
    why = console.why_disabled("freeze")
    if why or label is None:
        console.notify(why or "open a host first", title="Freeze", severity="warning")
        return
    planner = partial(console.options.runners.freeze, console.session, label)
    workspace = console.workspace(label)
    suggested = next_name(load_snapshots(workspace)[0], label) if workspace is not None else "v1"

    def closed(frozen: bool | None) -> None:
        if frozen:
            console.refresh_host(label)  # the header shows the new production snapshot at once

    console.push_screen(FreezeScreen(label, planner, suggested_name=suggested), closed)
