"""`bench --dataset` next to SGLang's own bench_serving in its sharegpt mode, on the same ShareGPT file: the same
requests in the same order with the same lengths (bench_serving's own sample_sharegpt_requests, run here, counting
with the stand-in's tokenizer folder as ours counts with the server's /tokenize), and against the same stand-in the
same request count and output tokens, output throughput within 3 % and median TTFT within 5 %. The control: counted
in words, as before, the output tokens are those of another workload (the stand-in's tokens are not words: punctuation
counts apart, as on the H200's tiny tokenizer, where words made bench_serving ask for 16.5 % more).

Why the stand-in is slowed (Kimi profile at 0.4× real time) and its prompts long (300-450 sentences, ~2,200 words):
bench_serving opens a new HTTP session for every request inside its timed window (tests/bench/
test_agrees_with_bench_serving.py), which on this busy 2-core machine adds 7 to 12 ms to each of its TTFTs; with a
prefill of about 400 ms that is under 3 %, and with requests of about 2 s its throughput loses under 1 %. At C = 1 a
request's TTFT is its own prefill (no other request's decode step to wait for), the same for both clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.bench.client import BenchClient
from console.bench.datasets import sample_dataset
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec
from console.core.bench.tokens import LengthsCounted, count_lengths
from console.sim.datasets import chat_conversations, write_datasets
from console.sim.tokenizer import SimTokenizer
from tests.support.sglang_bench import bench_serving_sharegpt_sample, run_bench_serving
from tests.support.simproc import SimProcess, running_sim

pytestmark = pytest.mark.system  # bench_serving and the stand-in as processes (tests/tiers.py)

PROMPTS = 8


def sim_tokens(texts: object) -> list[int]:
    """The stand-in's count (its /tokenize's, and its tokenizer folder's: tests/sim/test_tokenizer_pieces.py)."""
    return [SimTokenizer().count(t) for t in texts]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("count", "num_prompts", "seed"), [(60, 20, 1), (60, 60, 3), (40, 200, 2)])
def test_the_same_file_and_seed_give_bench_serving_s_requests_in_its_order(
    tmp_path: Path, count: int, num_prompts: int, seed: int
) -> None:
    rows = chat_conversations(count, seed=5)
    rows[3]["conversations"] = rows[3]["conversations"][:1]  # left out before bench_serving's shuffle
    rows[4]["conversations"][1]["value"] = "ok"  # shuffled with the rest, dropped by its length filter
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(rows))
    theirs = bench_serving_sharegpt_sample(path, num_prompts, seed)
    ours = sample_dataset(path, size=num_prompts, seed=seed, count=sim_tokens)
    assert [(r.prompt, r.prompt_len, r.output_len) for r in ours.requests] == theirs
    assert len(theirs) == min(num_prompts, count - 2)
    words = sample_dataset(path, size=num_prompts, seed=seed)  # the control: the same requests, other lengths
    assert [r.prompt for r in words.requests] == [p for p, _n, _m in theirs]
    assert sum(r.output_len or 0 for r in words.requests) < 0.95 * sum(m for _p, _n, m in theirs)


def test_the_generated_chat_set_samples_alike(tmp_path: Path) -> None:
    chat, _code = write_datasets(tmp_path, count=50, seed=2)
    theirs = bench_serving_sharegpt_sample(chat, 30, 1)
    ours = sample_dataset(chat, size=30, count=sim_tokens)
    assert [(r.prompt, r.prompt_len, r.output_len) for r in ours.requests] == theirs


@pytest.fixture
def slow_kimi() -> Iterator[SimProcess]:
    args = [
        "--sim-profile", "kimi-k2.5-int4-8x-rtxpro6000-pcie", "--model-path", "moonshotai/Kimi-K2.5",
        "--tp-size", "8", "--sim-speedup", "0.4", "--sim-time-scale", "0.001",
    ]  # fmt: skip
    with running_sim(args) as sim:
        yield sim


@pytest.mark.alone  # measures time (tests/tiers.py): run on its own
async def test_agrees_with_bench_serving_on_the_same_sharegpt_file(slow_kimi: SimProcess, tmp_path: Path) -> None:
    path = tmp_path / "long-chat.json"
    rows = chat_conversations(40, seed=1, prompt_sentences=(300, 450), answer_sentences=(5, 15))
    path.write_text(json.dumps(rows))

    record = run_bench_serving(
        slow_kimi.url,
        num_prompts=PROMPTS,
        max_concurrency=1,
        sharegpt=path,
        tokenizer=slow_kimi.state_dir / "tokenizer",  # the folder the stand-in ships for its clients
        extra_args=["--warmup-requests", "0"],
    ).record
    assert record, "bench_serving wrote no result"

    words = sample_dataset(path, size=PROMPTS, seed=1)  # as the CLI reads it before connecting
    config = SweepConfig(WorkloadSpec(name="dataset", dataset=words), concurrencies=[1], requests=PROMPTS, warmup=0)
    said: list[LengthsCounted] = []
    config = await count_lengths(config, slow_kimi.url, on_event=said.append)  # the server's /tokenize
    assert said[0].unit == "tokens" and said[0].counter == "the server's /tokenize"
    async with BenchClient(slow_kimi.url) as client:
        mine = (await BenchEngine(client, config).run()).levels[0].metrics

    assert mine["completed"] == record["completed"] == PROMPTS and mine["failed"] == 0
    assert mine["total_output_tokens"] == record["total_output_tokens"]  # the same requests, the same lengths
    in_words = sum(words.output_len(r) for r in words.requests)
    assert in_words < 0.95 * record["total_output_tokens"]  # the control: words would have asked for fewer
    shown = (mine["output_throughput"], record["output_throughput"], mine["median_ttft_ms"], record["median_ttft_ms"])
    assert mine["output_throughput"] == pytest.approx(record["output_throughput"], rel=0.03), shown
    assert mine["median_ttft_ms"] == pytest.approx(record["median_ttft_ms"], rel=0.05), shown
