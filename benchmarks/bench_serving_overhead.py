"""Per-request client overhead of opsconsole's engine and of SGLang's bench_serving, against a known truth.

The known-schedule server (tests/bench/schedule_server.py, pinned to one core) answers every request in
exactly L = ttft + (chunks − 1) × interval, so a closed loop of N requests at concurrency C (N a multiple of C)
would last (N / C) × L with a client that costs nothing. What a client adds per request shows as

    overhead per request = C × duration / N − L        (duration: the client's own benchmark duration)

and its output throughput falls short of the truth by about overhead / (L + overhead). bench_serving opens a
new aiohttp session and TCP connection for every request and, after the last one, calls /get_server_info
inside its timed window; opsconsole's engine keeps its connections. Both run the same workload, several rounds,
optionally while busy loops run (--busy: one, --loops N: N), and optionally from a cgroup of the top CPU weight
(--top-weight: as `make test` runs the timed tests beside the rest of the suite, scripts/run-suite.sh), and the
figures are printed per round and as the worst round.
The test tests/bench/test_agrees_with_bench_serving.py takes its tolerances from these figures.

Neither client warms up (one more whole request of waiting each). The defaults are the truth test's workload
(1.3 s requests, 12 at C = 4); `--prompts 8 --output-len 512` is the agreement test's (2.6 s requests).

Run: .venv/bin/python benchmarks/bench_serving_overhead.py [--rounds 3] [--busy | --loops N] [--top-weight]
     [--output-len 256] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from console.bench.client import BenchClient  # noqa: E402
from console.bench.engine import BenchEngine, SweepConfig  # noqa: E402
from console.bench.workloads import WorkloadSpec  # noqa: E402
from tests.bench.conftest import start_schedule_server, stop_process  # noqa: E402
from tests.support.cgroups import CPU_HIERARCHY, own_cpu_cgroup  # noqa: E402
from tests.support.sglang_bench import run_bench_serving  # noqa: E402


def truth_latency_s(ttft_ms: float, interval_ms: float, per_chunk: int, output_len: int) -> float:
    chunks = -(-output_len // per_chunk)
    return (ttft_ms + (chunks - 1) * interval_ms) / 1000.0


async def ours(url: str, args: argparse.Namespace) -> dict[str, float]:
    config = SweepConfig(
        WorkloadSpec(api="generate", input_len=args.input_len, output_len=args.output_len),
        concurrencies=[args.concurrency],
        requests=args.prompts,
        warmup=0,
    )
    async with BenchClient(url) as client:
        metrics = (await BenchEngine(client, config).run()).levels[0].metrics
    return {k: float(metrics[k]) for k in ("duration", "output_throughput", "mean_tpot_ms", "mean_ttft_ms")}


def theirs(url: str, args: argparse.Namespace) -> dict[str, float]:
    result = run_bench_serving(
        url,
        backend="sglang",
        num_prompts=args.prompts,
        input_len=args.input_len,
        output_len=args.output_len,
        max_concurrency=args.concurrency,
        extra_args=["--warmup-requests", "0"],
    )
    if result.returncode != 0 or not result.record:
        raise RuntimeError(f"bench_serving failed: {result.stderr[-2000:]}")
    return {k: float(result.record[k]) for k in ("duration", "output_throughput", "mean_tpot_ms", "mean_ttft_ms")}


@contextlib.contextmanager
def top_weight() -> Iterator[None]:
    """This process (and what it starts) in a new cgroup of the top CPU weight, as scripts/run-suite.sh runs the timed
    tests; back where it was after."""
    parent = CPU_HIERARCHY / own_cpu_cgroup().lstrip("/")
    cgroup = parent / f"opsconsole-top-weight-{os.getpid()}"
    cgroup.mkdir()
    (cgroup / "cpu.shares").write_text("262144")
    (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    try:
        yield
    finally:
        (parent / "cgroup.procs").write_text(str(os.getpid()))
        cgroup.rmdir()


def judge(figures: dict[str, float], latency_s: float, args: argparse.Namespace) -> dict[str, float]:
    rounds = args.prompts / args.concurrency
    truth_tput = args.prompts * args.output_len / (rounds * latency_s)
    truth_tpot = (latency_s * 1000 - args.ttft_ms) / (args.output_len - 1)
    return {
        "output_throughput": round(figures["output_throughput"], 1),
        "throughput_error_pct": round(100 * (figures["output_throughput"] / truth_tput - 1), 2),
        "overhead_per_request_ms": round(1000 * (figures["duration"] / rounds - latency_s), 2),
        "tpot_error_pct": round(100 * (figures["mean_tpot_ms"] / truth_tpot - 1), 2),
        "ttft_excess_ms": round(figures["mean_ttft_ms"] - args.ttft_ms, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", action="store_true", help="keep one core busy with a busy loop meanwhile")
    parser.add_argument("--loops", type=int, default=0, metavar="N", help="N busy loops meanwhile")
    parser.add_argument("--top-weight", action="store_true", help="measure from a cgroup of the top CPU weight (root)")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--ttft-ms", type=float, default=30.0)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.prompts % args.concurrency:
        parser.error("--prompts must be a multiple of --concurrency (whole rounds of the closed loop)")
    latency_s = truth_latency_s(args.ttft_ms, args.interval_ms, args.tokens_per_chunk, args.output_len)
    cpu = 1 if len(os.sched_getaffinity(0)) > 1 else None
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.loops or int(args.busy))]
    weight = contextlib.ExitStack()
    if args.top_weight:  # the loops stay where they were started: they stand for the rest of the suite
        weight.enter_context(top_weight())
    server, port = start_schedule_server(
        "--ttft-ms",
        str(args.ttft_ms),
        "--interval-ms",
        str(args.interval_ms),
        "--tokens-per-chunk",
        str(args.tokens_per_chunk),
        "--spec",
        cpu=cpu,
    )
    url = f"http://127.0.0.1:{port}"
    rows: list[dict[str, Any]] = []
    try:
        for index in range(args.rounds):
            rows.append(
                {"round": index + 1, "client": "opsconsole", **judge(asyncio.run(ours(url, args)), latency_s, args)}
            )
            rows.append({"round": index + 1, "client": "bench_serving", **judge(theirs(url, args), latency_s, args)})
    finally:
        stop_process(server)
        weight.close()
        for loop in loops:
            loop.kill()
            loop.wait()
    worst = {
        client: {
            "worst_throughput_error_pct": min(r["throughput_error_pct"] for r in rows if r["client"] == client),
            "worst_overhead_per_request_ms": max(r["overhead_per_request_ms"] for r in rows if r["client"] == client),
            "worst_tpot_error_pct": max(abs(r["tpot_error_pct"]) for r in rows if r["client"] == client),
        }
        for client in ("opsconsole", "bench_serving")
    }
    workload = {
        "truth_latency_ms": latency_s * 1000,
        "prompts": args.prompts,
        "concurrency": args.concurrency,
        "output_len": args.output_len,
        "busy_core": args.busy,
        "busy_loops": len(loops),
        "top_weight": args.top_weight,
    }
    if args.json:
        print(json.dumps({"workload": workload, "rounds": rows, "worst": worst}))
        return 0
    print(f"workload: {workload}")
    for row in rows:
        print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
    for client, figures in worst.items():
        print(f"worst {client}: " + "  ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
