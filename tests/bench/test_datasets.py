"""The dataset reader (console.bench.datasets): formats told apart and named, seeded samples that repeat, bad files
refused with the file, the line and what was expected, and what a record keeps (never a prompt's text)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.bench import datasets
from console.bench.datasets import DatasetError, describe_line, file_sha256, sample_dataset
from console.bench.workloads import DatasetRequest, DatasetSample, WorkloadSpec, build_requests


def write_jsonl(path: Path, records: list[Any], *, blank_every: int = 0) -> Path:
    lines = []
    for i, record in enumerate(records):
        lines.append(json.dumps(record))
        if blank_every and i % blank_every == blank_every - 1:
            lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def prompts(n: int) -> list[dict[str, Any]]:
    return [{"prompt": f"prompt number {i} " + "word " * (i % 7), "output_len": 10 + i} for i in range(n)]


def sharegpt(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": str(i),
            "conversations": [{"from": "human", "value": f"ask {i} now"}, {"from": "gpt", "value": "so " * (i + 2)}],
        }
        for i in range(n)
    ]


# --- formats -----------------------------------------------------------------------------------------------------


def test_the_three_formats_are_told_apart_and_named(tmp_path: Path) -> None:
    p = sample_dataset(write_jsonl(tmp_path / "p.jsonl", prompts(5)))
    chat = [
        {
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}],
            "max_tokens": 9,
        }
    ]
    c = sample_dataset(write_jsonl(tmp_path / "c.jsonl", chat))
    s_path = tmp_path / "s.json"
    s_path.write_text(json.dumps(sharegpt(4), indent=2))
    s = sample_dataset(s_path)
    assert (p.format, c.format, s.format) == ("prompt-jsonl", "chat-jsonl", "sharegpt")
    assert describe_line(p).startswith("p.jsonl: prompt JSONL, all 5 requests")
    assert "OpenAI chat JSONL" in describe_line(c) and "ShareGPT JSON" in describe_line(s)
    # prompt lengths in words; a chat request counts each message's role word, as a template lays it out
    assert [r.prompt_len for r in p.requests] == [3 + i for i in range(5)]
    assert c.requests[0].prompt_len == (1 + 2) + (1 + 2) and c.requests[0].output_len == 9
    assert c.requests[0].messages[1] == {"role": "user", "content": "hi there"}
    # ShareGPT as bench_serving reads it: turn 0 the prompt, turn 1's length the output length (in its shuffled order)
    assert sorted((r.prompt, r.output_len) for r in s.requests) == [(f"ask {i} now", i + 2) for i in range(4)]
    assert s.sha256 == file_sha256(s_path) and p.sha256 == file_sha256(tmp_path / "p.jsonl")


def test_sharegpt_skips_and_counts_what_bench_serving_drops(tmp_path: Path) -> None:
    rows = sharegpt(3)
    rows.append({"conversations": [{"from": "human", "value": "alone here"}]})
    rows.append({"conversation": [{"value": "hi"}, {"value": "one two three"}]})  # prompt under 2 words
    rows.append({"conversation": [{"value": "old key"}, {"value": "still read"}]})
    path = tmp_path / "s.json"
    path.write_text(json.dumps(rows))
    sample = sample_dataset(path)
    assert len(sample.requests) == 4
    assert dict(sample.skipped) == {
        "records with fewer than 2 turns": 1,
        "records with a prompt or answer under 2 words": 1,
    }
    assert (
        "skipped: 1 records with a prompt or answer under 2 words, 1 records with fewer than 2 turns"
        in describe_line(sample)
    )


# --- sampling ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("whole", [True, False], ids=["read-whole", "by-position"])
def test_a_seed_gives_the_same_requests_in_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: bool
) -> None:
    if not whole:
        monkeypatch.setattr(datasets, "WHOLE_FILE_BYTES", 16)
    path = write_jsonl(tmp_path / "p.jsonl", prompts(400), blank_every=50)
    first = sample_dataset(path, size=40, seed=7)
    again = sample_dataset(path, size=40, seed=7)
    other = sample_dataset(path, size=40, seed=8)
    assert first.requests == again.requests and len(first.requests) == 40
    assert other.requests != first.requests
    assert len({r.prompt for r in first.requests}) == 40  # no request twice
    every = {r.prompt for r in sample_dataset(path, size=1000).requests}
    assert {r.prompt for r in first.requests} <= every
    assert first.entries_estimated is not whole
    if whole:
        assert first.entries == 400 and dict(first.skipped) == {"blank lines": 8}
    else:
        assert 300 < first.entries < 500  # estimated from the lines read
        unhashed = sample_dataset(path, size=40, seed=7, hash_large=False)
        assert unhashed.sha256 == "" and "sha256 computed during the run" in describe_line(unhashed)
        assert unhashed.source == str(path) and first.sha256 == file_sha256(path)


def test_a_file_no_larger_than_the_sample_is_used_whole_in_its_own_order(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", prompts(30))
    assert [r.output_len for r in sample_dataset(path, size=30, seed=3).requests] == [10 + i for i in range(30)]


@pytest.mark.parametrize("whole", [True, False], ids=["parsed-once", "parsed-twice"])
def test_sharegpt_is_sampled_as_bench_serving_samples_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: bool
) -> None:
    """bench_serving 0.5.6's sample_sharegpt_requests, step by step: the records with two turns, shuffled after
    random.seed(seed), the first N whose prompt and answer have 2+ tokens (tests/bench/test_agrees_with_bench_serving
    .py runs bench_serving's own function on a file to check the same)."""
    monkeypatch.setattr(datasets, "READ_BYTES", 256)  # many small reads: records cross the buffer's edges
    if not whole:
        monkeypatch.setattr(datasets, "WHOLE_FILE_BYTES", 64)
    rows = sharegpt(300)
    rows[7]["conversations"] = rows[7]["conversations"][:1]  # dropped before the shuffle
    rows[9]["conversations"][0]["value"] = "hi"  # in the shuffle, dropped by the length filter
    path = tmp_path / "s.json"
    path.write_text(json.dumps(rows, indent=1))
    a = sample_dataset(path, size=25, seed=2)
    pairs = [
        (r["conversations"][0]["value"], r["conversations"][1]["value"]) for r in rows if len(r["conversations"]) >= 2
    ]
    random.seed(2)
    random.shuffle(pairs)
    expected = [p for p in pairs if len(p[0].split()) >= 2 and len(p[1].split()) >= 2][:25]
    assert [(r.prompt, r.output_len) for r in a.requests] == [(p, len(c.split())) for p, c in expected]
    assert sample_dataset(path, size=25, seed=2).requests == a.requests
    assert a.entries == 298 and a.sha256 == file_sha256(path)
    assert dict(a.skipped) == {"records with fewer than 2 turns": 1, "records with a prompt or answer under 2 words": 1}
    assert sample_dataset(path, size=25, seed=3).requests != a.requests


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=60),
    size=st.integers(min_value=1, max_value=80),
    seed=st.integers(min_value=0, max_value=10**6),
    final_newline=st.booleans(),
)
def test_sampling_by_position_only_returns_whole_lines_of_the_file(
    tmp_path_factory: pytest.TempPathFactory, lengths: list[int], size: int, seed: int, final_newline: bool
) -> None:
    path = tmp_path_factory.mktemp("pos") / "p.jsonl"
    lines = [json.dumps({"prompt": f"n{i} " + "x" * n}) for i, n in enumerate(lengths)]
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""))
    original = datasets.WHOLE_FILE_BYTES
    datasets.WHOLE_FILE_BYTES = 0
    try:
        sample = sample_dataset(path, size=size, seed=seed)
    finally:
        datasets.WHOLE_FILE_BYTES = original
    wanted = {f"n{i} " + "x" * n for i, n in enumerate(lengths)}
    got = [r.prompt for r in sample.requests]
    assert set(got) <= wanted and len(got) == len(set(got))
    # Never more than asked or than the file holds; fewer only when the draws ran out (lines after tiny ones).
    assert 1 <= len(got) <= min(size, len(lengths))


