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
    # Closed loop at C=4 with 8 equal requests: 2 waves of one request latency each.
    expected_throughput = REQUESTS * OUTPUT_LEN / (REQUESTS / 4 * truth["latency_ms"] / 1000)
    assert within(m["output_throughput"], expected_throughput, 1), (m["output_throughput"], expected_throughput)
    assert within(m["mean_e2e_latency_ms"], truth["latency_ms"], 1)
    # TTFT carries the HTTP round trip on top of the schedule: a few ms on loopback, more on a busy machine.
    assert truth["ttft_ms"] <= m["mean_ttft_ms"] < truth["ttft_ms"] + 15
    assert within(m["concurrency"], 4, 1)
    if api == "generate":  # from the requests' own spec_verify_ct
        assert m["accept_length"] == pytest.approx(truth["accept_length"])
        assert sweep.levels[0].accept_length_source == "requests"
    else:  # 0.5.x chat streams carry no spec counters: the server's figure, read right after a flush
        assert m["accept_length"] == pytest.approx(tokens_per_chunk)
        assert sweep.levels[0].accept_length_source == "server_after_flush"
