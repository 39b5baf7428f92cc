"""What a benchmark keeps for the prediction, read from a real stand-in process over HTTP: each level's pooled
`spec_accept_histogram` with SGLang 0.5.17's meaning (rounds by drafts accepted; per request as long as the most it saw
+ 1; its sum the verify rounds), from 0.5.23 under its new name, and, from a version that sends none (0.5.6), no
histogram made up."""

from __future__ import annotations

import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec
from console.sim.profiles import EAGLE_REPEAT_DRAFT
from tests.support.simproc import running_sim

pytestmark = pytest.mark.system

SETUP = [
    "--sim-profile", "tiny-test", "--model-path", "sim/tiny-test", "--speculative-algorithm", "EAGLE",
    "--speculative-draft-model-path", EAGLE_REPEAT_DRAFT, "--speculative-num-steps", "3",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--sim-time-scale", "0.001",
]  # fmt: skip


async def one_level(url: str) -> dict[str, object]:
    workload = WorkloadSpec(name="random", input_len=128, output_len=64)
    config = SweepConfig(workload, concurrencies=[4], requests=48, warmup=0)
    async with BenchClient(url) as client:
        result = await BenchEngine(client, config).run()
    return result.levels[0].metrics


async def test_a_0517_level_keeps_the_drawn_histogram() -> None:
    with running_sim([*SETUP, "--sim-sglang-version", "0.5.17"]) as sim:
        metrics = await one_level(sim.url)
    histogram = metrics["spec_accept_histogram"]
    assert isinstance(histogram, list) and len(histogram) == 4  # 0..steps accepted
    assert sum(histogram) == metrics["spec_verify_ct"]
    # the round time rests on the requests whose tokens came in more than one read: a client starved of CPU can read a
    # whole stream at once (TTFT = latency: no decode time to divide), and those rounds are left out of it
    assert isinstance(metrics["decode_rounds"], int) and 0 < metrics["decode_rounds"] <= metrics["spec_verify_ct"]
    # runs, as the H200's: a round that accepts one usually accepts all three ([2302, 39, 20, 405] there)
    assert histogram[3] > histogram[1] + histogram[2]
    assert isinstance(metrics["round_time_ms"], float) and metrics["round_time_ms"] > 0
    assert isinstance(metrics["decode_batch"], float) and 0 < metrics["decode_batch"] <= 4


async def test_a_0523_level_keeps_the_histogram_of_its_new_name() -> None:
    with running_sim([*SETUP, "--sim-sglang-version", "0.5.23"]) as sim:
        metrics = await one_level(sim.url)
    histogram = metrics["spec_accept_histogram"]
    assert isinstance(histogram, list) and len(histogram) == 4 and sum(histogram) == metrics["spec_verify_ct"]
    assert metrics["spec_histogram_key"] == "spec_correct_drafts_histogram" and metrics["spec_spelling"] == "0.5.23"
    assert "spec_accept_histogram" not in metrics["spec_meta_keys"]


async def test_an_older_version_sends_no_histogram_and_none_is_made_up() -> None:
    with running_sim([*SETUP, "--sim-sglang-version", "0.5.6"]) as sim:
        metrics = await one_level(sim.url)
    assert metrics["spec_accept_histogram"] is None and metrics["spec_spelling"] == "0.5.6-0.5.10"
    assert isinstance(metrics["spec_verify_ct"], int) and metrics["accept_length"] is not None  # the mean remains
