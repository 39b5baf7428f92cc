"""Comparison of benchmark runs: baseline vs any number of candidates, per level (pure, no I/O, no UI).

For each run and level the repeats (`--repeat N`) give a median and a spread (min..max). Each candidate
metric gets its delta in % against the baseline's median and a verdict in the metric's own direction
(more tokens/s is better, more milliseconds is worse). A delta is "within noise" when the two runs'
min..max ranges over their repeats overlap: the difference is no larger than what repeating the same
setup already produced. With a single repeat on either side the noise is unmeasured (None), and the
table says so rather than pretending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from console.bench.levels import LevelKey
from console.bench.metrics import percentile
from console.bench.records import BenchRecord
from console.bench.slo import Capacity, Slo, capacity

Verdict = Literal["better", "worse", "same", "n/a"]


@dataclass(frozen=True)
class MetricSpec:
    key: str
    title: str
    higher_is_better: bool
    unit: str


# The figures the table shows, in order: throughput first, then latency, then spec and efficiency.
COMPARED_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("output_throughput", "output tok/s", True, "tok/s"),
    MetricSpec("mean_request_output_throughput", "tok/s per request", True, "tok/s"),
    MetricSpec("request_goodput", "goodput", True, "req/s"),  # only runs given an SLO have it
    MetricSpec("median_ttft_ms", "median TTFT", False, "ms"),
    MetricSpec("p99_ttft_ms", "p99 TTFT", False, "ms"),
    MetricSpec("median_tpot_ms", "median TPOT", False, "ms"),
    MetricSpec("p99_tpot_ms", "p99 TPOT", False, "ms"),
    MetricSpec("p99_itl_ms", "p99 ITL", False, "ms"),
    MetricSpec("median_e2e_latency_ms", "median E2E", False, "ms"),
    MetricSpec("accept_length", "accept length", True, ""),
    MetricSpec("tokens_per_joule", "tok/J", True, "tok/J"),
    MetricSpec("failed", "failed", False, ""),
)
# A PD deployment's runs (their records keep each level's figures side by side, BenchRecord.per_side): the sides'
# own figures, shown when a run compared has them.
PD_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("pd_prefill_ttft_ms", "prefill TTFT (prefill servers)", False, "ms"),
    MetricSpec("pd_prefill_ms_smg", "prefill (smg)", False, "ms"),
    MetricSpec("pd_decode_tpot_ms", "decode TPOT (decode servers)", False, "ms"),
    MetricSpec("pd_kv_transfer_ms", "KV transfer", False, "ms"),
    MetricSpec("pd_kv_bootstrap_ms", "KV bootstrap", False, "ms"),
    MetricSpec("pd_failures", "PD failures", False, ""),
)
# Relative differences below this are "same" when no noise was measured (float and timer noise).
SAME_BELOW_PCT = 0.5
# A crossing of two setups is named at a level (C ≈ 30) only when the measured levels around it are at most this
# factor apart. Further apart a straight line between them says nothing about where in between they cross: at
# C = 1 and 48 the line put the Kimi seeds' crossing at C ≈ 6, and they measured it near 30.
PLACED_WITHIN = 2.0


def bracketed(low: float, high: float) -> bool:
    """Whether two measured levels (either order) are close enough to place a crossing between them by a line."""
    low, high = min(low, high), max(low, high)
    return low > 0 and high <= PLACED_WITHIN * low


@dataclass
class Cell:
    """One metric of one run at one level, over its repeats."""

    median: float | None
    low: float | None
    high: float | None
    repeats: int
    delta_pct: float | None = None
    verdict: Verdict = "n/a"
    within_noise: bool | None = None  # None: spread unmeasured (fewer than 2 repeats on a side)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunAtLevel:
    label: str
    cells: dict[str, Cell]
    failed_requests: int
    stopped: str | None
    slo_met: bool | None = None  # every repeat met the SLO's percentiles (None: run without an SLO)
    request_throughput: float | None = None  # median req/s over the repeats (what the level carried)


@dataclass
class LevelComparison:
    level: LevelKey
    runs: list[RunAtLevel]  # baseline first; a run without this level is absent

    def cells(self, metric: str, labels: Sequence[str]) -> list[Cell | None]:
        """The metric's cell of each run in `labels`' order; None for a run that has no such level."""
        by_label = {r.label: r for r in self.runs}
        return [run.cells[metric] if (run := by_label.get(label)) else None for label in labels]


@dataclass
class Comparison:
    baseline: str
    labels: list[str]
    levels: list[LevelComparison]
    notes: list[str] = field(default_factory=list)
    slo: Slo | None = None  # the SLO the runs were judged against (the baseline's, when they differ)
    metrics: tuple[MetricSpec, ...] = COMPARED_METRICS  # the rows, in order (PD_METRICS too where a run has them)

    def capacity(self, label: str) -> Capacity | None:
        """The run's capacity at the SLO: its highest level that met it (None without an SLO)."""
        if self.slo is None:
            return None
        points = []
        for lv in self.levels:
            run = next((r for r in lv.runs if r.label == label), None)
            if run is not None and run.slo_met is not None:
                points.append((str(lv.level), lv.level.value, run.slo_met, run.request_throughput))
        return capacity(points)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "baseline": self.baseline,
            "runs": self.labels,
            "notes": self.notes,
            "levels": [
                {
                    "level": str(lv.level),
                    "runs": [
                        {
                            "label": r.label,
                            "failed_requests": r.failed_requests,
                            "stopped": r.stopped,
                            "metrics": {k: c.as_dict() for k, c in r.cells.items()},
                            **({"slo_met": r.slo_met} if r.slo_met is not None else {}),
                        }
                        for r in lv.runs
                    ],
                }
                for lv in self.levels
            ],
        }
        if self.slo is not None:
            out["slo"] = self.slo.to_json()
            out["capacity"] = {label: cap.to_json() for label in self.labels if (cap := self.capacity(label))}
        return out

    def series(self, metric: str = "output_throughput") -> dict[str, list[tuple[LevelKey, float | None]]]:
        """Per run: (level, median) points, for the plot."""
        out: dict[str, list[tuple[LevelKey, float | None]]] = {label: [] for label in self.labels}
        for lv in self.levels:
            present = {r.label: r for r in lv.runs}
            for label in self.labels:
                run = present.get(label)
                out[label].append((lv.level, run.cells[metric].median if run else None))
        return out


