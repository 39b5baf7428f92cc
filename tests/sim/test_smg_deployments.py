"""The real smg (the `smg` wheel, 1.13) in front of stand-in deployments: in PD mode over a prefill + decode pair, and
in regular mode over rank 0 of a two-node deployment. Retries are off, so every request smg answers is the one the
stand-ins served."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.support.simdeploy import running_pd_pair, running_ranks, running_smg
from tests.support.simproc import start_sim

pytestmark = pytest.mark.system


def _post(url: str, body: dict[str, Any], timeout: float = 60.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def test_smg_in_pd_mode_routes_every_request_through_prefill_and_decode() -> None:
    with (
        running_pd_pair(("--enable-metrics",), ("--enable-metrics",)) as (prefill, decode),
        running_smg(
            ["--pd-disaggregation", "--prefill", prefill.url, str(prefill.bootstrap_port), "--decode", decode.url,
             "--disable-retries", "--disable-circuit-breaker"]
        ) as smg,
    ):  # fmt: skip
        status, body = _post(smg.url + "/generate", {"text": "the sea", "sampling_params": {"max_new_tokens": 12}})
        assert status == 200, body
        assert json.loads(body)["meta_info"]["completion_tokens"] == 12  # decode's answer (prefill's has one token)
        chat = {"model": "sim/test-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 6}
        status, body = _post(smg.url + "/v1/chat/completions", chat)
        assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 6
        status, body = _post(smg.url + "/v1/chat/completions", {**chat, "stream": True})
        assert status == 200 and body.rstrip().endswith(b"data: [DONE]")
        # Each of the three went through both halves: the prefill sent its KV, the decode bootstrapped the room.
        assert _metric(prefill.url, "sglang:kv_transfer_latency_ms_count") == 3
        assert _metric(decode.url, "sglang:kv_transfer_bootstrap_ms_count") == 3
        assert _metric(decode.url, "sglang:num_bootstrap_failed_reqs_total") == 0


def test_smg_in_regular_mode_routes_through_rank0_of_a_two_node_deployment() -> None:
    with (
        running_ranks(2, "--enable-metrics") as (rank0, rank1),
        running_smg(["--worker-urls", rank0.url, "--disable-retries", "--disable-circuit-breaker"]) as smg,
    ):
        for _ in range(3):
            status, body = _post(smg.url + "/generate", {"text": "hello", "sampling_params": {"max_new_tokens": 5}})
            assert status == 200, body
            assert json.loads(body)["meta_info"]["completion_tokens"] == 5
        assert _metric(rank0.url, "sglang:num_requests_total") >= 3
        assert rank1.proc.poll() is None


def test_a_decode_killed_under_smg_loses_its_streams_and_serves_again_once_back() -> None:
    with (
        running_pd_pair() as (prefill, decode),
        running_smg(
            ["--pd-disaggregation", "--prefill", prefill.url, str(prefill.bootstrap_port), "--decode", decode.url,
             "--disable-retries", "--disable-circuit-breaker"]
        ) as smg,
    ):  # fmt: skip
        body = {
            "text": "a long story",
            "sampling_params": {"max_new_tokens": 50000, "ignore_eos": True},
            "stream": True,
        }
        request = urllib.request.Request(
            smg.url + "/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        chunks: list[bytes] = []
        with urllib.request.urlopen(request, timeout=60) as stream:
            chunks.append(stream.readline())  # the stream is running: decode is sending it
            os.kill(decode.sim.proc.pid, signal.SIGKILL)
            with contextlib.suppress(OSError, http.client.HTTPException):
                chunks.extend(stream)
        # Lost with its decode server: smg ends the stream with its own error event (then [DONE]), no finish.
        received = b"".join(chunks)
        assert b'"type":"stream_error"' in received and b'"finish_reason":{' not in received
        decode.sim.proc.wait()
        again = start_sim(list(decode.sim.proc.args[8:]), port=decode.sim.port)  # the same unit started again
        try:
            again.wait_healthy()
            status, answer = _post(smg.url + "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 3}})
            assert status == 200, answer
            assert json.loads(answer)["meta_info"]["completion_tokens"] == 3
        finally:
            again.stop()
