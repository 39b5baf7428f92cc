"""How many streamed SSE events per second the benchmark client follows on one core, at C = 256.

The known-schedule test server (tests/bench/schedule_server.py) runs in its own process pinned to one core
and emits as fast as it can (`--interval-ms 0`: no pause between chunks, one token per chunk, /generate's
cumulative-text shape); the client runs pinned to the other core. Both clients get the same workload in
the same run: opsconsole's engine, then SGLang's own bench_serving client (when tests/support/sglang_bench.py
can run it). Prints both figures and the ratio.

Run: .venv/bin/python benchmarks/bench_client_events.py [--requests 2048] [--output-len 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from console.bench.client import BenchClient  # noqa: E402
from console.bench.engine import BenchEngine, SweepConfig  # noqa: E402
from console.bench.workloads import WorkloadSpec  # noqa: E402
from tests.bench.conftest import start_schedule_server, stop_process  # noqa: E402

CONCURRENCY = 256


def cores() -> tuple[int, int | None]:
    """(client core, server core); on a one-core machine both share it and the figure says so."""
    available = sorted(os.sched_getaffinity(0))
    return available[0], (available[1] if len(available) > 1 else None)


async def opsconsole_events_per_s(url: str, requests: int, output_len: int) -> tuple[float, int, float]:
    config = SweepConfig(
        WorkloadSpec(input_len=32, output_len=output_len),
        concurrencies=[CONCURRENCY],
        requests=requests,
        warmup=0,
        flush_cache=False,
    )
    async with BenchClient(url) as client:
        sweep = await BenchEngine(client, config).run()
    level = sweep.levels[0]
    events = sum(r.events for r in level.results)
    assert level.metrics["failed"] == 0, level.metrics["errors"]
    return events / level.metrics["duration"], events, level.metrics["output_throughput"]


def bench_serving_events_per_s(url: str, requests: int, output_len: int) -> tuple[float, str]:
    """SGLang's bench_serving client on the same workload, through tests/support/sglang_bench.py.
    It runs as a subprocess and inherits this process's CPU affinity (the client core)."""
    try:
        from tests.support import sglang_bench

        result = sglang_bench.run_bench_serving(
            url,
            backend="sglang",
            num_prompts=requests,
            input_len=32,
            output_len=output_len,
            max_concurrency=CONCURRENCY,
            timeout=900,
        )
    except Exception as exc:  # the comparison is optional: say why it is missing
        return 0.0, f"bench_serving not runnable here: {exc}"
    record = result.record
    if result.returncode != 0 or not record:
        return 0.0, f"bench_serving failed (exit {result.returncode}): {result.stderr.strip()[-500:]}"
    # One event per token (the server sends one token per chunk) plus [DONE] per request.
    events = record["completed"] * (output_len + 1)
    return events / record["duration"], f"bench_serving {sglang_bench.SGLANG_VERSION}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2048)
    parser.add_argument("--output-len", type=int, default=256)
    args = parser.parse_args()
    client_core, server_core = cores()
    proc, port = start_schedule_server("--ttft-ms", "0", "--interval-ms", "0", cpu=server_core)
    url = f"http://127.0.0.1:{port}"
    try:
        os.sched_setaffinity(0, {client_core})
        start = time.perf_counter()
        ours, events, tput = asyncio.run(opsconsole_events_per_s(url, args.requests, args.output_len))
        print(f"opsconsole engine : {ours:>10,.0f} events/s  ({events:,} events, {tput:,.0f} tok/s, "
              f"{time.perf_counter() - start:.1f} s)")  # fmt: skip
        theirs, name = bench_serving_events_per_s(url, args.requests, args.output_len)
        if theirs:
            print(f"{name:<18}: {theirs:>10,.0f} events/s")
            print(f"ratio             : {ours / theirs:.2f}x")
        else:
            print(name)
        print(json.dumps({"opsconsole_events_per_s": ours, "bench_serving_events_per_s": theirs or None}))
    finally:
        stop_process(proc)


if __name__ == "__main__":
    main()