def _cell(values: Sequence[float | None]) -> Cell:
    present = [float(v) for v in values if v is not None]
    if not present:
        return Cell(None, None, None, 0)
    return Cell(percentile(present, 50), min(present), max(present), len(present))


def _judge(base: Cell, cand: Cell, spec: MetricSpec) -> None:
    if base.median is None or cand.median is None:
        return
    diff = cand.median - base.median
    if base.median != 0:
        cand.delta_pct = diff / abs(base.median) * 100.0
    elif diff == 0:
        cand.delta_pct = 0.0
    if base.repeats >= 2 and cand.repeats >= 2:
        assert base.low is not None and base.high is not None and cand.low is not None and cand.high is not None
        cand.within_noise = cand.low <= base.high and base.low <= cand.high
    if diff == 0 or (cand.delta_pct is not None and abs(cand.delta_pct) < SAME_BELOW_PCT):
        cand.verdict = "same"
    else:
        cand.verdict = "better" if (diff > 0) == spec.higher_is_better else "worse"


def compare_runs(runs: Sequence[Sequence[BenchRecord]], metrics: Sequence[MetricSpec] | None = None) -> Comparison:
    """runs[0] is the baseline. Each run is the records of one sweep (all levels, all repeats). `metrics`: the rows
    (default COMPARED_METRICS, and PD_METRICS where a run is a PD deployment's, its records side by side)."""
    if not runs:
        raise ValueError("nothing to compare: give at least one run")
    if metrics is None:
        pd = any(r.per_side for records in runs for r in records)
        metrics = COMPARED_METRICS + (PD_METRICS if pd else ())
    labels: list[str] = []
    for records in runs:
        label = records[0].label if records else "?"
        while label in labels:  # the same label twice (e.g. two files): keep them apart
            label += "'"
        labels.append(label)
    notes: list[str] = []
    workloads = {repr(sorted((r[0].workload or {}).items())) for r in runs if r}
    if len(workloads) > 1:
        notes.append("the runs used different workloads: deltas compare different work")
    keys = sorted({r.level for records in runs for r in records})
    levels = []
    for key in keys:
        present: list[RunAtLevel] = []
        for label, records in zip(labels, runs, strict=True):
            at = [r for r in records if r.level == key]
            if not at:
                continue
            cells = {m.key: _cell([getattr(r, m.key, None) for r in at]) for m in metrics}
            stopped = next((r.stopped for r in at if r.stopped), None)
            verdicts = [r.slo_met for r in at if r.slo_met is not None]
            carried = _cell([r.request_throughput for r in at]).median
            met = all(verdicts) if verdicts else None
            present.append(RunAtLevel(label, cells, sum(r.failed for r in at), stopped, met, carried))
        if present and present[0].label == labels[0]:
            for cand in present[1:]:
                for m in metrics:
                    _judge(present[0].cells[m.key], cand.cells[m.key], m)
        levels.append(LevelComparison(key, present))
    if any(r.failed_requests for lv in levels for r in lv.runs):
        notes.append("some runs had failed requests: their figures cover only the completed ones")
    if all(c.repeats < 2 for lv in levels for r in lv.runs for c in r.cells.values()):
        notes.append("single repeats: run-to-run noise unmeasured (use --repeat 3 to measure it)")
    slo = None
    slos = {repr(sorted((r.slo or {}).items())) for records in runs for r in records if r.slo}
    if slos:
        slo = next((Slo.from_json(r.slo) for records in runs for r in records if r.slo), None)
        if len(slos) > 1:
            notes.append("the runs were judged against different SLOs: ✔/✖ and goodput are each run's own")
        if any(not r.slo for records in runs for r in records):
            notes.append("some runs had no SLO: they have no goodput and no ✔/✖")
    return Comparison(labels[0], labels, levels, notes, slo, tuple(metrics))


