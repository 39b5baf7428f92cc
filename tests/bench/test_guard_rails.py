"""Guard rails and load modes against the real known-schedule server: failures counted (never dropped),
error-rate stop, per-request timeout, hard time cap, duration mode, open-loop Poisson rates, progress events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig, SweepResult
from console.bench.events import BenchEvent, LevelDone, LevelStarted, RequestDone, SweepDone, SweepStarted
from console.bench.records import load_run
from console.bench.workloads import WorkloadSpec
from console.core.bench import run_bench
from console.workspace import Workspace
from tests.bench.conftest import ScheduleServer

SMALL = WorkloadSpec(input_len=8, output_len=8)


async def _run(url: str, config: SweepConfig, events: list[BenchEvent] | None = None) -> SweepResult:
    async with BenchClient(url) as client:
        return await BenchEngine(client, config, on_event=events.append if events is not None else None).run()


async def test_failed_requests_are_counted_and_shown(schedule_server: Callable[..., ScheduleServer]) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=1, fail_every=4)
    events: list[BenchEvent] = []
    sweep = await _run(server.url, SweepConfig(SMALL, concurrencies=[2], requests=20, warmup=0), events)
    level = sweep.levels[0]
    assert level.stopped is None
    assert level.metrics["completed"] + level.metrics["failed"] == 20
    assert level.metrics["failed"] == 5
    assert any("HTTP 500" in e for e in level.metrics["errors"])
    kinds = [type(e) for e in events]
    assert kinds[0] is SweepStarted and kinds[1] is LevelStarted and kinds[-2] is LevelDone and kinds[-1] is SweepDone
    assert sum(isinstance(e, RequestDone) for e in events) == 20


async def test_error_rate_over_threshold_stops_the_sweep(schedule_server: Callable[..., ScheduleServer]) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=1, fail_every=2)
    config = SweepConfig(SMALL, concurrencies=[1, 4], requests=40, warmup=0, max_error_rate=0.3)
    sweep = await _run(server.url, config)
    assert len(sweep.levels) == 1
    assert sweep.stopped and "error rate" in sweep.stopped
    assert sweep.levels[0].metrics["failed"] >= 3


async def test_request_timeout_fails_slow_requests(schedule_server: Callable[..., ScheduleServer]) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=200)
    config = SweepConfig(WorkloadSpec(input_len=8, output_len=64), concurrencies=[2], requests=4, warmup=0)
    config.request_timeout = 0.3
    sweep = await _run(server.url, config)
    level = sweep.levels[0]
    assert level.metrics["failed"] >= 1 and level.metrics["completed"] == 0
    assert all("timed out after 0.3 s" in r.error for r in level.results)


async def test_hard_time_cap_ends_the_sweep(schedule_server: Callable[..., ScheduleServer]) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=50)
    config = SweepConfig(
        WorkloadSpec(input_len=8, output_len=32), concurrencies=[2, 4], duration=30, warmup=0, time_cap=1.0
    )
    sweep = await _run(server.url, config)
    assert sweep.stopped and "hard time cap" in sweep.stopped
    assert len(sweep.levels) == 1


async def test_duration_mode_keeps_sending_until_the_deadline(schedule_server: Callable[..., ScheduleServer]) -> None:
    server = schedule_server(ttft_ms=2, interval_ms=2)
    sweep = await _run(server.url, SweepConfig(SMALL, concurrencies=[4], duration=0.6, warmup=1))
    m = sweep.levels[0].metrics
    # Each request takes ~16 ms (more on a busy machine): many waves of 4 fit into 0.6 s, and every worker's
    # last request ends after the deadline.
    assert m["completed"] > 12 and m["failed"] == 0 and m["duration"] >= 0.6


async def test_open_loop_poisson_rate(schedule_server: Callable[..., ScheduleServer]) -> None:
    server = schedule_server(ttft_ms=2, interval_ms=2)
    sweep = await _run(server.url, SweepConfig(SMALL, request_rates=[100.0], requests=50, warmup=0))
    level = sweep.levels[0]
    assert level.level.request_rate == 100.0 and level.metrics["completed"] == 50
    # 50 arrivals at 100/s take about 0.5 s; seeded, so the same every run.
    assert 0.2 < level.metrics["duration"] < 1.5
    assert level.metrics["request_throughput"] > 30


async def test_unreachable_server_fails_the_warmup_not_silently() -> None:
    sweep = await _run("http://127.0.0.1:9", SweepConfig(SMALL, concurrencies=[1], requests=2, warmup=1))
    assert sweep.stopped and "every warm-up request failed" in sweep.stopped
    # The failed warm-up is what the level did: shown as failed, never as "0 failed".
    assert (sweep.levels[0].metrics["completed"], sweep.levels[0].metrics["failed"]) == (0, 1)


async def test_an_interrupted_sweep_keeps_the_levels_that_finished(
    schedule_server: Callable[..., ScheduleServer], tmp_path: Path
) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=1)
    workspace = Workspace(tmp_path).ensure()
    config = SweepConfig(SMALL, concurrencies=[1, 2], requests=4, warmup=0)

    def cancel_after_level_one(event: BenchEvent) -> None:
        if isinstance(event, LevelDone):
            sweep.cancel()  # what Ctrl-C does to asyncio.run's task

    sweep = asyncio.create_task(
        run_bench(server.url, config, label="cut", target="t", workspace=workspace, on_event=cancel_after_level_one)
    )
    with pytest.raises(asyncio.CancelledError):
        await sweep
    records = load_run("cut", workspace.logs)
    assert [(r.max_concurrency, r.completed) for r in records] == [(1, 4)]
