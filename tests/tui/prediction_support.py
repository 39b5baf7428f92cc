"""A scripted host with benchmark records in its workspace, for the console's predictions (the editor's, the tune
confirmation's): the Kimi host of the seeds (EAGLE3 steps 2 topk 1 + spec v2 on SGLang 0.5.9) with what `bench`
would have written for it, made by the SGLang stand-in's engine on its virtual clock (tests/support/virtual_bench.py:
the same figures every time, a fraction of a second). The prediction reads only these records."""

from __future__ import annotations

import asyncio
import functools
import statistics
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from console.bench.records import BenchRecord, append_records
from console.core.change import ApplyState
from console.core.events import StepChanged
from console.core.tune import (
    LevelProgress,
    PendingTune,
    SetupsPredicted,
    Space,
    StageStarted,
    TrialApplied,
    TrialApplyEvent,
    TrialBenchmarked,
    TrialRef,
    TrialStarted,
    TuneRequest,
    TuneResult,
    TuneStarted,
    build_space,
    form_defaults,
    request_from_form,
    unit_speculation,
)
from console.core.tune.host import TuneHost
from console.core.tune.predict import predict_untried
from console.core.tune.search import Search
from console.sim.profiles import get_profile
from console.workspace import Workspace
from tests.support.virtual_bench import resolved_args, virtual_records
from tests.tui.support import FixedSession

KIMI_UNIT = """[Unit]
Description=SGLang server

[Service]
Environment="SGLANG_ENABLE_SPEC_V2=1"
ExecStart=/usr/bin/python3 -m sglang.launch_server \\
    --model-path moonshotai/Kimi-K2.5 \\
    --tp-size 8 \\
    --speculative-algorithm EAGLE3 \\
    --speculative-draft-model-path sim/kimi-k2.5-eagle3 \\
    --speculative-num-steps 2 \\
    --speculative-eagle-topk 1 \\
    --speculative-num-draft-tokens 3
"""
LEVELS = (1, 48)
DRAFT = "sim/kimi-k2.5-eagle3"


@functools.cache
def kimi_records(*, no_speculation: bool = True) -> tuple[BenchRecord, ...]:
    """The running setup at C=1 and 48, twice each (the noise measured), and (the issue's Kimi case) the same
    levels without speculation; of the target gpu-a, an hour old (a prediction reads records of 14 days)."""
    profile = get_profile("kimi-k2.5-int4-8x-rtxpro6000-pcie")
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    setups = [("running", resolved_args("EAGLE3", 2, 1, spec_v2=True, draft_model_path=DRAFT))]
    if no_speculation:
        setups.append(("nospec", resolved_args(None)))
    records = []
    for n, (label, args) in enumerate(setups):
        made = virtual_records(profile, args, LEVELS, repeat=2, label=label, version="0.5.9",
                               start=start + timedelta(minutes=10 * n))  # fmt: skip
        records += [r.model_copy(update={"target": "gpu-a"}) for r in made]
    return tuple(records)


def kimi_workspace(root: Path, *, no_speculation: bool = True) -> Workspace:
    """A workspace whose logs/ hold the Kimi host's records."""
    workspace = Workspace(root).ensure()
    append_records(workspace.logs, kimi_records(no_speculation=no_speculation))
    return workspace


def kimi_session(workspace: Workspace | None) -> FixedSession:
    return FixedSession(KIMI_UNIT, workspace=workspace)


# --- the Tune screen with the strategy predict ------------------------------------------------------------------

FORM = {"algorithm": "EAGLE3,none", "steps": "2", "topk": "1,2", "spec_v2": "on,off", "concurrency": "1,48"}


def kimi_request(values: dict[str, str] | None = None) -> TuneRequest:
    unit = unit_speculation(KIMI_UNIT, "0.5.9")
    return request_from_form(form_defaults(unit) | FORM | (values or {}), unit)


def kimi_space(request: TuneRequest) -> Space:
    return build_space(request.space, KIMI_UNIT, unit_name="sglang.service", version="0.5.9")


