"""`opsconsole tune`: find the best speculative setup for the operator's traffic — search, benchmark, recommend,
and never leave the host broken.

    pending = await plan_tune(session, request)      # holds the unit's lock (UnitLocked), reads unit + version,
    show(pending.space)                              #   builds the space: candidates, pruned, merged; changes nothing
    result = await pending.execute(on_event=sink)    # or: await pending.abort("not confirmed")
    pending.request_abort("why")                     # from another task (Ctrl-C): the original unit goes back

What execute() does:
1. The space (console/core/tune/space.py): every point checked with the host's SGLang version's rules against
   the unit as it is; refused points are pruned with SGLang's reason, points SGLang would silently turn into
   another are merged. Each candidate's unit = the original unit with its edits.
2. The search (console/core/tune/search.py) asks for stages of runs. Each run is one trial: the candidate's unit
   through the validated apply path (console.core.apply: plan_apply(unit_text=..., lock_held=True) ->
   execute: write, daemon-reload, restart, phases, health, verify; a failed start is rolled back by it, and
   the trial is recorded as failed and skipped), then a benchmark of the cells the search wants from it
   (console.core.bench.bench_host, records appended to logs/ as usual, labelled `<tune label>/<candidate>/
   <workload>/s<stage>`). A benchmark whose requests failed (a dropped link) is run again once the server
   answers.
3. The conclusions (console/core/tune/report.py): per cell the best setup with its margin and whether it is
   within the noise, the crossovers, the optimistic vs realistic workloads.
4. Afterwards the original unit text is written back through the same validated path (or, with apply_best,
   the recommended candidate's unit), and the host's health is checked.

The unit's lock is held from plan_tune() to the end of execute() (one outer hold; each trial's apply runs
with lock_held=True), so a second tune or apply on the same unit is refused at once. Where the host supports
it (systemd hosts: console/host/systemd.py SystemdService.guard) the hold is a restore-on-exit guard: the host
keeps a copy of the original unit, and if the console's connection goes away without the tune disarming the
guard (the console died, or the link stayed down) and no new connection of this tune claims it within
`restore_after_s`, the host writes the original unit back and restarts the service itself. Ctrl-C is an
intent (request_abort): the running apply rolls back, a running benchmark stops, and the original goes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import statistics
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from console import hints
from console.bench.engine import SweepConfig
from console.bench.events import BenchEvent
from console.bench.records import BenchRecord
from console.bench.slo import Capacity, Slo
from console.bench.workloads import DatasetSample, WorkloadSpec
from console.core.apply import RestartCost, default_owner, known_restart_cost
from console.core.change import ApplyState
from console.core.events import ApplyEvent, EventSink, Notice, Reconnecting, ignore
from console.core.session import Session
from console.core.tune.conclusions import Conclusions, best_setup, conclude
from console.core.tune.host import FINAL_HEALTH_WAIT_S, TuneHost, TuneTarget
from console.core.tune.predict import predict_untried
from console.core.tune.report import (
    OBJECTIVES,
    Crossover,
    Objective,
    Recommendation,
    WorkloadSide,
    crossover_summary,
    score_of,
    standing_json,
)
from console.core.tune.search import Cell, Policy, Search, Stage, StageKind, Strategy, cells_for
from console.core.tune.space import Candidate, Space, SpaceRequest, build_space
from console.core.tune.timing import Pace, request_seconds, tune_seconds
from console.errors import UsageError
from console.host.base import HostError

if TYPE_CHECKING:
    from console.core.roll import DeploymentEvent

FinalUnit = Literal["original", "best"]
# How long the host waits for a console that went away before it restores the original unit (guarded hosts).
DEFAULT_RESTORE_AFTER_S = 30.0
# A benchmark whose requests failed is run again (after the server answers) at most this many times.
BENCH_RETRIES = 2
# Bench metrics kept per level in the result (medians over the runs the figure comes from).
LEVEL_METRICS = (
    "output_throughput",
    "mean_request_output_throughput",
    "median_ttft_ms",
    "median_tpot_ms",
    "p99_itl_ms",
    "accept_length",
    "completed",
    "failed",
    "request_throughput",
    "request_goodput",
    "slo_attainment",
)


def _now() -> datetime:
    return datetime.now(UTC)


# --- the request --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TuneRequest:
    space: SpaceRequest
    concurrencies: tuple[int, ...]
    workloads: tuple[str, ...] = ("random",)
    duration_s: float = 60.0  # per level for a full run; screening runs a quarter of it
    repeats: int = 2
    input_len: int = 1024
    output_len: int = 256
    api: str = "generate"
    warmup: int = 2
    seed: int = 1
    request_timeout_s: float = 600.0
    budget_s: float | None = None
    apply_best: bool = False
    best_at: int | None = None  # the concurrency whose winner --apply-best applies (default: most levels won)
    strategy: Strategy = "halving"
    timeout_s: float = 900.0  # for each start
    label: str | None = None
    restore_after_s: float = DEFAULT_RESTORE_AFTER_S
    # The operator's traffic and what "best" means (console.core.tune.report): the objective ranks each level's
    # setups by output tok/s, goodput (req/s within the SLO) or capacity (req/s carried while meeting the SLO).
    objective: Objective = "throughput"
    slo: dict[str, float] | None = None  # console.bench.slo.Slo.to_json(); None: the profile's [slo], if any
    dataset: DatasetSample | None = None  # the sample the `dataset` workload sends
    long_prompts: str = "skip"

    def policy(self) -> Policy:
        return Policy(strategy=self.strategy, repeats=self.repeats)

    def cells(self) -> list[Cell]:
        return cells_for(self.workloads, self.concurrencies)

    def workload_spec(self, workload: str) -> WorkloadSpec:
        """What the tune benchmarks for one of its workloads (its records' `workload` is this spec's describe())."""
        return WorkloadSpec(
            name=workload,  # type: ignore[arg-type]
            api=self.api,  # type: ignore[arg-type]
            input_len=self.input_len,
            output_len=self.output_len,
            seed=self.seed,
            dataset=self.dataset if workload == "dataset" else None,
        )


# --- events -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialRef:
    """One trial: a candidate's unit started once, then benchmarked on `cells`."""

    number: int  # 1, 2, ... in the order trials ran
    candidate: str  # key
    name: str
    stage: int
    kind: StageKind
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class TuneStarted:
    space: Space
    cells: tuple[Cell, ...]
    strategy: Strategy
    guarded: bool  # the host restores the original unit by itself if this console goes away
    at: datetime
    objective: str = "throughput"  # what the standings' figures are: output tok/s, goodput or capacity (req/s)


