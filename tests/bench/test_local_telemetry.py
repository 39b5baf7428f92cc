"""GPU telemetry over a level, against the real known-schedule server: a poll that sees no GPU is no sample,
and a level shorter than one poll still gets the poll in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec
from tests.bench.conftest import ScheduleServer

CONFIG = SweepConfig(WorkloadSpec(input_len=8, output_len=8), concurrencies=[2], requests=4, warmup=0)


async def test_polls_that_see_no_gpu_are_not_counted_as_samples(
    schedule_server: Callable[..., ScheduleServer],
) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=1)

    async def nvidia_smi_failing() -> list[object]:
        return []  # what the host layer's reader gives when nvidia-smi fails on the host

    async with BenchClient(server.url) as client:
        sweep = await BenchEngine(client, CONFIG, gpu_sampler=nvidia_smi_failing).run()
    assert sweep.levels[0].telemetry == {} and sweep.gpus == []


async def test_a_level_shorter_than_one_poll_still_gets_its_sample(
    schedule_server: Callable[..., ScheduleServer],
) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=1)  # the level takes a few ms, the poll 0.3 s

    async def slow_nvidia_smi() -> list[object]:
        await asyncio.sleep(0.3)  # stands in for a slow reader, not for a condition
        return [{"index": 0, "power_draw_w": 300.0}]

    async with BenchClient(server.url) as client:
        sweep = await BenchEngine(client, CONFIG, gpu_sampler=slow_nvidia_smi).run()
    assert sweep.levels[0].telemetry["gpu_samples"] == 1 and sweep.levels[0].telemetry["mean_power_w"] == 300.0
