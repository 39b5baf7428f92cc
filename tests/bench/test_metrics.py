"""Unit tests of the pure metric math and the SSE parsers (bench_serving's definitions)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.bench.metrics import RequestResult, compute_metrics, percentile, pstdev
from console.bench.sse import ChatStreamParser, GenerateStreamParser


def test_percentile_interpolates_like_numpy() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 90) == pytest.approx(7.6)  # numpy.percentile(values, 90) == 7.6
    assert percentile(values, 99) == pytest.approx(4.0 + 0.96 * 6.0)
    assert percentile([], 99) == 0.0
    assert pstdev([2.0, 4.0]) == 1.0


def _ok(output_len: int, ttft: float, latency: float, itl: list[float], start: float = 0.0) -> RequestResult:
    return RequestResult(
        success=True, prompt_len=10, output_len=output_len, ttft=ttft, latency=latency, itl=itl, start=start
    )


def test_compute_metrics_uses_bench_serving_definitions() -> None:
    results = [
        _ok(5, 0.1, 0.5, [0.1] * 4),
        _ok(3, 0.2, 0.6, [0.2, 0.2]),
        _ok(1, 0.3, 0.3, []),  # one token: no TPOT entry
        RequestResult(success=False, error="HTTP 500: boom", latency=0.05),
    ]
    m = compute_metrics(results, duration=2.0)
    assert (m["completed"], m["failed"], m["errors"]) == (3, 1, {"HTTP 500: boom": 1})
    assert m["output_throughput"] == 9 / 2.0
    assert m["total_throughput"] == (30 + 9) / 2.0
    assert m["mean_tpot_ms"] == pytest.approx(150.0)
    assert m["mean_ttft_ms"] == pytest.approx(200.0)
    assert abs(m["mean_itl_ms"] - (0.4 + 0.4) / 6 * 1000) < 1e-9
    assert m["concurrency"] == pytest.approx((0.5 + 0.6 + 0.3) / 2.0)  # failed requests do not count
    assert m["mean_request_output_throughput"] == pytest.approx((5 / 0.5 + 3 / 0.6 + 1 / 0.3) / 3)
    assert m["accept_length"] is None


def test_accept_length_is_scoped_to_the_requests() -> None:
    a = _ok(10, 0.1, 1.0, [])
    a.spec_verify_ct = 4
    b = _ok(6, 0.1, 1.0, [])
    b.spec_verify_ct = 4
    assert compute_metrics([a, b], 1.0)["accept_length"] == 16 / 8


def _generate_stream(chunk_tokens: list[int], spaced: bool = False) -> bytes:
    out = b""
    total = 0
    sep = (", ", ": ") if spaced else (",", ":")
    for n, k in enumerate(chunk_tokens):
        total += k
        meta: dict[str, object] = {"completion_tokens": total, "prompt_tokens": 7, "finish_reason": None}
        if n == len(chunk_tokens) - 1:
            meta.update(finish_reason={"type": "length", "length": total}, spec_verify_ct=len(chunk_tokens))
        # The text mentions the key on purpose: a key inside a string must never be taken for the field.
        chunk = {"text": '"completion_tokens":999 ' * total, "meta_info": meta}
        out += b"data: " + json.dumps(chunk, separators=sep).encode() + b"\n\n"
    return out + b"data: [DONE]\n\n"


@given(
    chunk_tokens=st.lists(st.integers(1, 4), min_size=1, max_size=12),
    cuts=st.lists(st.integers(1, 40), max_size=30),
    spaced=st.booleans(),
)
def test_generate_parser_is_independent_of_how_bytes_arrive(
    chunk_tokens: list[int], cuts: list[int], spaced: bool
) -> None:
    body = _generate_stream(chunk_tokens, spaced)
    result = RequestResult()
    parser = GenerateStreamParser(result, start=0.0)
    pos, t = 0, 0.0
    for cut in cuts:
        t += 0.01
        parser.feed(body[pos : pos + cut], t)
        pos += cut
    parser.feed(body[pos:], t + 0.01)
    r = parser.finish()
    assert r.success, r.error
    assert r.output_len == sum(chunk_tokens)
    assert len(r.itl) == sum(chunk_tokens) - chunk_tokens[0]
    assert r.prompt_len == 7 and r.spec_verify_ct == len(chunk_tokens) and r.finish_reason == "length"


def test_generate_parser_splits_a_multi_token_chunk_into_per_token_itl() -> None:
    body = _generate_stream([2, 3, 1]).split(b"\n\n")
    parser = GenerateStreamParser(RequestResult(), start=0.0)
    for t, event in zip((0.1, 0.4, 0.6, 0.6), body, strict=False):
        parser.feed(event + b"\n\n", t)
    r = parser.finish()
    assert r.ttft == 0.1 and r.latency == 0.6
    assert [round(x, 9) for x in r.itl] == [0.1, 0.1, 0.1, 0.2]


def test_stream_without_done_or_with_an_error_fails() -> None:
    parser = GenerateStreamParser(RequestResult(), start=0.0)
    parser.feed(_generate_stream([1, 1]).replace(b"data: [DONE]\n\n", b""), 0.1)
    assert parser.finish().error == "stream ended before [DONE]"
    parser = GenerateStreamParser(RequestResult(), start=0.0)
    parser.feed(b'data: {"error": {"message": "out of memory"}}\n\n', 0.1)
    r = parser.finish()
    assert not r.success and r.error == "out of memory"


def test_chat_parser_uses_continuous_usage_for_per_token_itl() -> None:
    def chunk(content: str, tokens: int | None, finish: str | None = None) -> bytes:
        obj: dict[str, object] = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}
        if tokens is not None:
            obj["usage"] = {"prompt_tokens": 5, "completion_tokens": tokens}
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    parser = ChatStreamParser(RequestResult(), start=0.0)
    parser.feed(chunk("", 0), 0.05)  # role-only chunk: not a token
    parser.feed(chunk("a b", 2), 0.1)
    parser.feed(chunk("c d e", 5, "length"), 0.4)
    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 5}}\n\n'
    parser.feed(usage + b"data: [DONE]\n\n", 0.5)
    r = parser.finish()
    assert r.success and r.output_len == 5 and r.prompt_len == 5 and r.ttft == 0.1 and r.latency == 0.5
    assert [round(x, 9) for x in r.itl] == [0.1, 0.1, 0.1]

    plain = ChatStreamParser(RequestResult(), start=0.0)  # no usage at all: one token per content chunk
    plain.feed(chunk("a", None) + chunk("b", None) + b"data: [DONE]\n\n", 0.2)
    assert plain.finish().output_len == 2


def test_a_level_keeps_what_a_prediction_rests_on() -> None:
    """The pooled accept histogram (each request's as long as the most it saw + 1), the verify rounds, the decode
    batch (requests between their first and last token, time-weighted) and the mean round."""
    three = RequestResult(success=True, output_len=9, ttft=0.1, latency=1.1, spec_verify_ct=5)
    three.spec_accept_histogram = [3, 0, 2]
    results = [
        three,
        RequestResult(success=True, output_len=5, ttft=0.1, latency=0.6, spec_verify_ct=4, spec_accept_histogram=[4]),
        RequestResult(success=False, error="HTTP 500", spec_accept_histogram=[9, 9]),  # failed: not counted
    ]
    m = compute_metrics(results, duration=2.0)
    assert m["spec_accept_histogram"] == [7, 0, 2]
    assert m["spec_verify_ct"] == 9 and m["decode_rounds"] == 9
    assert m["decode_batch"] == pytest.approx((1.0 + 0.5) / 2.0)
    assert m["round_time_ms"] == pytest.approx((1.0 + 0.5) / 9 * 1000)


def test_without_speculation_a_round_is_a_token_and_no_histogram_is_made_up() -> None:
    m = compute_metrics([_ok(5, 0.1, 0.5, [0.1] * 4), _ok(3, 0.2, 0.6, [0.2, 0.2])], duration=1.0)
    assert m["spec_accept_histogram"] is None and m["spec_verify_ct"] is None
    assert m["decode_rounds"] == 4 + 2
    assert m["round_time_ms"] == pytest.approx((0.4 + 0.4) / 6 * 1000)


def test_the_generate_parser_keeps_the_accept_histogram_of_the_final_meta_info() -> None:
    result = RequestResult()
    parser = GenerateStreamParser(result, start=0.0)
    meta = {"completion_tokens": 3, "spec_verify_ct": 2, "spec_accept_histogram": [1, 1]}
    body = (
        b'data: {"text": "a", "output_ids": [1], "meta_info": {"completion_tokens": 1}}\n\n'
        + b"data: " + json.dumps({"text": "abc", "output_ids": [1, 2, 3], "meta_info": meta}).encode() + b"\n\n"
        + b"data: [DONE]\n\n"
    )  # fmt: skip
    parser.feed(body, 0.5)
    done = parser.finish()
    assert done.success and done.spec_verify_ct == 2 and done.spec_accept_histogram == [1, 1]
