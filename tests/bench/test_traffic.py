"""The operator's traffic end to end against real servers: a dataset's sample sent with its own output lengths and
each level judged against an SLO (the local engine and the load generator that runs on a GPU host alike, on the
known-schedule server); prompts too long for the stand-in's context skipped and counted, or refused before anything
is sent; and `bench --find-capacity` searching the stand-in's request rate until it brackets the capacity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from console.bench.client import BenchClient
from console.bench.datasets import sample_dataset
from console.bench.engine import BenchEngine, SweepConfig, SweepResult
from console.bench.remote import HostSweep
from console.bench.slo import CapacitySearch
from console.bench.workloads import WorkloadSpec
from console.sglang.client import parse_metrics
from console.sim.datasets import chat_conversations
from console.sim.tokenizer import SimTokenizer
from tests.bench.conftest import ScheduleServer
from tests.support.cli_run import run_cli
from tests.support.localproc import local_process
from tests.support.simproc import FAST, SimProcess, running_sim

pytestmark = pytest.mark.system  # real servers and the CLI as a process (tests/tiers.py)

OPSCONSOLE = Path(sys.executable).with_name("opsconsole")
LENGTHS = [8, 12, 20, 9, 30, 16]


def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "traffic.jsonl"
    lines = [
        json.dumps({"prompt": f"question {i} " + "word " * (5 + i), "output_len": n}) for i, n in enumerate(LENGTHS)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def config_for(path: Path, slo: dict[str, float], **kwargs: object) -> SweepConfig:
    sample = sample_dataset(path, size=100, seed=1)
    workload = WorkloadSpec(name="dataset", dataset=sample)
    return SweepConfig(workload, concurrencies=[2], requests=len(LENGTHS), warmup=0, slo=slo, **kwargs)  # type: ignore[arg-type]


async def local(server: ScheduleServer, config: SweepConfig) -> SweepResult:
    async with BenchClient(server.url) as client:
        return await BenchEngine(client, config).run()


async def on_host(server: ScheduleServer, config: SweepConfig) -> SweepResult:
    return await HostSweep(local_process, sys.executable, server.url, config, gpu_command=None).run()


@pytest.mark.parametrize("where", [local, on_host], ids=["local", "agent"])
async def test_a_dataset_goes_out_with_its_own_lengths_and_each_level_is_judged(
    schedule_server: Callable[..., ScheduleServer], tmp_path: Path, where: Callable[..., object]
) -> None:
    server = schedule_server(ttft_ms=20, interval_ms=5, tokens_per_chunk=1)
    path = dataset(tmp_path)
    generous = await where(server, config_for(path, {"ttft_p95": 5000.0, "tpot_p95": 500.0}))  # type: ignore[misc]
    (level,) = generous.levels
    m = level.metrics
    assert (m["completed"], m["failed"]) == (len(LENGTHS), 0)
    assert m["total_output_tokens"] == sum(LENGTHS)  # each request its own output length, forced
    assert m["slo_met"] is True and m["slo_misses"] == [] and m["slo"] == {"ttft_p95": 5000.0, "tpot_p95": 500.0}
    assert m["request_goodput"] == pytest.approx(len(LENGTHS) / m["duration"])
    assert m["slo_attainment"] == 1.0

    strict = await where(server, config_for(path, {"ttft_p50": 1.0}))  # type: ignore[misc]
    s = strict.levels[0].metrics
    assert s["slo_met"] is False and s["request_goodput"] == 0.0 and s["slo_attainment"] == 0.0
    assert s["slo_misses"][0].startswith("TTFT p50 ") and s["slo_misses"][0].endswith(" ms > 1 ms")


async def test_without_requests_or_duration_a_level_sends_the_dataset_sample_whole(
    schedule_server: Callable[..., ScheduleServer], tmp_path: Path
) -> None:
    """As bench_serving's --num-prompts: `--dataset-sample 6` sends 6 requests, not the concurrency's default 16."""
    server = schedule_server(ttft_ms=5, interval_ms=1, tokens_per_chunk=1)
    config = replace(config_for(dataset(tmp_path), {"ttft_p95": 5000.0}), requests=None)
    result = await local(server, config)
    assert result.levels[0].metrics["completed"] == len(LENGTHS)


@pytest.fixture
def small_context() -> Iterator[SimProcess]:
    with running_sim([*FAST, "--context-length", "20", "--enable-metrics"]) as sim:
        yield sim


def bench_cli(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli([str(OPSCONSOLE), "--workspace", str(workspace), "bench", *args], timeout=240, env=dict(os.environ))


def prompt_tokens_sent(sim: SimProcess) -> float:
    with urllib.request.urlopen(sim.url + "/metrics", timeout=10) as answer:
        metrics = parse_metrics(answer.read().decode())
    return sum(v for k, v in metrics.items() if k.startswith("sglang:prompt_tokens_total"))


def test_prompts_longer_than_the_context_are_skipped_and_counted_or_refused(
    small_context: SimProcess, tmp_path: Path
) -> None:
    path = dataset(tmp_path)  # prompts of 7 to 12 words: those over 20 - none; make two longer ones
    lines = path.read_text().splitlines()
    lines += [json.dumps({"prompt": "long " * 40, "output_len": 8}), json.dumps({"prompt": "longer " * 60})]
    path.write_text("\n".join(lines) + "\n")
    common = ("--url", small_context.url, "--dataset", str(path), "--concurrency", "1", "--requests", "3")
    before = prompt_tokens_sent(small_context)

    refused = bench_cli(tmp_path / "ws", *common, "--long-prompts", "error", "--warmup", "1")
    assert refused.returncode == 2, refused.stderr
    assert "2 of the 8 requests sampled from traffic.jsonl have a prompt longer than the server's context" in (
        " ".join(refused.stderr.split())
    )
    assert "nothing was sent" in refused.stderr and prompt_tokens_sent(small_context) == before
    assert not list((tmp_path / "ws" / "logs").glob("bench-*.jsonl"))

    done = bench_cli(tmp_path / "ws", *common, "--json", "--warmup", "0")
    assert done.returncode == 0, done.stderr
    (record,) = json.loads(done.stdout)
    d = record["workload"]["dataset"]
    assert (d["too_long_for_context"], d["requests"], d["format"]) == (2, 6, "prompt-jsonl")
    assert record["completed"] == 3 and record["failed"] == 0
    assert "prompt JSONL, all 8 requests" in done.stderr  # the format, named before the run
    assert "question" not in done.stdout  # no prompt text in the record


@pytest.fixture
def tiny() -> Iterator[SimProcess]:
    """A stand-in that runs 4 requests at a time at 5.5 ms a step: 32-token requests take about 0.2 s, so it carries
    about 20 requests/s before new ones queue (and their TTFT grows)."""
    with running_sim([*FAST, "--sim-speedup", "0.1", "--max-running-requests", "4"]) as sim:
        yield sim


def test_find_capacity_searches_request_rates_until_it_brackets_the_slo(tiny: SimProcess, tmp_path: Path) -> None:
    done = bench_cli(
        tmp_path / "ws",
        "--url", tiny.url, "--find-capacity", "--slo", "ttft_p95=100ms", "--request-rate", "8",
        "--input-len", "64", "--output-len", "32", "--requests", "40", "--warmup", "1", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    records, cap = doc["records"], doc["capacity"]
    assert len({r["run_id"] for r in records}) == 1 and all(r["request_rate"] for r in records)
    assert 2 <= len(records) <= 12  # bounded
    # The levels are the search's own steps (from 8/s: doubling or halving, then bisecting) and it stopped by itself.
    search = CapacitySearch(start=8.0)
    for r in records:
        assert search.next_rate() == pytest.approx(r["request_rate"], rel=1e-3)
        search.record(r["request_rate"], r["slo_met"])
    assert search.next_rate() is None and search.reason
    met = sorted(r["request_rate"] for r in records if r["slo_met"])
    assert met and any(not r["slo_met"] for r in records)  # it carries some rate within 100 ms, not every one
    assert cap["level"] == f"rate={max(met):g}"
    if search.bracketed:
        assert cap["gap_pct"] <= 10.0, cap


def test_lengths_are_the_server_s_tokens_kept_for_the_next_run_or_words_said_as_such(
    schedule_server: Callable[..., ScheduleServer], tmp_path: Path
) -> None:
    path = tmp_path / "chat.json"
    rows = chat_conversations(30, seed=6)
    path.write_text(json.dumps(rows))
    common = ("--dataset", str(path), "--dataset-sample", "6", "--concurrency", "2", "--json", "--warmup", "0")
    answers = {r["conversations"][0]["value"]: r["conversations"][1]["value"] for r in rows}
    with running_sim(FAST) as sim:
        first = bench_cli(tmp_path / "ws", "--url", sim.url, *common)
        assert first.returncode == 0, first.stderr
        assert "lengths in tokens: the server's /tokenize\n" in first.stderr and " tokens, output p50" in first.stderr
        (record,) = json.loads(first.stdout)
        assert record["length_unit"] == record["workload"]["dataset"]["length_unit"] == "tokens"
        sample = sample_dataset(path, size=6, seed=1)
        expected = sum(SimTokenizer().count(answers[r.prompt]) for r in sample.requests)
        assert record["total_output_tokens"] == expected != sum(r.output_len or 0 for r in sample.requests)
        second = bench_cli(tmp_path / "ws", "--url", sim.url, *common)
        assert "lengths in tokens: the server's /tokenize (read back from the workspace's cache)" in second.stderr
        assert json.loads(second.stdout)[0]["total_output_tokens"] == expected
    server = schedule_server()
    words = bench_cli(tmp_path / "ws", "--url", server.url, *common)
    assert words.returncode == 0, words.stderr
    said = " ".join(words.stderr.split())
    assert "lengths in words: words (the server has no /tokenize (SGLang before 0.5.4))" in said
    (record,) = json.loads(words.stdout)
    assert record["length_unit"] == "words" and record["workload"]["dataset"]["length_counter"].startswith("words (")


async def test_a_server_without_tokenize_hands_over_to_the_tokenizer_on_the_host(
    schedule_server: Callable[..., ScheduleServer], tmp_path: Path
) -> None:
    from console.bench.engine import SweepConfig as Sweep
    from console.core.bench.tokens import HostTokenizer, LengthsCounted, count_lengths
    from console.host.local import LocalTransport
    from console.sim.tokenizer import write_model_dir

    path = tmp_path / "chat.json"
    rows = chat_conversations(20, seed=8)
    path.write_text(json.dumps(rows))
    folder = write_model_dir(
        tmp_path / "tiny", architecture="LlamaForCausalLM", context_length=4096, served_model_name="t"
    )
    unit = f"[Service]\nExecStart={sys.executable} -m sglang.launch_server --model-path {folder} --port 30000\n"
    words = sample_dataset(path, size=8, seed=1)
    said: list[LengthsCounted] = []
    transport = LocalTransport()
    try:
        config = await count_lengths(
            Sweep(WorkloadSpec(name="dataset", dataset=words)),
            schedule_server().url,  # no /tokenize: SGLang before 0.5.4 answers 404 there too
            host=HostTokenizer(transport, unit),
            on_event=said.append,
        )
    finally:
        await transport.close()
    assert (
        said[0].unit == "tokens"
        and said[0].counter == f"the tokenizer at {folder} on the host ({Path(sys.executable).name})"
    )
    answers = {r["conversations"][0]["value"]: r["conversations"][1]["value"] for r in rows}
    counted = config.workload.dataset
    assert counted is not None and counted.describe()["length_unit"] == "tokens"
    assert [r.output_len for r in counted.requests] == [
        SimTokenizer().count(answers[r.prompt]) for r in counted.requests
    ]