def ascii_plot(
    series: dict[str, list[tuple[LevelKey, float | None]]], height: int = 10, column_width: int = 10
) -> list[str]:
    """A text plot of values (e.g. tokens/s) against levels: one marker per run (A, B, C...; '*' where
    runs overlap), y axis from 0 to the maximum. Returns the lines, legend included."""
    markers = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    values = [v for points in series.values() for _, v in points if v is not None]
    if not values:
        return ["(no data)"]
    top = max(values) or 1.0
    levels = next(iter(series.values()))
    width = len(levels) * column_width
    grid = [[" "] * width for _ in range(height)]
    for n, points in enumerate(series.values()):
        for i, (_, v) in enumerate(points):
            if v is None:
                continue
            row = height - 1 - min(height - 1, round(v / top * (height - 1)))
            col = i * column_width + column_width // 2
            grid[row][col] = markers[n % 26] if grid[row][col] == " " else "*"
    label_w = max(len(f"{top:,.0f}"), 1)
    lines = []
    for r, cells in enumerate(grid):
        y = top * (height - 1 - r) / (height - 1)
        axis = f"{y:,.0f}".rjust(label_w) if r in (0, height // 2, height - 1) else " " * label_w
        lines.append(f"{axis} |{''.join(cells).rstrip()}")
    lines.append(" " * label_w + " +" + "-" * width)
    lines.append(" " * (label_w + 2) + "".join(str(level).center(column_width) for level, _ in levels))
    for n, label in enumerate(series):
        lines.append(f"  {markers[n % 26]} = {label}")
    return lines