@dataclass(frozen=True)
class StageStarted:
    stage: int
    kind: StageKind
    runs: tuple[str, ...]  # candidate names, in order
    cells: tuple[Cell, ...]  # the cells this stage measures
    estimate_s: float | None
    at: datetime


@dataclass(frozen=True)
class TrialStarted:
    trial: TrialRef
    at: datetime


@dataclass(frozen=True)
class TrialApplyEvent:
    """The trial's apply (write, restart, phases, health, verify, rollback) as console.core.events reports it; on a
    deployment, its change's steps and members' events (console.core.roll's DeploymentEvent)."""

    trial: TrialRef
    event: ApplyEvent | DeploymentEvent


@dataclass(frozen=True)
class TrialApplied:
    trial: TrialRef
    state: ApplyState  # verified, or unchanged (the host already ran this unit)
    restarted: bool
    at: datetime


@dataclass(frozen=True)
class TrialBenchEvent:
    """The trial's benchmark as console.bench.events reports it (levels, running figures, requests)."""

    trial: TrialRef
    workload: str
    event: BenchEvent


@dataclass(frozen=True)
class TrialBenchmarked:
    trial: TrialRef
    figures: tuple[tuple[Cell, float], ...]  # output tokens/s per cell (median over this trial's repeats)
    labels: tuple[str, ...]  # the bench records' labels (opsconsole compare LABEL)
    at: datetime
    scores: tuple[tuple[Cell, float], ...] = ()  # the objective's figure per cell (= figures for throughput)


@dataclass(frozen=True)
class TrialFailed:
    trial: TrialRef
    reason: str
    rolled_back: bool
    journal: tuple[str, ...]  # the lines that explain a failed start
    at: datetime


@dataclass(frozen=True)
class TrialSkipped:
    trial: TrialRef
    reason: str
    at: datetime


@dataclass(frozen=True)
class LevelProgress:
    """Where one cell stands after a trial: every measured candidate (best first), who is still in, the leader's
    margin and whether the cell is decided."""

    cell: Cell
    standings: tuple[tuple[str, float, float, float, StageKind], ...]  # (name, median, low, high, measured by)
    alive: tuple[str, ...]
    leader: str | None
    margin_pct: float | None
    within_noise: bool
    decided: bool


@dataclass(frozen=True)
class SetupsPredicted:
    """Strategy predict, after a stage: each untried setup's predicted output tok/s per cell (low, value, high; none
    for a setup the prediction cannot place), and which of them can still win (the next trial is the likeliest)."""

    stage: int
    forecasts: tuple[tuple[str, tuple[tuple[Cell, float, float, float], ...]], ...]  # (name, per cell)
    can_win: tuple[str, ...]
    cannot_win: tuple[str, ...]
    unplaced: tuple[str, ...]  # names the prediction cannot place (a draft never measured): they count as able to win
    at: datetime


@dataclass(frozen=True)
class Restoring:
    target: FinalUnit
    name: str  # "the original unit" or the best candidate's name
    at: datetime


@dataclass(frozen=True)
class TuneFinished:
    final_unit: FinalUnit | None
    host_healthy: bool
    stopped: str | None
    at: datetime


