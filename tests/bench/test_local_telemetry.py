"""GPU telemetry over a level, against the real known-schedule server: a poll that sees no GPU is no sample,
a level shorter than one poll still gets the poll in flight, and `bench --url` on this machine's loopback
samples this machine's GPUs (here through the simulator's nvidia-smi stand-in, a real subprocess in the real
output format, as the gpu_command), with no telemetry at all when the GPU reader finds nothing."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.telemetry import nvidia_smi_sampler
from console.bench.workloads import WorkloadSpec
from console.core.bench.host import bench_url, is_loopback_url
from tests.bench.conftest import ScheduleServer

STAND_IN = (sys.executable, "-m", "console.sim.nvidia_smi")
CONFIG = SweepConfig(WorkloadSpec(input_len=8, output_len=8), concurrencies=[2], requests=4, warmup=0)


def test_loopback_urls() -> None:
    for url in ("http://127.0.0.1:30000", "http://localhost:30000", "http://[::1]:30000", "http://0.0.0.0:1"):
        assert is_loopback_url(url), url
    for url in ("http://10.0.0.7:30000", "http://gpu1:30000", "https://[2001:db8::1]:443"):
        assert not is_loopback_url(url), url


async def test_a_loopback_url_gets_this_machines_gpus(schedule_server: Callable[..., ScheduleServer]) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=1)
    records = await bench_url(server.url, CONFIG, label="local-gpus", target=server.url, gpu_command=STAND_IN)
    shown = subprocess.run(
        [*STAND_IN, "--query-gpu=index,driver_version", "--format=csv,noheader"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    (r,) = records
    assert r.completed == 4 and r.gpu_samples >= 1
    assert r.mean_power_w is not None and r.mean_power_w > 0 and r.tokens_per_joule is not None
    assert len(r.gpus) == len(shown) and r.driver_version == shown[0].split(", ")[1]


async def test_no_gpu_reader_means_no_telemetry(schedule_server: Callable[..., ScheduleServer]) -> None:
    server = schedule_server(ttft_ms=1, interval_ms=1)
    missing = ("/nonexistent/nvidia-smi",)
    (r,) = await bench_url(server.url, CONFIG, label="no-gpus", target=server.url, gpu_command=missing)
    assert r.completed == 4 and r.failed == 0
    assert r.gpu_samples == 0 and r.mean_power_w is None and r.gpus == [] and r.driver_version is None


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


async def test_a_cancelled_level_stops_polling_the_gpus(schedule_server: Callable[..., ScheduleServer]) -> None:
    """Ctrl-C, a tune's abort or the console closing mid-level: the poller ends with the level, rather than
    polling the host's GPUs for as long as the process lives."""
    server = schedule_server(ttft_ms=1, interval_ms=50)  # 8 tokens: a request takes ~0.4 s
    polled = asyncio.Event()

    async def nvidia_smi() -> list[object]:
        polled.set()
        return [{"index": 0, "power_draw_w": 300.0}]

    config = replace(CONFIG, requests=400, telemetry_interval=0.01)
    async with BenchClient(server.url) as client:
        sweep = asyncio.ensure_future(BenchEngine(client, config, gpu_sampler=nvidia_smi).run())
        await polled.wait()
        sweep.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweep
    pollers = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "BenchEngine._sample"]
    assert all(t.done() for t in pollers), pollers


@pytest.mark.system  # a real command, cancelled in flight
async def test_a_poll_cancelled_in_flight_is_ended_and_reaped(tmp_path: Path) -> None:
    """A level that ends while nvidia-smi still runs cancels the poll: the command is ended and reaped at once,
    not left running with its pipe open until the garbage collector meets it after the event loop has closed."""
    started = tmp_path / "pid"
    hung = ("sh", "-c", f"echo $$ > {started}; exec sleep 60", "sh")  # nvidia-smi on a wedged GPU; its args ignored
    poll = asyncio.create_task(nvidia_smi_sampler(hung)())
    deadline = time.monotonic() + 30
    while not started.exists() or not started.read_text().strip():
        assert time.monotonic() < deadline, "the poll's command did not start"
        await asyncio.sleep(0.01)
    pid = int(started.read_text())
    poll.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await poll
    assert not Path(f"/proc/{pid}").exists(), "the cancelled poll's command still runs (or was never reaped)"
