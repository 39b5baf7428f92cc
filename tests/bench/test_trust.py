"""Trust: against a server whose emission schedule is known exactly, the engine's TPOT, ITL and throughput
are within 1 % of the truth, on /generate and on the chat API, with several tokens per chunk (speculation)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec
from tests.bench.conftest import ScheduleServer

pytestmark = pytest.mark.alone  # measures time against a known truth: runs alone (tests/tiers.py)

OUTPUT_LEN = 64
REQUESTS = 8
OUTSIDE_SCHEDULE_MS = 15  # what a request may cost beyond the server's schedule (HTTP, JSON, a busy machine)


def within(measured: float, truth: float, pct: float) -> bool:
    return abs(measured - truth) <= abs(truth) * pct / 100.0


@pytest.mark.parametrize("api", ["generate", "chat"])
@pytest.mark.parametrize("tokens_per_chunk", [1, 3])
async def test_metrics_match_the_known_schedule(
    schedule_server: Callable[..., ScheduleServer], api: str, tokens_per_chunk: int
) -> None:
    # Requests of about 1 s, so that the few ms a request costs outside the schedule (HTTP, JSON, a busy
    # 2-core CI machine) stay well inside 1 % of the throughput.
    server = schedule_server(
        ttft_ms=40, interval_ms=15 * tokens_per_chunk, tokens_per_chunk=tokens_per_chunk, spec=True
    )
    truth = server.truth(OUTPUT_LEN)
    config = SweepConfig(
        WorkloadSpec(api=api, input_len=16, output_len=OUTPUT_LEN),  # type: ignore[arg-type]
        concurrencies=[4],
        requests=REQUESTS,
        warmup=1,
    )
    async with BenchClient(server.url) as client:
        sweep = await BenchEngine(client, config).run()
    m = sweep.levels[0].metrics
    assert m["completed"] == REQUESTS and m["failed"] == 0
    assert m["total_output_tokens"] == REQUESTS * OUTPUT_LEN
    assert within(m["mean_tpot_ms"], truth["tpot_ms"], 1), (m["mean_tpot_ms"], truth)
    assert within(m["median_tpot_ms"], truth["tpot_ms"], 1)
    assert within(m["mean_itl_ms"], truth["itl_ms"], 1), (m["mean_itl_ms"], truth)
    # Every token after the first chunk has its own ITL entry, even when chunks carry several tokens.
    assert sum(len(r.itl) for r in sweep.levels[0].results) == REQUESTS * (OUTPUT_LEN - tokens_per_chunk)
    # Closed loop at C=4 with 8 equal requests: 2 waves of one request latency each, and each wave's requests cost
    # what they cost outside the schedule, at most the 15 ms allowed on TTFT below (held to 1 % of the schedule
    # alone, the figure was 1.15 % short once, with a core busy: 23 ms over 2 waves).
    waves = REQUESTS / 4
    fastest = REQUESTS * OUTPUT_LEN / (waves * truth["latency_ms"] / 1000)
    slowest = REQUESTS * OUTPUT_LEN / (waves * (truth["latency_ms"] + OUTSIDE_SCHEDULE_MS) / 1000)
    assert m["output_throughput"] == pytest.approx(m["total_output_tokens"] / m["duration"])
    assert 0.99 * slowest <= m["output_throughput"] <= 1.01 * fastest, (m["output_throughput"], slowest, fastest)
    assert within(m["mean_e2e_latency_ms"], truth["latency_ms"], 1)
    # TTFT carries the HTTP round trip on top of the schedule: a few ms on loopback, more on a busy machine.
    assert truth["ttft_ms"] <= m["mean_ttft_ms"] < truth["ttft_ms"] + OUTSIDE_SCHEDULE_MS
    assert within(m["concurrency"], 4, 1)
    if api == "generate":  # from the requests' own spec_verify_ct
        assert m["accept_length"] == pytest.approx(truth["accept_length"])
        assert sweep.levels[0].accept_length_source == "requests"
    else:  # 0.5.x chat streams carry no spec counters: the server's figure, read right after a flush
        assert m["accept_length"] == pytest.approx(tokens_per_chunk)
        assert sweep.levels[0].accept_length_source == "server_after_flush"
