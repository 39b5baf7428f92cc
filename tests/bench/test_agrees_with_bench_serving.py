"""SGLang's own bench_serving and opsconsole's engine, run on the same server and workload, agree within 3 %
on output throughput and mean TPOT (native /generate and the OpenAI chat API).

bench_serving opens a new connection per request, which costs it a few ms per request; requests last about
half a second here so that this overhead stays well inside the 3 % (with 0.26 s requests it reached 3 %)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec
from tests.bench.conftest import ScheduleServer
from tests.support.sglang_bench import run_bench_serving

PROMPTS, CONCURRENCY, INPUT_LEN, OUTPUT_LEN = 32, 8, 32, 96


@pytest.mark.parametrize(("backend", "api"), [("sglang", "generate"), ("sglang-oai-chat", "chat")])
async def test_same_figures_as_bench_serving(
    schedule_server: Callable[..., ScheduleServer], backend: str, api: str
) -> None:
    server = schedule_server(ttft_ms=30, interval_ms=10, tokens_per_chunk=2, spec=True)
    theirs = run_bench_serving(
        server.url,
        backend=backend,
        num_prompts=PROMPTS,
        input_len=INPUT_LEN,
        output_len=OUTPUT_LEN,
        max_concurrency=CONCURRENCY,
    )
    assert theirs.returncode == 0 and theirs.record, theirs.stderr[-2000:]
    assert theirs.record["completed"] == PROMPTS

    config = SweepConfig(
        WorkloadSpec(api=api, input_len=INPUT_LEN, output_len=OUTPUT_LEN),  # type: ignore[arg-type]
        concurrencies=[CONCURRENCY],
        requests=PROMPTS,
        warmup=1,
    )
    async with BenchClient(server.url) as client:
        ours = (await BenchEngine(client, config).run()).levels[0].metrics

    for key in ("output_throughput", "mean_tpot_ms"):
        assert ours[key] == pytest.approx(theirs.record[key], rel=0.03), (key, ours[key], theirs.record[key])
    assert ours["total_output_tokens"] == theirs.record["total_output_tokens"]
