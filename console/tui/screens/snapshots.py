"""The snapshots view (command palette: Snapshots): every production snapshot of the workspace, which one is each
host's production (★), the highlighted one's document, the diff of two, and restore.

Keys: m marks a snapshot, d diffs the marked one (else the host's production) with the highlighted one, r restores
the highlighted one onto its host through the validated apply (console.core.snapshot.plan_restore): the plan (diff,
rule report, notes) is shown first and y writes it, watched on the console's progress screen as any apply (esc
there aborts and rolls back), n or Esc lets go. Reading only the workspace, the view works
without a host; restore needs the snapshot's host open in this console, and in read-only mode r says it is off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from console.core.apply import ApplyResult, PendingApply
from console.core.snapshot import (
    Snapshot,
    best_throughput,
    diff_snapshots,
    load_snapshots,
    production_names,
    production_of,
    render_document,
    setup_text,
)
from console.tui.context import ConsoleContext
from console.tui.screens.progress import apply_progress
from console.tui.widgets.footer import FittedFooter
from console.workspace import Workspace

# snapshot -> (a PendingApply for its host, notes): console.tui.runners.Restorer, the console's session_of bound
Restorer = Callable[[Snapshot], Awaitable[tuple[PendingApply, list[str]]]]
COLUMNS = ("", "name", "host", "frozen (UTC)", "SGLang", "setup", "best tok/s", "note")


def plan_text(snapshot: Snapshot, pending: PendingApply, notes: list[str]) -> Text:
    """The restore's plan: notes, the unit diff and the rules' verdict (apply's Plan, masked)."""
    plan = pending.plan
    out = Text()
    out.append(f"Restore {snapshot.name} onto {pending.session.label} ({pending.session.service.unit})\n", style="bold")
    for note in notes:
        out.append(f"  note: {note}\n", style="yellow")
    if plan.diff:
        for line in plan.diff.splitlines():
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            out.append(line + "\n", style=style)
    else:
        out.append("The unit already has this snapshot's flags and environment.\n", style="dim")
    for error in plan.report.errors:
        out.append(f"error [{error.code}]: {error.message}\n", style="bold red")
    for warning in plan.report.warnings:
        out.append(f"warning [{warning.code}]: {warning.message}\n", style="yellow")
    return out


class SnapshotsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="snapshots-close"),
        Binding("m", "mark", "Mark", id="snapshots-mark"),
        Binding("d", "diff", "Diff", id="snapshots-diff"),
        Binding("r", "restore", "Restore", id="snapshots-restore"),
        Binding("y", "confirm", "Yes, restore", id="snapshots-yes"),
        Binding("n", "decline", "No", id="snapshots-no"),
    ]

    class RestorePlanned(Message):
        def __init__(
            self, snapshot: Snapshot, pending: PendingApply | None, notes: list[str], error: str | None = None
        ) -> None:
            super().__init__()
            self.snapshot = snapshot
            self.pending = pending
            self.notes = notes
            self.error = error

    def __init__(self, workspace: Workspace, restorer: Restorer | None, *, read_only: bool = False) -> None:
        super().__init__()
        self.workspace = workspace
        self.restorer = restorer
        self.read_only = read_only
        self.snapshots: list[Snapshot] = []
        self.marked: str | None = None
        self.confirming: tuple[Snapshot, PendingApply] | None = None
        self.busy = False

    def compose(self) -> ComposeResult:
        with Vertical(id="snapshots-box"):
            yield Static(id="snapshots-title")
            yield DataTable(id="snapshots-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="snapshots-status")
            with VerticalScroll(id="snapshots-detail"):
                yield Static("", id="snapshots-text")
        yield FittedFooter(keep=("snapshots-close",))

    def on_mount(self) -> None:
        self.reload()
        self.query_one(DataTable).focus()

    def reload(self) -> None:
        snapshots, problems = load_snapshots(self.workspace)
        self.snapshots = list(reversed(snapshots))  # newest first
        current = production_names(snapshots)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_columns(*COLUMNS)
        for snap in self.snapshots:
            best = best_throughput(snap)
            note = snap.note.splitlines()[0] if snap.note.strip() else ""
            table.add_row(
                Text("★", style="bold yellow") if snap.name in current else "",
                Text(snap.name, style="bold"),
                snap.host.label,
                f"{snap.frozen_at:%Y-%m-%d %H:%M}",
                snap.server.version or "?",
                setup_text(snap.server.resolved),
                "-" if best is None else f"{best:,.0f}",
                note[:40],
                key=snap.name,
            )
        title = Text("Production snapshots (profiles/snapshots/)", style="bold")
        title.append("   ★ = the host's production (its latest freeze)", style="dim")
        for problem in problems:
            title.append(f"\nunreadable: {problem}", style="red")
        self.query_one("#snapshots-title", Static).update(title)
        if not self.snapshots:
            self._detail(Text("No snapshots yet: F on a host freezes its running setup.", style="dim"))
        self._hint()

    # -- what is shown ----------------------------------------------------------------------------------

    def highlighted(self) -> Snapshot | None:
        table = self.query_one(DataTable)
        if not self.snapshots or table.cursor_row is None or table.cursor_row >= len(self.snapshots):
            return None
        return self.snapshots[table.cursor_row]

    def _detail(self, text: Text) -> None:
        self.query_one("#snapshots-text", Static).update(text)
        self.query_one("#snapshots-detail", VerticalScroll).scroll_home(animate=False)

    def _status(self, text: str, style: str = "") -> None:
        self.query_one("#snapshots-status", Static).update(Text(text, style=style))

    def _hint(self) -> None:
        mark = f"marked: {self.marked}   " if self.marked else ""
        self._status(f"{mark}m mark · d diff with the marked one (else production) · r restore · esc close", "dim")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.confirming is None and not self.busy:
            snap = self.highlighted()
            if snap is not None:
                self._detail(Text(render_document(snap)))

    def action_mark(self) -> None:
        snap = self.highlighted()
        if snap is not None:
            self.marked = None if self.marked == snap.name else snap.name
            self._hint()

    def action_diff(self) -> None:
        b = self.highlighted()
        if b is None:
            return
        a = next((s for s in self.snapshots if s.name == self.marked), None)
        if a is None or a.name == b.name:
            a = production_of(self.snapshots, b.host.label, b.host.unit)
        if a is None or a.name == b.name:
            self._status(f"{b.name} is its host's production: mark another snapshot (m) to diff with it", "yellow")
            return
        diff = diff_snapshots(a, b)
        text = Text(f"{a.name} -> {b.name}\n", style="bold")
        for line in diff.lines():
            style = "bold" if line.endswith(":") else ""
            text.append(line + "\n", style=style)
        self._detail(text)
        self._status(f"diff {a.name} -> {b.name}", "bold")

    # -- restore ------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("confirm", "decline"):
            return self.confirming is not None and not self.busy
        return True  # read-only: r stays live and says why it does nothing (a silent key reads as broken)

    def action_restore(self) -> None:
        snap = self.highlighted()
        if self.read_only or self.restorer is None:
            self.notify("read-only: restoring rewrites the unit and restarts the host", severity="warning", timeout=4)
            return
        if snap is None or self.busy:
            return
        self.busy = True
        self._status(f"planning the restore of {snap.name} onto {snap.host.label} ...", "yellow")
        self.run_worker(self._plan(snap, self.restorer), exclusive=True, group="restore", exit_on_error=False)

    async def _plan(self, snap: Snapshot, restorer: Restorer) -> None:
        try:
            pending, notes = await restorer(snap)
        except Exception as exc:  # the host is not open, the lock is held, the unit is foreign: said, nothing done
            self.post_message(self.RestorePlanned(snap, None, [], str(exc)))
            return
        self.post_message(self.RestorePlanned(snap, pending, notes))

    def on_snapshots_screen_restore_planned(self, message: RestorePlanned) -> None:
        self.busy = False
        if message.pending is None:
            self._status(f"cannot restore {message.snapshot.name}: {message.error}", "bold red")
            return
        pending = message.pending
        self._detail(plan_text(message.snapshot, pending, message.notes))
        if pending.result.rollout.finished or not pending.needs_confirmation:
            why = pending.result.error or ("nothing to change" if pending.plan.ok else "refused by the rules")
            self._status(f"not restored: {why}", "yellow" if pending.plan.ok else "bold red")
            self.app.run_worker(pending.abort("nothing to do"), group="restore-abort")
            return
        self.confirming = (message.snapshot, pending)
        self._status(f"restore {message.snapshot.name} onto {pending.session.label}? y: write and restart · n: no",
                     "bold yellow")  # fmt: skip
        self.refresh_bindings()

    def action_confirm(self) -> None:
        if self.confirming is None or self.busy:
            return
        snap, pending = self.confirming
        self.confirming = None
        self.refresh_bindings()
        session = pending.session
        title = f"Restoring {snap.name} onto {session.label} ({session.service.unit})"
        progress = apply_progress(pending, title=title, what="the restore", back_to="the snapshots")
        self.app.push_screen(progress, lambda result: self._restored(snap, result))

    def _restored(self, snap: Snapshot, result: ApplyResult | None) -> None:
        """Back from the restore's progress: where it ended, and what the server runs now."""
        text = Text()
        if result is None:  # it raised (its progress screen said what): the host's tab shows where it is left
            self._status(f"the restore of {snap.name} failed before it finished; see the host's tab", "bold red")
            self._detail(text)
            return
        if result.verification is not None:
            for value in result.verification.values:
                text.append(f"  {value.dest} = {value.actual!r} [{value.status.replace('_', ' ')}]\n")
        for line in result.journal_excerpt():
            text.append(f"  {line}\n", style="red")
        if result.ok:
            self._status(f"restored {snap.name}: {result.state.value}", "bold green")
        else:
            rolled = " (rolled back)" if result.rollout.rolled_back else ""
            self._status(f"restore failed: {result.state.value}{rolled}: {result.error}", "bold red")
        self._detail(text)

    def action_decline(self) -> None:
        if self.confirming is None or self.busy:
            return
        _snap, pending = self.confirming
        self.confirming = None
        self.app.run_worker(pending.abort("not confirmed; nothing was changed"), group="restore-abort")
        self._hint()
        self.refresh_bindings()

    def action_close(self) -> None:
        if self.busy:
            self.notify("wait for the restore to finish", severity="warning", timeout=3)
            return
        if self.confirming is not None:
            self.action_decline()
        self.dismiss(None)


def open_snapshots(console: ConsoleContext) -> None:
    """The palette's Snapshots: the workspace's snapshots; restore goes to the snapshot's host in this console."""
    workspace = console.workspace()
    if workspace is None:
        console.notify("no workspace: the snapshots live in its profiles/snapshots/", title="Snapshots",
                       severity="warning")  # fmt: skip
        return
    restorer = partial(console.options.runners.restore, console.session)
    console.push_screen(SnapshotsScreen(workspace, restorer, read_only=console.options.read_only))