TuneEvent = (
    TuneStarted
    | StageStarted
    | TrialStarted
    | TrialApplyEvent
    | TrialApplied
    | TrialBenchEvent
    | TrialBenchmarked
    | TrialFailed
    | TrialSkipped
    | LevelProgress
    | SetupsPredicted
    | Restoring
    | TuneFinished
    | Reconnecting
    | Notice
)

# --- the result ---------------------------------------------------------------------------------------------

TrialState = Literal["benchmarked", "failed", "mismatch", "skipped", "not_run"]


@dataclass
class TrialRecord:
    """One candidate over the whole tune: how far it got and what it measured."""

    candidate: Candidate
    state: TrialState = "not_run"
    error: str | None = None
    labels: list[str] = field(default_factory=list)
    starts: int = 0  # how many times its unit was started
    journal: list[str] = field(default_factory=list)


@dataclass
class TuneResult:
    target: str
    unit: str
    sglang_version: str
    strategy: Strategy
    space: Space
    cells: list[Cell]
    trials: list[TrialRecord]
    search: Search
    metrics: dict[tuple[str, Cell, StageKind], list[dict[str, Any]]]
    recommendations: list[Recommendation] = field(default_factory=list)
    crossovers: list[Crossover] = field(default_factory=list)
    workload_sides: list[WorkloadSide] = field(default_factory=list)
    final_unit: FinalUnit | None = None
    host_healthy: bool = False
    stopped: str | None = None  # why the search ended early (budget, interrupted, host trouble), else None
    error: str | None = None
    guarded: bool = False
    elapsed_s: float = 0.0
    restarts: int = 0
    bench_s: float = 0.0
    label: str = ""
    objective: Objective = "throughput"
    slo: Slo | None = None
    capacities: dict[str, dict[str, Capacity]] = field(default_factory=dict)  # workload -> setup name -> capacity
    verdicts: list[str] = field(default_factory=list)  # where speculation loses on this traffic (tune_report)

    @property
    def ok(self) -> bool:
        return self.host_healthy and self.final_unit is not None and self.error is None and bool(self.recommendations)

    def level_metrics(self, candidate: str, cell: Cell) -> dict[str, Any] | None:
        standing = self.search.standing(candidate, cell)
        if standing is None:
            return None
        runs = self.metrics.get((candidate, cell, standing.kind), [])
        out: dict[str, Any] = {"workload": cell.workload, "concurrency": cell.concurrency}
        for key in LEVEL_METRICS:
            values = [float(r[key]) for r in runs if r.get(key) is not None]
            out[key] = round(statistics.median(values), 3) if values else None
        if self.objective == "throughput":
            out["output_throughput"] = round(standing.median, 2)
        out["score"] = round(standing.median, 3)
        verdicts = [r.get("slo_met") for r in runs if r.get("slo_met") is not None]
        out["slo_met"] = all(verdicts) if verdicts else None
        figures = standing_json(standing) or {}
        out["low"], out["high"] = figures.get("low"), figures.get("high")
        out["samples"], out["measured_by"] = standing.samples, standing.kind
        return out

    def summary(self, workload: str) -> str:
        return crossover_summary(self.recommendations, self.crossovers, workload)

    def to_json(self) -> dict[str, Any]:
        """`tune --json`: the issue's keys (trials, pruned, recommendations, final_unit, host_healthy) plus the
        crossovers, the workloads side by side and what the run was (docs/tune.md)."""
        return {
            "trials": [
                {
                    "config": dict(t.candidate.config),
                    "state": t.state,
                    "levels": [m for m in (self.level_metrics(t.candidate.key, c) for c in self.cells) if m],
                    "name": t.candidate.name,
                    "error": t.error,
                    "journal": list(t.journal),
                    "labels": list(t.labels),
                }
                for t in self.trials
            ],
            "pruned": [p.to_json() for p in self.space.pruned],
            "merged": [
                {"config": m.setting.requested_config(), "into": m.into_name, "reason": m.reason}
                for m in self.space.merged
            ],
            "recommendations": [r.to_json() for r in self.recommendations],
            "objective": self.objective,
            "slo": self.slo.to_json() if self.slo else None,
            "capacity": {w: {name: c.to_json() for name, c in caps.items()} for w, caps in self.capacities.items()},
            "speculation": list(self.verdicts),
            "crossovers": [c.to_json() for c in self.crossovers],
            "summary": {w: self.summary(w) for w in dict.fromkeys(c.workload for c in self.cells)},
            "workloads": [s.to_json() for s in self.workload_sides],
            "final_unit": self.final_unit,
            "host_healthy": self.host_healthy,
            "target": self.target,
            "unit": self.unit,
            "sglang_version": self.sglang_version,
            "strategy": self.strategy,
            "stopped": self.stopped,
            "error": self.error,
            "guarded": self.guarded,
            "elapsed_s": round(self.elapsed_s, 1),
            "restarts": self.restarts,
            "label": self.label,
        }


