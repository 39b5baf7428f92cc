"""`b`: benchmark the current host from a form, then watch the sweep live.

The form opens with the last used values (console.core.bench.queue keeps them in the workspace) and a label
proposed from the running setup; Start checks every field (the errors stand beside the form) and queues one sweep
per workload. The sweep runs in an app worker (console.core.bench.bench_queue on the host's session): Esc goes
back to the dashboard, which stays live, and the sweep goes on (`b` on that host shows it again); `x` cancels it,
keeping the levels that finished. The live rows are console.tui.presenters.bench_live's model, repainted four times
a second (a fast level finishes hundreds of requests a second), with the host's GPU power from the dashboard's own
refresh.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import fields
from functools import partial
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Button, Input, Label, Select, Static

from console.bench.records import BenchRecord
from console.core.bench import WORKLOAD_CHOICES, BenchForm, FormErrors, PlannedSweep, plan_sweeps, save_form
from console.host.base import HostError
from console.tui.context import ConsoleContext
from console.tui.presenters.bench_live import LiveBench, LiveLevel
from console.tui.screens import FORM_FOCUS_BINDINGS
from console.tui.widgets.footer import FittedFooter

# (sweeps, on_event) -> each sweep's records: console.tui.runners.BenchRunner, its session_of and host bound
Runner = Callable[[list[PlannedSweep], Callable[[Any], None]], Awaitable[list[list[BenchRecord]]]]
REPAINT_S = 0.25
# (field, title, hint) in the form's order
FORM_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("label", "label", "what compare calls this run"),
    ("concurrency", "concurrency", "levels, e.g. 1,8,32"),
    ("request_rate", "request rates", "req/s, open loop instead (empty: closed loop)"),
    ("requests", "requests", "per level (empty: max(16, 4×C))"),
    ("duration", "duration s", "per level, instead of requests"),
    ("input_len", "input tokens", "random workload's prompt length"),
    ("output_len", "output tokens", "forced (random), at most (chat)"),
    ("repeat", "repeats", "per level: 3 measures the noise"),
    ("warmup", "warm-up", "requests per level, not measured"),
)
WORKLOAD_TEXT = {
    "random": "random: forced lengths (optimistic)",
    "chat": "chat: natural stops (realistic)",
    "random+chat": "random then chat (both figures)",
}
STATE_STYLE = {"done": "green", "running": "bold", "warm-up": "yellow", "stopped": "bold red", "not run": "dim red"}


class BenchRun:
    """One host's benchmark queue, held by the app so it outlives its screen: the live model, the worker, the
    records. Listeners are told when the model changed (the screen repaints on its own timer)."""

    def __init__(self, host: str, sweeps: list[PlannedSweep], runner: Runner) -> None:
        self.host = host
        self.sweeps = sweeps
        self.runner = runner
        self.live = LiveBench(host, sweeps)
        self.records: list[list[BenchRecord]] = []
        self.worker: Any = None
        self.dirty = True
        self.on_finished: Callable[[BenchRun], None] | None = None

    @property
    def running(self) -> bool:
        return self.live.state == "running"

    def feed(self, event: Any) -> None:
        self.live.feed(event)
        self.dirty = True

    async def run(self) -> None:
        try:
            self.records = await self.runner(self.sweeps, self.feed)
            self.live.finish()
        except asyncio.CancelledError:
            self.live.cancel("cancelled: the levels that finished are kept in logs/")
            raise
        except Exception as exc:  # the host, the link, the server: said on the rows, the finished levels kept
            self.live.fail(str(exc) or exc.__class__.__name__)
        finally:
            self.dirty = True
            if self.on_finished is not None:
                self.on_finished(self)

    def cancel(self) -> None:
        if self.worker is not None and self.running:
            self.worker.cancel()


def live_table(live: LiveBench) -> Table:
    queued = len(live.sweeps) > 1
    workload = {s.label: s.workload for s in live.sweeps}
    table = Table(box=None, header_style="bold", pad_edge=False, expand=False)
    if queued:
        table.add_column("workload", no_wrap=True)
    for title in ("level", "state", "done", "tok/s", "TTFT ms", "TPOT ms", "GPU W"):
        table.add_column(title, justify="left" if title in ("level", "state") else "right", no_wrap=True)
    for row in live.rows:
        cells: list[RenderableType] = [
            row.name,
            Text(row.state, style=STATE_STYLE.get(row.state, "dim")),
            row.progress + (f" ({row.failed} failed)" if row.failed else ""),
            _num(row.output_tok_s, "{:,.1f}"),
            _num(row.ttft_ms, "{:,.0f}"),
            _num(row.tpot_ms, "{:,.1f}"),
            _num(row.power_w, "{:,.0f}"),
        ]
        table.add_row(*([workload.get(row.sweep, row.sweep)] if queued else []), *cells)
    return table


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def running_mark(live: LiveBench) -> str:
    """The dashboard header's mark while the benchmark runs: `▶ benchmark 2/3 C=8` (the level that runs, of all
    the queued sweeps' levels), `▶ benchmark starting` before the first one."""
    row = live.running_row
    if row is None:
        return "▶ benchmark starting"
    return f"▶ benchmark {live.rows.index(row) + 1}/{len(live.rows)} {row.name}"


