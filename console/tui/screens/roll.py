"""Rolling changes from the overview: with hosts selected (space), `e` sets flags on them, `r` restarts them and
`F` freezes them as one snapshot set, one batch at a time, canary first (console.core.roll.group over
console.core.roll.run, as `opsconsole apply|restart @GROUP --rolling` and `freeze @GROUP` do).

RollScreen is the form and the plan: the change (the flags to set or unset; the set's name), the canary, the wave
and the failures the roll goes past (the CLI's defaults), the drain timeout when the group names a router, the
gate (--gate bench) for a set. Its right side says what will happen, live: the batches, the router's steps, the
gate, what a failure does; a field that cannot be used is marked ✖. Ctrl+S plans on every host (the group's lock,
each host's unit lock, each host's own SGLang rules: a value one host's version refuses is named with that host,
and nothing changes anywhere); then a confirmation with every host's diff; then the progress.

RollView draws the roll on the console's progress screen (screens/progress.py): one row per host (pending /
draining / applying / verifying / benchmarking / rolling back / done / unchanged / rolled back / failed / not
started, console/tui/presenters/roll_board.py), the batch under way, the steps as a log; esc (or ctrl+c) asks,
then stops the roll between hosts (a host being changed rolls back as a single apply does); at the end every
host's outcome, the router's worker list, the snapshot set.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import ClassVar

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Checkbox, Input, Label, RichLog, Static

from console.core.change import parse_edits
from console.core.roll import (
    ApplyChange,
    FreezeChange,
    GateSpec,
    GroupRoll,
    OpenHost,
    PlanHost,
    RollError,
    RollEvent,
    RollReport,
    RollRequest,
    RollSpec,
    apply_planner,
    batches,
    freeze_planner,
    gate_from_fields,
    restart_planner,
    spec_from_fields,
)
from console.core.snapshot import member_names
from console.errors import UsageError
from console.fleet.groups import Group
from console.tui.presenters.roll_board import RollBoard, RollRow
from console.tui.runners import RollPlanner
from console.tui.screens import FORM_FOCUS_BINDINGS, unless_closing
from console.tui.screens.confirm import ConfirmScreen, diff_text
from console.tui.screens.progress import ProgressScreen
from console.tui.widgets.footer import FittedFooter
from console.tui.widgets.inputs import OrderedInput
from console.workspace import Workspace

TITLES = {"apply": "Rolling set", "restart": "Rolling restart", "freeze": "Fleet freeze"}
# The CLI's defaults: --canary 1 --wave 1 --max-failures 0; a group freeze restarts nothing, so all side by side.
DEFAULTS = {"apply": ("1", "1", "0"), "restart": ("1", "1", "0"), "freeze": ("0", "100%", "0")}
DRAIN_DEFAULT = "120"
SET_HINT = "speculative-num-steps=3 speculative-num-draft-tokens=4"
PHASE_STYLE = {
    "pending": ("·", "dim"),
    "draining": ("⇣", "yellow"),
    "applying": ("▶", "bold cyan"),
    "restarting": ("▶", "bold cyan"),
    "restoring": ("▶", "bold cyan"),
    "freezing": ("▶", "bold cyan"),
    "verifying": ("▶", "cyan"),
    "benchmarking": ("▶", "cyan"),
    "rolling back": ("↶", "bold yellow"),
    "done": ("✔", "bold green"),
    "unchanged": ("=", "green"),
    "rolled back": ("↶", "bold yellow"),
    "failed": ("✖", "bold red"),
    "not started": ("–", "dim"),
}


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RollSetup:
    """What the overview hands the form: the operation, the hosts selected (in the table's order) and their group,
    where the workspace is, how to plan and how to reach a host."""

    operation: str  # apply | restart | freeze
    group: Group
    hosts: tuple[str, ...]
    workspace: Workspace
    planner: RollPlanner
    open_host: OpenHost
    owner: str
    suggested_set: str = "v1"
    clock: Callable[[], datetime] = _utc_now  # the progress screen's (elapsed times of hosts under way)
    on_done: Callable[[RollReport], None] | None = None


@dataclass
class Draft:
    """The form as the core reads it, or what is wrong with it (one line per field)."""

    spec: RollSpec | None = None
    sets: list[str] = field(default_factory=list)
    unsets: list[str] = field(default_factory=list)
    set_name: str = ""
    note: str = ""
    drain_s: float = float(DRAIN_DEFAULT)
    errors: list[str] = field(default_factory=list)


def _words(text: str, what: str, errors: list[str]) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        errors.append(f"{what}: {exc} (quote a value with spaces whole)")
        return []


class RollScreen(Screen[None]):
    """The roll's form and its plan; dismissed once the roll's progress screen is closed (or on esc)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "plan", "Plan & confirm", id="roll-plan"),
        Binding("escape", "cancel", "Cancel", id="roll-cancel"),
        *FORM_FOCUS_BINDINGS,
    ]

    def __init__(self, setup: RollSetup) -> None:
        super().__init__()
        self.setup = setup
        self.busy = False
        self.outcome: RenderableType | None = None  # what the last plan said (refused, not planned), until an edit

    @property
    def operation(self) -> str:
        return self.setup.operation

    def compose(self) -> ComposeResult:
        setup = self.setup
        title = Text(f"{TITLES[setup.operation]} · @{setup.group.name} · ", style="bold")
        title.append(f"{len(setup.hosts)} of {len(setup.group.members)} hosts: {', '.join(setup.hosts)}")
        yield Static(title, id="roll-title")
        canary, wave, failures = DEFAULTS[setup.operation]
        # the change on whole-width rows (flags and values are long), the roll's numbers beside its plan
        if setup.operation == "apply":
            yield self._row("set FLAG=VALUE", OrderedInput(placeholder=SET_HINT, id="roll-set", compact=True))
            yield self._row("unset FLAG", OrderedInput(placeholder="flags to remove", id="roll-unset", compact=True))
        if setup.operation == "freeze":
            yield self._row("snapshot set", OrderedInput(setup.suggested_set, id="roll-name", compact=True))
            note = OrderedInput(placeholder="why this setup (goes into each document)", id="roll-note", compact=True)
            yield self._row("note", note)
        with Horizontal(id="roll-body"):
            with VerticalScroll(id="roll-form", can_focus=False):  # its fields are the Tab stops (as the bench form)
                yield self._row("canary hosts", OrderedInput(canary, id="roll-canary", compact=True))
                yield self._row("wave (N or P%)", OrderedInput(wave, id="roll-wave", compact=True))
                yield self._row("max failures", OrderedInput(failures, id="roll-max-failures", compact=True))
                if setup.group.router and setup.operation != "freeze":
                    yield self._row("drain timeout s", OrderedInput(DRAIN_DEFAULT, id="roll-drain", compact=True))
                if setup.operation == "apply":
                    yield self._row("gate", Checkbox("bench canary", id="roll-gate", compact=True))
                    level = OrderedInput(placeholder="newest record's", id="roll-gate-level", compact=True)
                    yield self._row("gate level C=", level)
                    yield self._row("gate max loss %", OrderedInput("5", id="roll-gate-loss", compact=True))
            with VerticalScroll(id="roll-plan-box"):
                yield Static("", id="roll-plan")
        yield FittedFooter(keep=("roll-cancel",))

    @staticmethod
    def _row(label: str, widget: Input | Checkbox) -> Horizontal:
        return Horizontal(Label(label, classes="roll-label"), widget, classes="roll-row")

    def on_mount(self) -> None:
        first = "#roll-set" if self.operation == "apply" else "#roll-name" if self.operation == "freeze" else None
        self.query_one(first or "#roll-canary", Input).focus()
        self._update()

    # -- the form --------------------------------------------------------------------------------------------

    def _value(self, ident: str, default: str = "") -> str:
        found = self.query(f"#{ident}").results(Input)
        widget = next(iter(found), None)
        return widget.value if widget is not None else default

    def draft(self) -> Draft:
        """The form read through the core's own parsers (nothing is contacted)."""
        draft = Draft()
        errors = draft.errors
        gate: GateSpec | None = None
        gates = list(self.query("#roll-gate").results(Checkbox))
        if gates and gates[0].value:
            try:
                gate = gate_from_fields(self._value("roll-gate-level"), self._value("roll-gate-loss"))
            except RollError as exc:
                errors.append(str(exc))
        try:
            draft.spec = spec_from_fields(self._value("roll-canary"), self._value("roll-wave"),
                                          self._value("roll-max-failures"), gate=gate,
                                          hosts=len(self.setup.hosts))  # fmt: skip
        except RollError as exc:
            errors.append(str(exc))
        if self.operation == "apply":
            draft.sets = _words(self._value("roll-set"), "set", errors)
            draft.unsets = _words(self._value("roll-unset"), "unset", errors)
            if not draft.sets and not draft.unsets and not errors:
                errors.append(f"nothing to set: write FLAG=VALUE, e.g. {SET_HINT}")
            try:
                parse_edits(draft.sets, draft.unsets)  # the syntax; each host's version checks the values
            except UsageError as exc:
                errors.append(str(exc))
        if self.operation == "freeze":
            draft.set_name = self._value("roll-name").strip()
            draft.note = self._value("roll-note")
            try:
                if not draft.set_name:
                    raise UsageError("the snapshot set needs a name, e.g. v2")
                member_names(draft.set_name, list(self.setup.hosts))
            except UsageError as exc:
                errors.append(f"snapshot set: {exc}")
        drain = self._value("roll-drain", DRAIN_DEFAULT).strip()
        try:
            draft.drain_s = float(drain)
            if not draft.drain_s > 0:
                raise ValueError
        except ValueError:
            errors.append(f"drain timeout {drain!r}: a positive number of seconds")
        return draft

    @on(Input.Changed)
    @on(Checkbox.Changed)
    def _changed(self) -> None:
        self.outcome = None
        self._update()

    def _update(self) -> None:
        with unless_closing(self):
            draft = self.draft()
            parts: list[RenderableType] = [plan_preview(self.setup, draft)]
            if self.outcome is not None:
                parts.append(self.outcome)
            self.query_one("#roll-plan", Static).update(RichGroup(*parts))

    # -- intents -------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "plan" and self.busy:
            return None
        return True

    def action_cancel(self) -> None:
        if not self.busy:
            self.dismiss(None)

    def action_plan(self) -> None:
        if self.busy:
            return
        draft = self.draft()
        if draft.errors or draft.spec is None:
            self.notify("The roll cannot be planned: fix what is marked ✖ first.", severity="error")
            return
        self._plan(draft, draft.spec)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_plan()

    def _request(self, draft: Draft, spec: RollSpec) -> tuple[RollRequest, PlanHost]:
        setup = self.setup
        request = RollRequest(setup.group, setup.hosts, setup.operation, spec, setup.owner,  # type: ignore[arg-type]
                              drain_timeout_s=draft.drain_s, set_name=draft.set_name or None)  # fmt: skip
        if setup.operation == "apply":
            return request, apply_planner(draft.sets, draft.unsets, owner=setup.owner)
        if setup.operation == "freeze":
            return request, freeze_planner(draft.set_name, note=draft.note, owner=setup.owner)
        return request, restart_planner(owner=setup.owner)

    @work(exclusive=True, group="roll-plan")
    async def _plan(self, draft: Draft, spec: RollSpec) -> None:
        setup = self.setup
        request, plan_host = self._request(draft, spec)
        self._busy(True, Text("planning on every host: the group's lock, each unit's lock, each host's rules ...",
                              style="yellow"))  # fmt: skip
        try:
            roll = await setup.planner(setup.workspace, request, plan_host, setup.open_host)
        except Exception as exc:  # the request, the group's lock, a host's lock, a host out of reach: all let go of
            self._busy(False, Text(f"✖ not planned, nothing was changed: {exc}", style="bold red"))
            return
        if roll.refused:
            await roll.abort("refused: " + "; ".join(roll.report.refusals))
            self._busy(False, refusals_text(roll))
            return
        self._busy(False, None)
        confirmed = await self.app.push_screen_wait(ConfirmScreen(question(roll), plan_body(roll), danger=True))
        if not confirmed:
            await roll.abort("not confirmed; nothing was changed")
            self.notify("not rolled; nothing was changed", timeout=4)
            return
        view = RollView(roll, back_to="the overview")
        await self.app.push_screen_wait(ProgressScreen(roll, view, clock=setup.clock, on_done=setup.on_done))
        self.dismiss(None)

    def _busy(self, busy: bool, outcome: RenderableType | None) -> None:
        with unless_closing(self):
            self.busy = busy
            self.outcome = outcome
            self._update()
            self.refresh_bindings()


