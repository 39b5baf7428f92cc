"""A scripted benchmark for the console's Pilot and snapshot tests: the engine's own events for the sweeps the
form planned, at fixed figures, level by level; the finished levels' records appended to the workspace's logs/
as bench_host does (also when cancelled). The real sweep runs on the demo host in tests/tui/test_bench_demo.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from console.bench import events as ev
from console.bench.metrics import RequestResult
from console.bench.records import BenchRecord, append_records, order_server_args
from console.core.bench import PlannedSweep, SweepQueued
from console.workspace import Workspace
from tests.support.bench_runs import EAGLE, T0

Then = Literal["finish", "hold", "stop", "fail"]
STOP_WHY = "error rate 62% > 50% after 21 requests"
PLACED = "round trip 0.4 ms: at most 5 ms, the port forward costs nothing"
FAIL_WHY = "gpu-a: the SSH connection was lost (reconnecting)"


@dataclass
class ScriptedBench:
    """The console's bench runner (Runners.bench). `finish_levels` levels of each sweep finish; the next one runs
    `running` requests and then holds until cancelled (`hold`), stops on the error rate (`stop`), or the host fails
    (`fail`); `finish` runs all."""

    workspace: Workspace | None = None
    then: Then = "finish"
    finish_levels: int = 99
    running: int = 37
    planned: list[list[PlannedSweep]] = field(default_factory=list)
    holding: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(
        self, _session_of: Any, label: str, sweeps: list[PlannedSweep], on_event: Callable[[Any], None]
    ) -> list[list[BenchRecord]]:
        self.planned.append(sweeps)
        out = []
        for index, sweep in enumerate(sweeps):
            records: list[BenchRecord] = []
            on_event(SweepQueued(index, len(sweeps), sweep.label, sweep.workload))
            on_event(
                ev.ClientPlaced("console", 0.4, None, "round trip 0.4 ms: at most 5 ms, the forward costs nothing")
            )
            levels = sweep.config.levels()
            on_event(ev.SweepStarted(levels, 1, "0.5.9", "qwen3.5-122b"))
            try:
                for n, level in enumerate(levels):
                    c = level.concurrency or 1
                    planned = sweep.config.requests or max(16, 4 * c)
                    on_event(ev.LevelStarted(level, 0, planned, None))
                    done = planned if n < self.finish_levels else min(self.running, planned)
                    for i in range(1, done + 1):
                        ttft = 0.08 + 0.004 * c
                        latency = ttft + 256 * (0.011 + 0.0004 * c)
                        result = RequestResult(success=True, output_len=257, ttft=ttft, latency=latency)
                        on_event(ev.RequestDone(level, result, i, 0))
                    tok_s = 95.0 * c / (1 + 0.04 * c)
                    on_event(ev.RunningFigures(level, 12.0, done, 0, c, tok_s, 80 + 4.0 * c))
                    if n >= self.finish_levels:
                        await self._end(level, n, on_event)
                        break
                    metrics = {"completed": planned, "failed": 0, "output_throughput": tok_s,
                               "mean_ttft_ms": 80 + 4.0 * c, "median_tpot_ms": 11 + 0.4 * c}  # fmt: skip
                    if sweep.config.slo:  # held to an SLO: met up to C=8 (as the engine's judge_level says it)
                        rate = planned / 12.0
                        met = c <= 8
                        misses = [] if met else [f"TTFT p95 {120 + 9.0 * c:,.1f} ms > 300 ms"]
                        metrics |= {"request_throughput": rate, "request_goodput": rate * (0.95 if met else 0.3),
                                    "slo": sweep.config.slo, "slo_met": met, "slo_misses": misses}  # fmt: skip
                    on_event(ev.LevelDone(level, 0, metrics, {"mean_power_w": 1900.0 + 20 * c}, None))
                    records.append(self._record(sweep, label, c, metrics, n))
                else:
                    on_event(ev.SweepDone(len(levels)))
            finally:
                if self.workspace is not None:  # as bench_host: the finished levels are kept, cancelled or not
                    append_records(self.workspace.logs, records)
            out.append(records)
            if any(r.stopped for r in records) or self.then == "stop":  # as bench_queue: a stop ends the queue
                break
        return out

    async def _end(self, level: Any, n: int, on_event: Callable[[Any], None]) -> None:
        if self.then == "hold":
            self.holding.set()
            await asyncio.Event().wait()  # until cancelled
        elif self.then == "stop":
            metrics = {"completed": 8, "failed": 13, "output_throughput": 50.0, "median_tpot_ms": 40.0}
            on_event(ev.LevelDone(level, 0, metrics, {}, STOP_WHY))
            on_event(ev.SweepDone(n + 1, STOP_WHY))
        elif self.then == "fail":
            from console.host.base import HostError

            raise HostError(FAIL_WHY)

    def _record(self, sweep: PlannedSweep, host: str, c: int, metrics: dict[str, Any], n: int) -> BenchRecord:
        at = T0 + timedelta(hours=len(self.planned), minutes=n)
        return BenchRecord(
            run_id=f"{sweep.label}@{at:%H%M%S}", label=sweep.label, target=host, started_at=at, ended_at=at,
            sglang_version="0.5.9", server_args=order_server_args(EAGLE), unit_hash="sha256:00aa11bb22cc33dd",
            workload=sweep.config.workload.describe(), max_concurrency=c, **metrics,
        )  # fmt: skip


def bench_app(
    workspace: Workspace | None,
    bench: ScriptedBench | None = None,
    *,
    read_only: bool = False,
    slo: tuple[tuple[str, float], ...] = (),
) -> Any:
    """The console on one scripted host (gpu-a, running eagle3 s2 k1 d3 v2) with a workspace and a scripted bench
    (the host connected then: a benchmark opens only on a connected host; without one it has not connected yet)."""
    from console.tui.runners import Runners
    from tests.tui.support import FixedSession, scripted_app, view

    runners = Runners(bench=bench) if bench is not None else Runners()
    sessions = {"gpu-a": FixedSession(slo=slo)} if bench is not None else {}  # slo: the profile's [slo]
    return scripted_app(views={"gpu-a": view()}, read_only=read_only, workspace=workspace, runners=runners,
                        sessions=sessions)  # fmt: skip


def seeds_workspace(root: Any) -> Workspace:
    """A workspace whose logs/ hold the seeds' two Kimi runs (no speculation; EAGLE3 topk 1 + v2) and a Qwen one."""
    from tests.support.bench_runs import NO_SPEC, SEEDS_EAGLE, SEEDS_NO_SPEC, run

    workspace = Workspace(root).ensure()
    append_records(workspace.logs, run("no spec", SEEDS_NO_SPEC, args=NO_SPEC))
    append_records(workspace.logs, run("eagle3 k1 v2", SEEDS_EAGLE, args=EAGLE, at=T0 + timedelta(hours=1)))
    qwen = {1: 123.0, 8: 410.0}
    append_records(workspace.logs, run("qwen steps 3", qwen, args={**EAGLE, "speculative_num_steps": 3},
                                       at=T0 - timedelta(days=1), host="gpu-b"))  # fmt: skip
    return workspace


