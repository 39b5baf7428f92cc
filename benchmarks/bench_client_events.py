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
import resource
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


async def opsconsole_events_per_s(
    url: str, requests: int, output_len: int, http_client: str = "raw"
) -> tuple[float, int, float]:
    config = SweepConfig(
        WorkloadSpec(input_len=32, output_len=output_len),
        concurrencies=[CONCURRENCY],
        requests=requests,
        warmup=0,
        flush_cache=False,
    )
    async with BenchClient(url, http_client=http_client) as client:  # type: ignore[arg-type]
        sweep = await BenchEngine(client, config).run()
    level = sweep.levels[0]
    events = sum(r.events for r in level.results)
    assert level.metrics["failed"] == 0, level.metrics["errors"]
    return events / level.metrics["duration"], events, level.metrics["output_throughput"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_serving_run(url: str, requests: int, output_len: int) -> tuple[float, float, str]:
    """SGLang's bench_serving client on the same workload, through tests/support/sglang_bench.py; it runs as
    a subprocess and inherits this process's CPU affinity (the client core).
    Returns (events per wall second, CPU seconds the subprocess used, what ran or why it could not)."""
    try:
        from tests.support import sglang_bench

        cpu = _children_cpu()
        result = sglang_bench.run_bench_serving(
            url,
            backend="sglang",
            num_prompts=requests,
            input_len=32,
            output_len=output_len,
            max_concurrency=CONCURRENCY,
            timeout=900,
        )
        cpu = _children_cpu() - cpu
    except Exception as exc:  # the comparison is optional: say why it is missing
        return 0.0, 0.0, f"bench_serving not runnable here: {exc}"
    record = result.record
    if result.returncode != 0 or not record:
        return 0.0, 0.0, f"bench_serving failed (exit {result.returncode}): {result.stderr.strip()[-500:]}"
    # One event per token (the server sends one token per chunk) plus [DONE] per request.
    events = record["completed"] * (output_len + 1)
    return events / record["duration"], cpu, f"bench_serving {sglang_bench.SGLANG_VERSION}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2048)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument(
        "--events-per-write", type=int, default=16, help="server side: SSE events per socket write (1 = like SGLang)"
    )
    args = parser.parse_args()
    client_core, server_core = cores()
    proc, port = start_schedule_server(
        "--ttft-ms", "0", "--interval-ms", "0", "--events-per-write", str(args.events_per_write), cpu=server_core
    )
    url = f"http://127.0.0.1:{port}"
    try:
        os.sched_setaffinity(0, {client_core})
        per_cpu: dict[str, float] = {}
        wall_rate: dict[str, float] = {}
        for http_client in ("raw", "aiohttp"):
            start, cpu = time.perf_counter(), time.process_time()
            rate, events, _throughput = asyncio.run(
                opsconsole_events_per_s(url, args.requests, args.output_len, http_client)
            )
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            per_cpu[http_client], wall_rate[http_client] = events / cpu, rate
            # Wall-clock events/s depends on what else the machine runs (and on the server); events per CPU
            # second is what the client would sustain with a core of its own.
            print(f"opsconsole ({http_client:<7}): {rate:>10,.0f} events/s wall, {events / cpu:>10,.0f} events per "
                  f"CPU-second ({events:,} events, {wall:.1f} s, client CPU {cpu / wall:.0%})")  # fmt: skip
        ours, ours_per_cpu = wall_rate["raw"], per_cpu["raw"]
        theirs, their_cpu, name = bench_serving_run(url, args.requests, args.output_len)
        if theirs:
            # Its start-up (imports, tokenizer, prompts) is measured on a one-request run and taken out.
            _, startup_cpu, _ = bench_serving_run(url, 1, args.output_len)
            their_events = args.requests * (args.output_len + 1)
            theirs_per_cpu = their_events / max(1e-9, their_cpu - startup_cpu)
            print(f"bench_serving       : {theirs:>10,.0f} events/s wall, {theirs_per_cpu:>10,.0f} events per "
                  f"CPU-second ({name})")  # fmt: skip
            print(f"ratio (raw / bench_serving): {ours / theirs:.2f}x wall, "
                  f"{ours_per_cpu / theirs_per_cpu:.2f}x per CPU-second")  # fmt: skip
            figures: dict[str, float] = {
                "bench_serving_events_per_s": theirs,
                "bench_serving_events_per_cpu_s": theirs_per_cpu,
            }
        else:
            print(name)
            figures = {}
        figures["opsconsole_aiohttp_events_per_cpu_s"] = per_cpu["aiohttp"]
        print(json.dumps({"opsconsole_events_per_s": ours, "opsconsole_events_per_cpu_s": ours_per_cpu, **figures}))
    finally:
        stop_process(proc)


if __name__ == "__main__":
    main()
