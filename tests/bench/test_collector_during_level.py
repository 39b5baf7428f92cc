"""While a level's requests run, the garbage collector makes no full collection (one walks the console's whole heap,
0.8-1.1 s in the suite's workers on a 2-core machine, and holds the load generator meanwhile); the young generations
are still collected. The thresholds are put back once the level ends, however it ends. What that does to the
figures: benchmarks/bench_gc_pause.py."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator

import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.events import LevelStarted, RequestDone
from console.bench.workloads import WorkloadSpec
from tests.bench.conftest import ScheduleServer


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """Thresholds of the test's own, so that putting them back is told apart from any default."""
    before = gc.get_threshold()
    gc.set_threshold(500, 7, 33)
    yield (500, 7, 33)
    gc.set_threshold(*before)


async def test_no_full_collection_while_a_levels_requests_run(
    schedule_server: Callable[..., ScheduleServer], thresholds: tuple[int, int, int]
) -> None:
    server = schedule_server(ttft_ms=5, interval_ms=5)
    young, middle, _ = thresholds
    during: list[tuple[int, ...]] = []
    collections_during: list[tuple[int, int]] = []  # (young, full) per finished request
    kept: list[list[int]] = []

    def collections() -> list[int]:
        return [generation["collections"] for generation in gc.get_stats()]

    def watch(event: object) -> None:
        if isinstance(event, RequestDone):
            during.append(gc.get_threshold())
            if len(during) % 2:  # every other time, make the next young collection one of generation 1
                while gc.get_count()[1] <= middle:
                    gc.collect(0)
            before = collections()
            kept.extend([i] for i in range(1000))  # more new objects than the young generation's threshold (500)
            after = collections()
            # A collection of generation 1 takes generation 0 with it and is counted under 1 only (one in every
            # `middle` young collections), so the young ones are the two counts together.
            young_collections = after[0] - before[0] + after[1] - before[1]
            collections_during.append((young_collections, after[2] - before[2]))

    config = SweepConfig(WorkloadSpec(input_len=8, output_len=4), concurrencies=[1, 2], requests=2, warmup=1)
    async with BenchClient(server.url) as client:
        sweep = await BenchEngine(client, config, on_event=watch).run()
    assert [lv.metrics["completed"] for lv in sweep.levels] == [2, 2]
    assert len(during) == 4 and all(t[:2] == (young, middle) and t[2] >= 2**30 for t in during), during
    assert gc.get_threshold() == thresholds
    assert all(made >= 1 and full == 0 for made, full in collections_during), collections_during


async def test_a_cancelled_level_puts_the_thresholds_back(
    schedule_server: Callable[..., ScheduleServer], thresholds: tuple[int, int, int]
) -> None:
    server = schedule_server(ttft_ms=5, interval_ms=50)
    started = asyncio.Event()

    def watch(event: object) -> None:
        if isinstance(event, LevelStarted):
            started.set()

    config = SweepConfig(WorkloadSpec(input_len=8, output_len=200), concurrencies=[1], requests=4, warmup=0)
    async with BenchClient(server.url) as client:
        run = asyncio.create_task(BenchEngine(client, config, on_event=watch).run())
        await started.wait()
        await asyncio.sleep(0)  # into the level's requests
        assert gc.get_threshold() != thresholds
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    assert run.cancelled() and gc.get_threshold() == thresholds
