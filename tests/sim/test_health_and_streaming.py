"""SGLang's generating /health, --stream-interval and when avg_spec_accept_length appears, on a real stand-in."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from console.sim.server import should_send
from tests.support.simproc import FAST, SimProcess, eagle_args, running_sim

SPEC = eagle_args(2)


def test_should_send_follows_sglangs_stream_interval_rule() -> None:
    assert all(should_send(n, 1) for n in range(1, 10))
    assert [n for n in range(1, 12) if should_send(n, 4)] == [1, 5, 9]  # the first token at once
    assert [n for n in range(1, 120) if should_send(n, None)] == [50, 100]  # not streaming


@pytest.fixture(scope="module")
def slow_sim() -> Iterator[SimProcess]:
    # Steps 100 times slower than the profile: a 20000-token prefill takes ~1 s, a 1-token one ~50 ms.
    with running_sim([*FAST, "--sim-speedup", "0.01", "--stream-interval", "4"]) as s:
        yield s


def _timed_health(url: str) -> tuple[int, float]:
    start = time.monotonic()
    status = httpx.get(url + "/health", timeout=30).status_code
    return status, time.monotonic() - start


@pytest.mark.alone  # the probe's time against the modelled prefill (tests/tiers.py)
def test_health_generates_through_the_scheduler_so_it_waits_under_load(slow_sim: SimProcess) -> None:
    idle_status, idle_s = _timed_health(slow_sim.url)
    assert idle_status == 200

    body = {"input_ids": [7] * 20000, "sampling_params": {"max_new_tokens": 1}}
    threads = [
        threading.Thread(target=lambda: httpx.post(slow_sim.url + "/generate", json=body, timeout=60)) for _ in range(2)
    ]
    for t in threads:
        t.start()
    try:
        # Both sent: one is being prefilled (alone: it exceeds the chunked-prefill budget), one waits.
        deadline = time.monotonic() + 10
        while httpx.get(slow_sim.url + "/v1/loads").json()["loads"][0]["num_waiting_reqs"] < 1:
            assert time.monotonic() < deadline, slow_sim.output()
        loaded_status, loaded_s = _timed_health(slow_sim.url)
    finally:
        for t in threads:
            t.join(60)
    assert loaded_status == 200
    # The probe's answer waits for the step in flight (~1 s of prefill); idle it is one 1-token prefill.
    assert loaded_s > 0.6 > 0.4 > idle_s, (idle_s, loaded_s)


def _generate_chunk_lengths(url: str, sampling: dict[str, object]) -> list[int]:
    body = {"text": "ba be", "sampling_params": {"max_new_tokens": 10, "ignore_eos": True, **sampling}}
    with httpx.stream("POST", url + "/generate", json={**body, "stream": True}, timeout=30) as r:
        return [len(json.loads(line[6:])["output_ids"]) for line in r.iter_lines() if line.startswith("data: {")]


def test_stream_interval_batches_tokens_per_chunk_like_sglang(slow_sim: SimProcess) -> None:
    assert _generate_chunk_lengths(slow_sim.url, {}) == [1, 5, 9, 10]  # --stream-interval 4; the end always
    assert _generate_chunk_lengths(slow_sim.url, {"stream_interval": 3}) == [1, 4, 7, 10]  # the request's own
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", slow_sim.url + "/v1/chat/completions", json=body, timeout=30) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    pieces = [e["choices"][0]["delta"].get("content") for e in events]
    # role chunk, tokens 1 / 2-5 / 6-9 / 10, then the finish chunk
    assert [len(p.split()) if p else 0 for p in pieces] == [0, 1, 4, 4, 1, 0]


def test_bad_sampling_number_is_a_clear_400(slow_sim: SimProcess) -> None:
    r = httpx.post(slow_sim.url + "/generate", json={"text": "ba", "sampling_params": {"max_new_tokens": "many"}})
    assert r.status_code == 400 and "max_new_tokens must be a number" in r.json()["message"]


@pytest.mark.system
def test_health_generation_switch_and_timeout_follow_sglangs_environment() -> None:
    # SGLANG_HEALTH_CHECK_TIMEOUT=0: a generating probe can never be answered in time.
    env = {"SGLANG_HEALTH_CHECK_TIMEOUT": "0", "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"}
    with running_sim([*FAST, *SPEC, "--decode-log-interval", "1000"], env=env) as s:  # healthy: /health is cheap
        assert httpx.get(s.url + "/health_generate").status_code == 503  # always generates
        s.wait_for("Health check failed. Server couldn't get a response from detokenizer for last 0 seconds.")
        # A request shorter than one decode-log window: SGLang has aggregated no acceptance yet.
        r = httpx.post(
            s.url + "/generate", json={"text": "ba", "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}}
        )
        assert r.status_code == 200 and r.json()["meta_info"]["spec_verify_ct"] > 0
        assert "avg_spec_accept_length" not in httpx.get(s.url + "/server_info").json()["internal_states"][0]
        assert "speculative" not in httpx.get(s.url + "/v1/loads").json()["loads"][0]
    with running_sim([*FAST], env={"SGLANG_HEALTH_CHECK_TIMEOUT": "0"}, healthy=False) as s:
        s.wait_for("The server is fired up and ready to roll!")
        assert httpx.get(s.url + "/health").status_code == 503  # /health generates by default