# --- holding the unit -----------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _hold(session: Session, owner: str, restore_after_s: float) -> AsyncIterator[Any]:
    """The unit's lock for the whole tune: a restore-on-exit guard where the host offers one, else the lock.
    Yields the guard handle (disarm() when the tune put the unit where it wants it), or None."""
    guard = session.service.guard(owner, grace_s=restore_after_s)
    if guard is None:
        async with session.service.lock(owner):
            yield None
        return
    async with guard as handle:
        yield handle


def _label_prefix(request: TuneRequest, now: datetime) -> str:
    base = request.label or f"tune-{now:%Y%m%d-%H%M%S}"
    return re.sub(r"\s+", "-", base.strip())


# --- the operation ------------------------------------------------------------------------------------------


class PendingTune:
    """A planned tune that holds the unit's lock until it is executed or aborted (leaving it without either
    aborts: nothing was changed)."""

    def __init__(
        self,
        target: TuneTarget,
        request: TuneRequest,
        space: Space,
        original_text: str,
        hold: AsyncExitStack,
        guard: Any,
        owner: str,
    ) -> None:
        self.target = target  # a host (TuneHost) or a deployment (console.core.tune.deployment)
        self.request = request
        self.space = space
        self._original = original_text  # the unit the space was built from (a deployment's reference member's)
        self._hold = hold
        self._guard = guard
        self._owner = owner
        self._abort_reason: str | None = None
        self._abort = asyncio.Event()
        self._bench_task: asyncio.Task[Any] | None = None
        self._emit: EventSink[TuneEvent] = ignore
        self._finished = False
        # What a restart of the host costs (its recent ones, else the server's own account), for the estimate:
        # the plan reads it.
        self.restart_cost: RestartCost | None = None
        if target is not None:  # None: a plan replayed for its estimate alone (tests/sim/test_real_0517_tune.py)
            target.bind(
                lambda: (self._abort_reason or "interrupted") if self.abort_requested else None,
                lambda event: self._emit(event),
            )

    @property
    def host(self) -> TuneTarget:
        return self.target

    @property
    def guarded(self) -> bool:
        return self._guard is not None or (self.target is not None and self.target.guarded)

    @property
    def running(self) -> str | None:
        """The candidate the host runs now (its unit is the original, byte for byte), else None."""
        return next((c.key for c in self.space.candidates if c.unit_text == self._original), None)

    def estimate_s(self, restart_s: float) -> float:
        """About how long the tune takes for a start of restart_s (the operator sees it before confirming): the
        starts and the levels it runs, each as the tune runs it (console/core/tune/timing.py)."""
        request = self.request
        return tune_seconds(
            [c.key for c in self.space.candidates],
            request.cells(),
            request.policy(),
            running=self.running,
            duration_s=request.duration_s,
            warmup=request.warmup,
            request_s=request_seconds(request.output_len),
            restart_s=restart_s,
        )

    def request_abort(self, why: str = "interrupted") -> None:
        """Stop at the next step (from another task): a start in progress is rolled back, a benchmark stops, and
        the original unit goes back. Honoured at once; the restore still runs."""
        if self._abort_reason is None:
            self._abort_reason = why
            self._abort.set()
            self.host.request_abort(why)
            if self._bench_task is not None:
                self._bench_task.cancel()

    @property
    def abort_requested(self) -> bool:
        return self._abort.is_set()

    async def abort(self, why: str = "not confirmed; nothing was changed") -> None:
        """Give the lock back without running anything (the host's guard disarmed first: nothing to restore)."""
        if self._finished:
            return
        self._finished = True
        try:
            await _disarm(self._guard)
        finally:
            await self._hold.aclose()

    async def __aenter__(self) -> PendingTune:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._finished:
            await self.abort("the tune was left without being executed; nothing was changed")

    async def execute(self, on_event: EventSink[TuneEvent] = ignore) -> TuneResult:
        self._emit = on_event
        try:
            return await _TuneRun(self).run()
        finally:
            self._finished = True
            await self._hold.aclose()


