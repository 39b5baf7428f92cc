"""What the console's live benchmark view costs beside the load it watches: the engine's events folded into the
live rows (console.tui.presenters.bench_live, called on the event loop for every request), and one repaint of the rows
(console.tui.screens.bench.live_table rendered by Rich, four times a second), for a queue of 2 workloads × 6
levels × 3 repeats. Compared with the event rate of a fast sweep (a closed loop at C = 256 finishing ~2,000
requests/s on a fast server), as the share of one core the view takes. Usage:

    .venv/bin/python benchmarks/console_bench_live.py [--events 200000] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

from rich.console import Console

from console.bench.events import Level, LevelStarted, RequestDone, RunningFigures, SweepStarted
from console.bench.metrics import RequestResult
from console.core.bench import BenchForm, SweepQueued, plan_sweeps
from console.tui.presenters.bench_live import LiveBench
from console.tui.screens.bench import REPAINT_S, live_table

FAST_SWEEP_REQUESTS_PER_S = 2000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sweeps = plan_sweeps(BenchForm(label="x", concurrency="1,8,32,64,128,256", repeat="3", workload="random+chat"))
    live = LiveBench("gpu-a", sweeps)
    level = Level(concurrency=256)
    live.feed(SweepQueued(0, 2, sweeps[0].label, "random"))
    live.feed(SweepStarted(sweeps[0].config.levels(), 3, "0.5.9", "m"))
    live.feed(LevelStarted(level, 0, args.events, None))
    result = RequestResult(success=True, output_len=257, ttft=0.2, latency=3.0)
    started = time.perf_counter()
    for n in range(1, args.events + 1):
        live.feed(RequestDone(level, result, n, 0))
        if n % 1000 == 0:
            live.feed(RunningFigures(level, n / 2000, n, 0, 256, 12345.0, 200.0))
    per_event_us = (time.perf_counter() - started) / args.events * 1e6
    console = Console(width=120, file=open("/dev/null", "w"), force_terminal=True)  # noqa: SIM115
    repaints = 200
    started = time.perf_counter()
    for _ in range(repaints):
        console.print(live_table(live))
    repaint_ms = (time.perf_counter() - started) / repaints * 1000
    share = (FAST_SWEEP_REQUESTS_PER_S * per_event_us / 1e6) + (repaint_ms / 1000 / REPAINT_S)
    figures = {
        "rows": len(live.rows),
        "fold_us_per_event": round(per_event_us, 2),
        "repaint_ms": round(repaint_ms, 2),
        "repaints_per_s": 1 / REPAINT_S,
        "core_share_at_2000_requests_per_s": round(share, 4),
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"live rows: {figures['rows']} (2 workloads × 6 levels × 3 repeats)")
    print(f"fold one event into the rows: {per_event_us:.2f} µs")
    print(f"render the rows (Rich, 120 columns): {repaint_ms:.2f} ms, {1 / REPAINT_S:g} times a second")
    print(f"share of one core at {FAST_SWEEP_REQUESTS_PER_S:,.0f} requests/s: {share:.1%}")


if __name__ == "__main__":
    main()