def reasons(live: LiveBench) -> Text:
    """Why each stopped or skipped level stopped, once per reason."""
    out = Text()
    seen: set[tuple[str, str]] = set()
    rows: list[LiveLevel] = [r for r in live.rows if r.why and r.state in ("stopped", "not run")]
    for row in rows:
        assert row.why is not None
        if (row.sweep, row.why) in seen:
            continue
        seen.add((row.sweep, row.why))
        out.append(f"{row.sweep} {row.name}: {row.why}\n", style="red")
    return out


class BenchScreen(Screen[None]):
    """The form, then the live view of the host's BenchRun (`run` given: straight to the live view)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back to the dashboard", id="bench-close"),
        Binding("ctrl+s", "start", "Start", id="bench-start"),
        Binding("x", "cancel_run", "Cancel the sweep", id="bench-cancel"),
        Binding("c", "compare", "Compare these runs", id="bench-compare"),
        *FORM_FOCUS_BINDINGS,
    ]

    def __init__(
        self,
        host: str,
        form: BenchForm,
        *,
        start: Callable[[list[PlannedSweep], BenchForm], BenchRun],
        run: BenchRun | None = None,
        power: Callable[[], float | None] = lambda: None,
        compare: Callable[[BenchRun], None] | None = None,
        proposal: Callable[[], str] | None = None,
    ) -> None:
        super().__init__()
        self.host = host
        self.form = form
        self.start = start
        self.run = run
        self.power = power
        self.compare = compare
        self.problems: dict[str, str] = {}
        # The label the form proposes names the setup that runs now: while the field holds the last proposal (the
        # operator typed nothing there), it follows the dashboard's view of the host; a typed label is kept.
        self.proposal = proposal
        self.last_proposal = form.label

    def compose(self) -> ComposeResult:
        with Vertical(id="bench-box"):
            yield Static(Text(f"Benchmark {self.host}", style="bold"), id="bench-title")
            with VerticalScroll(id="bench-form"):
                for name, title, hint in FORM_FIELDS:
                    with Horizontal(classes="bench-row"):
                        yield Label(title, classes="bench-label")
                        # the cursor goes to the end (ctrl+u clears): a selection made after focus, once the field
                        # is drawn, would swallow what is typed right after Tab
                        yield Input(getattr(self.form, name), id=f"bench-{name.replace('_', '-')}", compact=True,
                                    select_on_focus=False)  # fmt: skip
                        yield Label(hint, classes="bench-hint", id=f"bench-hint-{name.replace('_', '-')}")
                    if name == "label":
                        with Horizontal(classes="bench-row"):
                            yield Label("workload", classes="bench-label")
                            yield Select(
                                [(WORKLOAD_TEXT[w], w) for w in WORKLOAD_CHOICES],
                                value=self.form.workload,
                                allow_blank=False,
                                compact=True,
                                id="bench-workload",
                            )
                with Horizontal(id="bench-buttons"):
                    yield Button("Start", id="bench-go", variant="warning", compact=True)
                    yield Button("Cancel", id="bench-back", compact=True)
            yield Static("", id="bench-placement")
            with VerticalScroll(id="bench-live"):
                yield Static("", id="bench-rows")
                yield Static("", id="bench-why")
            yield Static("", id="bench-status")
        yield FittedFooter(keep=("bench-close",))

    def on_mount(self) -> None:
        self.set_interval(REPAINT_S, self._repaint)
        if self.run is not None:
            self._show_live()
        else:
            self.query_one("#bench-live").display = False
            self.query_one("#bench-placement").display = False
            self._status("real load: the server's cache is flushed per level · ctrl+s: start · esc: back", "dim")
            self.query_one("#bench-label", Input).focus()

    # -- the form ---------------------------------------------------------------------------------------------

    def current_form(self) -> BenchForm:
        values = {f.name: self.query_one(f"#bench-{f.name.replace('_', '-')}", Input).value for f in fields(BenchForm)
                  if f.name != "workload"}  # fmt: skip
        workload = self.query_one("#bench-workload", Select).value
        return BenchForm(**values, workload=str(workload))

    def _status(self, text: str, style: str = "") -> None:
        self.query_one("#bench-status", Static).update(Text(text, style=style))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The focused field's title and hint (or its error) on the status line: whole, where the form cuts it."""
        if self.run is not None:
            return
        for name, title, hint in FORM_FIELDS:
            if event.widget.id == f"bench-{name.replace('_', '-')}":
                problem = self.problems.get(name)
                text = f"{title}: {problem or hint} · ctrl+u clears · ctrl+s: start · esc: back"
                if self.problems:  # said until the form is started again
                    text = f"{self._refusal()} · {text}"
                self._status(text, "bold red" if problem else "dim")
                return
        if event.widget.id == "bench-workload":
            self._status("workload: random (forced lengths), chat (natural stops), or both one after the other", "dim")

    def _follow_the_setup(self) -> None:
        if self.proposal is None:
            return
        proposed = self.proposal()
        field = self.query_one("#bench-label", Input)
        if proposed != self.last_proposal and field.value == self.last_proposal:
            field.value = proposed
        self.last_proposal = proposed

    def _refusal(self) -> str:
        return f"not started: {len(self.problems)} field(s) to fix (in red)"

    def _show_problems(self, problems: dict[str, str]) -> None:
        self.problems = problems
        for name, _title, hint in FORM_FIELDS:
            label = self.query_one(f"#bench-hint-{name.replace('_', '-')}", Label)
            problem = problems.get(name)
            label.update(Text(problem, style="bold red") if problem else Text(hint, style="dim"))
            self.query_one(f"#bench-{name.replace('_', '-')}", Input).set_class(bool(problem), "-wrong")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start":
            return self.run is None
        if action == "cancel_run":
            return self.run is not None and self.run.running
        if action == "compare":
            return self.run is not None and not self.run.running and self.compare is not None
        return True

    def action_start(self) -> None:
        if self.run is not None:
            return
        form = self.current_form()
        try:
            sweeps = plan_sweeps(form)
        except FormErrors as exc:
            self._show_problems(exc.problems)
            self._status(self._refusal(), "bold red")
            first = next(iter(exc.problems))
            self.query_one(f"#bench-{first.replace('_', '-')}", Input).focus()
            return
        self._show_problems({})
        self.run = self.start(sweeps, form)
        self._show_live()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#bench-go")
    def _go(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#bench-back")
    def _back(self) -> None:
        self.action_close()

    # -- the live view -------------------------------------------------------------------------------------------

    def _show_live(self) -> None:
        assert self.run is not None
        self.query_one("#bench-form").display = False
        self.query_one("#bench-live").display = True
        self.query_one("#bench-placement").display = True
        self.set_focus(None)
        self.run.dirty = True
        self._repaint()
        self.refresh_bindings()

    def _repaint(self) -> None:
        run = self.run
        if run is None:
            self._follow_the_setup()
            return
        if run.running:
            run.live.show_power(self.power())
        if not run.dirty:
            return
        run.dirty = False
        live = run.live
        placement = live.placement or "placing the load generator (measuring the link) ..."
        self.query_one("#bench-placement", Static).update(Text(placement, style="dim"))
        title = Text(f"Benchmark {self.host}: {', '.join(s.label for s in run.sweeps)}", style="bold")
        if live.server:
            title.append(f"   {live.server}", style="dim")
        self.query_one("#bench-title", Static).update(title)
        self.query_one("#bench-rows", Static).update(live_table(live))
        self.query_one("#bench-why", Static).update(reasons(live))
        done = live.finished_levels
        if live.state == "running":
            self._status("running · esc: back to the dashboard (the sweep goes on; b shows it) · x: cancel", "yellow")
        elif live.state == "finished":
            self._status(f"finished: {done} level(s) in logs/ · c: compare these runs · esc: close", "bold green")
        elif live.state == "stopped":
            self._status(f"stopped early: {live.why} · {done} level(s) recorded · esc: close", "bold red")
        elif live.state == "cancelled":
            self._status(f"cancelled: {done} finished level(s) kept in logs/ · esc: close", "bold yellow")
        else:
            self._status(f"failed: {live.why} · {done} finished level(s) kept in logs/ · esc: close", "bold red")
        self.refresh_bindings()

    def action_cancel_run(self) -> None:
        if self.run is not None and self.run.running:
            self._status("cancelling: the level that runs stops, the finished ones are kept ...", "yellow")
            self.run.cancel()

    def action_compare(self) -> None:
        if self.run is not None and not self.run.running and self.compare is not None:
            self.compare(self.run)

    def action_close(self) -> None:
        if self.run is not None and self.run.running:
            self.notify(f"the benchmark on {self.host} goes on: b on its tab shows it", timeout=4)
        self.dismiss(None)


# --- how the console opens it ---------------------------------------------------------------------------------


def _power_of(console: ConsoleContext, label: str) -> Callable[[], float | None]:
    """The host's total GPU power as the dashboard last read it."""

    def power() -> float | None:
        view = console.views.get(label)
        status = view.status if view is not None else None
        if status is None or not status.gpus:
            return None
        watts = [g.power_draw_w for g in status.gpus if g.power_draw_w is not None]
        return sum(watts) if watts else None

    return power


def open_bench(console: ConsoleContext) -> None:
    """b / the palette: the running benchmark of the current host, else the form (not read-only, not on the
    overview, not before the host is connected)."""
    from console.core.bench import load_form, proposed_label

    label = console.current_host
    why = console.why_disabled("benchmark")
    if why or label is None:
        console.notify(why or "open a host first", title="Benchmark", severity="warning")
        return
    compare = partial_compare(console)
    existing = console.bench_runs.get(label)
    if existing is not None and existing.running:
        console.push_screen(BenchScreen(label, BenchForm(), start=lambda *_: existing, run=existing,
                                        power=_power_of(console, label), compare=compare))  # fmt: skip
        return
    try:
        console.session(label)
    except HostError:
        console.notify(f"{label} is not connected yet; try again once the header says connected", severity="warning")
        return
    runner: Runner = partial(console.options.runners.bench, console.session, label)
    workspace = console.workspace(label)
    form = load_form(workspace.logs) if workspace is not None else BenchForm()

    def proposal() -> str:
        return proposed_label(console.views.get(label), label)

    form = BenchForm(**{**form.__dict__, "label": proposal()})

    def start(sweeps: list[PlannedSweep], used: BenchForm) -> BenchRun:
        if workspace is not None:
            try:
                save_form(workspace.logs, used)
            except OSError as exc:  # the next form opens with the defaults; the benchmark does not need it
                console.notify(f"the form's values were not kept: {exc}", severity="warning")
        run = BenchRun(label, sweeps, runner)
        run.on_finished = lambda finished: _finished(console, finished)
        console.bench_runs[label] = run
        run.worker = console.run_worker(run.run(), name=f"bench {label}", group=f"bench-{label}",
                                        exit_on_error=False)  # fmt: skip
        return run

    console.push_screen(
        BenchScreen(label, form, start=start, power=_power_of(console, label), compare=compare, proposal=proposal)
    )


def _finished(console: ConsoleContext, run: BenchRun) -> None:
    """Said on whatever screen is up: the operator may be back on the dashboard."""
    live = run.live
    screen = console.screen
    if not isinstance(screen, BenchScreen) or screen.run is not run:
        severity: SeverityLevel = "information" if live.state == "finished" else "warning"
        title = f"benchmark on {run.host}: {live.state}"
        console.notify(f"{live.finished_levels} level(s) recorded; c compares runs", title=title, severity=severity)


def partial_compare(console: ConsoleContext) -> Callable[[BenchRun], None]:
    def compare(run: BenchRun) -> None:
        from console.tui.screens.runs import open_runs

        picked = [records[0].run_id for records in run.records if records]
        # cancelled or failed, the runner returned nothing: the levels that finished are under the sweeps' labels
        open_runs(console, picked=picked or [s.label for s in run.sweeps])

    return compare
