"""SGLang's speculative meta_info, held to each supported release's wheel: the keys its tokenizer manager writes
(`_calculate_spec_decoding_metrics`, read from the wheel's source by its syntax tree, tests/support/sglang_wheels.py)
are exactly the keys the load client knows for that release (console.sglang.spec_meta) and exactly the keys the
stand-in emulating that release sends, streamed and not, only in the last chunk. The next rename in a release fails
here, not on a user's records; so does a rename in the stand-in or the client.

The wheels come with the suite's setup (tests/suite_setup.py), cached like bench_serving.py."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from console.bench.metrics import RequestResult, compute_metrics
from console.bench.sse import GenerateStreamParser
from console.sglang import spec_meta
from console.sglang.flags import SUPPORTED_VERSIONS
from console.sim.profiles import EAGLE_REPEAT_DRAFT
from tests.support.sglang_wheels import SpecWrite, release_source, spec_meta_writes
from tests.support.simproc import running_sim

pytestmark = pytest.mark.system

EAGLE = [
    "--sim-profile", "tiny-test", "--model-path", "sim/tiny-test", "--speculative-algorithm", "EAGLE",
    "--speculative-draft-model-path", EAGLE_REPEAT_DRAFT, "--speculative-num-steps", "3",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--sim-time-scale", "0.001",
]  # fmt: skip


def writes(version: str) -> list[SpecWrite]:
    return spec_meta_writes(release_source(version))


def keys(version: str, *, dspark: bool = False) -> set[str]:
    return {w.key for w in writes(version) if dspark or not w.dspark_only}


def test_every_supported_release_writes_its_spec_keys_where_the_reader_looks() -> None:
    """The reader finds one function per wheel, and it writes keys: a release that moved it would fail here."""
    for version in SUPPORTED_VERSIONS:
        assert writes(version), version
        assert "spec_verify_ct" in keys(version)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_the_client_knows_exactly_the_keys_each_release_writes(version: str) -> None:
    assert keys(version, dspark=True) == spec_meta.RELEASE_KEYS[version]
    # each figure's every spelling in this release is one the client reads
    by_figure: dict[str, set[str]] = {}
    for w in writes(version):
        by_figure.setdefault(w.figure, set()).add(w.key)
    assert by_figure.get("histogram", set()) <= set(spec_meta.HISTOGRAM_KEYS)
    assert by_figure["correct"] <= set(spec_meta.CORRECT_KEYS)
    assert by_figure["proposed"] <= set(spec_meta.PROPOSED_KEYS)


def final_meta_of(version: str, histogram: list[int]) -> dict[str, Any]:
    """A final meta_info with exactly the (non-DSpark) keys this release writes, each with a value of its figure."""
    verify_ct = sum(histogram)
    correct = sum(i * n for i, n in enumerate(histogram))
    values = {"histogram": histogram, "correct": correct, "proposed": verify_ct * 3, "verify_ct": verify_ct}
    meta: dict[str, Any] = {"id": "r", "finish_reason": {"type": "length", "length": 40}, "completion_tokens": 40}
    for w in writes(version):
        if not w.dspark_only:
            meta[w.key] = values.get(w.figure, 0.5)
    return meta


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_the_client_reads_each_release_and_the_record_names_its_spelling(version: str) -> None:
    histogram = [2, 1, 0, 7]
    meta = final_meta_of(version, histogram)
    body = b'data: {"text":"a","meta_info":{"completion_tokens":1}}\n\n'
    body += b"data: " + json.dumps({"text": "a b", "meta_info": meta}).encode() + b"\n\ndata: [DONE]\n\n"
    parser = GenerateStreamParser(RequestResult(), 0.0)
    parser.feed(body, 0.1)
    result = parser.finish()
    assert result.success and result.spec_verify_ct == 10
    assert result.spec_correct_drafts == 1 + 21 and result.spec_proposed_drafts == 30
    has_histogram = any(w.figure == "histogram" for w in writes(version))
    assert result.spec_accept_histogram == (histogram if has_histogram else None)
    level = compute_metrics([result], 1.0)
    assert set(level["spec_meta_keys"]) == keys(version)
    assert level["spec_histogram_key"] == (
        next(k for k in spec_meta.HISTOGRAM_KEYS if k in meta) if has_histogram else None
    )
    expected = {"0.5.6": "0.5.6-0.5.10", "0.5.9": "0.5.6-0.5.10", "0.5.23": "0.5.23"}.get(version, "0.5.12-0.5.17")
    assert level["spec_spelling"] == expected


def spec_keys(meta: dict[str, Any]) -> set[str]:
    return {k for k in meta if k.startswith("spec_")}


def sse_chunks(body: str) -> list[dict[str, Any]]:
    return [json.loads(e[5:]) for e in body.split("\n\n") if e.startswith("data:") and e[5:].strip() != "[DONE]"]


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_the_stand_in_as_each_release_sends_exactly_its_keys(version: str) -> None:
    expected = keys(version)
    # with no verify round (one output token): only what the release writes outside its verify_ct guard
    unguarded = {w.key for w in writes(version) if not w.guards}
    with running_sim([*EAGLE, "--sim-sglang-version", version]) as sim, httpx.Client(base_url=sim.url) as http:
        sampling = {"max_new_tokens": 40, "ignore_eos": True, "temperature": 0}
        plain = http.post("/generate", json={"text": "hello there", "sampling_params": sampling}, timeout=30).json()
        assert spec_keys(plain["meta_info"]) == expected
        streamed = http.post(
            "/generate", json={"text": "hello there", "sampling_params": sampling, "stream": True}, timeout=30
        ).text
        chunks = sse_chunks(streamed)
        assert len(chunks) > 2
        assert [spec_keys(c["meta_info"]) for c in chunks[:-1]] == [set()] * (len(chunks) - 1)  # the last only
        assert spec_keys(chunks[-1]["meta_info"]) == expected
        one = {**sampling, "max_new_tokens": 1}
        single = http.post("/generate", json={"text": "hello", "sampling_params": one}, timeout=30).json()
        assert spec_keys(single["meta_info"]) == unguarded
    final = plain["meta_info"]
    histogram = next((final[k] for k in spec_meta.HISTOGRAM_KEYS if k in final), None)
    if histogram is not None:  # the rounds by drafts accepted: they add up to the verify rounds
        assert sum(histogram) == final["spec_verify_ct"] and histogram[-1] > 0
        assert sum(i * n for i, n in enumerate(histogram)) == spec_meta.read_spec_meta(final).correct_drafts
