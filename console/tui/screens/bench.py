"""`b`: benchmark the current host from a form, then watch the sweep live.

The form opens with the last used values (console.core.bench.queue keeps them in the workspace) and a label
proposed from the running setup; Start checks every field (the errors stand beside the form) and queues one sweep
per workload. The workload `dataset` sends a file picked from the workspace's datasets/ (sampled with the form's
size and seed; picking a file picks that workload), the SLO field (prefilled with the profile's [slo]) holds every
level to an SLO: the live view then shows each level's goodput and ✔/✖, and each sweep's capacity at the SLO; find
capacity searches the request rate instead of running the levels. A shape window (`bench --shape-from-server`)
watches the server's own traffic that long, then runs requests drawn from it at its rate times each rate scale: the
live view says the window, then the shape line ("last 10 min: 3.1 req/s, input p50 ...") before anything is sent.
The sweep runs in an app worker (console.core.bench.bench_queue on the host's session): Esc goes
back to the dashboard, which stays live, and the sweep goes on (`b` on that host shows it again); `x` cancels it,
keeping the levels that finished. The live rows are console.tui.presenters.bench_live's model, repainted four times
a second (a fast level finishes hundreds of requests a second), with the host's GPU power from the dashboard's own
refresh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import ClassVar

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

from console.bench.slo import Slo
from console.core.bench import (
    CAPACITY_CHOICES,
    WORKLOAD_CHOICES,
    BenchForm,
    FormErrors,
    PlannedSweep,
    dataset_files,
    plan_sweeps,
    save_form,
    slo_text,
)
from console.host.base import HostError
from console.tui.bench_run import BenchRun, Runner
from console.tui.context import ConsoleContext
from console.tui.presenters.bench_live import LiveBench, LiveLevel
from console.tui.screens import FORM_FOCUS_BINDINGS
from console.tui.widgets.footer import FittedFooter
from console.tui.widgets.inputs import OrderedInput

REPAINT_S = 0.25
# (field, title, hint) in the form's order; those in SELECTS are picked from a list, the rest typed
FORM_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("label", "label", "what compare calls this run"),
    ("workload", "workload", "what the requests are"),
    ("dataset", "dataset", "your prompts: a file of datasets/"),
    ("dataset_sample", "sample", "requests drawn from the dataset"),
    ("seed", "seed", "same seed, same requests in the same order"),
    ("shape_window", "shape window", "watch the server's traffic, e.g. 10m, then run its shape (empty: off)"),
    ("rate_scale", "rate scale", "with a shape: the rate seen × each, e.g. 1,1.5,2"),
    ("concurrency", "concurrency", "levels, e.g. 1,8,32"),
    ("request_rate", "request rates", "req/s, open loop instead (empty: closed loop)"),
    ("requests", "requests", "per level (empty: max(16, 4×C); a dataset: its sample)"),
    ("duration", "duration s", "per level, instead of requests"),
    ("input_len", "input tokens", "random workload's prompt length"),
    ("output_len", "output tokens", "forced (random), at most (chat, dataset; empty: its own)"),
    ("repeat", "repeats", "per level: 3 measures the noise"),
    ("warmup", "warm-up", "requests per level, not measured"),
    ("slo", "SLO", "e.g. ttft_p95=800ms,tpot_p95=60ms (empty: none)"),  # see slo_hint: the profile's [slo]
    ("find_capacity", "find capacity", "the rate at which the SLO stops being met"),
)
SELECTS = {"workload", "dataset", "find_capacity"}
WORKLOAD_TEXT = {
    "random": "random: forced lengths (optimistic)",
    "chat": "chat: natural stops (realistic)",
    "random+chat": "random then chat (both figures)",
    "dataset": "dataset: your own prompts (below)",
}
CAPACITY_TEXT = {"no": "no: the levels above", "yes": "yes: search the request rate"}
# Said on the status line when a list is focused (a typed field says its title and hint).
SELECT_HELP = {
    "workload": "workload: random (forced lengths), chat (natural stops), both one after the other, or a dataset",
    "dataset": "dataset: a JSON or JSONL file of the workspace's datasets/ (ShareGPT, prompt or chat JSONL)",
    "find_capacity": "find capacity: search the request rate (doubling, then bisecting) until the SLO's limit is "
    "bracketed within 10 %",
}


def slo_hint(profile_slo: str) -> str:
    """The SLO field's hint: an empty field holds the levels to the profile's [slo] where it has one (bench_host
    gives it to a sweep given none), to none otherwise."""
    if profile_slo:
        return f"empty: the profile's {profile_slo}"
    return dict((name, hint) for name, _title, hint in FORM_FIELDS)["slo"]


def _widget_id(name: str) -> str:
    return f"bench-{name.replace('_', '-')}"


STATE_STYLE = {"done": "green", "running": "bold", "warm-up": "yellow", "stopped": "bold red", "not run": "dim red"}


def live_table(live: LiveBench) -> Table:
    queued = len(live.sweeps) > 1
    workload = {s.label: s.workload for s in live.sweeps}
    table = Table(box=None, header_style="bold", pad_edge=False, expand=False)
    if queued:
        table.add_column("workload", no_wrap=True)
    judged = live.judged
    titles = ["level", "state", "done", "tok/s", "TTFT ms", "TPOT ms", "GPU W"]
    if judged:
        titles[-1:-1] = ["good/s", "SLO"]
    for title in titles:
        table.add_column(title, justify="left" if title in ("level", "state") else "right", no_wrap=True)
    for row in live.rows:
        cells: list[RenderableType] = [
            row.name,
            Text(row.state, style=STATE_STYLE.get(row.state, "dim")),
            row.progress + (f" ({row.failed} failed)" if row.failed else ""),
            _num(row.output_tok_s, "{:,.1f}"),
            _num(row.ttft_ms, "{:,.0f}"),
            _num(row.tpot_ms, "{:,.1f}"),
        ]
        if judged:
            cells += [_num(row.goodput, "{:,.2f}"), verdict_mark(row.slo_met)]
        cells.append(_num(row.power_w, "{:,.0f}"))
        table.add_row(*([workload.get(row.sweep, row.sweep)] if queued else []), *cells)
    return table


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def verdict_mark(met: bool | None) -> Text:
    """✔ the level met the SLO, ✖ it did not, - not judged (yet)."""
    if met is None:
        return Text("-", style="dim")
    return Text("✔", style="bold green") if met else Text("✖", style="bold red")


def slo_summary(live: LiveBench) -> Text:
    """The SLO the levels are held to, the levels that missed it and why, and each sweep's capacity at it (nothing
    without an SLO)."""
    out = Text()
    if live.slo is None:
        if live.searching:
            out.append("find capacity: waiting for the first level's verdict\n", style="dim")
        return out
    out.append("SLO: ", style="bold")
    out.append(f"{Slo.from_json(live.slo).text()}", style="bold")
    out.append("   good/s: requests/s whose own TTFT, TPOT and E2E met it\n", style="dim")
    queued = len(live.sweeps) > 1
    for row in live.rows:
        if row.slo_met is False and row.slo_misses:
            where = f"{row.sweep} {row.name}" if queued else row.name
            out.append(f"✖ {where}: {'; '.join(row.slo_misses)}\n", style="red")
    for sweep in live.sweeps:
        cap = live.capacity(sweep.label)
        if cap is None:
            continue
        what = "searched" if sweep.config.find_capacity else "highest level"
        prefix = f"{sweep.label}: " if len(live.sweeps) > 1 else ""
        out.append(f"{prefix}capacity at the SLO ({what}): ", style="bold")
        out.append(f"{cap.text()}\n", style="bold green" if cap.level else "bold red")
    return out


def running_mark(live: LiveBench) -> str:
    """The dashboard header's mark while the benchmark runs: `▶ benchmark 2/3 C=8` (the level that runs, of all
    the queued sweeps' levels), `▶ benchmark starting` before the first one."""
    row = live.running_row
    judged = live.last_judged
    verdict = ""
    if judged is not None:  # the last finished level's goodput and verdict, while the next one runs
        goodput = f" {judged.goodput:,.2f} good/s" if judged.goodput is not None else ""
        verdict = f" · {judged.name}{goodput} {'✔' if judged.slo_met else '✖'}"
    if row is None:
        if live.watching:  # nothing is sent until the shape window ends
            return "▶ benchmark watching the traffic" + verdict
        return "▶ benchmark starting" + verdict
    if live.searching:
        return f"▶ capacity search {row.name}{verdict}"
    return f"▶ benchmark {live.rows.index(row) + 1}/{len(live.rows)} {row.name}{verdict}"


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
    # on_mount places the focus: the label field on the form, none on the live view (its keys are the screen's).
    # Textual's own pick would be the first focusable widget, the hidden form's label there, swallowing `x`.
    AUTO_FOCUS = ""

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
        datasets: Path | None = None,
        profile_slo: str = "",
    ) -> None:
        super().__init__()
        self.host = host
        self.form = form
        self.datasets = datasets  # the workspace's datasets/: what the dataset field offers
        self.profile_slo = profile_slo  # the host's profile's [slo] as the field takes it (held to when it is empty)
        self.hints = {name: hint for name, _title, hint in FORM_FIELDS} | {"slo": slo_hint(profile_slo)}
        self.planning = False  # a dataset is being read (in a thread) before the sweep starts
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
            # not a Tab stop of its own: the focused field scrolls into view, and focusing the form would restyle
            # its ~90 widgets on the way in and out (~60 ms each)
            with VerticalScroll(id="bench-form", can_focus=False):
                for name, title, _hint in FORM_FIELDS:
                    with Horizontal(classes="bench-row"):
                        yield Label(title, classes="bench-label")
                        if name in SELECTS:
                            yield self._select(name)
                        else:
                            # the cursor goes to the end (ctrl+u clears): a selection made after focus, once the
                            # field is drawn, would swallow what is typed right after Tab
                            yield OrderedInput(getattr(self.form, name), id=_widget_id(name), compact=True,
                                               select_on_focus=False)  # fmt: skip
                        yield Label(self.hints[name], classes="bench-hint", id=f"bench-hint-{name.replace('_', '-')}")
                with Horizontal(id="bench-buttons"):
                    yield Button("Start", id="bench-go", variant="warning", compact=True)
                    yield Button("Cancel", id="bench-back", compact=True)
            yield Static("", id="bench-placement")
            yield Static("", id="bench-shape")
            with VerticalScroll(id="bench-live"):
                yield Static("", id="bench-rows")
                yield Static("", id="bench-slo-summary")
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
            self.query_one("#bench-shape").display = False
            self._status("real load: the server's cache is flushed per level · ctrl+s: start · esc: back", "dim")
            self.query_one("#bench-label", Input).focus()

    # -- the form ---------------------------------------------------------------------------------------------

    def _select(self, name: str) -> Select[str]:
        if name == "workload":
            options = [(WORKLOAD_TEXT[w], w) for w in WORKLOAD_CHOICES]
            return Select(options, value=self.form.workload, allow_blank=False, compact=True, id=_widget_id(name))
        if name == "find_capacity":
            options = [(CAPACITY_TEXT[c], c) for c in CAPACITY_CHOICES]
            return Select(options, value=self.form.find_capacity, allow_blank=False, compact=True, id=_widget_id(name))
        files = dataset_files(self.datasets) if self.datasets is not None else []
        value = self.form.dataset if self.form.dataset in files else Select.NULL
        prompt = "pick a file" if files else "none: put yours in datasets/"
        return Select([(f, f) for f in files], value=value, prompt=prompt, compact=True, id=_widget_id(name))

    def current_form(self) -> BenchForm:
        values: dict[str, str] = {}
        for f in fields(BenchForm):
            widget = self.query_one(f"#{_widget_id(f.name)}")
            if isinstance(widget, Select):
                values[f.name] = "" if widget.is_blank() else str(widget.value)
            elif isinstance(widget, Input):
                values[f.name] = widget.value
        return BenchForm(**values)

    @on(Select.Changed, "#bench-dataset")
    def _dataset_picked(self, event: Select.Changed) -> None:
        """A file picked is the workload `dataset` (the intent: send this file)."""
        if not event.select.is_blank():
            self.query_one("#bench-workload", Select).value = "dataset"

    @on(Select.Changed, "#bench-workload")
    def _workload_picked(self, event: Select.Changed) -> None:
        """Another workload than `dataset` sends no file: the pick is let go of rather than refused at Start. Read
        from the field, not the event: the field's first report, posted as it mounted, can arrive after a pick."""
        if event.select.value != "dataset":
            self.query_one("#bench-dataset", Select).clear()

    def _status(self, text: str, style: str = "") -> None:
        self.query_one("#bench-status", Static).update(Text(text, style=style))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The focused field's title and hint (or its error) on the status line: whole, where the form cuts it."""
        if self.run is not None:
            return
        for name, title, _hint in FORM_FIELDS:
            hint = self.hints[name]
            if event.widget.id == _widget_id(name):
                problem = self.problems.get(name)
                if name in SELECTS and not problem:
                    text = f"{SELECT_HELP.get(name, f'{title}: {hint}')} · ctrl+s: start · esc: back"
                else:
                    text = f"{title}: {problem or hint} · ctrl+u clears · ctrl+s: start · esc: back"
                if self.problems:  # said until the form is started again
                    text = f"{self._refusal()} · {text}"
                self._status(text, "bold red" if problem else "dim")
                return

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
        for name, _title, _hint in FORM_FIELDS:
            hint = self.hints[name]
            label = self.query_one(f"#bench-hint-{name.replace('_', '-')}", Label)
            problem = problems.get(name)
            label.update(Text(problem, style="bold red") if problem else Text(hint, style="dim"))
            self.query_one(f"#{_widget_id(name)}").set_class(bool(problem), "-wrong")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start":
            return self.run is None and not self.planning
        if action == "cancel_run":
            return self.run is not None and self.run.running
        if action == "compare":
            return self.run is not None and not self.run.running and self.compare is not None
        return True

    def action_start(self) -> None:
        if self.run is not None or self.planning:
            return
        form = self.current_form()
        plan = partial(plan_sweeps, form, datasets=self.datasets, profile_slo=bool(self.profile_slo))
        if form.workload != "dataset":
            self._planned(form, plan)
            return
        # The file is read and sampled first (a large one takes seconds): in a thread, the form stays responsive.
        self.planning = True
        self.refresh_bindings()
        self._status(f"reading {form.dataset or 'the dataset'} ...", "yellow")
        self.run_worker(partial(self._plan_in_thread, form, plan), thread=True, group="bench-plan")

    def _plan_in_thread(self, form: BenchForm, plan: Callable[[], list[PlannedSweep]]) -> None:
        try:
            sweeps: list[PlannedSweep] | FormErrors = plan()
        except FormErrors as exc:
            sweeps = exc
        self.app.call_from_thread(self._planned, form, lambda: sweeps)

    def _planned(self, form: BenchForm, plan: Callable[[], list[PlannedSweep] | FormErrors]) -> None:
        self.planning = False
        self.refresh_bindings()
        try:
            sweeps = plan()
        except FormErrors as exc:
            sweeps = exc
        if isinstance(sweeps, FormErrors):
            self._show_problems(sweeps.problems)
            self._status(self._refusal(), "bold red")
            on_the_form = [name for name, _title, _hint in FORM_FIELDS if name in sweeps.problems]
            first = on_the_form[0] if on_the_form else next(iter(sweeps.problems))  # the topmost wrong field
            self.query_one(f"#{_widget_id(first)}").focus()
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
        shape = self.query_one("#bench-shape", Static)
        shape.update(Text("\n".join(live.shape)))
        shape.display = bool(live.shape)  # nothing without a shape window: the rows stay where they were
        title = Text(f"Benchmark {self.host}: {', '.join(s.label for s in run.sweeps)}", style="bold")
        if live.server:
            title.append(f"   {live.server}", style="dim")
        self.query_one("#bench-title", Static).update(title)
        self.query_one("#bench-rows", Static).update(live_table(live))
        summary = slo_summary(live)
        shown = self.query_one("#bench-slo-summary", Static)
        shown.update(summary)
        shown.display = bool(summary)  # nothing without an SLO: the rows' reasons stay where they were
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

    profile_slo = slo_text(console.session(label).target.slo)
    # The profile's [slo] is what the host is held to: the field opens with it (else the last one used).
    form = BenchForm(**{**form.__dict__, "label": proposal(), "slo": profile_slo or form.slo})

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
        BenchScreen(
            label,
            form,
            start=start,
            power=_power_of(console, label),
            compare=compare,
            proposal=proposal,
            datasets=workspace.datasets if workspace is not None else None,
            profile_slo=profile_slo,
        )
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
