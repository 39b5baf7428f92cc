"""`T`: tune a host's speculative setup (console.core.tune), from the console.

The form asks for the space (algorithm, steps, topk, draft tokens, spec v2; the defaults are the CLI's, from the
unit the host runs), the concurrency levels, the workloads and the budget; the right side shows, at every
keystroke, what the host's SGLang version would run, prune (with SGLang's reason) and merge. ctrl+s plans the
tune (the unit's lock is held from then on), shows the planned space and the estimate, and asks. Then the tune
runs on the console's progress screen (screens/progress.py), drawn by TuneView: one row per setup (pending /
starting / benchmarking C=N / done / failed, skipped / pruned), the current trial's phase and figures, the
elapsed time; `esc` aborts (asked first) and the core puts the original unit back; `d` goes back to the
dashboard while the tune goes on (`T` on that host comes back to it). At the end: per level the best setup with
its margin and whether it is within the noise, the crossovers, the optimistic vs realistic workloads, and where
the unit is and whether the host is healthy.

The operator's traffic (issue 23): the form also takes the objective (throughput, goodput or capacity: what ranks
a level's setups), the SLO (prefilled with the profile's [slo]) and a dataset picked from the workspace's datasets/
(read in a thread once picked, as `tune --dataset` reads it); the board shows its figures by the objective and each
level's ranking, the result each setup's capacity at the SLO and where speculation loses on this traffic.

Before anything restarts, the confirmation ranks the planned setups by what this host's benchmark records predict
for them at the form's levels (console.core.tune.Foresight, fitted once as the form opens, in a worker; each figure
with its band, and whether it is worth a restart against the running setup). The strategy predict restarts only for
setups the prediction says can still win: the board shows, after each of its stages, which those are.

The TUI holds no logic: the form is console/core/tune/form.py, the board console/tui/presenters/tune_board.py, the
space console/core/tune/space.py, the tune console/core/tune/run.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, Input, Label, Select, Static
from textual.worker import Worker

from console.bench.datasets import DatasetError, describe_line, sample_dataset
from console.bench.workloads import DatasetSample
from console.core.apply import duration_text
from console.core.bench import dataset_files, slo_text
from console.core.session import Session
from console.core.tune import (
    FIELDS,
    Estimate,
    Foresight,
    FormError,
    PendingTune,
    Space,
    TuneEvent,
    TuneRequest,
    TuneResult,
    UnitSpeculation,
    afterwards,
    build_space,
    dataset_sampling,
    estimate,
    foresight,
    form_defaults,
    meaning,
    request_from_form,
    unit_speculation,
)
from console.errors import UsageError
from console.host.base import HostError, UnitLocked
from console.sglang.client import SglangError
from console.tui.context import ConsoleContext
from console.tui.presenters.prediction import Ranked, predicted_ranking
from console.tui.presenters.tune_board import TuneBoard
from console.tui.runners import TunePlanner, tune_on_host
from console.tui.screens import FORM_FOCUS_BINDINGS, unless_closing
from console.tui.screens.confirm import ConfirmScreen, cost_line
from console.tui.screens.progress import ProgressScreen
from console.tui.widgets.inputs import OrderedInput

Clock = Callable[[], datetime]
SPACE_PAUSE_S = 0.25  # the space is checked once typing pauses this long
PREVIEW_LIMIT = 6  # pruned and merged points the form shows of each (a large space is a long text to lay out)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def screen_name(label: str) -> str:
    """The installed name of a host's running (or finished, not yet closed) tune."""
    return f"tune-{label}"


def _field_id(key: str) -> str:
    return "tune-field-" + key.replace("_", "-")