# --- what the form and the confirmation say -----------------------------------------------------------------


def plan_preview(setup: RollSetup, draft: Draft) -> RenderableType:
    """The roll as the form stands (pure): its batches, the router, the gate, what a failure does; ✖ per problem."""
    spec = draft.spec
    hosts = list(setup.hosts)
    what = {"apply": "set flags on", "restart": "restart", "freeze": "freeze"}[setup.operation]
    head = Text(f"The plan: {what} {len(hosts)} hosts of @{setup.group.name}, one batch at a time", style="bold")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(ratio=1)
    if spec is not None:
        for batch in batches(hosts, spec):
            grid.add_row(f"{batch.kind} {batch.index}", ", ".join(batch.hosts))
        grid.add_row(f"max failures {spec.max_failures}", failure_words(setup.operation, spec))
    router = setup.group.router if setup.operation != "freeze" else None
    if router:
        drained = f"its requests drained (≤ {draft.drain_s:g} s)"
        grid.add_row("router", f"{router}: each worker out before its restart, {drained}, back in once verified; "
                               "never fewer than N − wave serving")  # fmt: skip
    elif setup.operation != "freeze":
        grid.add_row("router", Text("none (the group names none in groups.toml)", style="dim"))
    if spec is not None and spec.gate is not None:
        level = f"C={spec.gate.concurrency}" if spec.gate.concurrency else "the level of its newest record"
        loss = f"a loss beyond {spec.gate.max_regression_pct:g}% (and the noise)"
        grid.add_row("gate", f"the canary benchmarked at {level} against its last record there; {loss} halts the "
                             "roll and rolls it back")  # fmt: skip
    elif setup.operation == "apply":
        grid.add_row("gate", Text("none (each host verified by what its server resolves)", style="dim"))
    if setup.operation == "apply" and draft.sets + draft.unsets:
        change = " ".join([*(f"--set {s}" for s in draft.sets), *(f"--unset {u}" for u in draft.unsets)])
        grid.add_row("change", Text(change, style="cyan"))
        grid.add_row("", Text("each host's own SGLang version checks it when the roll is planned", style="dim"))
    if setup.operation == "freeze" and draft.set_name:
        names = ", ".join(f"{draft.set_name}.{h}" for h in hosts[:4]) + (" …" if len(hosts) > 4 else "")
        grid.add_row("snapshots", f"{names}; the set's index profiles/snapshot-sets/{draft.set_name}.toml")
    tail = Text()
    for error in draft.errors:
        tail.append(f"✖ {error}\n", style="bold red")
    if not draft.errors:
        tail.append("ctrl+s: plan on every host (nothing changes yet), then a confirmation", style="green")
    return RichGroup(head, grid, Text(""), tail)