# --- bad input ---------------------------------------------------------------------------------------------------


def refused(path: Path, **kwargs: Any) -> str:
    with pytest.raises(DatasetError) as caught:
        sample_dataset(path, **kwargs)
    message = str(caught.value)
    assert message.startswith(str(path)), message  # the file is always named
    return message


@pytest.mark.parametrize("whole", [True, False], ids=["read-whole", "by-position"])
def test_bad_files_name_the_file_the_line_and_what_was_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: bool
) -> None:
    if not whole:
        monkeypatch.setattr(datasets, "WHOLE_FILE_BYTES", 16)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n \n")
    assert "the file is empty; expected a ShareGPT JSON list, or JSONL" in refused(empty)

    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"prompt": "caf\xe9 au lait"}\n')
    assert "line 1: not UTF-8 (byte 16 of the line)" in refused(latin)

    good = [json.dumps(p) for p in prompts(3)]
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join([*good, '{"prompt": "the file ends in the mid']))
    last = "line 4" if whole else f"the line at byte {len(chr(10).join(good)) + 1:,}"
    assert f"{last}: JSON cut short (the file ends inside this record)" in refused(cut)

    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([*good, json.dumps({"messages": [{"role": "user", "content": "hi"}]})]) + "\n")
    message = refused(mixed)
    assert "this line is OpenAI chat JSONL, but the first line made the file prompt JSONL" in message
    assert message.endswith('expected {"prompt": "...", "output_len": 128} (output_len optional)')

    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"prompt": "fine here"}) + "\n" + json.dumps({"prompt": ""}) + "\n")
    assert "(prompt): not a non-empty string" in refused(missing)

    neither = tmp_path / "neither.jsonl"
    neither.write_text(json.dumps({"text": "hello"}) + "\n")
    assert 'line 1: no "prompt" nor "messages"' in refused(neither)

    role = tmp_path / "role.jsonl"
    role.write_text(json.dumps({"messages": [{"content": "no role"}]}) + "\n")
    assert "line 1 (messages[0].role): missing or not a string" in refused(role)

    bad_len = tmp_path / "len.jsonl"
    bad_len.write_text(json.dumps({"prompt": "a b", "output_len": 0}) + "\n")
    assert "(output_len): 0 is not a whole number ≥ 1" in refused(bad_len)