def slo_workspace(root: Any) -> Workspace:
    """A workspace whose logs/ hold two runs held to one SLO: no speculation carries more good requests at C=1,
    EAGLE3 from C=8 on (the goodput crossover at the SLO), no speculation misses the SLO at 64."""
    from tests.support.bench_runs import NO_SPEC, SEEDS_EAGLE, SEEDS_NO_SPEC, run

    slo = {"ttft_p95": 800.0, "tpot_p95": 60.0}
    goodput = {"no spec": {1: 1.4, 8: 3.0, 64: 2.0}, "eagle3 k1 v2": {1: 1.2, 8: 3.5, 64: 6.0}}
    met = {"no spec": {1: True, 8: True, 64: False}, "eagle3 k1 v2": {1: True, 8: True, 64: True}}
    workspace = Workspace(root).ensure()
    for n, (label, points, args) in enumerate(
        (("no spec", SEEDS_NO_SPEC, NO_SPEC), ("eagle3 k1 v2", SEEDS_EAGLE, EAGLE))
    ):
        records = run(label, points, args=args, at=T0 + timedelta(hours=n))
        judged = [r.model_copy(update={"slo": slo, "slo_met": met[label][r.max_concurrency or 0],
                                       "request_goodput": goodput[label][r.max_concurrency or 0],
                                       "request_throughput": (r.max_concurrency or 1) * 0.1})
                  for r in records]  # fmt: skip
        append_records(workspace.logs, judged)
    return workspace
