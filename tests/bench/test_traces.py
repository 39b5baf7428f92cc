"""A Mooncake-format trace as `bench --dataset` reads it (console.bench.traces, console.bench.datasets): told apart
from the other JSONL formats by its first line, every line checked, sorted by arrival, a window and a cap taken, the
levels its speeds; the trace options refused without a trace, and a trace with options that need another clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.bench.datasets import DatasetError, describe_line, sample_dataset
from console.bench.traces import BLOCK_TOKENS, bench_serving_text, trace_prompt_ids
from console.bench.workloads import WorkloadSpec, build_requests
from console.cli import build_parser
from console.cli.bench import config_from_args
from console.cli.traffic import parse_trace_window, read_dataset, resolve_lengths, with_traffic
from console.errors import UsageError
from console.sim.datasets import mooncake_trace


def write(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_trace_is_read_in_arrival_order_and_sliced_by_its_window(tmp_path: Path) -> None:
    records = [
        {"timestamp": 3000, "input_length": 700, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 0, "input_length": 100, "output_length": 7, "hash_ids": [1]},
        {"timestamp": 3000, "input_length": 600, "output_length": 6, "hash_ids": [1, 3]},
        {"timestamp": 65000, "input_length": 512, "output_length": 9, "hash_ids": [4]},
    ]
    path = write(tmp_path / "trace.jsonl", records)
    whole = sample_dataset(path, size=10)
    assert whole.format == "mooncake-trace" and whole.length_unit == "tokens"
    assert [(r.at_ms, r.prompt_len, r.output_len) for r in whole.requests] == [
        (0.0, 100, 7), (3000.0, 700, 5), (3000.0, 600, 6), (65000.0, 512, 9),
    ]  # fmt: skip
    assert whole.arrivals_s() == [0.0, 3.0, 3.0, 65.0]
    window = sample_dataset(path, size=10, trace_window=(1.0, 60.0))
    assert [r.output_len for r in window.requests] == [5, 6] and window.arrivals_s() == [0.0, 0.0]
    capped = sample_dataset(path, size=10, trace_limit=2)
    assert [r.output_len for r in capped.requests] == [7, 5]
    d = whole.describe()
    assert d["trace_window"] == {"start_s": 0.0, "end_s": None} and d["trace_span_s"] == 65.0
    assert "Mooncake trace JSONL, 4 of 4 requests (window whole) over 65.0 s" in describe_line(whole)
    assert "input p50 512 / p99 700 tokens" in describe_line(whole)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"timestamp": -1, "input_length": 5, "output_length": 5}, "line 2 (timestamp): -1 is not a time in ms"),
        ({"timestamp": 1, "input_length": 5}, 'line 2: no "output_length"'),
        ({"timestamp": 1, "input_length": 5, "output_length": 5, "hash_ids": ["a"]}, "line 2 (hash_ids): not a list"),
        ({"timestamp": 1, "input_length": 0, "output_length": 5}, "line 2 (input_length): 0 is not a whole number"),
        ({"prompt": "hi"}, "line 2: this line is prompt JSONL, but the first line made the file Mooncake trace"),
    ],
)
def test_a_bad_trace_line_is_named(tmp_path: Path, line: dict[str, object], problem: str) -> None:
    path = write(tmp_path / "trace.jsonl", [{"timestamp": 0, "input_length": 9, "output_length": 2}, line])
    with pytest.raises(DatasetError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        sample_dataset(path, size=10)


def test_token_prompts_share_blocks_by_hash_id_and_bench_serving_prompts_are_its_text() -> None:
    blocks: dict[int, list[int]] = {}
    a = trace_prompt_ids([7, 8], 900, 1, (1000, 30000), blocks)
    b = trace_prompt_ids([7, 9, 10], 1536, 2, (1000, 30000), blocks)
    c = trace_prompt_ids([7], 700, 3, (1000, 30000), blocks)
    assert len(a) == 900 and len(b) == 1536 and len(c) == 700
    assert a[:BLOCK_TOKENS] == b[:BLOCK_TOKENS] == c[:BLOCK_TOKENS] and a[BLOCK_TOKENS] != b[BLOCK_TOKENS]
    assert c[BLOCK_TOKENS:] != a[BLOCK_TOKENS:700]  # past its blocks a request's tokens are its own
    text = bench_serving_text([46, 47])
    assert text.startswith("Round 1: 46hi hi ") and "hi47hi" in text
    assert text.endswith("hiTell me a story based on this context.") and text.replace("this", "").count("hi") == 256


def bench_args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["bench", "--url", "http://127.0.0.1:1", *argv])


def test_the_trace_options_make_the_levels_and_are_refused_without_a_trace(tmp_path: Path) -> None:
    trace = write(tmp_path / "trace.jsonl", mooncake_trace(30, seed=1, rate=1.0))
    args = bench_args("--dataset", str(trace), "--trace-speed", "1,2", "--trace-window", "5s-20s")
    cap = resolve_lengths(args)
    sample = read_dataset(args, cap)
    assert sample is not None and sample.trace_window == (5.0, 20.0) and args.api == "generate"
    config = with_traffic(config_from_args(args), args, sample, None)
    assert [lv.label for lv in config.levels()] == ["trace ×1", "trace ×2"]
    requests = build_requests(config.workload, 3)
    assert len(requests) == 3 and b'"input_ids"' in requests[0].body
    chat = bench_args("--dataset", str(trace), "--trace-prompts", "bench-serving")
    assert read_dataset(chat, resolve_lengths(chat)) is not None and chat.api == "chat"

    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hello there"}\n')
    with pytest.raises(UsageError, match="--trace-speed: only for a trace --dataset"):
        read_dataset(bench_args("--dataset", str(prompts), "--trace-speed", "2"), None)
    with pytest.raises(UsageError, match=r"replayed on its own clock .* drop --request-rate"):
        read_dataset(bench_args("--dataset", str(trace), "--request-rate", "3"), None)
    with pytest.raises(ValueError, match="LENGTH or START-END"):
        parse_trace_window("ten minutes")
    assert parse_trace_window("10m") == (0.0, 600.0) and parse_trace_window("20m-30m") == (1200.0, 1800.0)
    assert WorkloadSpec().trace_prompts == "tokens"
