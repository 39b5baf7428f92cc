"""What full garbage collections in the load generator's process do to a level's figures, with and without them held
during the measured requests (console.bench.engine.full_collections_held).

The console runs the load generator in its own process (`on-host`, and `console` through the SSH forward), beside a
Textual app of a few hundred thousand objects; a full collection walks all of them and holds every coroutine
meanwhile (0.8-1.1 s measured in the suite's workers on this 2-core machine). Here the process holds --heap
long-lived objects, like a console that has been up a while, and a background task makes objects that live about a
second, like an app that allocates as it renders, so that the collector's own thresholds call full collections.
The load is C=1 against the known-schedule server (tests/bench/schedule_server.py, on its own core where there are
two), so the truth is exact: each request takes TTFT + (chunks - 1) x interval, and each chunk comes one interval
after the one before.

Cases, alternated round by round in one run: `collects in full` (the hold off) and `as shipped`. Printed per case:
the full collections during the levels and their median time (a gc callback), and the medians over the rounds of
output tok/s against the truth, max ITL and p99 ITL.

    .venv/bin/python benchmarks/bench_gc_pause.py [--rounds 3] [--heap 2000000]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.bench import engine
from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.events import LevelDone, LevelStarted
from console.bench.workloads import WorkloadSpec
from tests.bench.conftest import start_schedule_server, stop_process

TTFT_MS, INTERVAL_MS, OUTPUT_LEN, REQUESTS = 40.0, 15.0, 64, 6
RENDER_EVERY_S, RENDER_OBJECTS, RENDER_LIFETIME = 0.005, 2000, 200  # 400k objects/s, each kept ~1 s


async def render_like_an_app() -> None:
    kept: collections.deque[list[list[int]]] = collections.deque(maxlen=RENDER_LIFETIME)
    while True:
        await asyncio.sleep(RENDER_EVERY_S)
        kept.append([[i] for i in range(RENDER_OBJECTS)])


class FullCollections:
    """The full collections inside the measured requests (between LevelStarted and LevelDone), timed."""

    def __init__(self) -> None:
        self.measuring = False
        self.seconds: list[float] = []
        self._started: float | None = None

    def on_event(self, event: object) -> None:
        if isinstance(event, LevelStarted):
            self.measuring = True
        elif isinstance(event, LevelDone):
            self.measuring = False

    def callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter() if self.measuring else None
        elif self._started is not None:
            self.seconds.append(time.perf_counter() - self._started)
            self._started = None


async def one_level(url: str, hold: bool) -> tuple[dict[str, float], list[float]]:
    config = SweepConfig(
        WorkloadSpec(api="generate", input_len=16, output_len=OUTPUT_LEN), concurrencies=[1], requests=REQUESTS
    )
    full = FullCollections()
    patch = (
        contextlib.nullcontext() if hold else mock.patch.object(engine, "full_collections_held", contextlib.nullcontext)
    )
    async with BenchClient(url) as client:
        renderer = asyncio.create_task(render_like_an_app())
        gc.callbacks.append(full.callback)
        try:
            with patch:
                await asyncio.sleep(1.0)  # the renderer's objects reach the old generation
                sweep = await BenchEngine(client, config, on_event=full.on_event).run()
        finally:
            gc.callbacks.remove(full.callback)
            renderer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renderer
    return sweep.levels[0].metrics, full.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heap", type=int, default=2_000_000, help="long-lived objects the process holds")
    args = parser.parse_args()
    heap = [[i] for i in range(args.heap)]  # small lists: each one an object the collector walks
    gc.collect()
    proc, port = start_schedule_server(
        "--ttft-ms", str(TTFT_MS), "--interval-ms", str(INTERVAL_MS), *(["--cpu", "1"] if _two_cores() else [])
    )
    truth_tok_s = OUTPUT_LEN / ((TTFT_MS + (OUTPUT_LEN - 1) * INTERVAL_MS) / 1000)
    cases = {"collects in full": False, "as shipped": True}
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    pauses: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for _ in range(args.rounds):
            for name, hold in cases.items():
                metrics, paused = asyncio.run(one_level(f"http://127.0.0.1:{port}", hold))
                figures[name].append(metrics)
                pauses[name] += paused
    finally:
        stop_process(proc)
    made = RENDER_OBJECTS / RENDER_EVERY_S
    print(f"heap {len(heap):,} objects, {made:,.0f} objects/s made; C=1, {REQUESTS} requests of {OUTPUT_LEN} tokens")
    print(f"truth {truth_tok_s:.1f} tok/s, ITL {INTERVAL_MS:g} ms; medians of {args.rounds} rounds")
    header = ("case", "full coll.", "median ms", "tok/s", "of truth", "max ITL ms", "p99 ITL ms")
    print(f"{header[0]:16} " + " ".join(f"{h:>10}" for h in header[1:]))
    for name in cases:
        runs = figures[name]
        tok_s = statistics.median(m["output_throughput"] for m in runs)
        row = (
            len(pauses[name]),
            f"{statistics.median(pauses[name] or [0.0]) * 1000:.1f}",
            f"{tok_s:.1f}",
            f"{tok_s / truth_tok_s:.1%}",
            f"{statistics.median(m['max_itl_ms'] for m in runs):.1f}",
            f"{statistics.median(m['p99_itl_ms'] for m in runs):.1f}",
        )
        print(f"{name:16} " + " ".join(f"{cell:>10}" for cell in row))


def _two_cores() -> bool:
    return len(os.sched_getaffinity(0)) > 1


if __name__ == "__main__":
    main()