class _TuneRun:
    """One execution of a planned tune: the stages and their trials (each a unit applied, then benchmarked), then
    the conclusions (conclusions.py) and the unit put back. What is done on the host is the pending tune's TuneHost
    (host.py); the time it keeps to, a Pace (timing.py)."""

    def __init__(self, pending: PendingTune) -> None:
        self.p = pending
        self.host = pending.target
        self.request = pending.request
        self.space = pending.space
        cells = pending.request.cells()
        self.search = Search([c.key for c in pending.space.candidates], cells, pending.request.policy())
        self.trials = {c.key: TrialRecord(c) for c in pending.space.candidates}
        self.metrics: dict[tuple[str, Cell, StageKind], list[dict[str, Any]]] = {}
        started = _now()
        self.label = _label_prefix(pending.request, started)
        self.result = TuneResult(
            target=self.host.label,
            unit=self.host.unit,
            sglang_version=pending.space.sglang_version,
            strategy=pending.request.strategy,
            space=pending.space,
            cells=cells,
            trials=list(self.trials.values()),
            search=self.search,
            metrics=self.metrics,
            guarded=pending.guarded,
            label=self.label,
            objective=pending.request.objective,
            slo=Slo.from_json(pending.request.slo) if pending.request.slo else None,
        )
        self.trial_number = 0
        self.pace = Pace(pending.request.duration_s)
        self.conclusions = Conclusions()  # once the search has ended
        self.running: str | None = pending.running
        self.host_broken = False
        self.records: list[BenchRecord] = []  # every clean level this tune measured (strategy predict refits on them)

    def emit(self, event: TuneEvent) -> None:
        self.p._emit(event)

    # -- the run ---------------------------------------------------------------------------------------------

    async def run(self) -> TuneResult:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        self.emit(
            TuneStarted(
                self.space,
                tuple(self.search.cells),
                self.request.strategy,
                self.p.guarded,
                _now(),
                self.request.objective,
            )
        )
        try:
            await self._search(t0)
        except asyncio.CancelledError:
            # The task itself was cancelled (the console closing): the original goes back before it ends.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.p.request_abort("interrupted")
        except Exception as exc:  # a bug must not leave a trial unit behind: restore, then report
            self.result.error = self.host.mask(f"unexpected error: {type(exc).__name__}: {exc}")
            self.search.stop("error")
        if self.p.abort_requested:
            self.result.stopped = self.p._abort_reason
        elif self._restored_by_host():
            self.result.stopped = self._restored_by_host()
        elif self.search.stop_reason in ("budget", "error") or self.host_broken:
            self.result.stopped = self.search.stop_reason
        self._conclude()
        await self._finish()
        self.result.elapsed_s = loop.time() - t0
        self.emit(TuneFinished(self.result.final_unit, self.result.host_healthy, self.result.stopped, _now()))
        return self.result

    def _restored_by_host(self) -> str | None:
        """Set when the host's guard gave the original unit back by itself (this console was away too long)."""
        restored = getattr(self.p._guard, "restored_at", None)
        if restored:
            return (
                f"the host restored the original unit by itself at {restored} (this console's connection was gone "
                f"longer than --restore-after {self.request.restore_after_s:g} s)"
            )
        return None

    async def _search(self, t0: float) -> None:
        loop = asyncio.get_running_loop()
        while not self.p.abort_requested and not self.host_broken and not self._restored_by_host():
            stage = self.search.next_stage(self.running)
            if stage is None:
                return
            estimate = self.pace.stage_s(stage, self.running)
            cells = tuple(dict.fromkeys(cell for run in stage.runs for cell in run.cells))
            names = tuple(self.space.candidate(run.candidate).name for run in stage.runs)
            self.emit(StageStarted(stage.index, stage.kind, names, cells, estimate, _now()))
            for run in stage.runs:
                trial = self._trial_ref(run.candidate, stage, run.cells)
                restored = self._restored_by_host()
                if self.p.abort_requested or self.host_broken or restored:
                    self._skip(trial, self.p._abort_reason or restored or "the host is not healthy")
                    continue
                if self._over_budget(stage, run.candidate, loop.time() - t0):
                    self.search.stop("budget")
                    self._skip(trial, "the time budget is spent")
                    continue
                await self._trial(trial, stage)
            self.search.finish_stage()
            if self.search.stop_reason == "budget":
                return
            if self.request.strategy == "predict":
                self._refit(stage.index)

    def _over_budget(self, stage: Stage, candidate: str, elapsed: float) -> bool:
        budget = self.request.budget_s
        return budget is not None and self.pace.over_budget(
            stage, candidate, running=self.running, elapsed=elapsed, budget_s=budget
        )

    def _trial_ref(self, candidate: str, stage: Stage, cells: tuple[Cell, ...]) -> TrialRef:
        self.trial_number += 1
        name = self.space.candidate(candidate).name
        return TrialRef(self.trial_number, candidate, name, stage.index, stage.kind, cells)

    def _skip(self, trial: TrialRef, reason: str) -> None:
        record = self.trials[trial.candidate]
        if record.state == "not_run":
            record.state = "skipped"
            record.error = reason
        self.emit(TrialSkipped(trial, reason, _now()))

    # -- one trial ------------------------------------------------------------------------------------------

    async def _trial(self, trial: TrialRef, stage: Stage) -> None:
        record = self.trials[trial.candidate]
        candidate = self.space.candidate(trial.candidate)
        self.emit(TrialStarted(trial, _now()))
        loop = asyncio.get_running_loop()
        t = loop.time()
        try:
            applied = await self.host.apply(candidate, lambda e: self.emit(TrialApplyEvent(trial, e)))
        except HostError as exc:
            reason = self.host.mask(f"could not apply: {exc}")
            self._fail(trial, reason, rolled_back=False, journal=[])
            self.host_broken = not await self.host.healthy()
            return
        state = applied.state
        restarted = state is not ApplyState.UNCHANGED
        if restarted:
            record.starts += 1
            self.result.restarts += 1
        if state in (ApplyState.VERIFIED, ApplyState.UNCHANGED):
            if state is ApplyState.VERIFIED:
                self.pace.starts.append(loop.time() - t)
            elif not await self.host.healthy() and not await self._restart_in_place(trial):
                return
            self.running = candidate.key
            self.emit(TrialApplied(trial, state, restarted, _now()))
            await self._bench(trial, stage, candidate, settle=restarted)
            return
        if state is ApplyState.ABORTED:
            self._skip(trial, applied.error or "interrupted")
            return
        if state is ApplyState.REFUSED:
            # Nothing was written anywhere (a deployment's members would not match on this setup): what ran still
            # runs; not a setup this target can run.
            self._fail(trial, applied.error or "refused", rolled_back=False, journal=[])
            return
        if state is ApplyState.MISMATCH:
            # Healthy, but the server resolved other values than the rules predicted: not the setup under test.
            self.running = None
            record.state = "mismatch"
            reason = applied.error or "the server resolved other values than predicted"
            self.search.drop(candidate.key, reason)
            record.error = reason
            self.emit(TrialFailed(trial, reason, False, (), _now()))
            return
        journal = list(applied.journal)
        if self.p.abort_requested and state is ApplyState.HEALTHY_ON_OLD:
            # Interrupted while it started: rolled back, and not a verdict on the setup.
            self._skip(trial, f"{self.p._abort_reason}: its start was rolled back")
            return
        self._fail(trial, applied.error or state.value, rolled_back=applied.rolled_back, journal=journal)
        if state is not ApplyState.HEALTHY_ON_OLD:
            # The old unit did not come back either (or nothing could be written): stop searching, restore.
            self.running = None
            self.host_broken = not await self.host.healthy()

    def _fail(self, trial: TrialRef, reason: str, *, rolled_back: bool, journal: list[str]) -> None:
        record = self.trials[trial.candidate]
        record.state = "failed"
        record.error = reason
        record.journal = list(journal)
        self.search.drop(trial.candidate, reason)
        self.emit(TrialFailed(trial, reason, rolled_back, tuple(journal), _now()))

    async def _restart_in_place(self, trial: TrialRef) -> bool:
        """The unit is already this candidate's but the server is not healthy: restart it (no edits)."""
        result = await self.host.restart(lambda e: self.emit(TrialApplyEvent(trial, e)))
        if result.state in (ApplyState.VERIFIED, ApplyState.MISMATCH):
            self.result.restarts += 1
            return True
        self._fail(trial, result.error or result.state.value, rolled_back=False, journal=list(result.journal))
        self.host_broken = True
        return False

    # -- benchmarks -----------------------------------------------------------------------------------------

    async def _bench(self, trial: TrialRef, stage: Stage, candidate: Candidate, *, settle: bool = False) -> None:
        """The trial's benchmarks; right after its start (`settle`) each level warms until its round time settles (the
        first run after a restart ran 5-17 % slow on a real GPU server when it did not: console.bench.engine)."""
        record = self.trials[trial.candidate]
        record.state = "benchmarked"
        figures: list[tuple[Cell, float]] = []
        scores: list[tuple[Cell, float]] = []
        labels: list[str] = []
        for workload in dict.fromkeys(cell.workload for cell in trial.cells):
            cells = [c for c in trial.cells if c.workload == workload]
            label = f"{self.label}/{candidate.key}/{workload}/s{stage.index}"
            records = await self._bench_workload(trial, stage, workload, cells, label, settle=settle)
            if records is None:
                return  # interrupted
            labels.append(label)
            record.labels.append(label)
            for cell in cells:
                mine = [r for r in records if r.max_concurrency == cell.concurrency]
                good = [r for r in mine if not r.failed and not r.stopped and r.completed]
                if not good:
                    self.search.drop_cell(candidate.key, cell)
                    self.emit(Notice(f"{candidate.name}: no clean benchmark at {cell.label}; left out there"))
                    continue
                self.records.extend(good)
                for r in good:
                    self.search.record(candidate.key, cell, stage.kind, score_of(r, self.request.objective))
                    self.metrics.setdefault((candidate.key, cell, stage.kind), []).append(r.model_dump())
                figures.append((cell, statistics.median(r.output_throughput for r in good)))
                scores.append((cell, statistics.median(score_of(r, self.request.objective) for r in good)))
        self.emit(TrialBenchmarked(trial, tuple(figures), tuple(labels), _now(), tuple(scores)))
        for cell in trial.cells:
            self._progress(cell)

    async def _bench_workload(
        self, trial: TrialRef, stage: Stage, workload: str, cells: list[Cell], label: str, *, settle: bool = False
    ) -> list[BenchRecord] | None:
        req = self.request
        config = SweepConfig(
            workload=req.workload_spec(workload),
            slo=req.slo,
            long_prompts="error" if req.long_prompts == "error" else "skip",
            concurrencies=[c.concurrency for c in cells],
            duration=req.duration_s * stage.duration_fraction,
            warmup=req.warmup,
            warmup_settle=settle,
            repeat=stage.repeats,
            request_timeout=req.request_timeout_s,
            time_cap=max(3600.0, req.duration_s * stage.repeats * len(cells) * 4),
        )
        loop = asyncio.get_running_loop()
        records: list[BenchRecord] = []
        for attempt in range(BENCH_RETRIES + 1):
            if self.p.abort_requested:
                return None
            run_label = label if attempt == 0 else f"{label}/retry{attempt}"
            t = loop.time()
            task = asyncio.ensure_future(
                self.host.bench(config, run_label, lambda e: self.emit(TrialBenchEvent(trial, workload, e)))
            )
            self.p._bench_task = task
            try:
                records = await task
            except asyncio.CancelledError:
                if self.p.abort_requested and task.cancelled():
                    return None  # request_abort() stopped it: the finished levels are in logs/ already
                raise
            except (HostError, OSError) as exc:
                self.emit(Notice(self.host.mask(f"{trial.name}: the benchmark failed: {exc}")))
                records = []
            finally:
                self.p._bench_task = None
            self.result.bench_s += loop.time() - t
            clean = records and all(not r.failed and not r.stopped for r in records)
            if clean:
                if stage.duration_fraction == 1.0:
                    self.pace.levels.append((loop.time() - t) / max(1, len(records)))
                return records
            if attempt < BENCH_RETRIES:
                self.emit(Notice(f"{trial.name}: requests failed during the benchmark; running it again"))
                if not await self.host.wait_healthy():
                    return records
        return records

    def _refit(self, stage: int) -> None:
        """Strategy predict: the untried setups predicted again from every level this tune measured (console.core
        .predict: the same model as `opsconsole predict`), for the search to pick the next trial or stop."""
        forecasts, shown = predict_untried(self.records, self.space.candidates, self.search.cells, self.search.tried())
        self.search.predicted(forecasts)
        can = self.search.can_win()
        names = {c.key: c.name for c in self.space.candidates}
        self.emit(
            SetupsPredicted(
                stage,
                tuple((names[key], cells) for key, cells in shown.items()),
                tuple(names[k] for k in can),
                tuple(names[k] for k in forecasts if k not in can and forecasts[k] is not None),
                tuple(names[k] for k, f in forecasts.items() if f is None),
                _now(),
            )
        )

    def _progress(self, cell: Cell) -> None:
        decision = self.search.decision(cell)
        names = {c.key: c.name for c in self.space.candidates}
        standings = tuple((names[s.candidate], s.median, s.low, s.high, s.kind) for s in self.search.standings(cell))
        self.emit(
            LevelProgress(
                cell,
                standings,
                tuple(names[k] for k in self.search.alive(cell)),
                names[decision.winner.candidate] if decision.winner else None,
                decision.margin_pct,
                decision.within_noise,
                decision.decided,
            )
        )

    # -- conclusions and the end --------------------------------------------------------------------------

    def _conclude(self) -> None:
        found = conclude(
            self.search, self.space.candidates, self.metrics, objective=self.request.objective,
            slo=bool(self.request.slo),
        )  # fmt: skip
        self.conclusions = found
        self.result.recommendations = found.recommendations
        self.result.capacities = found.capacities
        self.result.verdicts = found.verdicts
        self.result.crossovers = found.crossovers
        self.result.workload_sides = found.workload_sides

    async def _finish(self) -> None:
        """Put the original unit back (or the best one), check the server, then let the host's guard go."""
        if self._restored_by_host():
            # The host put the original back and let go of the lock: touch nothing more, say where it stands.
            self.result.host_healthy = await self.host.wait_healthy(FINAL_HEALTH_WAIT_S, interruptible=False)
            if await self.host.runs_original():
                self.result.final_unit = "original"
            return
        best = None
        if self.request.apply_best and not self.p.abort_requested:
            best = best_setup(
                self.conclusions, self.space.candidates, objective=self.request.objective,
                best_at=self.request.best_at,
            )  # fmt: skip
        target: FinalUnit = "best" if best is not None else "original"
        self.emit(Restoring(target, best.name if best else "the original unit", _now()))
        trial = TrialRef(self.trial_number + 1, best.key if best else "original", "restore", -1, "full", ())
        placed = await self._place(best, trial)
        if not placed and best is not None:
            self.emit(Notice(f"{best.name} did not come back up; putting the original unit back"))
            target = "original"
            placed = await self._place(None, trial)
        self.result.host_healthy = await self.host.wait_healthy(FINAL_HEALTH_WAIT_S, interruptible=False)
        if placed:
            self.result.final_unit = target
        else:
            self.result.error = self.result.error or "the unit could not be put back; see the host's unit backups"
        if placed and self.result.host_healthy and self.p._guard is not None:
            try:
                await self.p._guard.disarm()
            except HostError as exc:
                self.emit(Notice(self.host.mask(f"could not disarm the host's restore guard: {exc}")))

    async def _place(self, candidate: Candidate | None, trial: TrialRef) -> bool:
        """The candidate's unit (None: the original) through the validated path (no-op when it is on the host
        already); True when the host runs it."""
        placed, started = await self.host.put_back(candidate, lambda e: self.emit(TrialApplyEvent(trial, e)))
        if started:
            self.result.restarts += 1
        return placed


