"""A running benchmark queue as the console shows it live (pure: the engine's events folded into rows).

One row per level (and repeat) of every queued sweep: waiting, warming up, running (requests done / total, output
tok/s, TTFT and TPOT so far, GPU power), done (the level's own figures), stopped (with why), or not run (with why:
the sweep stopped before it, the operator cancelled, the host failed).

With an SLO (the sweep's, or the profile's [slo] that bench_host gave it: the levels' own figures say so) each row
also has its goodput (requests/s whose own TTFT, TPOT and E2E met the SLO; counted live from the requests when the
sweep carries the SLO, the level's own figure once it is done) and its verdict (✔ the level's percentiles meet the
SLO, ✖ not); `capacity()` is the highest level of a sweep that met it. A sweep that searches its capacity has no
planned levels: each searched rate gets its row as it starts. A sweep shaped from the server's traffic has none
either until the window is observed: ShapeObserved gives its rates (its rows then) and the shape line.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from console.bench.events import (
    ClientPlaced,
    Level,
    LevelDone,
    LevelStarted,
    RequestDone,
    RunningFigures,
    SweepDone,
    SweepStarted,
)
from console.bench.metrics import percentile
from console.bench.present import placement_text
from console.bench.slo import Capacity, Slo, capacity, is_good, request_figures_ms
from console.core.bench import PlannedSweep, ShapeObserved, ShapeObserving, SweepQueued

RowState = Literal["waiting", "warm-up", "running", "done", "stopped", "not run"]
RunState = Literal["running", "finished", "stopped", "cancelled", "failed"]


class TpotSample:
    """The TPOTs of a running level for its median so far: every request's until CAP, then every 2nd, 4th ...
    (a fixed stride, no randomness), so a long level costs neither memory nor a sort of everything per event; the
    median is computed when asked (a repaint), cached until the next value. The level's exact median comes with
    its LevelDone."""

    CAP = 2048

    def __init__(self) -> None:
        self.values: list[float] = []
        self.stride = 1
        self.seen = 0
        self._median: float | None = None
        self._fresh = True

    def add(self, value: float) -> None:
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        self.values.append(value)
        self._fresh = False
        if len(self.values) >= self.CAP:
            self.values = self.values[::2]
            self.stride *= 2

    def median(self) -> float | None:
        if not self.values:
            return None
        if not self._fresh:
            self._median, self._fresh = percentile(self.values, 50), True
        return self._median


@dataclass
class LiveLevel:
    sweep: str  # the queued sweep's label
    level: str  # C=8, rate=2/s
    repeat_index: int
    state: RowState = "waiting"
    planned: int | None = None  # requests planned (None: the level runs for a duration)
    duration_s: float | None = None
    done: int = 0
    failed: int = 0
    elapsed_s: float = 0.0
    output_tok_s: float | None = None
    ttft_ms: float | None = None
    final_tpot_ms: float | None = None  # the level's own median TPOT, once it is done
    power_w: float | None = None
    why: str | None = None
    recorded: bool = False  # the engine finished the level (stopped early or not): its record is in logs/
    tpots: TpotSample = field(default_factory=lambda: TpotSample(), repr=False)
    x: float = 0.0  # where the level lies on its axis (concurrency or request rate): capacity's order
    good: int = 0  # requests so far that met the sweep's SLO (each its own TTFT, TPOT and E2E)
    goodput: float | None = None  # good requests/s: so far, then the level's own request_goodput
    slo_met: bool | None = None  # the level's percentiles meet the SLO (None: not judged, or not done yet)
    slo_misses: tuple[str, ...] = ()
    request_throughput: float | None = None  # requests/s completed (the level's figure, once done)

    @property
    def tpot_ms(self) -> float | None:
        """The level's median TPOT once done, else the median so far (of a sample, see TpotSample)."""
        return self.final_tpot_ms if self.final_tpot_ms is not None else self.tpots.median()

    @property
    def name(self) -> str:
        return self.level + (f" #{self.repeat_index + 1}" if self.repeat_index else "")

    @property
    def progress(self) -> str:
        """`37/64`, `37 in 12 s/60 s` (duration), `-` before it runs."""
        if self.state in ("waiting", "warm-up") or (self.state == "not run" and not self.done):
            return "-"
        if self.planned is not None:
            return f"{self.done}/{self.planned}"
        if self.duration_s is not None and self.state == "running":
            return f"{self.done} in {self.elapsed_s:.0f}/{self.duration_s:g} s"
        return str(self.done)