def test_bad_sharegpt_files_name_the_line_and_the_json_path(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.json"
    text = json.dumps(sharegpt(5), indent=1)
    truncated.write_text(text[: len(text) // 2])
    message = refused(truncated)
    assert "JSON cut short (the file ends inside a record)" in message
    assert 'expected [{"conversations": [{"from": "human", "value": "..."}' in message

    no_value = tmp_path / "no_value.json"
    rows = sharegpt(3)
    rows[2]["conversations"][1] = {"from": "gpt", "text": "wrong key"}
    no_value.write_text(json.dumps(rows, indent=1))
    starts = [n for n, text in enumerate(json.dumps(rows, indent=1).splitlines(), 1) if text == " {"]
    assert refused(no_value).startswith(f"{no_value}: line {starts[2]} ([2].conversations[1].value): missing")

    latin = tmp_path / "latin.json"
    latin.write_bytes(b'[\n{"conversations": [{"value": "a b"},\n {"value": "caf\xe9 c"}]}]')
    assert "line 3: not UTF-8" in refused(latin)

    jsonl_sharegpt = tmp_path / "sharegpt.jsonl"
    write_jsonl(jsonl_sharegpt, sharegpt(2))
    assert "a ShareGPT record: ShareGPT is one JSON list, not JSONL" in refused(jsonl_sharegpt)

    not_a_list = tmp_path / "object.json"
    not_a_list.write_text("[1, 2]")
    assert "line 1 ([0]): not an object" in refused(not_a_list)

    trailing = tmp_path / "trailing.json"
    trailing.write_text(json.dumps(sharegpt(2)) + " x")
    assert "'x' where the end of the file should be" in refused(trailing)


def test_a_file_with_nothing_usable_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "short.json"
    path.write_text(json.dumps([{"conversations": [{"value": "only one turn"}]}]))
    assert "no usable request (skipped: 1 records with fewer than 2 turns)" in refused(path)
    missing = tmp_path / "missing.jsonl"
    assert "cannot be read" in refused(missing)


# --- what travels and what is kept ------------------------------------------------------------------------------


def test_records_keep_counts_and_lengths_never_text(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", prompts(20))
    sample = sample_dataset(path, size=10, seed=1, output_len_cap=15)
    described = WorkloadSpec(name="dataset", dataset=sample).describe()
    text = json.dumps(described)
    assert "prompt number" not in text and "word" not in text.replace("words", "")
    d = described["dataset"]
    assert isinstance(d, dict)
    assert {k: d[k] for k in ("file", "format", "seed", "sample", "entries", "requests")} == {
        "file": "p.jsonl",
        "format": "prompt-jsonl",
        "seed": 1,
        "sample": 10,
        "entries": 20,
        "requests": 10,
    }
    assert d["sha256"] == file_sha256(path) and d["lengths_in"] == "words"
    assert d["output_len_source"] == "dataset, capped by --output-len 15"
    assert d["output_len"]["max"] == 15 and d["prompt_len"]["count"] == 10
    assert described["ignore_eos"] is True and described["temperature"] == 0.0


def test_output_lengths_say_where_they_come_from() -> None:
    own = DatasetRequest(prompt="a b", prompt_len=2, output_len=40)
    none = DatasetRequest(prompt="a b", prompt_len=2)
    base = DatasetSample("f", "", "prompt-jsonl", 1, 2, 2, requests=(own, none))
    assert [base.output_len(r) for r in (own, none)] == [40, 256]
    assert base.output_len_source() == "dataset (1 of 2 have one)"
    capped = DatasetSample("f", "", "prompt-jsonl", 1, 2, 2, requests=(own, none), output_len_cap=30)
    assert [capped.output_len(r) for r in (own, none)] == [30, 30]
    only_cap = DatasetSample("f", "", "prompt-jsonl", 1, 1, 1, requests=(none,), output_len_cap=64)
    assert only_cap.output_len_source() == "--output-len 64"


def test_prompts_longer_than_the_context_are_left_out_and_counted() -> None:
    short = DatasetRequest(prompt="a", prompt_len=100)
    long = DatasetRequest(prompt="b", prompt_len=5000)
    sample = DatasetSample("f", "", "prompt-jsonl", 1, 3, 3, requests=(short, long, short))
    fitted = sample.within_context(4096)
    assert fitted.requests == (short, short) and fitted.too_long == 1
    assert sample.within_context(None) is sample
    assert fitted.describe()["too_long_for_context"] == 1


def test_dataset_request_bodies_for_both_apis(tmp_path: Path) -> None:
    sample = sample_dataset(write_jsonl(tmp_path / "p.jsonl", prompts(3)), output_len_cap=11)
    spec = WorkloadSpec(name="dataset", dataset=sample)
    bodies = [json.loads(r.body) for r in build_requests(spec, 5)]
    assert [b["text"] for b in bodies] == [r.prompt for r in sample.requests] + [r.prompt for r in sample.requests[:2]]
    assert bodies[0]["sampling_params"] == {"max_new_tokens": 10, "temperature": 0.0, "ignore_eos": True}
    assert bodies[2]["sampling_params"]["max_new_tokens"] == 11  # its own 12, capped
    # warm-up and every level take the same requests: the sample from its start
    assert build_requests(spec, 2, offset=900_000) == build_requests(spec, 2)

    chat = [{"messages": [{"role": "user", "content": "hi you"}], "max_tokens": 7}]
    chat_sample = sample_dataset(write_jsonl(tmp_path / "c.jsonl", chat))
    body = json.loads(build_requests(WorkloadSpec(name="dataset", api="chat", dataset=chat_sample), 1)[0].body)
    assert body["messages"] == [{"role": "user", "content": "hi you"}] and body["max_completion_tokens"] == 7
    assert body["ignore_eos"] is True
    with pytest.raises(ValueError, match="use --api chat"):
        build_requests(WorkloadSpec(name="dataset", api="generate", dataset=chat_sample), 1)
    with pytest.raises(ValueError, match="no requests"):
        build_requests(WorkloadSpec(name="dataset", dataset=sample.within_context(1)), 1)


# --- lengths in the model's tokens (a LengthCounter; console.core.bench.tokens makes the real ones) -------------


class Pieces:
    """A tokenizer as the H200's tiny Llama counts: a BOS, then words and punctuation runs apart."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, texts: Any) -> list[int]:
        import re

        self.calls.append(len(texts))
        return [1 + len(re.findall(r"\w+|[^\w\s]+", t)) for t in texts]


def test_sharegpt_in_tokens_filters_and_sets_lengths_as_bench_serving_s_tokenizer_does(tmp_path: Path) -> None:
    rows = sharegpt(40)
    rows[5]["conversations"][1]["value"] = "Sure!"  # 1 word, 3 tokens: too short in words, kept in tokens
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(rows))
    counter = Pieces()
    tokens = sample_dataset(path, size=40, seed=1, count=counter)
    words = sample_dataset(path, size=40, seed=1)
    assert len(tokens.requests) == 40 and len(words.requests) == 39
    assert tokens.length_unit == "tokens" and words.length_unit == "words"
    for r in tokens.requests:
        assert (r.prompt_len, r.output_len) == tuple(Pieces()([r.prompt, _answer(rows, r.prompt)]))
    assert sum(counter.calls) == 2 * 40  # every record measured once, prompt and answer in one call
    assert "p99" in describe_line(tokens) and " tokens, output" in describe_line(tokens)


def _answer(rows: list[dict[str, Any]], prompt: str) -> str:
    return next(r["conversations"][1]["value"] for r in rows if r["conversations"][0]["value"] == prompt)


def test_tokens_measure_only_the_records_taken_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(sharegpt(400)))
    counter = Pieces()
    sample = sample_dataset(path, size=16, seed=3, count=counter)
    assert len(sample.requests) == 16
    assert counter.calls == [2 * (16 + 16 // 8 + 8)]  # one batch: the 16 wanted and an eighth more, prompt and answer
    assert [r.prompt for r in sample.requests] == [r.prompt for r in sample_dataset(path, size=16, seed=3).requests]


def test_a_large_sharegpt_file_in_tokens_reads_only_the_records_it_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(sharegpt(300)))
    small = sample_dataset(path, size=50, seed=2, count=Pieces())
    monkeypatch.setattr(datasets, "WHOLE_FILE_BYTES", 1000)  # parsed twice, the second time keeping 66 records
    large = sample_dataset(path, size=50, seed=2, count=Pieces())
    assert large.requests == small.requests and large.sha256 == small.sha256


def test_jsonl_prompts_are_counted_in_tokens_and_keep_their_own_output_lengths(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "Hello, world!", "output_len": 7}, {"prompt": "a b c"}])
    sample = sample_dataset(path, size=10, seed=1, count=Pieces())
    assert [(r.prompt_len, r.output_len) for r in sample.requests] == [(5, 7), (4, None)]
    assert sample.describe()["length_unit"] == "tokens" and sample.describe()["lengths_in"] == "tokens"
    chat = write_jsonl(tmp_path / "c.jsonl", [{"messages": [{"role": "user", "content": "Hi, there."}]}])
    assert sample_dataset(chat, size=1, seed=1, count=Pieces()).requests[0].prompt_len == 1 + 5  # role + 4 pieces
