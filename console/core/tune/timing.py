"""How long a planned tune takes, as the operator sees it before confirming (PendingTune.estimate_s). Pure.

Every term is a step the tune takes (console/core/tune/run.py, the bench engine's console/bench/engine.py), counted
as it runs it:

- A start for every trial whose setup the host does not run yet: none for the setup the host already runs, which a
  stage begins with (Search.next_stage); one more to put the original unit back, unless the tune never left it.
- For every level of every repeat (one concurrency of one workload), the engine's `_run_level`: the warm-up
  requests in waves of C together (ceil(warmup / C) waves; right after a start the first repeat's warm-up goes on
  until its round time settles: at least one wave more, `SETTLE_WAVES`), a cache flush, the measured
  duration (`--duration`, a screening run its `screen_fraction` of it), and the tail: the requests in flight at the
  deadline run to their end, so the level ends when the last of its C requests does, on average C / (C + 1) of a
  request after the deadline (the latest of C points spread evenly over a request's length). The warm-up and the
  tail do not shrink with a screening run's shorter duration: a short level costs them in full.

Recorded on SGLang 0.5.17 on an H200 (tests/sim/fixtures/real-0.5.17): a level of 1.5 s took 0.3-1 s before it
(warm-up and flush; two requests' length at C = 1, one at C = 8 and 32) and ended 0.1 s (C = 1) to 0.4 s (C = 32)
after its deadline; a screening level of 0.19 s took as long as its requests (0.2-3.2 s). The estimate before these
had priced each level at its duration + 5 s, and a screening level at an eighth of that.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from console.core.tune.search import Cell, Policy, Search, Stage, estimate_stage_seconds

# One request's wall time before the tune measured any: its output tokens at this pace (the prompt's prefill is
# small beside them). The tune has not benchmarked the server when the estimate is shown, so this is a prior, not a
# measurement. Most of a level's overhead is its warm-up, which runs with at most `warmup` requests in flight: a
# model's pace alone, 8-11 ms a token on the seeds' hosts (design.md and the stand-in's profiles: 123 and 93 tok/s at
# C = 1). The tail runs at the level's load, slower at high concurrency (60-80 ms a token over 48-64 requests there),
# which the prior does not know. They weigh only when a level is short beside a request.
TOKEN_S = 0.01


def request_seconds(output_len: int, token_s: float = TOKEN_S) -> float:
    """One request of the tune's workload, by TOKEN_S (see there)."""
    return max(1, output_len) * token_s


# Right after a start a level's first repeat warms until two waves agree (console.bench.engine): one wave more than
# otherwise when the first two agree, which is what the estimate counts.
SETTLE_WAVES = 1


def level_seconds(duration_s: float, concurrency: int, *, warmup: int, request_s: float, settle: bool = False) -> float:
    """One level of one repeat as the bench engine runs it (the module's docstring): warm-up, flush (one HTTP call,
    nothing beside a request), the measured duration, the tail."""
    together = max(1, concurrency)
    warm_rounds = -(-warmup // together) if warmup > 0 else 0
    if settle and warmup > 0:
        warm_rounds = max(warm_rounds, 1) + SETTLE_WAVES
    tail = concurrency / (concurrency + 1.0)
    return duration_s + (warm_rounds + tail) * request_s


def stage_bench_seconds(stage: Stage, *, duration_s: float, warmup: int, request_s: float) -> float:
    """The benchmarks of a stage: every run's cells, each for the stage's repeats."""
    level = duration_s * stage.duration_fraction
    return sum(
        stage.repeats * level_seconds(level, cell.concurrency, warmup=warmup, request_s=request_s)
        for run in stage.runs
        for cell in run.cells
    )


def tune_seconds(
    candidates: Sequence[str],
    cells: Sequence[Cell],
    policy: Policy,
    *,
    running: str | None,
    duration_s: float,
    warmup: int,
    request_s: float,
    restart_s: float,
) -> float:
    """About how long the tune takes for a start of restart_s (linear in it: form.estimate splits the two parts).

    The first stage is the one the search will ask for (grid: every setup fully, the whole tune; halving: the
    screening), beginning with `running`, the setup the host runs (no start). A halving search then runs full
    runs for the two best of each level, each of them started again (at most every setup; which of them the host
    runs then is not known, so each is counted a start), with the full duration and the repeats; it stops there
    when the levels' winners are outside the noise (a second full stage, for levels still within it, is not
    counted). A predicted search is priced at its most: every setup after the running one, each a start and its full
    runs. Then the original unit goes back: a start, unless the host never left it."""
    search = Search(list(candidates), list(cells), policy)
    first = search.next_stage(running)
    assert first is not None  # a fresh search always has its first stage
    starts = sum(1 for run in first.runs if run.candidate != running)
    bench = stage_bench_seconds(first, duration_s=duration_s, warmup=warmup, request_s=request_s)
    settle = SETTLE_WAVES * request_s if warmup > 0 else 0.0  # a started setup's first repeat of each level
    bench += settle * sum(len(run.cells) for run in first.runs if run.candidate != running)
    kept = min(len(candidates), policy.keep_per_level)
    if policy.strategy == "halving" and kept >= 2:
        starts += min(len(candidates), kept * len(cells))
        full = sum(level_seconds(duration_s, cell.concurrency, warmup=warmup, request_s=request_s) for cell in cells)
        bench += kept * policy.repeats * full + kept * len(cells) * settle
    if policy.strategy == "predict":
        # The running setup first, then one setup a stage while the prediction says one can win: at most every other
        # setup (counted as such: how many it will try is what it finds out).
        others = len(candidates) - (1 if running in candidates else 0)
        starts += others
        full = sum(level_seconds(duration_s, cell.concurrency, warmup=warmup, request_s=request_s) for cell in cells)
        bench += others * (policy.repeats * full + len(cells) * settle)
    restore = 1 if starts else 0  # no start at all: the host ran the original unit throughout
    return bench + (starts + restore) * restart_s


@dataclass
class Pace:
    """The tune's own pace, measured as it runs: each start's seconds and each full-length level's (overheads
    included), for the estimate of the next stage and the time budget. `duration_s`: a level's asked duration, its
    pace until one is measured."""

    duration_s: float
    starts: list[float] = field(default_factory=list)
    levels: list[float] = field(default_factory=list)

    @property
    def restart_s(self) -> float:
        return statistics.median(self.starts) if self.starts else 0.0

    @property
    def level_s(self) -> float:
        """Wall seconds of one full-length level (measured, else the duration)."""
        return statistics.median(self.levels) if self.levels else self.duration_s

    def stage_s(self, stage: Stage, running: str | None) -> float | None:
        """How long the stage takes at this pace; None before a start was measured."""
        if not self.starts:
            return None
        return estimate_stage_seconds(stage, restart_s=self.restart_s, full_level_s=self.level_s, running=running)

    def over_budget(
        self, stage: Stage, candidate: str, *, running: str | None, elapsed: float, budget_s: float
    ) -> bool:
        """Whether the candidate's run of the stage would end past the budget, keeping time to put the original
        unit back."""
        restart = self.restart_s if candidate != running else 0.0
        cells = next(len(run.cells) for run in stage.runs if run.candidate == candidate)
        need = restart + cells * stage.repeats * self.level_s * stage.duration_fraction
        return elapsed + need + self.restart_s > budget_s
