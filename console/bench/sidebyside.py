"""Two to four benchmark runs side by side (pure, no I/O, no UI): each run's setup as the server resolved it, its
metrics per level with deltas against the first run (console.bench.comparison), where two runs cross along the
concurrency axis, and the comparison as Markdown (the table a production document carries) and JSON.

Crossovers: for every pair of runs and each plotted metric, the difference between them at each level both ran,
oriented so that positive means the first is ahead (more tokens/s, fewer ms). Where it changes sign between two
consecutive levels the crossing is interpolated linearly between them ("A ahead below C ≈ 30, B ahead above"), but
named there only when the two levels are at most PLACED_WITHIN apart (console.bench.comparison); further apart it
is said to be between them ("A ahead below, B ahead above: they cross between C = 1 and 48"). A crossing where
either side's difference is inside the run-to-run spread of the repeats is marked as noise.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from console.bench.comparison import (
    COMPARED_METRICS,
    SAME_BELOW_PCT,
    Cell,
    Comparison,
    MetricSpec,
    bracketed,
    compare_runs,
)
from console.bench.levels import LevelKey, LevelKind
from console.bench.present import delta_text, value_text
from console.bench.records import BenchRecord
from console.bench.runs import setup_of, workload_text
from console.sglang.setup import SpecSetup
from console.sglang.vocabulary import View, dests

MAX_RUNS = 4
PLOT_AXES: tuple[LevelKind, ...] = ("C", "rate")  # the level axes plotted and crossed (a trace's speed is not one)
PLOTTED = ("output_throughput", "median_tpot_ms")  # the metrics plotted against concurrency and crossed
GOODPUT = "request_goodput"  # crossed too when the runs were judged against an SLO


def metric_spec(key: str) -> MetricSpec:
    return next(m for m in COMPARED_METRICS if m.key == key)


@dataclass(frozen=True)
class RunSetup:
    """What one run measured: its setup as resolved, the software, the unit, the load."""

    label: str
    run_id: str
    host: str
    setup: str
    spec: SpecSetup  # the same, typed (console.sglang.setup): what the panes detail
    speculative: tuple[tuple[str, Any], ...]  # the speculative server args as the server resolved them
    spec_v2: bool | None  # the spec-v2 worker (console.sglang.specmode.spec_mode; None: not known)
    version: str
    unit_hash: str | None
    model: str | None
    workload: str
    client_location: str
    started_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "run_id": self.run_id,
            "host": self.host,
            "setup": self.setup,
            "speculative": dict(self.speculative),
            "spec_v2": self.spec_v2,
            "sglang_version": self.version,
            "unit_hash": self.unit_hash,
            "model": self.model,
            "workload": self.workload,
            "client_location": self.client_location,
            "started_at": self.started_at.isoformat(),
        }


def run_setup(records: Sequence[BenchRecord]) -> RunSetup:
    first = min(records, key=lambda r: r.started_at)
    args = first.server_args
    speculative = tuple((k, args[k]) for k in dests(View.RUN_SETUP) if k in args)
    return RunSetup(
        label=first.label,
        run_id=first.run_id,
        host=first.target,
        setup=setup_of(args, first.spec_v2, first.sglang_version),
        spec=SpecSetup.from_server_args(args, first.spec_mode),
        speculative=speculative,
        spec_v2=mode.spec_v2 if (mode := first.spec_mode) is not None else None,
        version=first.sglang_version or "?",
        unit_hash=first.unit_hash,
        model=first.model,
        workload=workload_text(first.workload),
        client_location=first.client_location,
        started_at=first.started_at,
    )


@dataclass(frozen=True)
class Crossover:
    metric: str
    below: str  # the run ahead below the crossing
    above: str  # the run ahead above it
    between: tuple[LevelKey, LevelKey]  # the two measured levels it lies between
    at: float  # the interpolated level value where the two are equal
    axis: LevelKind  # "C" or "rate"
    noise: bool  # either side's difference is inside the repeats' spread (or under SAME_BELOW_PCT)

    @property
    def placed(self) -> bool:
        """The two measured levels are close enough (PLACED_WITHIN) for the interpolated level to be named."""
        return bracketed(*(level.value for level in self.between))

    def text(self) -> str:
        if self.placed:
            where = f"C ≈ {self.at:.0f}" if self.axis == "C" else f"rate ≈ {self.at:.3g}/s"
            line = f"{self.below} ahead below {where}, {self.above} ahead above"
        else:
            line = f"{self.below} ahead below, {self.above} ahead above: they cross between {self._span()}"
        return line + (" (within noise)" if self.noise else "")

    def _span(self) -> str:
        """The two measured levels: "C = 1 and 48", "rate 0.5/s and 4/s"."""
        x1, x2 = sorted(level.value for level in self.between)
        return f"C = {x1:g} and {x2:g}" if self.axis == "C" else f"rate {x1:.3g}/s and {x2:.3g}/s"

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "below": self.below,
            "above": self.above,
            "between": [str(level) for level in self.between],
            "at": round(self.at, 2) if self.placed else None,  # None: somewhere between, not placed
            "axis": self.axis,
            "within_noise": self.noise,
        }


def crossing(x1: float, d1: float, x2: float, d2: float) -> float:
    """Where a difference that is d1 at x1 and d2 at x2 (opposite signs) reaches 0, linearly."""
    return x1 + (x2 - x1) * d1 / (d1 - d2)


def _close(a: Cell, b: Cell) -> bool:
    """Whether two runs' figures at a level cannot be told apart: their repeats' ranges overlap, or (unmeasured
    spread) they differ by less than SAME_BELOW_PCT."""
    if a.median is None or b.median is None:
        return True
    if a.repeats >= 2 and b.repeats >= 2 and None not in (a.low, a.high, b.low, b.high):
        return bool(a.low <= b.high and b.low <= a.high)  # type: ignore[operator]
    scale = max(abs(a.median), abs(b.median)) or 1.0
    return abs(a.median - b.median) / scale * 100 < SAME_BELOW_PCT


def find_crossovers(comparison: Comparison, metric: str = "output_throughput") -> list[Crossover]:
    """Every place where two runs swap places along a level axis, for one metric (see the module's doc)."""
    spec = metric_spec(metric)
    out: list[Crossover] = []
    for a, b in itertools.combinations(comparison.labels, 2):
        for axis in PLOT_AXES:
            points: list[tuple[LevelKey, float, float, bool]] = []  # level, x, difference (a ahead > 0), close
            for level in comparison.levels:
                x = level.level.value
                runs = {r.label: r for r in level.runs}
                if level.level.kind != axis or a not in runs or b not in runs:
                    continue
                ca, cb = runs[a].cells[metric], runs[b].cells[metric]
                if ca.median is None or cb.median is None:
                    continue
                diff = ca.median - cb.median if spec.higher_is_better else cb.median - ca.median
                if diff != 0:
                    points.append((level.level, x, diff, _close(ca, cb)))
            for (l1, x1, d1, n1), (l2, x2, d2, n2) in itertools.pairwise(points):
                if (d1 > 0) == (d2 > 0):
                    continue
                below, above = (a, b) if d1 > 0 else (b, a)
                at = crossing(x1, d1, x2, d2)
                out.append(Crossover(metric, below, above, (l1, l2), at, axis, n1 or n2))
    return out


@dataclass
class SideBySide:
    """The runs (the first is the baseline), their comparison and their crossovers."""

    setups: list[RunSetup]
    comparison: Comparison
    crossovers: list[Crossover] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return self.comparison.labels

    def cells(self, label: str) -> list[tuple[LevelKey, dict[str, Cell]]]:
        """One run's metrics per level it ran: (level, {metric: cell})."""
        out = []
        for level in self.comparison.levels:
            run = next((r for r in level.runs if r.label == label), None)
            if run is not None:
                out.append((level.level, run.cells))
        return out

    def verdicts(self, label: str) -> dict[LevelKey, bool | None]:
        """One run's SLO verdict per level it ran: every repeat met the SLO (None: the run had no SLO)."""
        return {
            level.level: run.slo_met for level in self.comparison.levels for run in level.runs if run.label == label
        }

    def series(self, metric: str) -> dict[str, list[tuple[float, float]]]:
        """Per run: (level value, median) points on the plots' axis, for the plots."""
        out: dict[str, list[tuple[float, float]]] = {label: [] for label in self.labels}
        for level in self.comparison.levels:
            if level.level.kind != self.axis:
                continue
            for run in level.runs:
                median = run.cells[metric].median
                if median is not None:
                    out[run.label].append((level.level.value, median))
        return out

    @property
    def axis(self) -> LevelKind:
        """What the plots are drawn against: the concurrency where any level has one, else the request rate."""
        return "C" if any(lv.level.kind == "C" for lv in self.comparison.levels) else "rate"

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": [s.to_json() for s in self.setups],
            "comparison": self.comparison.as_dict(),
            "crossovers": [c.to_json() for c in self.crossovers],
        }


