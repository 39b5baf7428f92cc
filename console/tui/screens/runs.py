"""`c`: the benchmark runs of the workspace's logs/ in a table (filter as you type), two to four picked, then side
by side: one pane per run (its setup as the server resolved it, version, unit hash, workload, and its metrics per
level with the deltas against the first run, ▲/▼ in each metric's direction, "noise" inside the repeats' spread),
output tok/s and TPOT plotted against concurrency, the crossovers named, and the comparison exported as Markdown
and JSON. Runs held to an SLO also get their goodput plotted, the crossover at the SLO (where another run carries
more good requests) named, each level's ✔/✖ in the panes and each run's capacity at the SLO; the export carries
the SLO (console.bench.sidebyside's Markdown and JSON).
Reading only local files, it works without a host and in read-only mode.

The model is console.bench.runs (the table), console.bench.sidebyside (panes, crossovers, Markdown) and
console.core.bench.export (the files); this screen shows them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Label, Static

from console import hints
from console.bench.comparison import Cell
from console.bench.present import delta_style, delta_text, value_text
from console.bench.runs import RunSummary, filter_runs, list_runs
from console.bench.sidebyside import (
    GOODPUT,
    MAX_RUNS,
    PLOTTED,
    SideBySide,
    crossed_metrics,
    crossover_lines,
    metric_spec,
    side_by_side,
    slo_lines,
)
from console.core.bench import export_comparison
from console.tui.context import ConsoleContext
from console.tui.widgets.inputs import OrderedInput
from console.tui.widgets.plot import RUN_MARKS, RUN_STYLES, Plot

COLUMNS = ("label", "host", "setup", "SGLang", "when (UTC)", "levels", "workload")  # after the pick mark's
# (metric, short title) of a pane's rows: narrow enough for four panes on 80 columns
PANE_METRICS = (
    ("output_throughput", "tok/s"),
    ("median_ttft_ms", "TTFT ms"),
    ("median_tpot_ms", "TPOT ms"),
    ("p99_itl_ms", "p99 ITL"),
    ("accept_length", "accept"),
    ("request_goodput", "good/s"),
    ("tokens_per_joule", "tok/J"),
    ("failed", "failed"),
)
MARK_COLUMN = "mark"


def delta_cell(cell: Cell) -> Text:
    """`▲12.0%` green, `▼6.4%` red, `=` dim, `noise` in yellow where the repeats overlap (console.bench.present)."""
    text = delta_text(cell, compact=True)
    return Text(text, style=delta_style(cell)) if text else Text("")


def pane(sbs: SideBySide, index: int) -> Group:
    """One run: its letter and label in its plot colour, its setup, then its metrics per level."""
    setup = sbs.setups[index]
    label = sbs.labels[index]
    style = RUN_STYLES[index % len(RUN_STYLES)]
    head = Text()
    head.append(f"{RUN_MARKS[index]} ", style=style)
    head.append(label, style=style)
    head.append("  (baseline)\n" if index == 0 else "\n", style="dim")
    head.append(f"{setup.host} · SGLang {setup.version}\n")
    head.append(f"{setup.setup}\n")
    for name, value in setup.spec.details():
        head.append(f"  {name} {value}\n", style="dim")
    if setup.spec_v2 is not None:
        head.append(f"  spec v2 {'on' if setup.spec_v2 else 'off'}\n", style="dim")
    head.append(f"unit {setup.unit_hash or '-'}\n", style="dim")
    head.append(f"{setup.workload} · {setup.started_at:%m-%d %H:%M}", style="dim")
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("metric", no_wrap=True, style="dim")
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("delta", justify="left", no_wrap=True)
    verdicts = sbs.verdicts(label)
    for level, cells in sbs.cells(label):
        verdict = verdicts.get(level)
        mark = "" if verdict is None else Text("SLO ✔", "green") if verdict else Text("SLO ✖", "bold red")
        table.add_row(Text(str(level), style="bold"), "", mark)
        for key, short in PANE_METRICS:
            cell = cells[key]
            if cell.median is None or (key not in ("output_throughput", GOODPUT) and not cell.median):
                continue  # a zero here is a figure the run did not measure (or no failures): not worth a row
            table.add_row(f" {short}", value_text(cell, metric_spec(key)), delta_cell(cell))
    return Group(head, table)


class RunsScreen(Screen[None]):
    # The table has the keys from the moment the screen is drawn: focusing it in on_mount comes a turn later, and a
    # space typed right after `c` went into the filter (Textual's default focuses the first field, the filter).
    AUTO_FOCUS = "#runs-table"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="runs-back"),
        Binding("space", "pick", "Pick", id="runs-pick"),
        Binding("enter", "compare", "Compare", id="runs-compare", show=False),
        Binding("slash", "filter", "Filter", id="runs-filter"),
        Binding("x", "export", "Export", id="runs-export"),
    ]

    def __init__(self, logs: Path, *, picked: Sequence[str] = (), clock: Callable[[], datetime] | None = None) -> None:
        super().__init__()
        self.logs = logs
        self.clock = clock or (lambda: datetime.now(UTC))
        self.runs: list[RunSummary] = []
        self.shown: list[RunSummary] = []
        self.picked: list[str] = list(picked)  # run ids, in the order picked: the first is the baseline
        self.problems: list[str] = []
        self.comparison: SideBySide | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="runs-box"):
            yield Static(id="runs-title")
            hint = "filter: label, host, setup, version, workload ..."
            yield OrderedInput(placeholder=hint, id="runs-filter", compact=True)
            yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="runs-compare"):
                yield Static(id="cmp-crossovers")
                with Horizontal(id="cmp-plots"):
                    yield Plot(id="plot-output")
                    yield Plot(id="plot-tpot")
                with Horizontal(id="cmp-slo"):  # runs held to an SLO: their goodput, each one's capacity at it
                    yield Plot(id="plot-goodput")
                    yield Static(id="cmp-capacity")
                yield Static(id="cmp-legend")
                yield Horizontal(id="cmp-panes")
            with Horizontal(id="runs-export-row"):
                yield Label("export to ", id="runs-export-label")
                yield OrderedInput(id="runs-export-path", compact=True)
            yield Static("", id="runs-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs-compare").display = False
        self.query_one("#runs-export-row").display = False
        self.runs, self.problems = list_runs(self.logs)
        self.picked = self._resolve(self.picked)
        self._fill("")
        if len(self.picked) >= 2:
            self.action_compare()

    def _resolve(self, refs: Sequence[str]) -> list[str]:
        """Run ids for what was asked: a run id, or a label (its newest run: a cancelled sweep's caller knows only
        the label its finished levels were recorded under)."""
        out: list[str] = []
        for ref in refs:
            run = next((r for r in self.runs if r.run_id == ref), None) or next(
                (r for r in self.runs if r.label == ref),
                None,  # newest first
            )
            if run is not None and run.run_id not in out:
                out.append(run.run_id)
        return out[:MAX_RUNS]

    # -- the table ----------------------------------------------------------------------------------------------

    def _fill(self, query: str) -> None:
        self.shown = filter_runs(self.runs, query)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        # The pick mark's column is one cell wide from the start: a column sized to its content is 0 wide while
        # nothing is picked, and update_cell does not widen it (the status line said "picked 2/4: A ..., B ..."
        # while the rows showed no letter).
        table.add_column("", width=1, key=MARK_COLUMN)
        table.add_columns(*COLUMNS)
        for run in self.shown:
            table.add_row(*self._cells(run), key=run.run_id)
        self._title()
        self._hint()

    def _mark(self, run: RunSummary) -> Text:
        """The run's letter in its plot colour once picked (A is the baseline)."""
        if run.run_id not in self.picked:
            return Text("")
        n = self.picked.index(run.run_id)
        return Text(RUN_MARKS[n], style=RUN_STYLES[n])

    def _cells(self, run: RunSummary) -> list[Any]:
        label = Text(run.label, style="bold") + (Text(" stopped", style="red") if run.stopped else Text(""))
        when = f"{run.started_at:%m-%d %H:%M}"
        return [self._mark(run), label, run.host, run.setup, run.version, when, run.levels_text, run.workload]

    def _title(self) -> None:
        title = Text("Benchmark runs (logs/bench-*.jsonl)", style="bold")
        shown = f"{len(self.shown)} of {len(self.runs)}" if len(self.shown) != len(self.runs) else str(len(self.runs))
        title.append(f"   {shown} run(s)", style="dim")
        for problem in self.problems[:3]:
            title.append(f"\nskipped {problem}", style="red")
        if len(self.problems) > 3:
            title.append(f"\n... and {len(self.problems) - 3} more unreadable line(s)", style="red")
        self.query_one("#runs-title", Static).update(title)

    def _status(self, text: str, style: str = "") -> None:
        self.query_one("#runs-status", Static).update(Text(text, style=style))

    def _hint(self) -> None:
        if not self.runs:
            self._status(f"No runs yet: b on a host runs a benchmark (or {hints.BENCH.line()}).", "dim")
            return
        names = ", ".join(f"{RUN_MARKS[i]} {self._label(p)}" for i, p in enumerate(self.picked))
        picked = f"picked {len(self.picked)}/{MAX_RUNS}: {names} · " if self.picked else ""
        hint = f"space: pick 2-{MAX_RUNS} (the first is the baseline) · enter: compare · /: filter"
        self._status(picked + hint, "dim")

    def _label(self, run_id: str) -> str:
        return next((r.label for r in self.runs if r.run_id == run_id), run_id)

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    @on(Input.Submitted, "#runs-filter")
    def _filter_done(self) -> None:
        self.query_one(DataTable).focus()

    def highlighted(self) -> RunSummary | None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        return self.shown[row] if self.shown and row is not None and 0 <= row < len(self.shown) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        comparing = self.comparison is not None and self.query_one("#runs-compare").display
        if action in ("pick", "filter", "compare"):
            return not comparing
        if action == "export":
            return comparing
        return True

    def action_filter(self) -> None:
        self.query_one("#runs-filter", Input).focus()

    def action_pick(self) -> None:
        run = self.highlighted()
        if run is None:
            return
        if run.run_id in self.picked:
            self.picked.remove(run.run_id)
        elif len(self.picked) >= MAX_RUNS:
            self._status(f"at most {MAX_RUNS} runs side by side: unpick one first (space)", "yellow")
            return
        else:
            self.picked.append(run.run_id)
        table = self.query_one(DataTable)
        for summary in self.shown:
            table.update_cell(summary.run_id, MARK_COLUMN, self._mark(summary))
        self._hint()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_compare()

    # -- side by side ---------------------------------------------------------------------------------------------

    def action_compare(self) -> None:
        if len(self.picked) < 2:
            self._status(f"pick 2-{MAX_RUNS} runs with space first ({len(self.picked)} picked)", "yellow")
            return
        by_id = {r.run_id: r for r in self.runs}
        try:
            sbs = side_by_side([list(by_id[p].records) for p in self.picked])
        except ValueError as exc:
            self._status(f"cannot compare: {exc}", "bold red")
            return
        self.comparison = sbs
        self.query_one("#runs-filter").display = False
        self.query_one("#runs-table").display = False
        self.query_one("#runs-compare").display = True
        self._show(sbs)
        self.query_one("#runs-compare").focus()  # the keys scroll it: at 80×24 the panes are below the plots
        self._status("↑↓ pgup pgdn: scroll · x: export as Markdown and JSON · esc: back to the runs", "dim")
        self.refresh_bindings()

    def _show(self, sbs: SideBySide) -> None:
        panes = self.query_one("#cmp-panes", Horizontal)
        panes.remove_children()
        panes.mount_all(Static(pane(sbs, i), classes="cmp-pane") for i in range(len(sbs.labels)))
        title = Text(f"Side by side: {len(sbs.labels)} runs, deltas against {sbs.labels[0]}\n", style="bold")
        goodput_title = metric_spec(GOODPUT).title + ": "
        for line in crossover_lines(sbs):
            crossed = "no crossover" not in line
            if line.startswith(goodput_title):  # goodput counts the requests within the SLO: it crosses at the SLO
                title.append("crossover at the SLO " if crossed else "at the SLO ", style="bold")
            else:
                title.append("crossover " if crossed else "", style="bold")
            title.append(line + "\n", style="bold yellow" if crossed else "dim")
        for note in sbs.comparison.notes:
            title.append(f"note: {note}\n", style="yellow")
        title.rstrip()
        self.query_one("#cmp-crossovers", Static).update(title)
        legend = Text()
        for i, label in enumerate(sbs.labels):
            legend.append(f"{RUN_MARKS[i]} {label}", style=RUN_STYLES[i])
            legend.append("   ")
        legend.append("* runs on one point   ┆ crossover", style="dim")
        self.query_one("#cmp-legend", Static).update(legend)
        judged = GOODPUT in crossed_metrics(sbs.comparison)
        plotted = (*PLOTTED, GOODPUT) if judged else PLOTTED
        for plot_id, metric in zip(("#plot-output", "#plot-tpot", "#plot-goodput"), plotted, strict=False):
            spec = metric_spec(metric)
            series = sbs.series(metric)
            crossings = [c.at for c in sbs.crossovers if c.metric == metric]
            self.query_one(plot_id, Plot).show(
                series, title=f"{spec.title} ({spec.unit}) by {sbs.axis}", crossings=crossings, axis=sbs.axis
            )
        self.query_one("#cmp-slo").display = judged
        capacity = Text()
        for n, line in enumerate(slo_lines(sbs.comparison)):
            capacity.append(line + "\n", style="bold" if n == 0 else "")
        self.query_one("#cmp-capacity", Static).update(capacity)

    def action_export(self) -> None:
        if self.comparison is None:
            return
        row = self.query_one("#runs-export-row")
        row.display = True
        path = self.query_one("#runs-export-path", Input)
        path.value = f"compare-{self.clock():%Y%m%d-%H%M%S}"
        path.focus()
        self._status("enter: write NAME.md and NAME.json (a relative NAME goes under logs/) · esc: not now", "dim")

    @on(Input.Submitted, "#runs-export-path")
    def _export(self, event: Input.Submitted) -> None:
        if self.comparison is None or not event.value.strip():
            return
        try:
            md, js = export_comparison(self.comparison, event.value.strip(), self.logs)
        except OSError as exc:
            self._status(f"not exported: {exc}; give another path", "bold red")
            return
        self.query_one("#runs-export-row").display = False
        self.query_one("#runs-compare").focus()
        self._status(f"exported {md} and {js.name}", "bold green")

    def action_back(self) -> None:
        if self.query_one("#runs-export-row").display:
            self.query_one("#runs-export-row").display = False
            self.query_one("#runs-compare").focus()
            self._status("not exported · x: export · esc: back to the runs", "dim")
            return
        if self.query_one("#runs-compare").display:
            self.query_one("#runs-compare").display = False
            self.query_one("#runs-filter").display = True
            self.query_one("#runs-table").display = True
            self.comparison = None
            self.query_one(DataTable).focus()
            self._hint()
            self.refresh_bindings()
            return
        self.dismiss(None)


def open_runs(console: ConsoleContext, *, picked: Sequence[str] = ()) -> None:
    """c / the palette: the runs of the console's workspace (works on the overview and in read-only mode)."""
    workspace = console.workspace()
    if workspace is None:
        console.notify("no workspace: the runs live in its logs/", title="Compare", severity="warning")
        return
    console.push_screen(RunsScreen(workspace.logs, picked=picked, clock=console.clock))