async def plan_tune(session: Session, request: TuneRequest, *, owner: str | None = None) -> PendingTune:
    """Hold the unit's lock (UnitLocked if another tune or apply holds it; a restore-on-exit guard where the host
    offers one), read the unit and the SGLang version, and build the space. Asks nothing, changes nothing.

    Raises UnitError (not an SGLang unit), UsageError (nothing left to run) and HostError, lock released."""
    from console.core.deployment import refuse_member_change

    if session.workspace is not None:  # one member of a deployment is tuned with the deployment (tune DEPLOYMENT)
        refuse_member_change(session.target, session.workspace.profiles, "a tune")
    owner = owner or default_owner(hints.verb("tune"))
    request = checked_request(request, session.target.slo)
    version, _source = await session.sglang_version()
    stack = AsyncExitStack()
    guard: Any = None
    try:
        guard = await stack.enter_async_context(_hold(session, owner, request.restore_after_s))
        original = await session.service.read_unit()
        architecture = await architecture_of(session)
        space = build_space(
            request.space, original, unit_name=session.service.unit, version=version, architecture=architecture
        )
        space = masked_space(space, session.secrets.text)
        if not space.candidates:
            raise nothing_to_run(space)
    except BaseException:
        try:
            await _disarm(guard)  # nothing was changed: the host must not restore anything when it is let go
        finally:
            await stack.aclose()
        raise
    host = TuneHost(session, original, timeout_s=request.timeout_s, owner=owner)
    pending = PendingTune(host, request, space, original, stack, guard, owner)
    pending.restart_cost = known_restart_cost(session)
    return pending