def _minutes(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


# --- what the space looks like -----------------------------------------------------------------------------------


def space_text(space: Space, limit: int | None = None) -> RenderableType:
    """The setups to run, those pruned with SGLang's reason, those merged into another one (at most `limit` of
    each of the last two: the form redraws it at every keystroke; the confirmation lists them all)."""
    parts: list[RenderableType] = [
        Text(f"SGLang {space.sglang_version}: {_count(len(space.candidates), 'setup')} to run", style="bold")
    ]
    for candidate in space.candidates:  # beside the name that tells it apart, its full name (as SGLang resolves it)
        setup = candidate.setup
        details = f"  {setup.name()}" if setup.speculative else ""
        parts.append(Text.assemble(("  ✔ ", "green"), (candidate.name, "bold"), (details, "dim")))
    if space.pruned:
        parts.append(Text(f"pruned ({len(space.pruned)}): SGLang {space.sglang_version} would refuse them", "bold"))
        for pruned in space.pruned[:limit]:
            parts.append(Text.assemble(("  ✖ ", "red"), pruned.setting.describe()))
            parts.append(Text(f"    {pruned.reason}", style="dim"))
        parts.extend(_more(len(space.pruned), limit))
    if space.merged:
        parts.append(Text(f"merged ({len(space.merged)}): SGLang runs them as another setup", "bold"))
        for merged in space.merged[:limit]:
            parts.append(Text.assemble(("  = ", "cyan"), merged.setting.describe(), f" → {merged.into_name}"))
            parts.append(Text(f"    {merged.reason}", style="dim"))
        parts.extend(_more(len(space.merged), limit))
    return Group(*parts)


def _more(count: int, limit: int | None) -> list[Text]:
    if limit is None or count <= limit:
        return []
    return [Text(f"  ... and {count - limit} more (ctrl+s lists them all before anything starts)", style="dim")]


# --- the form ------------------------------------------------------------------------------------------------------


class TuneFormScreen(Screen[None]):
    """The space, the levels and the budget; ctrl+s plans the tune and asks before anything is restarted."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "start", "Plan and start", id="tune-start"),
        Binding("escape", "close", "Close", id="tune-close"),
        *FORM_FOCUS_BINDINGS,
    ]

    def __init__(
        self,
        session: Session,
        *,
        label: str,
        read_only: str = "",
        clock: Clock = _utc_now,
        planner: TunePlanner = tune_on_host,
        datasets: Path | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.datasets = datasets  # the workspace's datasets/: what the dataset field offers
        self.profile_slo = slo_text(session.target.slo)  # the profile's [slo], as the SLO field takes it
        # the picked file's sample, or what is wrong with it (None: no file picked; "" while it is read)
        self.dataset: DatasetSample | str | None = None
        self.planner = planner
        self.label = label
        self.read_only = read_only
        self.clock = clock
        self.unit: UnitSpeculation | None = None
        self.unit_text = ""
        self.version = ""
        self.values: dict[str, str] = {}
        self.error: FormError | None = None
        self.request: TuneRequest | None = None  # the form's, when it has no error
        self.space: Space | None = None  # the space of the form as it was at space_values
        self.space_values: dict[str, str] = {}
        self._could_start: bool | None = None
        self._space_timer: Timer | None = None
        self.busy = False
        self.started: TuneProgress | None = None
        # This host's prediction (its records in the workspace's logs/, fitted once), for the confirmation's ranking;
        # None until read, or without a workspace (nothing to read: the confirmation says nothing of a prediction).
        self.foresight: Foresight | None = None
        self.foresight_error = ""  # the server could not be read for it
        self._foresight_worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Tune {self.label}: reading the unit ...", style="bold"), id="tune-form-title")
        with Horizontal(id="tune-form-body"):
            yield VerticalScroll(id="tune-form")
            yield VerticalScroll(Static("", id="tune-space"), id="tune-space-box")
        yield Footer()

    def on_mount(self) -> None:
        self._load()
        if self.session.workspace is not None:
            self._foresight_worker = self._load_foresight()

    @work(exclusive=True, group="tune-foresight")
    async def _load_foresight(self) -> None:
        try:
            self.foresight = await foresight(self.session)
        except (HostError, SglangError) as exc:
            self.foresight_error = f"the running server cannot be read ({exc})"

    async def _predicted(self, pending: PendingTune) -> RenderableType | None:
        """The planned setups best first by their prediction at the form's levels (None without a workspace)."""
        if self.session.workspace is None:
            return None
        if self._foresight_worker is not None:  # the fit may be under way still: the confirmation waits for it
            await self._foresight_worker.wait()
        if self.foresight is None:
            return Text(f"No prediction: {self.foresight_error}", style="dim")
        request = pending.request  # ranked on the tune's own traffic (its first workload), not the newest measured
        found = self.foresight.on_workload(request.workload_spec(request.workloads[0]))
        if found.predictor is None:
            return Text(f"No prediction: {found.why_not}", style="dim")
        levels = pending.request.concurrencies
        named = found.of_candidates(pending.space.candidates, levels)  # under a millisecond a setup
        return prediction_view(predicted_ranking(named, levels), levels, found.workload)

    @work(exclusive=True, group="tune-load")
    async def _load(self) -> None:
        with unless_closing(self):
            await self._read_and_build()

    async def _read_and_build(self) -> None:
        try:
            self.version, _source = await self.session.sglang_version()
            self.unit_text = await self.session.service.read_unit()
            self.unit = unit_speculation(self.unit_text, self.version)
        except (HostError, ValueError) as exc:  # ValueError: UnitError, the unit is not an SGLang unit
            self.query_one("#tune-form-title", Static).update(Text(f"Tune {self.label}: {exc}", style="bold red"))
            return
        title = Text(f"Tune {self.session.service.unit} on {self.label}", style="bold")
        title.append(f"   SGLang {self.version}: each setup is restarted and benchmarked", style="dim")
        if self.read_only:
            title.append(f"   {self.read_only}", style="yellow")
        self.query_one("#tune-form-title", Static).update(title)
        defaults = form_defaults(self.unit) | {"slo": self.profile_slo}
        rows: list[Widget] = []
        group = ""
        for spec in FIELDS:
            if spec.group != group:
                group = spec.group
                rows.append(Static(Text(group, style="bold underline"), classes="field-group"))
            field: Widget
            if spec.key == "dataset":  # a file of datasets/: picked from the list of them
                files = dataset_files(self.datasets) if self.datasets is not None else []
                field = Select(
                    [(name, name) for name in files],
                    prompt="pick a file" if files else "none: put yours in datasets/",
                    tooltip=spec.hint,
                    id=_field_id(spec.key),
                    disabled=bool(self.read_only),
                    compact=True,
                )
            elif spec.choices:  # one of a few: picked from a list, nothing to mistype
                field = Select(
                    [(value, value) for value, _meaning in spec.choices],  # said in full beside the space
                    value=defaults[spec.key],
                    allow_blank=False,
                    tooltip=spec.hint,
                    id=_field_id(spec.key),
                    disabled=bool(self.read_only),
                    compact=True,
                )
            else:
                field = OrderedInput(
                    value=defaults[spec.key],
                    placeholder=spec.hint,
                    id=_field_id(spec.key),
                    disabled=bool(self.read_only),
                    compact=True,
                )
            rows.append(Horizontal(Label(spec.label, classes="field-label"), field, classes="field-row"))
        await self.query_one("#tune-form", VerticalScroll).mount_all(rows)
        if not self.read_only:  # now, before the space shows: keys typed once the form looks ready land in steps
            self.set_focus(self.query_one(f"#{_field_id('steps')}"))
        self._update()

    def form_values(self) -> dict[str, str]:
        values = {}
        for spec in FIELDS:
            field = self.query_one(f"#{_field_id(spec.key)}")
            if isinstance(field, Select):
                values[spec.key] = "" if field.is_blank() else str(field.value)
            else:
                values[spec.key] = str(field.value) if isinstance(field, Input) else ""
        return values

    @on(Select.Changed, "#tune-field-dataset")
    def _dataset_picked(self, event: Select.Changed) -> None:
        """A file picked is read (in a thread: a large one takes seconds) and added to the workloads."""
        if event.select.is_blank():
            self.dataset = None
            self._update()
            return
        workloads = self.query_one(f"#{_field_id('workload')}", Input)
        if "dataset" not in [w.strip() for w in workloads.value.split(",")]:
            workloads.value = ",".join([w for w in (workloads.value.strip(), "dataset") if w])
        self._sample_dataset()

    @on(Input.Changed, "#tune-field-dataset-sample, #tune-field-seed")
    def _sampling_changed(self) -> None:
        """Another sample size or seed: the picked file is sampled again (the request carries what was drawn)."""
        if self.form_values().get("dataset"):
            self._sample_dataset()

    def _sample_dataset(self) -> None:
        values = self.form_values()
        try:
            size, seed = dataset_sampling(values)
        except FormError:
            self.dataset = None  # said beside the sample or the seed; the file is read once they can be
            self._update()
            return
        self.dataset = ""
        self._update()
        self._read_dataset(values["dataset"], size, seed)

    @work(thread=True, exclusive=True, group="tune-dataset")
    def _read_dataset(self, name: str, size: int, seed: int) -> None:
        assert self.datasets is not None
        try:
            read: DatasetSample | str = sample_dataset(self.datasets / name, size=size, seed=seed)
        except DatasetError as exc:
            read = f"{exc}; nothing was sent"
        self.app.call_from_thread(self._dataset_read, (name, size, seed), read)

    def _dataset_read(self, asked: tuple[str, int, int], read: DatasetSample | str) -> None:
        values = self.form_values()
        try:
            now = (values.get("dataset", ""), *dataset_sampling(values))
        except FormError:
            now = None
        if now != asked:
            return  # another file, size or seed was asked for meanwhile: its own read is on the way
        self.dataset = read
        self._update()

    @on(Input.Changed)
    @on(Select.Changed)
    def _changed(self, _event: Input.Changed | Select.Changed) -> None:
        self._update()

    def _update(self) -> None:
        """The request from the form as it is, at once; the space it makes in a thread (a large space takes a
        fifth of a second to check: typing must not wait for it). Pure: nothing is asked of the host."""
        if self.unit is None:
            return
        self.values = self.form_values()
        self.error = None
        self.request = None
        try:
            request = self.request = self._request()
        except FormError as exc:
            self.error = exc
        else:
            # Checked once typing pauses: a large space holds the interpreter for a fifth of a second even in a
            # thread (the GIL), which would make every key of a burst wait for it.
            if self._space_timer is not None:
                self._space_timer.stop()
            values = dict(self.values)
            if self.space is None:
                self._build_space(request, values)  # the form as it opens: at once
            else:
                self._space_timer = self.set_timer(SPACE_PAUSE_S, lambda: self._build_space(request, values))
        for spec in FIELDS:
            row = self.query_one(f"#{_field_id(spec.key)}").parent
            if isinstance(row, Widget):
                row.set_class(self.error is not None and self.error.field == spec.key, "-invalid")
        self._show()

    def _request(self) -> TuneRequest:
        assert self.unit is not None
        if self.dataset == "":
            raise FormError("dataset", "reading the file ...")
        return request_from_form(self.values, self.unit, dataset=self.dataset, profile_slo=bool(self.profile_slo))

    @work(thread=True, exclusive=True, group="tune-space")
    def _build_space(self, request: TuneRequest, values: dict[str, str]) -> None:
        try:
            space: Space | str = build_space(
                request.space, self.unit_text, unit_name=self.session.service.unit, version=self.version
            )
        except (ValueError, UsageError) as exc:  # UnitError, UsageError: said in the report
            space = str(exc)
        self.app.call_from_thread(self._space_built, values, space)

    def _space_built(self, values: dict[str, str], space: Space | str) -> None:
        if values != self.values:
            return  # the form changed meanwhile: its own space is on the way
        if isinstance(space, str):
            self.error, self.space = FormError("algorithm", space), None
        else:
            self.space, self.space_values = space, values
        with unless_closing(self):  # the thread's answer can come as the screen closes
            self._show()

    def _show(self) -> None:
        could_start = self._could_start
        self.query_one("#tune-space", Static).update(self._report(), layout=True)
        self._could_start = self.check_action("start", ())
        if self._could_start != could_start:
            self.refresh_bindings()

    def _report(self) -> RenderableType:
        parts: list[RenderableType] = []
        current = self.space is not None and self.space_values == self.values
        if self.error is not None:
            parts.append(Text(f"✖ {self.error}", style="bold red"))
        elif self.space is None or not current:
            parts.append(Text("checking the space ...", style="dim"))
        if self.error is None and self.space is not None:
            parts.append(space_text(self.space, PREVIEW_LIMIT))  # the last one checked, until the form's own is ready
        parts.append(Text(""))
        if self.request is not None:
            strategy, stays = self.request.strategy, self.request.apply_best
            objective = self.request.objective
            parts.append(Text(f"objective {objective}: {meaning('objective', objective)}", style="dim"))
            if self.request.dataset is not None:
                parts.append(Text(f"dataset {describe_line(self.request.dataset)}", style="dim"))
            parts.append(Text(f"strategy {strategy}: {meaning('strategy', strategy)}", style="dim"))
            parts.append(Text(f"afterwards: {afterwards(self.request)}", style="bold yellow" if stays else "dim"))
        if self.read_only:
            parts.append(Text(f"Tune is off: {self.read_only}", style="yellow"))
        elif self.error is not None:
            parts.append(Text("Fix what is marked ✖ above", style="bold red"))
        elif current and self.space is not None and not self.space.candidates:
            parts.append(Text("Nothing to run: SGLang would refuse every setup", style="bold red"))
        else:
            parts.append(Text("ctrl+s: plan the tune (the space and the estimate, then a confirmation)", "green"))
        return Group(*parts)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start":
            # The form's own space need not be shown yet (it is checked once typing pauses): the plan builds it
            # again and the confirmation shows it. Only a space known to be empty keeps Start off.
            known_empty = self.space is not None and self.space_values == self.values and not self.space.candidates
            ready = self.unit is not None and self.error is None and not known_empty
            if self.read_only or self.busy or not ready:
                return None
        return True

    def action_close(self) -> None:
        if self.busy:  # the plan holds the unit's lock: it is let go of by the confirmation's answer
            self.notify("planning the tune: wait for its confirmation, then n", severity="warning", timeout=4)
            return
        self.dismiss(None)

    def action_start(self) -> None:
        if self.check_action("start", ()) is None or self.unit is None:
            return
        self._plan(self._request())

    @work(exclusive=True, group="tune-plan")
    async def _plan(self, request: TuneRequest) -> None:
        self.busy = True
        self.refresh_bindings()
        try:
            pending = await self.planner(self.session, request)
        except UnitLocked as exc:
            who = exc.holder or "another console"
            self.notify(f"The unit is locked: {who}. Nothing was changed.", title="locked", severity="error")
            return
        except (HostError, ValueError, UsageError) as exc:  # UsageError: nothing to run; UnitError: not an SGLang unit
            self.notify(f"Cannot plan the tune: {exc}", severity="error", timeout=10)
            return
        finally:
            self.busy = False
            self.refresh_bindings()
        parts = estimate(pending.estimate_s, pending.restart_cost)
        unit = self.session.service.unit
        guard = (
            "If this console goes away, the host puts the original unit back by itself."
            if pending.guarded
            else "This host has no restore guard: if this console dies mid-tune, the unit stays as the last trial "
            "left it (the original is in the unit's backups)."
        )
        budget = f"; the budget stops it after {request.budget_s / 60:g} min" if request.budget_s else ""
        try:
            predicted = await self._predicted(pending)
        except asyncio.CancelledError:  # the console closing meanwhile: let go of the lock, change nothing
            await pending.abort("the console closed before the tune was confirmed; nothing was changed")
            raise
        at_most = "At most" if request.strategy == "predict" else "About"
        body = Group(
            space_text(pending.space),
            *([Text(""), predicted] if predicted is not None else []),
            Text(""),
            Text(
                f"{at_most} {parts.bench_s / 60:.0f} min of benchmarks and {_count(parts.starts, 'start')} of {unit} "
                f"({_count(len(request.cells()), 'level')}{budget})",
                style="bold",
            ),
            cost_line(parts.restart, self.label),
            *([Text(f"{at_most} {duration_text(parts.total_s)} in all", style="bold")] if parts.total_s else []),
            Text(guard, style="dim"),
        )
        if request.strategy == "predict":
            question = (
                f"Benchmark the setup {self.label} runs, then restart {unit} only for the setups predicted to be "
                f"able to win and benchmark them ({afterwards(request)} afterwards)?"
            )
        else:
            question = (
                f"Restart {unit} on {self.label} with each of these setups and benchmark them "
                f"({afterwards(request)} afterwards)?"
            )
        try:
            confirmed = await self.app.push_screen_wait(ConfirmScreen(question, body, danger=True))
        except asyncio.CancelledError:  # the console closing while it asks: let go of the lock, change nothing
            await pending.abort("the console closed before the tune was confirmed; nothing was changed")
            raise
        if not confirmed:
            await pending.abort("not confirmed; nothing was changed")
            self.notify("not started; nothing was changed", timeout=4)
            return
        screen = tune_progress(pending, label=self.label, clock=self.clock)
        self.started = screen
        self.dismiss(None)  # the caller pushes the running tune in its place


def prediction_view(ranked: list[Ranked], levels: tuple[int, ...], workload: str | None) -> RenderableType:
    """The planned setups best first by what this host's records predict, a figure and its band per level (★ the
    best there), each with its verdict against the running setup; what would settle the unknown ones."""
    head = Text("Predicted from this host's records, best first", style="bold")
    if workload:  # not necessarily the tune's: the running setup's newest benchmark is what the prediction rests on
        head.append(f" (on {workload}, the running setup's newest benchmark)", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    table.add_column("setup", no_wrap=True, overflow="ellipsis", min_width=12, ratio=1)
    for c in levels:
        table.add_column(f"C={c} tok/s", justify="right", no_wrap=True)
    table.add_column("verdict", overflow="fold", min_width=10, ratio=1)
    settle: list[Text] = []
    for row in ranked:
        cells = [Text(("★ " if c in row.best_at else "") + text) for c, text in zip(levels, row.cells, strict=True)]
        style = _VERDICT_STYLE.get(row.kind, "")
        table.add_row(Text(row.name, style="bold" if row.kind == "running" else ""), *cells, Text(row.verdict, style))
        if row.kind == "unknown":
            verdict = row.forecast.verdict
            then = f"; {verdict.settle}" if verdict.settle else ""
            settle.append(Text(f"  {row.name}: {verdict.text.removeprefix('unknown: ')}{then}", style="dim"))
    return Group(head, table, *settle)


_VERDICT_STYLE = {"running": "bold", "worth": "bold green", "not-worth": "yellow", "unknown": "yellow"}


# --- the running tune and its result ---------------------------------------------------------------------------


class TuneView:
    """The tune's progress (console.tui.screens.progress.ProgressScreen): one row per setup, the current trial, the
    elapsed time and the estimate, then the result; it goes on behind the dashboard (d)."""

    what = "the tune"
    abort_question: str | None = (
        "Abort the tune? The trial in progress is rolled back or stopped, and the original unit goes back."
    )
    can_leave = True
    tick_s = 1.0  # the elapsed time moves between events

    def __init__(self, pending: PendingTune, *, label: str) -> None:
        self.label = label
        self.unit = pending.target.unit
        self.board = TuneBoard.planned(pending.space)
        self.estimate = estimate(pending.estimate_s, pending.restart_cost)

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Tuning {self.unit} on {self.label}", style="bold"), id="tune-title")
        with VerticalScroll(id="tune-body"):
            yield Static("", id="tune-status")
            yield Static("", id="tune-result")  # above the rows: once it is over, the outcome is what matters
            yield Static("", id="tune-rows")
            yield Static("", id="tune-notes")

    def feed(self, screen: TuneProgress, event: TuneEvent) -> None:
        self.board.feed(event)

    def finished(self, screen: TuneProgress) -> None:
        if not screen.is_current:  # the operator is on the dashboard (d): say it is over
            ok = screen.result is not None and screen.result.ok
            screen.app.notify(
                f"the tune on {self.label} is over: T shows its result",
                title="Tune",
                severity="information" if ok else "warning",
                timeout=30,
            )

    def draw(self, screen: TuneProgress) -> None:
        self.tick(screen)
        ranked = rankings_text(self.board)  # nothing under throughput (the ★ says it)
        predicted = board_prediction_text(self.board)  # strategy predict: which setups can still win
        rows = Group(rows_table(self.board), *([predicted] if predicted else []), *([ranked] if ranked else []),
                     Text(""), excluded_text(self.board))  # fmt: skip
        screen.query_one("#tune-rows", Static).update(rows)
        result = screen.query_one("#tune-result", Static)
        result.display = screen.done
        result.update(self._result(screen) if screen.done else Text(""))
        notes = Text()
        for note in self.board.notes[-5:]:
            notes.append(f"! {note}\n", style="yellow")
        screen.query_one("#tune-notes", Static).update(notes)

    def tick(self, screen: TuneProgress) -> None:
        status = status_text(self.board, screen.clock(), screen, self.estimate)
        screen.query_one("#tune-status", Static).update(status)

    def _result(self, screen: TuneProgress) -> RenderableType:
        if screen.result is None:
            error = f"the tune failed: {screen.error}" if screen.error else "no result"
            return Text(f"✖ {error}", style="bold red")
        return result_view(screen.result)


TuneProgress = ProgressScreen[TuneEvent, TuneResult]


def tune_progress(pending: PendingTune, *, label: str, clock: Clock = _utc_now) -> TuneProgress:
    """The running tune's screen: installed under screen_name(label) by the console, so that T shows it again."""
    return ProgressScreen(pending, TuneView(pending, label=label), clock=clock)


def status_text(board: TuneBoard, now: datetime, screen: TuneProgress, parts: Estimate) -> RenderableType:
    """The stage, elapsed and estimate, the current trial's phase and figures."""
    lines: list[RenderableType] = []
    elapsed = _minutes(board.elapsed_s(now))
    head = Text(f"elapsed {elapsed}", style="bold")
    starts = f"{parts.starts} starts" + (f" of ~{duration_text(parts.restart.median_s)}" if parts.restart else "")
    head.append(f"   estimate: about {parts.bench_s / 60:.0f} min of benchmarks + {starts}", style="dim")
    if board.stage_estimate_s is not None and board.finished is None:
        head.append(f"   this stage: about {_minutes(board.stage_estimate_s)}", style="dim")
    lines.append(head)
    if board.finished is not None or screen.done:
        lines.append(Text("finished", style="bold green" if screen.result and screen.result.ok else "bold yellow"))
    elif screen.aborting:
        lines.append(Text("aborting: the original unit goes back ...", style="bold yellow"))
    if board.stage and board.finished is None:
        lines.append(Text(board.stage, style="cyan"))
    current = board.current
    if current is not None and board.finished is None:
        trial = current.trial
        line = Text.assemble(("▶ ", "bold cyan"), (f"trial {trial.number}: {trial.name}", "bold"))
        since = _minutes((now - current.started_at).total_seconds())
        if trial.stage >= 0:
            line.append(f"  ({trial.kind}, {since})", style="dim")
        line.append(f"  {current.phase}")
        if current.level:
            line.append(f"  {current.level}")
        if current.throughput is not None:
            line.append(f"  {current.throughput:,.0f} tok/s", style="bold")
            line.append(f"  {current.completed} done", style="dim")
            if current.failed:
                line.append(f"  {current.failed} failed", style="red")
        lines.append(line)
    if not screen.done:
        hint = "esc: abort (the original unit goes back)   d: the dashboard (the tune goes on)"
        lines.append(Text(hint, style="dim"))
    else:
        lines.append(Text("esc: close", style="dim"))
    return Group(*lines)


_STATE_STYLE = {
    "pending": "dim",
    "starting": "cyan",
    "benchmarking": "bold cyan",
    "done": "green",
    "failed": "bold red",
    "skipped": "yellow",
    "pruned": "dim red",
    "merged": "dim",
}


def rows_table(board: TuneBoard) -> Table:
    cells = board.cells
    one_workload = len({c.workload for c in cells}) == 1
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    table.add_column("setup", no_wrap=True, overflow="ellipsis", max_width=36)
    table.add_column("state", no_wrap=True, min_width=16)
    for cell in cells:
        header = f"C={cell.concurrency}" if one_workload else f"{cell.workload}\nC={cell.concurrency}"
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True, overflow="ellipsis", ratio=1)
    for row in board.rows:
        style = _STATE_STYLE.get(row.state, "")
        if row.out:
            style = "dim green"
        shown = [board.figure(row, c) for c in cells]
        figures: list[str | Text] = [
            "" if f is None else f"{f:,.0f}" if board.objective == "throughput" else f"{f:,.2f}" for f in shown
        ]
        for i, cell in enumerate(cells):  # strategy predict: an untried setup's predicted figure, marked ~
            if shown[i] is None and cell in row.predicted:
                figures[i] = Text(f"~{row.predicted[cell][1]:,.0f}", style="dim italic")
        leader = any(board.levels.get(c) is not None and board.levels[c].leader == row.name for c in cells)
        name = Text(("★ " if leader else "  ") + row.name, style="bold" if leader else "")
        detail = "" if row.state == "benchmarking" else row.detail
        table.add_row(name, Text(row.state_text, style=style), *figures, Text(detail, style="dim"))
    return table


_CHANCE_STYLE = {"can win": "cyan", "cannot win": "dim", "unplaced": "yellow"}


def board_prediction_text(board: TuneBoard) -> Text:
    """Strategy predict: after which stage the untried setups were last predicted, which of them can still win (the
    next restart is the likeliest of them), which cannot (no restart for them), which nothing places."""
    out = Text()
    event = board.prediction
    if event is None:
        return out
    out.append(f"\npredicted after stage {event.stage}", style="bold")
    out.append(" (~ figures: predicted tok/s of the setups not run yet)\n", style="dim")
    placed = [name for name in event.can_win if name not in event.unplaced]
    if placed:
        out.append(f"can still win: {', '.join(placed)}\n", style=_CHANCE_STYLE["can win"])
    if event.cannot_win:
        out.append(f"cannot win, no restart: {', '.join(event.cannot_win)}\n", style=_CHANCE_STYLE["cannot win"])
    if event.unplaced:
        out.append(f"no measured base, run to find out: {', '.join(event.unplaced)}\n", style=_CHANCE_STYLE["unplaced"])
    if not event.can_win:
        end = "no untried setup can win" if event.cannot_win else "every setup measured"
        out.append(f"{end}: the tune ends here\n", style="bold")
    return out


def rankings_text(board: TuneBoard) -> Text:
    """Each level's setups best first by the objective (under throughput the ★ in the rows says it: nothing)."""
    out = Text()
    if board.objective == "throughput":
        return out
    out.append(f"\nranked by {board.objective} ({board.unit}, the median of each setup's runs)\n", style="bold")
    for cell, ranking in board.rankings():
        where = (
            f"C={cell.concurrency}"
            if len({c.workload for c in board.cells}) == 1
            else f"{cell.workload} C={cell.concurrency}"
        )
        out.append(f"{where}: ", style="bold")
        out.append("  ".join(f"{n}. {name} {score:,.2f}" for n, (name, score) in enumerate(ranking, 1)) + "\n")
    return out


def excluded_text(board: TuneBoard) -> RenderableType:
    """Why each pruned or merged point is not run, in full (the table has one line for it)."""
    out = Text()
    for row in board.rows:
        if row.state in ("pruned", "merged"):
            out.append(f"{row.state}: ", style="bold dim red" if row.state == "pruned" else "bold dim")
            out.append(f"{row.name}: ", style="dim")
            out.append(f"{row.detail}\n", style="dim")
    return out


def result_view(result: TuneResult) -> RenderableType:
    """Per level the best setup, margin and noise; the crossovers; optimistic vs realistic; the host."""
    parts: list[RenderableType] = []
    for workload in dict.fromkeys(c.workload for c in result.cells):
        recs = [r for r in result.recommendations if r.cell.workload == workload]
        if not recs:
            continue
        by = "" if result.objective == "throughput" else f" by {result.objective}"
        parts.append(Text(f"{workload}: best setup per level{by}", style="bold underline"))
        table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
        scored = result.objective != "throughput"
        columns = [("level", "left"), ("best", "left")]
        columns += [(f"{result.objective[:8]} req/s", "right")] if scored else []
        columns += [("tok/s", "right"), ("margin", "right"), ("noise", "left")]
        for column, justify in columns:
            table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        table.add_column("runner-up", no_wrap=True, overflow="ellipsis", ratio=1)
        for r in recs:
            margin = "-" if r.margin_pct is None else f"{r.margin_pct:+.1f} %"
            noise = Text("within", style="yellow") if r.within_noise else Text("outside", style="green")
            score = ["-" if r.score is None else f"{r.score:,.2f}"] if scored else []
            table.add_row(f"C={r.cell.concurrency}", Text(r.name, style="bold"), *score, f"{r.output_throughput:,.1f}",
                          margin, noise, r.runner_up or "-")  # fmt: skip
        parts.append(table)
        capacities = result.capacities.get(workload, {})
        if capacities and result.slo is not None:
            parts.append(Text(f"capacity at the SLO ({result.slo.text()}), each setup:", style="bold"))
            for name, cap in sorted(capacities.items(), key=lambda item: -(item[1].request_throughput or 0.0)):
                parts.append(Text.assemble(f"  {name}: ", (cap.text(), "green" if cap.level else "red")))
        parts.extend(Text(r.evidence_note, style="yellow") for r in recs if r.evidence_note)
        parts.append(Text(result.summary(workload), style="bold cyan"))
        parts.append(Text(""))
    if result.verdicts:  # the report's own sentences: where the setup without speculation is the best
        parts.append(Text("speculation loses on this traffic", style="bold yellow underline"))
        parts.extend(Text(f"! {verdict}", style="bold yellow") for verdict in result.verdicts)
        parts.append(Text(""))
    if result.workload_sides:
        parts.append(Text("optimistic (random, forced lengths, temperature 0) vs realistic (chat)", "bold underline"))
        sides = Table(box=None, header_style="bold", pad_edge=False, expand=True)
        sides.add_column("level", no_wrap=True)
        for column in ("optimistic", "realistic"):
            sides.add_column(column, no_wrap=True, overflow="ellipsis", ratio=1)
        for side in result.workload_sides:
            opt, real = side.optimistic, side.realistic
            sides.add_row(
                f"C={side.concurrency}",
                f"{opt.name} {opt.output_throughput:,.0f}" if opt else "-",
                f"{real.name} {real.output_throughput:,.0f}" if real else "-",
            )
        parts.append(sides)
        for side in result.workload_sides:
            if side.warning:
                parts.append(Text(f"! {side.warning}", style="yellow"))
        parts.append(Text(""))
    if not result.recommendations:
        parts.append(Text("Nothing was measured cleanly enough to recommend a setup.", style="bold yellow"))
    if result.stopped:
        parts.append(Text(f"stopped early: {result.stopped}", style="yellow"))
    if result.error:
        parts.append(Text(f"error: {result.error}", style="bold red"))
    where = {"original": "the original unit", "best": "the recommended unit"}.get(result.final_unit or "", "")
    health = Text("healthy", style="bold green") if result.host_healthy else Text("NOT healthy", style="bold red")
    host = Text.assemble(
        (f"{result.target}: ", "bold"),
        (where or "the unit could not be put back (see its backups)", "bold" if where else "bold red"),
        ", ",
        health,
        (f"; {result.restarts} restarts in {_minutes(result.elapsed_s)}", "dim"),
    )
    parts.append(host)
    parts.append(Text(f"records in logs/ labelled {result.label}/<setup>/<workload>/s<stage>", style="dim"))
    return Group(*parts)


# --- opening it ------------------------------------------------------------------------------------------------


def open_tune(console: ConsoleContext) -> None:
    """T / the palette: the host's running tune if there is one, else the form (off in read-only mode)."""
    label = console.current_host
    if label is None:
        console.notify(console.why_disabled("tune") or "open a host first", title="Tune", severity="warning")
        return
    name = screen_name(label)
    if console.is_screen_installed(name):
        console.push_screen(name)
        return
    why = console.why_disabled("tune")
    if why:
        console.notify(why, title="Tune", severity="warning")
        return
    try:
        session = console.session(label)
    except HostError:
        console.notify(f"{label} is not connected yet; try again once the header says connected", severity="warning")
        return
    workspace = console.workspace(label)
    form = TuneFormScreen(session, label=label, clock=console.clock, planner=console.options.runners.tune,
                          datasets=workspace.datasets if workspace is not None else None)  # fmt: skip

    def closed(_: None) -> None:
        screen = form.started
        if screen is None:
            return
        console.install_screen(screen, name)
        console.push_screen(name)

    console.push_screen(form, closed)


def tune_running(console: ConsoleContext) -> str | None:
    """The host whose tune is running (the app refuses to quit meanwhile), or None."""
    for label in console.labels:
        name = screen_name(label)
        if console.is_screen_installed(name):
            screen = console.get_screen(name)
            if isinstance(screen, ProgressScreen) and isinstance(screen.view, TuneView) and screen.running:
                return label
    return None
