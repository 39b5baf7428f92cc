"""`opsconsole compare RUN... [--json]`: the side-by-side table of benchmark runs, baseline first.

Runs are labels (newest run with that label across logs/bench-*.jsonl) or JSONL files. The comparison itself
is pure (console.bench.comparison) and the records are read by console.bench.records; this module renders.
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from console.bench.comparison import Cell, Comparison, ascii_plot, compare_runs
from console.bench.present import delta_style, delta_text, value_text
from console.bench.records import load_run
from console.bench.sidebyside import slo_lines
from console.cli.common import workspace_of
from console.errors import ExitCode


def _delta(cell: Cell) -> Text:
    text = delta_text(cell)
    return Text(f" {text}", style=delta_style(cell)) if text else Text("")


def _slo_mark(met: bool | None) -> Text:
    if met is None:
        return Text("")
    return Text(" SLO ✔", style="green") if met else Text(" SLO ✖", style="red")


def render(comparison: Comparison) -> Group:
    table = Table(title=f"baseline: {comparison.baseline}", header_style="bold", show_lines=False)
    table.add_column("level / metric")
    for n, label in enumerate(comparison.labels):
        table.add_column(label, justify="right", style=None if n else "bold")
    for i, level in enumerate(comparison.levels):
        if i:
            table.add_section()
        by_label = {r.label: r for r in level.runs}
        header = [Text(str(level.level), style="bold")]
        for label in comparison.labels:
            run = by_label.get(label)
            if run is None:
                header.append(Text("(not run)", style="dim"))
            elif run.stopped or run.failed_requests:
                header.append(Text(f"{run.failed_requests} failed", style="red") + _slo_mark(run.slo_met))
            else:
                header.append(_slo_mark(run.slo_met))
        table.add_row(*header)
        for spec in comparison.metrics:
            if all((r.cells[spec.key].median is None) for r in level.runs):
                continue
            cells = level.cells(spec.key, comparison.labels)
            figures = ["" if cell is None else Text(value_text(cell, spec)) + _delta(cell) for cell in cells]
            table.add_row(f"  {spec.title}" + (f" ({spec.unit})" if spec.unit else ""), *figures)
    plot_lines = ascii_plot(comparison.series("output_throughput"))
    plot = Text("output tokens/s by level\n", style="bold")
    for line in plot_lines:
        plot.append(line + "\n")
    notes = Text("".join(f"note: {n}\n" for n in comparison.notes), style="yellow")
    notes.append("".join(f"{line}\n" for line in slo_lines(comparison)))
    legend = Text("▲ better / ▼ worse than the baseline; 'noise': inside the run-to-run spread\n", style="dim")
    return Group(table, legend, plot, notes)


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    logs = workspace_of(args).logs
    try:
        runs = [load_run(ref, logs) for ref in args.runs]
    except (LookupError, ValueError, OSError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        return ExitCode.FAILED
    comparison = compare_runs(runs)
    if args.json:
        print(json.dumps(comparison.as_dict(), indent=2))
    else:
        Console().print(render(comparison))
    return ExitCode.OK