def side_by_side(runs: Sequence[Sequence[BenchRecord]]) -> SideBySide:
    """Two to four runs (each all the records of one sweep), the first the baseline. Two runs with the same label
    (the same setup measured twice) are told apart by their start time."""
    if not 1 <= len(runs) <= MAX_RUNS:
        raise ValueError(f"pick one to {MAX_RUNS} runs to compare (got {len(runs)})")
    if any(not records for records in runs):
        raise ValueError("a run without records cannot be compared")
    renamed = _distinct_labels(runs)
    comparison = compare_runs(renamed)
    crossovers = [c for metric in crossed_metrics(comparison) for c in find_crossovers(comparison, metric)]
    return SideBySide([run_setup(records) for records in renamed], comparison, crossovers)


def crossed_metrics(comparison: Comparison) -> tuple[str, ...]:
    """The plotted metrics, and goodput when any run has it (it was given an SLO)."""
    has_goodput = any(r.cells[GOODPUT].median is not None for lv in comparison.levels for r in lv.runs)
    return (*PLOTTED, GOODPUT) if has_goodput else PLOTTED


def _distinct_labels(runs: Sequence[Sequence[BenchRecord]]) -> list[list[BenchRecord]]:
    seen: dict[str, int] = {}
    for records in runs:
        seen[records[0].label] = seen.get(records[0].label, 0) + 1
    out = []
    for records in runs:
        label = records[0].label
        if seen[label] > 1:
            when = min(r.started_at for r in records)
            label = f"{label} @{when:%m-%d %H:%M:%S}"
        out.append([r.model_copy(update={"label": label}) for r in records])
    return out


