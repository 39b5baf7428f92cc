"""opsconsole's engine and SGLang's own bench_serving, on the same known-schedule server (native /generate and
the OpenAI chat API): both judged against the server's truth, and compared with each other where that is fair.

Why not only compare them: bench_serving opens a new aiohttp session and TCP connection for every request and
calls /get_server_info inside its timed window, so its closed loop loses time per request that ours does not
(benchmarks/bench_serving_overhead.py, per request of a slot, on this 2-core machine shared with other work:
bench_serving 11 to 22 ms, up to 28 ms with one core kept busy and 50 ms with two busy loops; opsconsole
2 to 8 ms, up to 17 ms under load, much of it the server's own handling of requests that arrive together).
With 0.5 s requests that made it read 3 to 4 % below ours on a busy machine, and a 3 % agreement check failed
for a reason that is not ours.

- Truth (test_both_against_the_known_schedule): ours' TPOT within 1 % of the truth, its throughput below the truth
  by no more than OURS_OVERHEAD_ALLOWANCE_S a request (2.5 % here) and above it by no more than 1 %.
  bench_serving's TPOT within 1 % too (it is measured inside one request, where its overhead does not fall),
  and its throughput below the truth by no more than its per-request overhead allows: OVERHEAD_ALLOWANCE_S
  (about twice the worst measured with one core busy) added to every request (1.3 s here: 3.7 % below).
- Agreement (test_agrees_with_bench_serving_where_its_overhead_is_small): long requests (2.6 s), two per
  slot, where that allowance is 1.9 % of a request: the two throughputs within that plus ours' 1 %, TPOT 1 %.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec
from tests.bench.conftest import ScheduleServer
from tests.support.sglang_bench import run_bench_serving

pytestmark = pytest.mark.alone  # measures time against a known truth: runs alone (tests/tiers.py)

OURS_REL = 0.01  # ours against the truth: throughput and TPOT
TPOT_REL = 0.01  # TPOT is measured within each request: per-request overhead does not reach it
# bench_serving's own cost per request (new session + connection, /get_server_info in the window): about 2x the
# worst measured with one core busy (28 ms; 50 ms with two busy loops), benchmarks/bench_serving_overhead.py.
OVERHEAD_ALLOWANCE_S = 0.050
# Ours' cost per request, by the same rule: about 2x the worst measured under load (17 ms, above). Held to 1 % of the
# truth instead, the engine on the testbed host with a core busy read 1.06 % below it (14 ms a request).
OURS_OVERHEAD_ALLOWANCE_S = 0.034
BACKENDS = [("sglang", "generate"), ("sglang-oai-chat", "chat")]


@dataclass(frozen=True)
class Workload:
    prompts: int
    concurrency: int
    input_len: int
    output_len: int
    ttft_ms: float
    interval_ms: float
    tokens_per_chunk: int

    @property
    def rounds(self) -> int:
        assert self.prompts % self.concurrency == 0, "whole rounds of the closed loop"
        return self.prompts // self.concurrency


# 1.3 s requests, 3 per slot: bench_serving's overhead shows, ours must not.
TRUTH = Workload(
    prompts=12, concurrency=4, input_len=32, output_len=256, ttft_ms=30, interval_ms=10, tokens_per_chunk=2
)
# 2.6 s requests, 2 per slot: bench_serving's overhead is at most 1.9 % of a request by the allowance.
AGREEMENT = Workload(
    prompts=8, concurrency=4, input_len=32, output_len=512, ttft_ms=30, interval_ms=10, tokens_per_chunk=2
)


def start(schedule_server: Callable[..., ScheduleServer], w: Workload) -> ScheduleServer:
    return schedule_server(ttft_ms=w.ttft_ms, interval_ms=w.interval_ms, tokens_per_chunk=w.tokens_per_chunk, spec=True)


def theirs(server: ScheduleServer, backend: str, w: Workload) -> dict[str, Any]:
    result = run_bench_serving(
        server.url,
        backend=backend,
        num_prompts=w.prompts,
        input_len=w.input_len,
        output_len=w.output_len,
        max_concurrency=w.concurrency,
        extra_args=["--warmup-requests", "0"],  # a warm-up is one more whole request of waiting, for both
    )
    assert result.returncode == 0 and result.record, result.stderr[-2000:]
    assert result.record["completed"] == w.prompts
    assert result.record["total_output_tokens"] == w.prompts * w.output_len
    return result.record


async def ours(server: ScheduleServer, api: str, w: Workload) -> dict[str, Any]:
    config = SweepConfig(
        WorkloadSpec(api=api, input_len=w.input_len, output_len=w.output_len),  # type: ignore[arg-type]
        concurrencies=[w.concurrency],
        requests=w.prompts,
        warmup=0,
    )
    async with BenchClient(server.url) as client:
        metrics = (await BenchEngine(client, config).run()).levels[0].metrics
    assert metrics["completed"] == w.prompts and metrics["failed"] == 0
    assert metrics["total_output_tokens"] == w.prompts * w.output_len
    return metrics


def truth_throughput(server: ScheduleServer, w: Workload) -> float:
    """A client that costs nothing: `rounds` requests back to back per slot, each lasting exactly its schedule."""
    return w.prompts * w.output_len / (w.rounds * server.truth(w.output_len)["latency_ms"] / 1000)


def ours_within_truth(measured: float, server: ScheduleServer, w: Workload) -> bool:
    """Ours' throughput against a client that costs nothing: below it by at most OURS_OVERHEAD_ALLOWANCE_S a
    request, above it only by timer noise (OURS_REL)."""
    expected = truth_throughput(server, w)
    latency_s = server.truth(w.output_len)["latency_ms"] / 1000
    return expected * latency_s / (latency_s + OURS_OVERHEAD_ALLOWANCE_S) <= measured <= expected * (1 + OURS_REL)


def overhead_per_request_ms(record: dict[str, Any], server: ScheduleServer, w: Workload) -> float:
    """What the client added to each request of a slot (see benchmarks/bench_serving_overhead.py)."""
    return 1000 * record["duration"] / w.rounds - server.truth(w.output_len)["latency_ms"]


@pytest.mark.parametrize(("backend", "api"), BACKENDS)
async def test_both_against_the_known_schedule(
    schedule_server: Callable[..., ScheduleServer], backend: str, api: str
) -> None:
    server = start(schedule_server, TRUTH)
    truth = server.truth(TRUTH.output_len)
    expected = truth_throughput(server, TRUTH)

    mine = await ours(server, api, TRUTH)
    assert ours_within_truth(mine["output_throughput"], server, TRUTH), (
        mine["output_throughput"],
        expected,
        overhead_per_request_ms(mine, server, TRUTH),
    )
    assert mine["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"], rel=OURS_REL)

    record = theirs(server, backend, TRUTH)
    assert record["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"], rel=TPOT_REL)
    latency_s = truth["latency_ms"] / 1000
    lowest = expected * latency_s / (latency_s + OVERHEAD_ALLOWANCE_S)  # each request OVERHEAD_ALLOWANCE_S longer
    shown = (record["output_throughput"], lowest, expected, f"{overhead_per_request_ms(record, server, TRUTH):.1f} ms")
    # A client can lose time, never gain it: above the truth only by timer noise.
    assert lowest <= record["output_throughput"] <= expected * (1 + OURS_REL), shown


@pytest.mark.parametrize(("backend", "api"), BACKENDS)
async def test_agrees_with_bench_serving_where_its_overhead_is_small(
    schedule_server: Callable[..., ScheduleServer], backend: str, api: str
) -> None:
    server = start(schedule_server, AGREEMENT)
    record = theirs(server, backend, AGREEMENT)
    mine = await ours(server, api, AGREEMENT)
    latency_s = server.truth(AGREEMENT.output_len)["latency_ms"] / 1000
    throughput_rel = OVERHEAD_ALLOWANCE_S / latency_s + OURS_REL  # theirs may lag by its overhead, ours by 1 %
    assert mine["output_throughput"] == pytest.approx(record["output_throughput"], rel=throughput_rel), (
        mine["output_throughput"],
        record["output_throughput"],
        f"their overhead {overhead_per_request_ms(record, server, AGREEMENT):.1f} ms a request",
    )
    assert mine["mean_tpot_ms"] == pytest.approx(record["mean_tpot_ms"], rel=TPOT_REL)
    assert mine["total_output_tokens"] == record["total_output_tokens"]
