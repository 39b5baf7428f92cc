"""The stand-in as a real process on a real socket: startup, SGLang's HTTP API, refusals, SIGTERM."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.simproc import FAST, SimProcess, eagle_args, http_status, running_sim, start_sim

SPEC = eagle_args(2)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    args = [*FAST, *SPEC, "--enable-metrics", "--decode-log-interval", "5", "--sim-sglang-version", "0.5.9"]
    with running_sim(args) as s:
        yield s


def sse_events(response: httpx.Response) -> list[Any]:
    events: list[Any] = []
    for line in response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[len("data: ") :]
        events.append("[DONE]" if data == "[DONE]" else json.loads(data))
    return events


def test_startup_log_lines_come_in_sglangs_order(sim: SimProcess) -> None:
    markers = [
        "Load weight begin. avail mem=",
        "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=",
        "KV Cache is allocated. #tokens: ",
        "Capture cuda graph begin. This can take up to several minutes. avail mem=",
        "Capture cuda graph end. Time elapsed: ",
        "Capture draft cuda graph begin.",
        "Capture draft cuda graph end.",
        "Capture draft extend cuda graph begin.",
        "Capture draft extend cuda graph end.",
        "Uvicorn running on http://127.0.0.1:",
        "The server is fired up and ready to roll!",
    ]
    out = sim.output()
    positions = [out.find(m) for m in markers]
    assert all(p >= 0 for p in positions), [m for m, p in zip(markers, positions, strict=True) if p < 0]
    assert positions == sorted(positions)
    assert "Max running requests is reset to 48 for speculative decoding." in out
    assert out.splitlines()[1].startswith("[20") and " TP0] Load weight begin." in out


def test_generate_stream_is_cumulative_with_spec_meta_info(sim: SimProcess) -> None:
    body = {
        "text": "ba be bi",
        "sampling_params": {"max_new_tokens": 40, "ignore_eos": True, "temperature": 0},
        "stream": True,
    }
    with httpx.stream("POST", sim.url + "/generate", json=body, timeout=30) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    texts = [c["text"] for c in chunks]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts[-1] == 40 and counts == sorted(counts)
    # Speculation: some chunks carry several tokens (1 + accepted drafts per verify round).
    assert max(b - a for a, b in itertools.pairwise(counts)) > 1
    final = chunks[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": 40}
    assert final["prompt_tokens"] == 3
    assert 1 <= final["spec_verify_ct"] < 40
    assert final["spec_accept_length"] == pytest.approx(40 / final["spec_verify_ct"])
    assert "spec_accept_token_num" in final and "total_retractions" in final  # 0.5.9 names
    assert sum(final["spec_accept_histogram"]) == final["spec_verify_ct"]  # 0.5.9's histogram
    assert len(final["e2e_latency"].__str__()) > 0
    assert len(chunks[-1]["output_ids"]) == 40 and len(chunks[-1]["text"].split()) == 40


def test_generate_non_stream_and_token_ids(sim: SimProcess) -> None:
    r = httpx.post(
        sim.url + "/generate",
        json={"input_ids": [5, 6, 7, 8], "sampling_params": {"max_new_tokens": 7, "ignore_eos": True}},
        timeout=30,
    )
    assert r.status_code == 200
    out = r.json()
    assert out["meta_info"]["prompt_tokens"] == 4 and out["meta_info"]["completion_tokens"] == 7
    assert len(out["output_ids"]) == 7 and len(out["text"].split()) == 7


def test_chat_stream_with_usage(sim: SimProcess) -> None:
    body = {
        "model": "x",
        "messages": [{"role": "user", "content": "ba be bi bo"}],
        "max_completion_tokens": 25,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", sim.url + "/v1/chat/completions", json=body, timeout=30) as r:
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 25
    assert usage["usage"]["prompt_tokens"] == 5  # "user" + 4 words
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-2])
    assert len(content.split()) == 25
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert events[0]["object"] == "chat.completion.chunk"


def test_completions_non_stream(sim: SimProcess) -> None:
    r = httpx.post(sim.url + "/v1/completions", json={"prompt": "ba be", "max_tokens": 5, "ignore_eos": True})
    out = r.json()
    assert out["object"] == "text_completion" and out["usage"]["completion_tokens"] == 5
    assert len(out["choices"][0]["text"].split()) == 5


def test_info_endpoints_and_version_shapes(sim: SimProcess) -> None:
    # Enough decode steps for a decode-log window, so the lifetime accept length is aggregated.
    httpx.post(
        sim.url + "/generate",
        json={"text": "ba", "sampling_params": {"max_new_tokens": 60, "ignore_eos": True, "temperature": 0}},
        timeout=30,
    )
    info = httpx.get(sim.url + "/server_info").json()
    assert info["version"] == "0.5.9"
    assert info["speculative_num_draft_tokens"] == 3 and info["max_running_requests"] == 48
    assert info["max_total_num_tokens"] > 0
    state = info["internal_states"][0]
    assert state["avg_spec_accept_length"] > 1.0
    assert set(state["memory_usage"]) >= {"weight", "kvcache", "token_capacity", "graph"}
    assert state["effective_max_running_requests_per_dp"] == 48
    assert httpx.get(sim.url + "/get_server_info").json()["version"] == "0.5.9"
    assert httpx.get(sim.url + "/model_info").json()["architectures"] == ["LlamaForCausalLM"]
    models = httpx.get(sim.url + "/v1/models").json()
    assert models["data"][0]["id"] == "sim/test-model" and models["data"][0]["owned_by"] == "sglang"
    assert httpx.get(sim.url + "/get_load").json()[0]["dp_rank"] == 0  # <= 0.5.14
    loads = httpx.get(sim.url + "/v1/loads").json()  # >= 0.5.9
    assert loads["loads"][0]["max_running_requests"] == 48
    assert "Decode batch, #running-req: " in sim.output() and "accept len: " in sim.output()


def test_metrics_have_sglang_names(sim: SimProcess) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(sim.url + "/metrics").text
    names = {f.name for f in text_string_to_metric_families(text)}
    for name in (
        "sglang:spec_accept_length",
        "sglang:spec_accept_rate",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:token_usage",
        "sglang:generation_tokens",
        "sglang:time_to_first_token_seconds",
    ):
        assert name in names, name


def test_flush_cache_refused_while_busy_then_resets_acceptance(sim: SimProcess) -> None:
    # long enough (~4 s at the stand-in's 20x speed) that a busy machine's slow polls still see it running (3,000 tokens
    # ended between a /get_load that saw it and the /flush_cache after it, with a core busy)
    body = {"text": "ba", "sampling_params": {"max_new_tokens": 12000, "ignore_eos": True}}
    done = threading.Event()

    def long_request() -> None:
        httpx.post(sim.url + "/generate", json=body, timeout=60)
        done.set()

    threading.Thread(target=long_request, daemon=True).start()
    deadline = time.monotonic() + 10
    while httpx.get(sim.url + "/get_load").json()[0]["num_reqs"] == 0:
        assert time.monotonic() < deadline
    assert httpx.post(sim.url + "/flush_cache").status_code == 400
    assert done.wait(60)
    r = httpx.post(sim.url + "/flush_cache")
    assert r.status_code == 200 and r.text.startswith("Cache flushed.")
    assert "avg_spec_accept_length" not in httpx.get(sim.url + "/server_info").json()["internal_states"][0]


@pytest.mark.system
def test_api_key_guards_all_but_health_and_metrics() -> None:
    with running_sim([*FAST, "--api-key", "s3cret", "--enable-metrics"]) as s:
        assert http_status(s.url + "/health") == 200
        assert http_status(s.url + "/metrics") == 200
        r = httpx.get(s.url + "/server_info")
        assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
        ok = httpx.get(s.url + "/server_info", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and "s3cret" not in ok.text
        gone = httpx.get(s.url + "/get_load", headers={"Authorization": "Bearer s3cret"})  # not in 0.5.23
        assert gone.status_code == 404 and gone.json() == {"detail": "Not Found"}
        # SGLang logs its settings, key included, at every start (server_args=ServerArgs(...)): the stand-in
        # does too, so that the console's masking is tested against what a real journal holds.
        assert "api_key='s3cret'" in s.output()


@pytest.mark.system
def test_port_refused_then_503_then_200_while_starting() -> None:
    sim = start_sim(["--sim-profile", "tiny-test", "--sim-time-scale", "1.0"])
    try:
        sim.wait_for("Load weight begin")
        assert http_status(sim.url + "/health") is None  # not listening while weights load
        seen: list[int | None] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not seen or seen[-1] != 200):
            status = http_status(sim.url + "/health", timeout=1)
            if not seen or seen[-1] != status:
                seen.append(status)
            time.sleep(0.005)
        assert seen[-1] == 200
        assert 503 in seen and seen.index(503) < seen.index(200)
        assert "Capture target decode CUDA graph end" in "".join(sim.lines)  # 0.5.23's capture line
    finally:
        assert sim.stop() == 0


@pytest.mark.system
def test_sigterm_drains_running_requests_and_exits_zero() -> None:
    sim = start_sim([*FAST, "--sim-speedup", "0.02"])  # slow decoding: the request outlives the SIGTERM
    try:
        sim.wait_healthy()
        result: dict[str, Any] = {}

        def request() -> None:
            body = {"text": "ba", "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}}
            result["r"] = httpx.post(sim.url + "/generate", json=body, timeout=60)

        t = threading.Thread(target=request)
        t.start()
        deadline = time.monotonic() + 10
        while httpx.get(sim.url + "/v1/loads").json()["loads"][0]["num_running_reqs"] == 0:
            assert time.monotonic() < deadline
        os.kill(sim.proc.pid, signal.SIGTERM)
        sim.wait_for("Gracefully exiting")
        assert http_status(sim.url + "/health") == 503
        t.join(60)
        assert result["r"].status_code == 200
        assert result["r"].json()["meta_info"]["completion_tokens"] == 20
        assert sim.proc.wait(30) == 0
    finally:
        sim.stop()


def run_sim_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.sim", "--sim-profile", "tiny-test", "--sim-time-scale", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.system
def test_spec_v2_with_topk_2_fails_like_sglang_0_5_9() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "console.sim",
            "--sim-sglang-version",
            "0.5.9",
            "--model-path",
            "a/b",
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-num-steps",
            "2",
            "--speculative-eagle-topk",
            "2",
            "--speculative-num-draft-tokens",
            "4",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "SGLANG_ENABLE_SPEC_V2": "1"},
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.rstrip().splitlines()[-1] == (
        "ValueError: Spec v2 currently only supports topk = 1 for speculative decoding."
    )


@pytest.mark.system
def test_unknown_flag_is_an_argparse_usage_error() -> None:
    done = run_sim_cli("--model-path", "a/b", "--no-such-flag", "3")
    assert done.returncode == 2
    assert "error: unrecognized arguments: --no-such-flag 3" in done.stderr


def test_bad_sim_options_are_usage_errors_not_a_frozen_server() -> None:
    from console.sim.__main__ import prepare

    assert prepare(["--model-path", "a/b", "--sim-speedup", "0"]) == (2, None)  # was: steps 10^6 times slower
    assert prepare(["--model-path", "a/b", "--sim-gpus", "-1"]) == (2, None)  # was: a host without GPUs


@pytest.mark.system
def test_missing_local_draft_model_fails_like_a_missing_model(tmp_path: Any) -> None:
    done = run_sim_cli("--model-path", "a/b", *SPEC, "--speculative-draft-model-path", str(tmp_path / "nope"))
    assert done.returncode == 1
    assert "HFValidationError" in done.stderr.splitlines()[-1] and str(tmp_path / "nope") in done.stderr


@pytest.mark.system
def test_gpus_load_up_while_serving_and_nvidia_smi_shows_it() -> None:
    from console.sim.gpus import read_state

    with running_sim([*FAST, "--sim-speedup", "0.05"]) as s:
        idle = read_state(s.state_dir, list).gpus[0]
        assert idle.util_gpu == 0 and idle.memory_used_mib > 0  # weights, KV pool and graphs are resident
        done = threading.Event()

        def request() -> None:
            body = {"text": "ba", "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}}
            httpx.post(s.url + "/generate", json=body, timeout=60)
            done.set()

        threading.Thread(target=request, daemon=True).start()
        deadline = time.monotonic() + 20
        while read_state(s.state_dir, list).gpus[0].util_gpu == 0:
            assert time.monotonic() < deadline and not done.is_set()
            time.sleep(0.05)
        busy = read_state(s.state_dir, list).gpus[0]
        assert busy.power_draw_w > idle.power_draw_w and busy.sm_clock_mhz > idle.sm_clock_mhz
        env = {**os.environ, "OPSCONSOLE_SIM_STATE_DIR": str(s.state_dir)}
        apps = subprocess.run(
            [sys.executable, "-m", "console.sim.nvidia_smi", "--query-compute-apps=pid,used_memory", "--format=csv"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        assert apps[0] == "pid, used_gpu_memory [MiB]" and apps[1].startswith(f"{s.proc.pid}, ")


QWEN = ["--sim-profile", "qwen3.5-122b-fp8-4x-rtxpro6000", "--speculative-algorithm", "NEXTN"]


@pytest.mark.parametrize(
    ("args", "expected_tok_s"),
    [
        # Operators' single-request figures (temperature 0, ignore_eos): MTP topk 1, steps 1 / 2 / 3.
        (
            [
                *QWEN,
                "--speculative-num-steps",
                "1",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "2",
            ],
            123,
        ),
        (
            [
                *QWEN,
                "--speculative-num-steps",
                "3",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "4",
            ],
            234,
        ),
        (
            [
                *QWEN,
                "--speculative-num-steps",
                "2",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "3",
            ],
            186,
        ),
        # Kimi K2.5 without speculation, and with EAGLE3 topk 1 steps 2 on the overlap (spec v2) path.
        (["--sim-profile", "kimi-k2.5-int4-8x-rtxpro6000-pcie"], 92.7),
        (
            [
                "--sim-profile",
                "kimi-k2.5-int4-8x-rtxpro6000-pcie",
                "--speculative-algorithm",
                "EAGLE3",
                "--speculative-draft-model-path",
                "sim/kimi-k2.5-eagle3",
                "--speculative-num-steps",
                "2",
                "--speculative-eagle-topk",
                "1",
                "--speculative-num-draft-tokens",
                "3",
            ],
            86.8,
        ),
    ],
    ids=["qwen-steps1", "qwen-steps3", "qwen-steps2", "kimi-no-spec", "kimi-eagle3-spec-v2"],
)
@pytest.mark.alone  # a single stream's speed against the profile (tests/tiers.py)
@pytest.mark.system
def test_single_stream_speed_matches_the_profile_through_http(args: list[str], expected_tok_s: float) -> None:
    with running_sim([*args, "--sim-time-scale", "0.001"]) as s:
        body = {
            "text": "ba be bi bo bu",
            "sampling_params": {"max_new_tokens": 250, "ignore_eos": True, "temperature": 0},
            "stream": True,
        }
        start = time.perf_counter()
        first = None
        with httpx.stream("POST", s.url + "/generate", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data: {") and first is None:
                    first = time.perf_counter()
        latency = time.perf_counter() - start
        assert first is not None
        tok_s = 249 / (latency - (first - start))  # bench_serving's per-request decode speed
        assert tok_s == pytest.approx(expected_tok_s, rel=0.10)


@pytest.mark.system
def test_batch_generate_streams_each_request_with_its_index() -> None:
    """The shape bench_one_batch_server reads: one stream, chunks tagged with the request's index.

    Like SGLang, the stream carries each request's latest state, so a client that falls a step behind sees
    tokens merged. Steps 20 times slower than the profile (still ~1 s in all) leave a loaded CI machine
    ample time to see the first token on its own, which is what bench_one_batch_server times TTFT by."""
    body = {
        "input_ids": [[5, 6, 7], [8, 9], [10]],
        "sampling_params": {"max_new_tokens": 12, "ignore_eos": True, "temperature": 0},
        "stream": True,
    }
    with (
        running_sim(["--sim-time-scale", "0.001", "--sim-speedup", "0.05"]) as sim,
        httpx.stream("POST", sim.url + "/generate", json=body, timeout=60) as r,
    ):
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    finals = {e["index"]: e["meta_info"] for e in events[:-1] if e["meta_info"]["finish_reason"] is not None}
    assert sorted(finals) == [0, 1, 2]
    assert [finals[i]["prompt_tokens"] for i in range(3)] == [3, 2, 1]
    assert all(m["completion_tokens"] == 12 for m in finals.values())
    assert any(e["meta_info"]["completion_tokens"] == 1 for e in events[:-1])  # the TTFT marker it looks for