async def plan_on_kimi(session: Any, request: TuneRequest) -> PendingTune:
    """The Tune form's planner on the scripted Kimi host: the core's own space of the request (the unit's lock is
    the scripted host's: nothing to hold); executed, it plays ScriptedPredictedTune."""
    return ScriptedPredictedTune(session, request)


class ScriptedPredictedTune(PendingTune):
    """A tune with the strategy predict, played up to its second stage and held there (the live screen): stage 0
    measures the running setup (its figures are the Kimi host's own records), then the core's own prediction
    (console.core.tune.predict.predict_untried, refitted from those records as the runner does) and the core's own
    search say which setups can still win, and the likeliest one starts."""

    def __init__(self, session: Any, request: TuneRequest) -> None:
        host = TuneHost(session, KIMI_UNIT, timeout_s=60.0, owner="tests")
        super().__init__(host, request, kimi_space(request), KIMI_UNIT, AsyncExitStack(), None, "tests")

    async def execute(self, on_event: Any = None) -> TuneResult:
        assert self.request.strategy == "predict", "the form's strategy: predict"
        emit = on_event or (lambda _e: None)
        cells = tuple(self.request.cells())
        candidates = self.space.candidates
        search = Search([c.key for c in candidates], cells, self.request.policy())
        names = {c.key: c.name for c in candidates}
        at = [START]

        def tick(seconds: float) -> datetime:
            at[0] += timedelta(seconds=seconds)
            return at[0]

        emit(TuneStarted(self.space, cells, "predict", False, tick(0)))
        measured: list[BenchRecord] = []  # this tune's records, as the runner keeps them
        while (stage := search.next_stage(RUNNING_KEY)) is not None:
            chosen = stage.runs[0].candidate
            emit(StageStarted(stage.index, "full", (names[chosen],), cells, None, tick(0)))
            trial = TrialRef(stage.index + 1, chosen, names[chosen], stage.index, "full", cells)
            emit(TrialStarted(trial, tick(1)))
            records = [r for r in kimi_records() if r.label == RECORDS.get(chosen)]
            if not records:  # a setup the host has no records of: its start is where the screen is held
                emit(TrialApplyEvent(trial, StepChanged(ApplyState.RESTARTING, "", tick(1))))
                await asyncio.Event().wait()  # until the screen goes away
            emit(TrialApplied(trial, ApplyState.UNCHANGED if chosen == RUNNING_KEY else ApplyState.VERIFIED,
                              chosen != RUNNING_KEY, tick(1)))  # fmt: skip
            figures = []
            for cell in cells:
                values = [r.output_throughput for r in records if r.max_concurrency == cell.concurrency]
                for value in values:
                    search.record(chosen, cell, "full", value)
                figures.append((cell, statistics.median(values)))
            emit(TrialBenchmarked(trial, tuple(figures), (f"t/{chosen}",), tick(60), tuple(figures)))
            for cell in cells:  # where each level stands, as the runner says it after a trial
                decision = search.decision(cell)
                standings = tuple((names[x.candidate], x.median, x.low, x.high, x.kind) for x in search.standings(cell))
                leader = names[decision.winner.candidate] if decision.winner else None
                emit(LevelProgress(cell, standings, tuple(names[k] for k in search.alive(cell)), leader,
                                   decision.margin_pct, decision.within_noise, decision.decided))  # fmt: skip
            measured += records
            search.finish_stage()
            forecasts, shown = predict_untried(measured, candidates, cells, search.tried())
            search.predicted(forecasts)
            can = search.can_win()
            emit(SetupsPredicted(
                stage.index,
                tuple((names[key], per_cell) for key, per_cell in shown.items()),
                tuple(names[k] for k in can),
                tuple(names[k] for k in forecasts if k not in can and forecasts[k] is not None),
                tuple(names[k] for k, f in forecasts.items() if f is None),
                tick(1),
            ))  # fmt: skip
        raise AssertionError(f"the scripted tune ran out of setups to start: {search.stop_reason}")


RUNNING_KEY = "eagle3-s2-k1-n3-v2"
RECORDS = {RUNNING_KEY: "running", "nospec": "nospec"}  # the candidates the host has records of (their labels)
START = datetime(2026, 11, 30, 11, 47, 26, tzinfo=UTC)
