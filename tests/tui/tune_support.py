"""A fixed tune for the Tune screen's snapshots: the core's own PendingTune over the core's own space (the rules of
0.5.9 on the fixed unit of tests/tui/support.py), whose execute() plays fixed events (fixed times and figures)
and returns a result made by the core's own search and report from those figures. The Kimi story of the seeds:
no speculation best at C=1, EAGLE3 topk 1 + spec v2 beyond; topk 4 with spec v2 pruned by 0.5.9."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

from console.bench.events import Level, LevelStarted, RunningFigures
from console.bench.slo import Capacity, Slo
from console.core.change import ApplyState
from console.core.events import PhaseChanged, StepChanged
from console.core.phases import PhaseTracker
from console.core.tune import build_space, form_defaults, request_from_form, unit_speculation
from console.core.tune.host import TuneHost
from console.core.tune.report import Objective, compare_workloads, find_crossovers, recommend, speculation_verdicts
from console.core.tune.run import (
    LevelProgress,
    PendingTune,
    Restoring,
    StageStarted,
    TrialApplied,
    TrialApplyEvent,
    TrialBenchEvent,
    TrialBenchmarked,
    TrialRecord,
    TrialRef,
    TrialStarted,
    TuneEvent,
    TuneFinished,
    TuneResult,
    TuneStarted,
)
from console.core.tune.search import Cell, Search
from tests.tui.support import DEMO_UNIT, NOW, FixedSession

START = NOW - timedelta(minutes=12, seconds=34)
FORM = {"algorithm": "none,EAGLE3", "steps": "2", "topk": "1,4", "spec_v2": "on,off", "concurrency": "1,16,64"}
# output tok/s per setup (by name) at C=1, 16, 64
FIGURES = {
    "no speculation": (52.0, 610.0, 1500.0),
    "EAGLE3 topk 1 + spec v2": (49.0, 650.0, 1810.0),
    "EAGLE3 topk 1": (47.5, 590.0, 1600.0),
    "EAGLE3 topk 4": (45.0, 480.0, 1100.0),
}
# on chat (natural lengths, temperature 0.7) speculation accepts less: its figures fall more than no speculation's
CHAT = {"no speculation": 0.95, "EAGLE3 topk 1 + spec v2": 0.72, "EAGLE3 topk 1": 0.75, "EAGLE3 topk 4": 0.7}
ACCEPT = {"random": 3.1, "chat": 2.4}  # accepted tokens per step of the speculative setups
SLO = "ttft_p95=800ms,tpot_p95=60ms"
# goodput (req/s within the SLO) of 256-token requests: speculation's longer TPOT tails cost it good requests, so no
# speculation leads by goodput at C=1 and 16 where it trailed EAGLE3 topk 1 + spec v2 by tok/s at 16
GOOD_SHARE = {"no speculation": 1.2, "EAGLE3 topk 1 + spec v2": 1.0, "EAGLE3 topk 1": 0.9, "EAGLE3 topk 4": 0.8}
# each setup's capacity at the SLO: (highest level met, req/s carried there, the level above that missed)
CAPACITY = {
    "no speculation": ("C=16", 2.4, "C=64"),
    "EAGLE3 topk 1 + spec v2": ("C=64", 7.1, None),
    "EAGLE3 topk 1": ("C=16", 2.2, "C=64"),
    "EAGLE3 topk 4": ("C=1", 0.19, "C=16"),
}


class ScriptedTune(PendingTune):
    """Plays a tune: `finish` False stops in the third trial's benchmark (the live screen) until aborted."""

    def __init__(self, *, finish: bool, workloads: str = "random", objective: str = "throughput") -> None:
        session = FixedSession()
        unit = unit_speculation(DEMO_UNIT, "0.5.9")
        held = {"objective": objective, "slo": SLO} if objective != "throughput" else {}
        request = request_from_form(form_defaults(unit) | FORM | {"workload": workloads} | held, unit)
        space = build_space(request.space, DEMO_UNIT, unit_name="sglang.service", version="0.5.9")
        host = TuneHost(session, DEMO_UNIT, timeout_s=60.0, owner="tests")  # type: ignore[arg-type]
        super().__init__(host, request, space, DEMO_UNIT, AsyncExitStack(), None, "tests")
        self.finish = finish

    async def execute(self, on_event: Any = None) -> TuneResult:
        emit = on_event or (lambda _e: None)
        cells = tuple(self.request.cells())
        candidates = self.space.candidates
        search = Search([c.key for c in candidates], cells, self.request.policy())
        at = [START]

        def tick(seconds: float) -> Any:
            at[0] += timedelta(seconds=seconds)
            return at[0]

        def send(event: TuneEvent) -> None:
            emit(event)

        objective = self.request.objective
        send(TuneStarted(self.space, cells, "halving", False, tick(0), objective))
        send(StageStarted(1, "screen", tuple(c.name for c in candidates), cells, None, tick(0)))
        for number, candidate in enumerate(candidates, start=1):
            trial = TrialRef(number, candidate.key, candidate.name, 1, "screen", cells)
            send(TrialStarted(trial, tick(1)))
            send(TrialApplyEvent(trial, StepChanged(ApplyState.RESTARTING, "", tick(1))))
            tracker = PhaseTracker.for_start(speculative=candidate.config["speculative_algorithm"] is not None)
            for line in ("[TP0] Load weight begin. avail mem=139.01 GB", "[TP0] Load weight end. type=X"):
                when = tick(20)
                for change in tracker.feed(line, when):
                    phases = tuple(tracker.phases)
                    send(TrialApplyEvent(trial, PhaseChanged(change.kind, change.phase, when, line,  # type: ignore[arg-type]
                                                             tracker.progress, phases)))  # fmt: skip
            if number == 3 and not self.finish:
                level = Level(concurrency=16)
                send(TrialBenchEvent(trial, "random", LevelStarted(level, 0, None, 7.5)))
                send(TrialBenchEvent(trial, "random", RunningFigures(level, 4.0, 37, 0, 16, 598.2, 210.0)))
                await asyncio.Event().wait()  # until the screen goes away
            send(TrialApplied(trial, ApplyState.VERIFIED, True, tick(5)))
            figures = tuple((cell, figure(candidate.name, cell)) for cell in cells)
            scores = tuple((cell, score(candidate.name, value, objective)) for cell, value in figures)
            for cell, value in scores:
                for repeat in (0.99, 1.01):
                    search.record(candidate.key, cell, "full", value * repeat)
            send(TrialBenchmarked(trial, figures, (f"t/{candidate.key}",), tick(30), scores))
            for cell in cells:
                decision = search.decision(cell)
                names = {c.key: c.name for c in candidates}
                standings = tuple((names[s.candidate], s.median, s.low, s.high, s.kind) for s in search.standings(cell))
                leader = names[decision.winner.candidate] if decision.winner else None
                send(LevelProgress(cell, standings, tuple(names[k] for k in search.alive(cell)), leader,
                                   decision.margin_pct, decision.within_noise, decision.decided))  # fmt: skip
        send(Restoring("original", "the original unit", tick(1)))
        names = {c.key: c.name for c in candidates}
        configs = {c.key: c.config for c in candidates}
        throughput = {(c.key, cell): figure(c.name, cell) for c in candidates for cell in cells}
        recs = recommend(search, names, configs, objective=objective,
                         throughput=throughput if objective != "throughput" else None)  # fmt: skip
        capacities = {}
        if self.request.slo:
            capacities = {w: {n: Capacity(*CAPACITY[n]) for n in names.values()} for w in self.request.workloads}
        plain = {
            w: {c.key for c in candidates if c.config["speculative_algorithm"] is None} for w in self.request.workloads
        }
        verdicts = speculation_verdicts(recs, plain, capacities, names, objective)
        accept = {
            (c.key, cell): None if c.config["speculative_algorithm"] is None else ACCEPT[cell.workload]
            for c in candidates
            for cell in cells
        }
        result = TuneResult(
            target="gpu-a",
            unit="sglang.service",
            sglang_version="0.5.9",
            strategy="halving",
            space=self.space,
            cells=list(cells),
            trials=[TrialRecord(c, state="benchmarked") for c in candidates],
            search=search,
            metrics={},
            recommendations=recs,
            crossovers=find_crossovers(search, recs),
            workload_sides=compare_workloads(recs, accept),
            final_unit="original",
            host_healthy=True,
            elapsed_s=(tick(40) - START).total_seconds(),
            restarts=5,
            label="tune-20261130-114726",
            objective=objective,
            slo=Slo.from_json(self.request.slo) if self.request.slo else None,
            capacities=capacities,
            verdicts=verdicts,
        )
        send(TuneFinished("original", True, None, at[0]))
        return result


def figure(name: str, cell: Cell) -> float:
    """Output tok/s of a setup in a cell: FIGURES at C=1, 16, 64, scaled by CHAT on chat."""
    value = FIGURES[name][(1, 16, 64).index(cell.concurrency)]
    return value * (CHAT[name] if cell.workload == "chat" else 1.0)


def score(name: str, throughput: float, objective: Objective) -> float:
    """A setup's figure at a level by the objective: its tok/s, or the good requests/s of 256-token requests."""
    return throughput if objective == "throughput" else throughput / 256 * GOOD_SHARE[name]