# What becomes of a host whose change fails (the roll's other hosts: not started once it stops).
FAILED_HOST = {
    "apply": "that host rolls back to its previous unit",
    "restart": "that host is reported failed (a restart writes nothing to roll back)",
    "freeze": "that host is reported not frozen (a freeze restarts nothing)",
}


def failure_words(operation: str, spec: RollSpec) -> str:
    """What a failure does to the roll, in the operator's words (pure)."""
    failed = FAILED_HOST.get(operation, "that host is reported")
    if spec.max_failures == 0:
        return f"the first failure stops the roll: {failed}, the hosts after it are not started"
    return f"the roll goes past {spec.max_failures} failed hosts ({failed}); the next failure stops it"


def refusals_text(roll: GroupRoll) -> Text:
    out = Text("✖ REFUSED: nothing was changed on any host\n", style="bold red")
    for refusal in roll.report.refusals:
        host, _, why = refusal.partition(": ")
        out.append(f"  {host}: ", style="bold")
        out.append(f"{why}\n", style="red")
    return out


def question(roll: GroupRoll) -> str:
    n, group = len(roll.plan.hosts), roll.request.group.name
    if roll.request.operation == "freeze":
        return f"Freeze these {n} hosts of @{group} as snapshot set {roll.request.set_name}?"
    if roll.request.operation == "restart":
        return f"Restart these {n} hosts of @{group}, one batch at a time?"
    return f"Write the new unit to these {n} hosts of @{group} and restart each, one batch at a time?"