# --- text -----------------------------------------------------------------------------------------------------


def shown_metrics(sbs: SideBySide) -> list[MetricSpec]:
    """The compared metrics that any run has a figure for."""
    return [
        m
        for m in COMPARED_METRICS
        if any(r.cells[m.key].median is not None for lv in sbs.comparison.levels for r in lv.runs)
    ]


def crossover_lines(sbs: SideBySide) -> list[str]:
    """One line per crossing, metric first; a plotted metric where no two runs cross says so."""
    lines = []
    for metric in crossed_metrics(sbs.comparison):
        spec = metric_spec(metric)
        found = [c for c in sbs.crossovers if c.metric == metric]
        if len(sbs.labels) < 2:
            continue
        if not found:
            lines.append(f"{spec.title}: no crossover: the order holds at every level both runs measured")
        for c in found:
            lines.append(f"{spec.title}: {c.text()}")
    return lines


def slo_mark(met: bool | None) -> str:
    return "-" if met is None else ("✔" if met else "✖")


def slo_lines(comparison: Comparison) -> list[str]:
    """The SLO and each run's capacity at it (empty without an SLO)."""
    slo = comparison.slo
    if slo is None:
        return []
    lines = [f"SLO: {slo.text()} ({slo.spec()})"]
    for label in comparison.labels:
        cap = comparison.capacity(label)
        if cap is not None:
            lines.append(f"capacity at the SLO, {label}: {cap.text()}")
    return lines


def slo_markdown(sbs: SideBySide) -> list[str]:
    """The SLO, whether each run met it at each level (✔/✖) and each run's capacity, as Markdown."""
    if sbs.comparison.slo is None:
        return []
    lines = ["", "## SLO", ""] + [f"- {_md(line)}" for line in slo_lines(sbs.comparison)]
    lines += ["", "| level | " + " | ".join(_md(label) for label in sbs.labels) + " |"]
    lines.append("|---|" + ":---:|" * len(sbs.labels))
    for level in sbs.comparison.levels:
        runs = {r.label: r for r in level.runs}
        marks = [slo_mark(runs[label].slo_met) if label in runs else "not run" for label in sbs.labels]
        lines.append(f"| {level.level} | " + " | ".join(marks) + " |")
    return lines


def _md_cell(cell: Cell | None, spec: MetricSpec) -> str:
    if cell is None:
        return "not run"
    delta = delta_text(cell)
    return value_text(cell, spec) + (f" ({delta})" if delta else "")


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(sbs: SideBySide, *, title: str = "Benchmark comparison") -> str:
    """The comparison as Markdown: the runs, one table per metric (levels × runs, deltas against the first run),
    the crossovers and the notes."""
    lines = [f"# {title}", "", f"Baseline: **{_md(sbs.labels[0])}**", ""]
    lines += ["| run | host | setup | SGLang | unit | workload | started (UTC) |", "|---|---|---|---|---|---|---|"]
    for s in sbs.setups:
        row = (s.label, s.host, s.setup, s.version, s.unit_hash or "-", s.workload, f"{s.started_at:%Y-%m-%d %H:%M}")
        lines.append("| " + " | ".join(_md(str(v)) for v in row) + " |")
    lines += slo_markdown(sbs)
    for spec in shown_metrics(sbs):
        lines += ["", f"## {spec.title}" + (f" ({spec.unit})" if spec.unit else ""), ""]
        lines.append("| level | " + " | ".join(_md(label) for label in sbs.labels) + " |")
        lines.append("|---|" + "---:|" * len(sbs.labels))
        for level in sbs.comparison.levels:  # in the keys' order
            cells = [_md_cell(cell, spec) for cell in level.cells(spec.key, sbs.labels)]
            lines.append(f"| {level.level} | " + " | ".join(cells) + " |")
    crossings = crossover_lines(sbs)
    if crossings:
        lines += ["", "## Crossovers", ""] + [f"- {_md(line)}" for line in crossings]
    if sbs.comparison.notes:
        lines += ["", "## Notes", ""] + [f"- {_md(note)}" for note in sbs.comparison.notes]
    lines += [
        "",
        "▲ better / ▼ worse than the baseline in the metric's own direction; noise: inside the repeats' spread.",
    ]
    if sbs.comparison.slo is not None:
        lines.append("✔ the level's percentiles meet the SLO / ✖ they miss it; goodput: requests/s that met it each.")
    return "\n".join(lines) + "\n"
