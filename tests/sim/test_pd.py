"""The stand-in as a PD pair of SGLang 0.5.23 (console.sim.pd): a prefill with its bootstrap server, a decode that
fetches each room's KV from it, rooms failed when the prefill goes away, mismatches refused at first contact
(../shared/research/wave5-facts.md §5). Real processes on loopback; requests sent to both halves as smg sends them."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.support.simdeploy import PdMember, ended, running_pd_pair, start_decode, start_prefill, wait_until
from tests.support.simproc import FAST, free_port, http_status

pytestmark = pytest.mark.system

FAST_HEARTBEAT = {"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "2", "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": "1"}


def _post(url: str, body: dict[str, Any], timeout: float = 60.0) -> tuple[int, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _metric(url: str, name: str) -> float:
    """The value of one sample of /metrics (the first whose name matches)."""
    text = _get(url + "/metrics")[1]
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(f"{name} not in /metrics:\n{text[:2000]}")


def _pd_body(prefill: PdMember, room: int, max_new_tokens: int = 8, **more: Any) -> dict[str, Any]:
    return {
        "text": "tell me about the sea",
        "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True},
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": prefill.bootstrap_port,
        "bootstrap_room": room,
        **more,
    }


class Background:
    """A request in a thread: its (status, body) once it ended."""

    def __init__(self, url: str, body: dict[str, Any]) -> None:
        self.result: tuple[int, Any] | None = None
        self.thread = threading.Thread(target=self._run, args=(url, body), daemon=True)
        self.thread.start()

    def _run(self, url: str, body: dict[str, Any]) -> None:
        try:
            self.result = _post(url, body)
        except OSError as e:  # the server went away mid-request
            self.result = (0, str(e))

    def wait(self, timeout: float = 60.0) -> tuple[int, Any]:
        self.thread.join(timeout)
        assert self.result is not None, "the request did not end"
        return self.result


def test_the_bootstrap_server_answers_503_until_the_ranks_registered() -> None:
    prefill = start_prefill("--sim-time-scale", "1", "--tp-size", "2")  # loads for seconds: the window is there
    base = f"http://127.0.0.1:{prefill.bootstrap_port}"
    query = "/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1"
    try:
        wait_until(lambda: http_status(base + "/health") == 200, 30, "the bootstrap server's /health")
        assert _get(base + "/health") == (200, "OK")
        assert _get(base + query) == (503, "Prefill server not fully registered yet (0 workers registered).")
        assert http_status(prefill.url + "/health") is None  # the HTTP API is not bound while the weights load
        assert _get(base + "/route?prefill_dp_rank=-1")[0] == 400
        prefill.sim.wait_healthy()
        status, body = _get(base + query)
        layout = json.loads(body)
        assert status == 200 and layout["attn_tp_size"] == 2 and layout["page_size"] == 1
        assert (layout["kv_cache_dtype"], layout["decode_allocation_policy"]) == ("auto", "early")
        assert layout["prefill_http_port"] == prefill.sim.port
        rank1 = json.loads(
            _get(base + "/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=1&target_pp_rank=0")[1]
        )
        assert set(rank1) == {"rank_ip", "rank_port"}
        assert _get(base + "/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=7&target_pp_rank=0")[0] == 404
        assert _post(base + "/register_dp_rank", {"bootstrap_room": 5, "dp_rank": 0})[0] == 200
        assert _post(base + "/query_dp_ranks", {"bootstrap_rooms": [5, 6]}) == (200, {"5": 0})
    finally:
        prefill.sim.stop()


def test_decode_answers_with_the_kv_its_prefill_sent() -> None:
    with running_pd_pair(("--enable-metrics",), ("--enable-metrics",)) as (prefill, decode):
        room = random.getrandbits(63)
        waiting = Background(decode.url + "/generate", _pd_body(prefill, room))
        # Decode bootstraps the room and waits for its KV; the prefill request has not even been sent.
        wait_until(lambda: _metric(decode.url, "sglang:num_decode_transfer_queue_reqs") == 1, 30, "decode waits")
        assert waiting.result is None
        prefill_sent = time.monotonic()
        status, answer = _post(prefill.url + "/generate", _pd_body(prefill, room))
        assert status == 200 and answer["meta_info"]["completion_tokens"] == 1  # a prefill answers its first token
        status, body = waiting.wait()
        assert status == 200 and body["meta_info"]["completion_tokens"] == 8
        assert time.monotonic() > prefill_sent
        assert _metric(prefill.url, "sglang:kv_transfer_latency_ms_count") == 1
        assert _metric(decode.url, "sglang:kv_transfer_bootstrap_ms_count") == 1
        assert _metric(decode.url, "sglang:num_decode_transfer_queue_reqs") == 0
        metrics = _get(decode.url + "/metrics")[1]
        assert 'engine_type="decode"' in metrics and 'engine_type="unified"' not in metrics
        assert 'engine_type="prefill"' in _get(prefill.url + "/metrics")[1]
        loads = json.loads(_get(prefill.url + "/v1/loads?include=core,disagg")[1])["loads"][0]["disaggregation"]
        assert loads["mode"] == "prefill" and loads["kv_transfer_latency_ms"] > 0
        assert json.loads(_get(decode.url + "/v1/loads")[1])["loads"][0]["disaggregation"]["mode"] == "decode"
        for family in ("num_bootstrap_failed_reqs_total", "num_transfer_failed_reqs_total", "kv_transfer_speed_gb_s",
                       "num_prefill_inflight_queue_reqs", "num_decode_prealloc_queue_reqs"):  # fmt: skip
            assert f"sglang:{family}" in metrics


def test_a_null_bootstrap_port_is_the_decodes_own() -> None:
    prefill = start_prefill()
    decode = start_decode("--disaggregation-bootstrap-port", str(prefill.bootstrap_port))
    try:
        prefill.sim.wait_healthy()
        decode.sim.wait_healthy()
        room = random.getrandbits(63)
        waiting = Background(decode.url + "/generate", _pd_body(prefill, room, bootstrap_port=None))
        assert _post(prefill.url + "/generate", _pd_body(prefill, room))[0] == 200
        status, body = waiting.wait()
        assert status == 200 and body["meta_info"]["completion_tokens"] == 8
    finally:
        prefill.sim.stop()
        decode.sim.stop()


def test_decode_fails_the_rooms_of_a_prefill_that_went_away_and_keeps_those_with_their_kv() -> None:
    with running_pd_pair(decode_args=("--enable-metrics",), env=FAST_HEARTBEAT) as (prefill, decode):
        # A request that holds its KV and decodes for a while: it must finish whatever happens to the prefill.
        long_room = random.getrandbits(63)
        holding = Background(decode.url + "/generate", _pd_body(prefill, long_room, max_new_tokens=20000))
        assert _post(prefill.url + "/generate", _pd_body(prefill, long_room))[0] == 200
        # A request whose prefill half never comes: it waits in the transfer queue.
        stranded = Background(decode.url + "/generate", _pd_body(prefill, random.getrandbits(63)))
        wait_until(lambda: _metric(decode.url, "sglang:num_decode_transfer_queue_reqs") == 1, 30, "a stranded room")
        os.kill(prefill.sim.proc.pid, signal.SIGKILL)
        status, body = stranded.wait()
        assert status == 500, body
        assert "Lost connection with prefill instance" in body["detail"]
        decode.sim.wait_for("Lost connection with prefill instance (bootstrap_addr: 127.0.0.1:")
        assert holding.result is None  # still decoding when its prefill was given up
        status, body = holding.wait()
        assert status == 200 and body["meta_info"]["completion_tokens"] == 20000
        assert _metric(decode.url, "sglang:num_transfer_failed_reqs_total") == 1


@pytest.mark.parametrize(
    ("prefill_flag", "decode_flag", "message"),
    [
        (
            ("--page-size", "16"),
            (),
            "Page size mismatch: prefill server has page_size=16, but decode server has page_size=1",
        ),
        (("--kv-cache-dtype", "fp8_e4m3"), (), "KV cache dtype mismatch: prefill server has kv_cache_dtype=fp8_e4m3"),
    ],
)
def test_a_mismatched_layout_kills_the_decode_at_first_contact(
    prefill_flag: tuple[str, ...], decode_flag: tuple[str, ...], message: str
) -> None:
    with running_pd_pair(prefill_flag, decode_flag) as (prefill, decode):
        room = random.getrandbits(63)
        waiting = Background(decode.url + "/generate", _pd_body(prefill, room))
        assert ended(decode.sim, 30) == -signal.SIGKILL  # the scheduler raised: kill_process_tree
        assert message in decode.sim.output()
        assert waiting.wait()[0] in (0, 500)  # its client's connection went with it


def test_a_mismatched_allocation_policy_fails_the_request_only() -> None:
    policy = ("--disaggregation-decode-allocation-policy", "prefill_complete")
    with running_pd_pair(policy, ()) as (prefill, decode):
        status, body = _post(decode.url + "/generate", _pd_body(prefill, random.getrandbits(63)))
        assert status == 500
        assert (
            "Disaggregation decode allocation policy mismatch: prefill=prefill_complete, decode=early" in body["detail"]
        )
        assert http_status(decode.url + "/health") == 200


def test_a_fake_decode_serves_alone_and_a_fake_prefill_is_refused() -> None:
    decode = start_decode("--disaggregation-transfer-backend", "fake")
    try:
        decode.sim.wait_healthy()
        status, body = _post(decode.url + "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 5}})
        assert status == 200 and body["meta_info"]["completion_tokens"] == 5
    finally:
        decode.sim.stop()
    refused = subprocess.run(
        [sys.executable, "-m", "console.sim", *FAST, "--model-path", "sim/m", "--port", str(free_port()),
         "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "fake"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "AssertionError: Prefill server does not support 'fake' as the transfer backend" in refused.stderr


def test_a_prefill_back_before_its_decode_dropped_it_stalls_its_rooms_until_the_timeout() -> None:
    """SGLang #34289: a decode keeps a prefill's KV port until two heartbeats miss; a prefill started again within
    that window has a new port, so the rooms sent to it stall (here 3 s, not 300), then the decode reads /route anew."""
    timeouts = {"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "3", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "3"}
    with running_pd_pair(env=timeouts) as (prefill, decode):
        room = random.getrandbits(63)
        first = Background(decode.url + "/generate", _pd_body(prefill, room))
        assert _post(prefill.url + "/generate", _pd_body(prefill, room))[0] == 200
        assert first.wait()[0] == 200
        os.kill(prefill.sim.proc.pid, signal.SIGKILL)
        prefill.sim.proc.wait()
        again = start_prefill(bootstrap_port=prefill.bootstrap_port, env=timeouts)  # back at once, same address
        try:
            again.sim.wait_healthy()
            room = random.getrandbits(63)
            stalled = Background(decode.url + "/generate", _pd_body(again, room))
            status, body = _post(again.url + "/generate", _pd_body(again, room))
            assert status == 500 and "in KVPoll.Bootstrapping" in body["detail"]  # its decode never reached it
            status, body = stalled.wait()
            assert status == 500 and "in KVPoll.WaitingForInput" in body["detail"]
            room = random.getrandbits(63)  # the decode read the prefill's /route again: the pair works
            recovered = Background(decode.url + "/generate", _pd_body(again, room))
            assert _post(again.url + "/generate", _pd_body(again, room))[0] == 200
            assert recovered.wait()[0] == 200
        finally:
            again.sim.stop()