def plan_body(roll: GroupRoll) -> RenderableType:
    """What the confirmation shows: the batches, the router, the gate's baselines, every host's change."""
    plan, report = roll.plan, roll.report
    head = Text()
    for batch in plan.batches:
        head.append(f"{batch.kind} {batch.index}: ", style="bold")
        head.append(", ".join(batch.hosts) + "\n")
    if report.router:
        urls = ", ".join(h.worker_url or "?" for h in plan.hosts)
        head.append(f"router {report.router}: ", style="bold")
        head.append(f"each worker out before its restart, back after ({urls})\n")
    head.append(f"max failures {plan.spec.max_failures}: ", style="bold")
    head.append(failure_words(roll.request.operation, plan.spec) + "\n")
    gate = report.gate
    if gate is not None:
        for label, base in gate.get("baselines", {}).items():
            values = ", ".join(f"{v:.1f}" for v in base["values"])
            head.append(f"gate: {label} at {base['level']} against {base['label']} ({values} tok/s); a loss beyond "
                        f"{gate['max_regression_pct']:g}% halts the roll\n")  # fmt: skip
    parts: list[RenderableType] = [head]
    shown: set[str] = set()
    for host in plan.hosts:
        change = host.change
        if isinstance(change, FreezeChange):
            freeze = change.pending.plan
            unit = "adds [Install] to the unit" if freeze.unit_changed else "unit unchanged"
            parts.append(Text(f"{host.label}: as {freeze.snapshot.name}, document {freeze.document_path}, {unit}, "
                              "enabled"))  # fmt: skip
        elif isinstance(change, ApplyChange) and not change.pending.restart_only:
            pending_plan = change.pending.plan
            if pending_plan.diff in shown:
                parts.append(Text(f"{host.label}: the same change", style="bold"))
            else:
                shown.add(pending_plan.diff)
                parts.append(Text(f"{host.label} (SGLang {pending_plan.sglang_version}):", style="bold"))
                parts.append(diff_text(pending_plan.diff) if pending_plan.diff else Text("  (already so)"))
            for warning in pending_plan.report.warnings:
                parts.append(Text(f"  ! {warning.message}", style="yellow"))
        else:
            parts.append(Text(f"{host.label}: restarted as it is (nothing written), its start verified"))
    return RichGroup(*parts)


