"""How many streamed tokens/s the SGLang stand-in sustains on one CPU core at concurrency 256.

The server runs pinned to core 0 (taskset) with the `tiny-test` profile and `--sim-speedup 1e6`, so model
steps take no time and what is measured is the server's own overhead: scheduling, token generation,
JSON encoding and SSE writes. A closed-loop aiohttp client (on the other cores) keeps 256 streams
open, each asking for OUTPUT_LEN tokens with ignore_eos, and counts completed tokens and SSE chunks.
Cases: without speculation (one token per chunk, the worst case) and EAGLE 3/1/4 (several tokens per
chunk), on /generate (cumulative text, what bench_serving --backend sglang reads) and on
/v1/chat/completions (deltas).

    .venv/bin/python benchmarks/sim_throughput.py [--seconds 10] [--concurrency 256]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.simproc import eagle_args, running_sim

OUTPUT_LEN = 256
SPEC = [*eagle_args(3), "--max-running-requests", "256"]


async def load(url: str, endpoint: str, concurrency: int, seconds: float, warmup: float) -> tuple[float, float]:
    """(tokens/s, chunks/s) over `seconds` after `warmup`, counting only tokens of completed requests."""
    if endpoint == "/generate":
        body = {
            "text": "ba be bi bo",
            "sampling_params": {"max_new_tokens": OUTPUT_LEN, "ignore_eos": True},
            "stream": True,
        }
    else:
        body = {
            "messages": [{"role": "user", "content": "ba be bi bo"}],
            "max_tokens": OUTPUT_LEN,
            "ignore_eos": True,
            "stream": True,
        }
    counting = False
    tokens = 0
    chunks = 0
    stop_at = time.monotonic() + warmup + seconds

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal tokens, chunks
        while time.monotonic() < stop_at:
            n = 0
            async with session.post(url + endpoint, json=body) as r:
                async for line in r.content:
                    if line.startswith(b"data:"):
                        n += 1
            if counting:
                tokens += OUTPUT_LEN
                chunks += n

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
        tasks = [asyncio.create_task(client(session)) for _ in range(concurrency)]
        await asyncio.sleep(warmup)
        counting = True
        started = time.monotonic()
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - started
    return tokens / elapsed, chunks / elapsed


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (whether the server's core was the limit)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def engine_steps_per_s(steps: int = 2000) -> float:
    """The scheduler's own pace: decode steps a second of the engine with 256 running EAGLE requests (median of 5)."""
    from console.sim.engine import Engine
    from console.sim.profiles import get_profile

    rates = []
    for _ in range(5):
        resolved = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                    "speculative_num_draft_tokens": 4, "max_running_requests": 256}  # fmt: skip
        engine = Engine(get_profile("tiny-test"), resolved)
        for i in range(256):
            engine.add(f"r{i}", 256, 1_000_000, ignore_eos=True)
        while engine.num_queued:
            engine.next_step()
        started = time.perf_counter()
        for _ in range(steps):
            engine.next_step()
        rates.append(steps / (time.perf_counter() - started))
    return sorted(rates)[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    server_core, client_cores = cores[0], cores[1:] or cores
    os.sched_setaffinity(0, client_cores)  # keep the load generator off the server's core
    print(
        f"SGLang stand-in on core {server_core}; client on cores {client_cores}; C = {args.concurrency}, "
        f"{OUTPUT_LEN} output tokens per request, {args.seconds:g} s per case"
    )
    print(f"engine alone (no server): {engine_steps_per_s():,.0f} decode steps/s with 256 running requests")
    print(f"{'case':<28}{'endpoint':<24}{'tokens/s':>12}{'chunks/s':>12}{'server CPU':>12}")
    base = ["--sim-profile", "tiny-test", "--sim-time-scale", "0", "--sim-speedup", "1e6", "--skip-server-warmup"]
    for label, extra in (("no speculation", ["--max-running-requests", "256"]), ("EAGLE 3/1/4", SPEC)):
        with running_sim([*base, *extra], cpu=server_core) as sim:
            for endpoint in ("/generate", "/v1/chat/completions"):
                cpu_before, wall_before = cpu_seconds(sim.proc.pid), time.monotonic()
                tok_s, chunk_s = asyncio.run(load(sim.url, endpoint, args.concurrency, args.seconds, warmup=2.0))
                busy = (cpu_seconds(sim.proc.pid) - cpu_before) / (time.monotonic() - wall_before)
                print(f"{label:<28}{endpoint:<24}{tok_s:>12,.0f}{chunk_s:>12,.0f}{busy:>11.0%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