def nothing_to_run(space: Space) -> UsageError:
    reasons = "; ".join(f"{p.setting.describe()}: {p.reason}" for p in space.pruned[:3])
    return UsageError(f"nothing to run: SGLang {space.sglang_version} would refuse every setup asked for ({reasons})")


def checked_request(request: TuneRequest, profile_slo: tuple[tuple[str, float], ...] = ()) -> TuneRequest:
    """The request with the profile's [slo] when it names none; UsageError for an objective that needs an SLO
    without one, or a dataset workload without a dataset."""
    if request.objective not in OBJECTIVES:
        raise UsageError("{field} is one of {choices} (got {value!r})", field="objective",
                         choices=", ".join(OBJECTIVES), value=request.objective)  # fmt: skip
    if request.slo is None and profile_slo:
        request = dataclasses.replace(request, slo=dict(profile_slo))
    if request.objective != "throughput" and not request.slo:
        raise UsageError(
            "{field} {value} needs an SLO to count good requests against: give {slo} "
            "(e.g. ttft_p95=800ms,tpot_p95=60ms) or put [slo] in the host's profile",
            field="objective",
            value=request.objective,
        )
    if request.strategy == "predict" and request.objective != "throughput":
        raise UsageError(
            "{field} predict ranks setups by the output tok/s it predicts: use {objective} throughput, or "
            "{field} halving for goodput or capacity",
            field="strategy",
        )
    if ("dataset" in request.workloads) != (request.dataset is not None):
        raise UsageError("the dataset workload needs {field} FILE, and {field} runs as the `dataset` workload",
                         field="dataset")  # fmt: skip
    return request


async def _disarm(guard: Any) -> None:
    if guard is not None and not guard.disarmed:
        with contextlib.suppress(HostError):
            await guard.disarm()


def masked_space(space: Space, text: Callable[[str], str]) -> Space:
    """The space as anyone may see it: the rules' texts may quote values from the unit."""
    return Space(
        space.sglang_version,
        space.candidates,
        [dataclasses.replace(p, reason=text(p.reason)) for p in space.pruned],
        [dataclasses.replace(m, reason=text(m.reason)) for m in space.merged],
    )


async def architecture_of(session: Session) -> str | None:
    """The served model's architecture (SGLang's auto-choice uses it); None when the server does not say."""
    try:
        client = await session.sglang()
        async with asyncio.timeout(5.0):
            info = await client.model_info()
    except Exception:
        return None
    architectures = info.get("architectures") if isinstance(info, dict) else None
    if isinstance(architectures, list) and architectures:
        return str(architectures[0])
    return None


async def run_tune(session: Session, request: TuneRequest, *, on_event: EventSink[TuneEvent] = ignore) -> TuneResult:
    """plan_tune + execute in one call (no confirmation), for callers that need no look at the space first."""
    async with await plan_tune(session, request) as pending:
        return await pending.execute(on_event=on_event)