# --- the progress ---------------------------------------------------------------------------------------------


def host_table(board: RollBoard, now: datetime) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    table.add_column("", no_wrap=True, width=1)
    table.add_column("host", no_wrap=True)
    table.add_column("batch", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("s", justify="right", no_wrap=True)
    table.add_column("what it did last", no_wrap=True, overflow="ellipsis", ratio=1)
    for label in board.order:
        row = board.rows[label]
        mark, style = PHASE_STYLE.get(row.phase, ("?", ""))
        seconds = row.seconds(now)
        table.add_row(Text(mark, style=style), Text(label, style="bold"), row.batch, Text(_phase(row), style=style),
                      "" if seconds is None else f"{seconds:.1f}", Text(row.detail, style="dim"))  # fmt: skip
    return table


def _phase(row: RollRow) -> str:
    if row.start_progress is not None and row.phase in ("applying", "restarting", "restoring"):
        return f"{row.phase} {round(100 * row.start_progress)}%"
    return row.phase


class RollView:
    """The roll on the progress screen: the hosts' board, the batch under way, the steps; then every outcome."""

    abort_question: str | None
    can_leave = False
    tick_s = 0.5

    def __init__(self, roll: GroupRoll, *, back_to: str = "the overview") -> None:
        self.roll = roll
        self.board = RollBoard.planned(roll.plan)
        operation = roll.request.operation
        self.what = f"the {TITLES[operation].lower()}"
        self.abort_question = (
            "Stop the roll? No new host starts; a host being changed now rolls back as a single apply does."
        )
        self.back_to = back_to
        spec = roll.plan.spec
        title = Text(f"{TITLES[operation]} · @{roll.request.group.name} · {len(roll.plan.hosts)} hosts", style="bold")
        title.append(f"   canary {spec.canary} · wave {spec.wave} · max failures {spec.max_failures}", style="dim")
        if roll.report.router:
            title.append(f" · router {roll.report.router}", style="dim")
        if spec.gate is not None:
            title.append(" · gate bench", style="dim")
        self.title = title

    def compose(self) -> ComposeResult:
        yield Static(self.title, id="roll-progress-title")
        yield Static("", id="roll-summary")
        with VerticalScroll(id="roll-hosts-box"):
            yield Static("", id="roll-hosts")
        yield RichLog(id="roll-log", max_lines=2000, wrap=True, markup=False)

    def feed(self, screen: ProgressScreen[RollEvent, RollReport], event: RollEvent) -> None:
        line = self.board.feed(event)
        if line is not None:
            text, style = line
            at = getattr(event, "at", None) or getattr(getattr(event, "event", None), "at", None) or screen.clock()
            entry = Text(f"{at.astimezone(UTC):%H:%M:%S} ", style="dim")
            entry.append(text, style=style)
            log = screen.query_one("#roll-log", RichLog)
            width = log.scrollable_content_region.width  # wrapped at the log's width, not the terminal's default
            log.write(entry, width=width if width > 20 else None)

    def finished(self, screen: ProgressScreen[RollEvent, RollReport]) -> None:
        self.board.finish(screen.result)

    def tick(self, screen: ProgressScreen[RollEvent, RollReport]) -> None:
        if self.board.under_way:
            self.draw(screen)

    def draw(self, screen: ProgressScreen[RollEvent, RollReport]) -> None:
        screen.query_one("#roll-summary", Static).update(self._summary(screen))
        screen.query_one("#roll-hosts", Static).update(host_table(self.board, screen.clock()))

    def _summary(self, screen: ProgressScreen[RollEvent, RollReport]) -> RenderableType:
        board = self.board
        counts = Text()
        for phase in ("done", "unchanged", "rolled back", "failed", "not started", "pending"):
            n = board.count(phase)
            if n:
                _mark, style = PHASE_STYLE[phase]
                counts.append(f"{n} {phase}", style=style)
                counts.append(" · ", style="dim")
        if counts.plain.endswith(" · "):
            counts.right_crop(3)
        report = screen.result
        back = Text(f"esc: back to {self.back_to}", style="dim")
        if report is None and screen.error is not None:
            return RichGroup(Text(f"✖ {screen.error}", style="bold red"), counts, back)
        if report is None:
            head = Text()
            under_way = board.under_way
            if under_way:
                head.append(f"▶ {board.current_batch}: {', '.join(under_way)}", style="bold cyan")
            else:
                head.append("▶ planning the next batch ...", style="bold cyan")
            if screen.aborting:
                head.append("   stopping: no new host starts (a host being changed rolls back)", style="bold yellow")
            else:
                head.append("   esc: stop the roll between hosts", style="dim")
            return RichGroup(head, counts)
        took = f" in {report.seconds:.1f} s" if report.seconds is not None else ""
        what = f"@{report.group}: {TITLES.get(report.operation, report.operation).lower()}"
        lines: list[RenderableType] = []
        if report.ok:
            lines.append(Text(f"✔ {what} done{took}", style="bold green"))
        else:
            reason = report.ledger.stop_reason() or "see the hosts below"
            lines.append(Text(f"✖ {what} STOPPED{took}: {reason}", style="bold red"))
        lines.append(counts)
        if report.router is not None:
            after = report.router_after
            listed = ", ".join(w.url for w in after) if after is not None else "unknown"
            whole = {True: "whole", False: "NOT whole", None: "unknown"}[report.router_whole]
            style = {True: "green", False: "bold red", None: "yellow"}[report.router_whole]
            lines.append(Text(f"router {report.router}: worker list {whole} ({listed})", style=style))
        kept = report.snapshot_set
        if kept is not None:
            complete = "complete" if kept["complete"] else f"INCOMPLETE (not frozen: {', '.join(kept['not_frozen'])})"
            lines.append(Text(f"snapshot set {kept['name']}: {complete}; index {kept['path']}"))
        lines.append(back)
        return RichGroup(*lines)
