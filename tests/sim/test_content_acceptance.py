"""The stand-in's acceptance depends on what a request is about (console.sim.perf, "content"): the 3-gram repetition
of its prompt. Code and templated text accept more draft tokens than open chat, the synthetic workloads are left as
they were calibrated, and on the Kimi profile the code set turns EAGLE3's loss into a win, in the model and through
a real stand-in process."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.bench.client import BenchClient
from console.bench.datasets import sample_dataset
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec, build_requests, chat_prompts
from console.sim.datasets import chat_conversations, code_prompts, write_datasets
from console.sim.engine import simulate_closed_loop
from console.sim.perf import (
    CONTENT_REJECTION_GAIN,
    REPETITION_FLOOR,
    PerfModel,
    content_rejection_scale,
    ngram_repetition,
)
from console.sim.profiles import get_profile
from tests.support.simproc import SimProcess, running_sim

KIMI = get_profile("kimi-k2.5-int4-8x-rtxpro6000-pcie")
NO_SPEC: dict[str, object] = {}
EAGLE3_V2 = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 2,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 3,
    "disable_overlap_schedule": False,
}


def chat_repetitions() -> list[float]:
    return [ngram_repetition(c["conversations"][0]["value"].split()) for c in chat_conversations(200)]


def code_repetitions() -> list[float]:
    return [ngram_repetition(r["prompt"].split()) for r in code_prompts(200)]


def test_repetition_is_the_share_of_3_grams_seen_before() -> None:
    assert ngram_repetition([]) == 0.0 and ngram_repetition(["a", "b", "c"]) == 0.0
    assert ngram_repetition(["a", "b", "c", "a", "b", "c"]) == 0.25  # abc bca cab abc: one of four seen before
    assert ngram_repetition(["x", "y", "z", "w"]) == 0.0
    assert ngram_repetition(["same"] * 100) == 0.99  # 97 of 98 seen before
    rng = random.Random(1)
    assert ngram_repetition([rng.randrange(1000, 30000) for _ in range(1024)]) == 0.0  # the random workload's ids


def test_repetition_above_the_floor_divides_the_rejections() -> None:
    assert content_rejection_scale(0.0) == content_rejection_scale(REPETITION_FLOOR) == 1.0
    assert content_rejection_scale(0.5) == pytest.approx(1 / (1 + CONTENT_REJECTION_GAIN * (0.5 - REPETITION_FLOOR)))
    model = PerfModel(KIMI, EAGLE3_V2)
    lengths = [model.expected_accept_length(0.0, True, r) for r in (0.0, 0.1, 0.2, 0.4, 0.6)]
    assert lengths[0] == lengths[1] == model.expected_accept_length(0.0, True)  # as calibrated
    assert lengths == sorted(lengths) and lengths[-1] < 3.0  # more repetition, more accepted; never past the tree


def test_the_synthetic_workloads_repeat_nothing_so_their_calibration_holds() -> None:
    for spec in (WorkloadSpec(name="random"), WorkloadSpec(name="random", api="chat"), WorkloadSpec(name="chat")):
        for request in build_requests(spec, 8):
            body = request.body.decode()
            assert ngram_repetition(body.split()) <= REPETITION_FLOOR, spec
    assert max(ngram_repetition(p.split()) for p in chat_prompts()) <= REPETITION_FLOOR


def test_the_generated_chat_repeats_like_open_chat_and_the_code_like_code() -> None:
    chat, code = chat_repetitions(), code_repetitions()
    assert sum(r <= REPETITION_FLOOR for r in chat) >= 0.95 * len(chat)
    assert statistics.median(code) >= 0.4 and min(code) > REPETITION_FLOOR
    model = PerfModel(KIMI, EAGLE3_V2)
    on_chat = statistics.mean(model.expected_accept_length(0.0, True, r) for r in chat)
    on_code = statistics.mean(model.expected_accept_length(0.0, True, r) for r in code)
    assert on_chat == pytest.approx(1.38, abs=0.03)  # the profile's calibrated EAGLE3 acceptance
    assert on_code >= 2.0 and on_code / on_chat >= 1.45


@pytest.mark.parametrize("concurrency", [1, 8])
def test_on_the_kimi_profile_eagle3_loses_on_chat_and_wins_on_code(concurrency: int) -> None:
    """The model on the virtual clock, with each set's median lengths and repetition (bench_serving's way:
    temperature 0, the dataset's own output lengths forced)."""
    runs = max(16, 4 * concurrency)
    chat_rep, code_rep = statistics.median(chat_repetitions()), statistics.median(code_repetitions())
    chat_in = int(statistics.median(len(c["conversations"][0]["value"].split()) for c in chat_conversations(200)))
    chat_out = int(statistics.median(len(c["conversations"][1]["value"].split()) for c in chat_conversations(200)))
    code_in = int(statistics.median(len(r["prompt"].split()) for r in code_prompts(200)))
    code_out = int(statistics.median(r["output_len"] for r in code_prompts(200)))

    def tok_s(setup: dict[str, object], inp: int, out: int, rep: float) -> float:
        return simulate_closed_loop(KIMI, setup, concurrency, inp, out, runs, repetition=rep).output_throughput

    assert tok_s(EAGLE3_V2, chat_in, chat_out, chat_rep) < tok_s(NO_SPEC, chat_in, chat_out, chat_rep)
    assert tok_s(EAGLE3_V2, code_in, code_out, code_rep) > 1.2 * tok_s(NO_SPEC, code_in, code_out, code_rep)


@pytest.fixture(scope="module")
def kimi_eagle3() -> Iterator[SimProcess]:
    args = [
        "--sim-profile", KIMI.name, "--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8",
        "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "3", "--speculative-draft-model-path", "sim/kimi-k2.5-eagle3",
        "--sim-speedup", "20", "--sim-time-scale", "0.001", "--stream-interval", "8",
    ]  # fmt: skip
    with running_sim(args) as sim:
        yield sim


@pytest.mark.system  # a real stand-in process
async def test_a_real_stand_in_accepts_more_on_the_code_set(kimi_eagle3: SimProcess, tmp_path: Path) -> None:
    """What a benchmark sees: the per-request accept length (Σ tokens / Σ verifies from each request's meta_info)
    on 24 requests of each set, 60 output tokens each."""
    chat_file, code_file = write_datasets(tmp_path, count=60, seed=3)
    measured = {}
    for name, path in (("chat", chat_file), ("code", code_file)):
        sample = sample_dataset(path, size=24, seed=1, output_len_cap=60)
        config = SweepConfig(WorkloadSpec(name="dataset", dataset=sample), concurrencies=[4], requests=24, warmup=0)
        async with BenchClient(kimi_eagle3.url) as client:
            level = (await BenchEngine(client, config).run()).levels[0]
        assert level.metrics["failed"] == 0 and level.accept_length_source == "requests"
        measured[name] = level.metrics["accept_length"]
    model = PerfModel(KIMI, EAGLE3_V2)
    assert measured["chat"] == pytest.approx(model.expected_accept_length(0.0, True), rel=0.08)
    assert measured["code"] >= 2.0 and measured["code"] / measured["chat"] >= 1.4, measured