@dataclass
class LiveBench:
    """Fold BenchEvents (and the queue's SweepQueued) into rows; `state` says how the whole queue ended."""

    host: str
    sweeps: list[PlannedSweep]
    rows: list[LiveLevel] = field(default_factory=list)
    placement: str = ""
    current: str = ""  # the sweep now running
    state: RunState = "running"
    why: str | None = None
    server: str = ""  # version and model, once the first sweep started
    slo: dict[str, float] | None = None  # the SLO the levels are held to (the sweep's, else their records')
    shape: list[str] = field(default_factory=list)  # the window being watched, then the shape seen and its rates
    watching: bool = False  # a shape window is being watched: nothing is sent until it ends

    def __post_init__(self) -> None:
        for sweep in self.sweeps:
            if sweep.shape is None:
                self._plan_rows(sweep, sweep.config.levels())

    def _plan_rows(self, sweep: PlannedSweep, levels: list[Level]) -> None:
        if sweep.config.find_capacity:
            return  # its levels are searched: each gets its row when it starts
        for level in levels:
            for repeat in range(sweep.config.repeat):
                self.rows.append(LiveLevel(sweep.label, level.label, repeat, x=_axis(level)))
        self.slo = next((s.config.slo for s in self.sweeps if s.config.slo), None)
        self._limits = {
            s.label: Slo.from_json(s.config.slo).per_request_ms() for s in self.sweeps if s.config.slo is not None
        }

    @property
    def searching(self) -> bool:
        """Some sweep searches its capacity (its levels are not known before they run)."""
        return any(s.config.find_capacity for s in self.sweeps)

    @property
    def judged(self) -> bool:
        """The levels are held to an SLO: the view shows goodput and the verdicts."""
        return self.slo is not None or any(r.slo_met is not None for r in self.rows)

    def _row(self, level: str, repeat_index: int) -> LiveLevel | None:
        found = (
            r for r in self.rows if r.sweep == self.current and r.level == level and r.repeat_index == repeat_index
        )
        return next(found, None)

    def _searched_row(self, level: Level, repeat_index: int) -> LiveLevel | None:
        """A searched level's row, added when it starts (None for a sweep whose levels were planned)."""
        sweep = next((s for s in self.sweeps if s.label == self.current), None)
        if sweep is None or not sweep.config.find_capacity:
            return None
        row = LiveLevel(self.current, level.label, repeat_index, x=_axis(level))
        self.rows.append(row)
        return row

    def _next_waiting(self) -> LiveLevel | None:
        return next((r for r in self.rows if r.sweep == self.current and r.state == "waiting"), None)

    @property
    def running_row(self) -> LiveLevel | None:
        return next((r for r in self.rows if r.state in ("running", "warm-up")), None)

    def feed(self, event: Any) -> None:
        if isinstance(event, SweepQueued):
            self.current = event.label
        elif isinstance(event, ClientPlaced):
            self.placement = placement_text(event)
        elif isinstance(event, ShapeObserving):
            self.shape, self.watching = [event.text()], True
        elif isinstance(event, ShapeObserved):
            self.shape, self.watching = [event.text(), event.workload_text()], False
            sweep = next((s for s in self.sweeps if s.label == self.current), None)
            if sweep is not None:
                self._plan_rows(sweep, replace(sweep.config, request_rates=list(event.rates)).levels())
        elif isinstance(event, SweepStarted):
            self.server = f"SGLang {event.server_version or '?'} · {event.model}"
            row = self._next_waiting()
            if row is not None:
                row.state = "warm-up"
        elif isinstance(event, LevelStarted):
            row = self._row(event.level.label, event.repeat_index) or self._searched_row(
                event.level, event.repeat_index
            )
            if row is not None:
                row.state, row.planned, row.duration_s = "running", event.planned_requests, event.planned_duration
        elif isinstance(event, RequestDone):
            row = self._row(event.level.label, self._repeat_of(event.level.label))
            if row is not None:
                row.done, row.failed = event.completed, event.failed
                result = event.result
                if result.success and result.output_len > 1:
                    row.tpots.add((result.latency - result.ttft) / (result.output_len - 1) * 1000)
                limits = self._limits.get(row.sweep)
                if limits is not None:
                    figures = request_figures_ms(result.success, result.ttft, result.latency, result.output_len)
                    row.good += is_good(figures, limits)
        elif isinstance(event, RunningFigures):
            row = self._row(event.level.label, self._repeat_of(event.level.label))
            if row is not None:
                row.done, row.failed, row.elapsed_s = event.completed, event.failed, event.elapsed
                row.output_tok_s, row.ttft_ms = event.output_throughput, event.mean_ttft_ms
                if row.sweep in self._limits and event.elapsed > 0:
                    row.goodput = row.good / event.elapsed
        elif isinstance(event, LevelDone):
            self._level_done(event)
        elif isinstance(event, SweepDone):
            self._sweep_done(event)

    def _repeat_of(self, level: str) -> int:
        found = (r for r in self.rows if r.sweep == self.current and r.level == level and r.state == "running")
        running = next(found, None)
        return running.repeat_index if running is not None else 0

    def _level_done(self, event: LevelDone) -> None:
        row = self._row(event.level.label, event.repeat_index)
        if row is None:
            return
        m, t = event.metrics, event.telemetry
        row.done, row.failed = int(m.get("completed", row.done)), int(m.get("failed", row.failed))
        row.output_tok_s = m.get("output_throughput", row.output_tok_s)
        row.ttft_ms = m.get("mean_ttft_ms", row.ttft_ms)
        row.final_tpot_ms = m.get("median_tpot_ms", row.tpot_ms)
        if t.get("mean_power_w") is not None:
            row.power_w = t["mean_power_w"]
        row.request_throughput = m.get("request_throughput", row.request_throughput)
        if m.get("request_goodput") is not None:
            row.goodput = float(m["request_goodput"])
        if m.get("slo_met") is not None:
            row.slo_met, row.slo_misses = bool(m["slo_met"]), tuple(m.get("slo_misses") or ())
            if self.slo is None and isinstance(m.get("slo"), dict):
                self.slo = dict(m["slo"])  # the profile's [slo], which bench_host gave the sweep
        row.state = "stopped" if event.stopped else "done"
        row.why = event.stopped
        row.recorded = True
        if not event.stopped:
            following = self._next_waiting()
            if following is not None:
                following.state = "warm-up"

    def _sweep_done(self, event: SweepDone) -> None:
        if event.stopped is None:
            return
        running = next((r for r in self.rows if r.sweep == self.current and r.state in ("running", "warm-up")), None)
        if running is not None:
            running.state, running.why = "stopped", event.stopped
        for row in self.rows:
            if row.sweep == self.current and row.state == "waiting":
                row.state, row.why = "not run", "the sweep stopped before it"
        self.why = event.stopped  # the queue goes on with its next sweep; finish() says it stopped

    def show_power(self, watts: float | None) -> None:
        """The host's GPU power now (the dashboard's refresh), on the level that runs."""
        row = self.running_row
        if row is not None and row.state == "running" and watts is not None:
            row.power_w = watts

    def finish(self) -> None:
        """The queue returned: every sweep ran (a stopped sweep keeps its state and why)."""
        if self.state == "running":
            self.state = "stopped" if self.why else "finished"
        self._close_open("not run", "the sweep before it stopped early")

    def cancel(self, why: str = "cancelled") -> None:
        """The operator cancelled: the level that ran is stopped, the rest not run; finished levels are kept."""
        self.state, self.why, self.watching = "cancelled", why, False
        self._close_open("stopped", why)

    def fail(self, error: str) -> None:
        self.state, self.why, self.watching = "failed", error, False
        self._close_open("stopped", error)

    def _close_open(self, running_state: RowState, why: str) -> None:
        for row in self.rows:
            if row.state in ("running", "warm-up"):
                row.state, row.why = running_state, why
            elif row.state == "waiting":
                row.state, row.why = "not run", why

    def capacity(self, sweep: str) -> Capacity | None:
        """The sweep's capacity at the SLO: its highest finished level whose every repeat met it (None: its levels
        were not judged)."""
        by_level: dict[str, list[LiveLevel]] = {}
        for row in self.rows:
            if row.sweep == sweep and row.recorded and row.slo_met is not None:
                by_level.setdefault(row.level, []).append(row)
        if not by_level:
            return None
        return capacity(
            (level, rows[0].x, all(r.slo_met for r in rows), min((r.request_throughput or 0.0) for r in rows))
            for level, rows in by_level.items()
        )

    @property
    def last_judged(self) -> LiveLevel | None:
        """The level finished last that was held to the SLO (the dashboard's mark says its verdict)."""
        return next((r for r in reversed(self.rows) if r.recorded and r.slo_met is not None), None)

    @property
    def finished_levels(self) -> int:
        """Levels whose records went to logs/ (a cancelled or cut level has none)."""
        return sum(1 for r in self.rows if r.recorded)


def _axis(level: Level) -> float:
    return float(level.request_rate if level.request_rate is not None else level.concurrency or 0)
