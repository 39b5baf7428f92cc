"""The stand-in as the nodes of one multi-node SGLang 0.5.23 deployment (console.sim.multinode): real processes on
loopback that rendezvous at --dist-init-addr, a rank 0 that binds its API only with every rank loaded, dummy health
on rank 1, the gate, and ranks that die with a peer and never rejoin (../shared/research/wave5-facts.md §4)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.simdeploy import ended, rank_args, running_ranks, stop_ranks, wait_until
from tests.support.simproc import free_port, http_status, start_sim

pytestmark = pytest.mark.system


def _post(url: str, body: dict[str, object], timeout: float = 30.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_rank0_serves_only_after_every_rank_joined_and_rank1_serves_a_dummy() -> None:
    dist = free_port()
    rank0 = start_sim(rank_args(2, 0, dist, "--enable-metrics"))
    ranks = [rank0]
    try:
        rank0.wait_for("Init parallel begin.")
        assert http_status(rank0.url + "/health") is None  # alone, it waits at the rendezvous: its port is closed
        rank1_started = time.monotonic()
        # Rank 1 loads for seconds (a real start's time scale), rank 0 in a blink: rank 0 has to wait for it.
        rank1 = start_sim(rank_args(2, 1, dist, "--enable-metrics", "--sim-time-scale", "1"))
        ranks.append(rank1)
        rank0.wait_healthy()
        # Rank 0's rendezvous ended only once rank 1 was there, and its API came after rank 1 had loaded.
        assert rank0.arrival_of("Init parallel ends.") > rank1_started
        rank1.wait_for("Dummy health check server started in background thread")
        assert rank0.arrival_of("Uvicorn running") > rank1.arrival_of("Load weight end")

        status, body = _post(rank0.url + "/generate", {"text": "hello", "sampling_params": {"max_new_tokens": 4}})
        assert status == 200 and len(json.loads(body)["output_ids"]) == 4
        info = json.loads(_get(rank0.url + "/server_info")[1])
        assert (info["nnodes"], info["node_rank"], info["internal_states"][0]["world_size"]) == (2, 0, 2)

        for path in ("/health", "/health_generate", "/ping"):
            assert _get(rank1.url + path) == (200, b"")  # always 200, empty: it reflects nothing
        assert _get(rank1.url + "/metrics") == (200, b"")  # only attention-TP rank 0 records scheduler metrics
        assert _post(rank1.url + "/generate", {"text": "x"})[0] == 404  # no tokenizer, no API
        assert _get(rank1.url + "/server_info")[0] == 404
        assert any("[" in line and " TP1] Load weight begin" in line for line in rank1.lines)
    finally:
        stop_ranks(ranks)


def test_a_rank_alone_times_out_without_ever_binding() -> None:
    rank0 = start_sim(rank_args(2, 0, free_port(), "--dist-timeout", "1"))
    try:
        assert ended(rank0, 30) == -signal.SIGKILL  # kill_process_tree on itself, as SGLang's launch-phase handler
        assert "Timed out after 1 seconds waiting for clients. 1/2 clients joined." in rank0.output()
        assert "Uvicorn running" not in rank0.output() and "Load weight begin" not in rank0.output()
    finally:
        stop_ranks([rank0])


def test_rank1_ignores_sigterm_and_stopping_rank0_stops_both() -> None:
    with running_ranks(2) as (rank0, rank1):
        rank1.wait_for("Dummy health check server started")
        os.kill(rank1.proc.pid, signal.SIGTERM)
        rank1.wait_for("SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast")
        assert rank1.proc.poll() is None and http_status(rank1.url + "/health") == 200
        assert http_status(rank0.url + "/health") == 200
        os.kill(rank0.proc.pid, signal.SIGTERM)
        assert ended(rank0, 30) == 0
        assert ended(rank1, 30) == 0  # the ShutdownReq broadcast
        assert "terminated with 0" in rank1.output()


@pytest.mark.parametrize("killed", [1, 0])
def test_killing_any_rank_takes_the_other_down(killed: int) -> None:
    with running_ranks(2, "--sim-peer-loss-exit-s", "0.5") as ranks:
        ranks[1].wait_for("Dummy health check server started")
        os.kill(ranks[killed].proc.pid, signal.SIGKILL)
        survivor = ranks[1 - killed]
        assert ended(survivor, 30) == -signal.SIGKILL
        assert "Connection closed by peer" in survivor.output()
        assert "kill_process_tree called" in survivor.output()


def test_a_restarted_rank_never_rejoins_the_running_group() -> None:
    dist = free_port()
    extra = ("--sim-peer-loss-exit-s", "1")
    ranks = [start_sim(rank_args(2, 0, dist, *extra)), start_sim(rank_args(2, 1, dist, *extra))]
    try:
        ranks[0].wait_healthy()
        ranks[1].wait_for("Dummy health check server started")
        os.kill(ranks[1].proc.pid, signal.SIGKILL)
        ranks[1].proc.wait()
        again = start_sim(rank_args(2, 1, dist, "--dist-timeout", "3", *extra))
        ranks.append(again)
        assert ended(ranks[0], 30) == -signal.SIGKILL  # rank 0 goes with its lost peer
        assert ended(again, 30) == -signal.SIGKILL  # and the new rank 1 finds no group to join
        assert "The client socket has timed out after 3000ms" in again.output()
        assert "Dummy health check server started" not in again.output()
    finally:
        stop_ranks(ranks)


def test_the_gate_holds_every_rank_before_the_weights_until_activated() -> None:
    gate = free_port()
    with running_ranks(2, "--gated-launch-port", str(gate), healthy=False) as (rank0, rank1):
        rank0.wait_for("Gated launch waiting for activation. rank=0")
        rank1.wait_for("Gated launch waiting for activation. rank=1")
        assert _get(f"http://127.0.0.1:{gate}/health") == (200, b"OK")
        activated_at = time.monotonic()
        assert _post(f"http://127.0.0.1:{gate}/gate/activate", {}) == (200, b"OK")
        rank0.wait_healthy()
        for rank in (rank0, rank1):
            rank.wait_for("Gated launch activated. elapsed=")
            assert rank.arrival_of("Load weight begin") > activated_at
        assert rank0.arrival_of("Gated launch control server started on 127.0.0.1:") < activated_at


@pytest.mark.parametrize("stopped", [0, 1])
def test_ranks_waiting_at_the_gate_go_when_a_peer_goes(stopped: int) -> None:
    """At the gate rank 0 broadcasts the gate's flag to every rank each second (gloo): a peer gone fails it, and the
    rank left dies as with a peer lost later, instead of waiting at a gate nobody will open (SIGTERM to rank 0, as
    the console's restart stops it; SIGKILL to rank 1, whose node died)."""
    gate = free_port()
    with running_ranks(2, "--gated-launch-port", str(gate), "--sim-peer-loss-exit-s", "0.5", healthy=False) as ranks:
        for rank in ranks:
            rank.wait_for(f"Gated launch waiting for activation. rank={(rank is ranks[1] and 1) or 0}")
        os.kill(ranks[stopped].proc.pid, signal.SIGTERM if stopped == 0 else signal.SIGKILL)
        survivor = ranks[1 - stopped]
        assert ended(survivor, 30) == -signal.SIGKILL
        assert "Connection closed by peer" in survivor.output()
        assert "Load weight begin" not in survivor.output()


def test_the_gate_on_a_single_node() -> None:
    gate = free_port()
    single = start_sim(["--sim-profile", "tiny-test", "--sim-time-scale", "0.05", "--gated-launch-port", str(gate)])
    try:
        single.wait_for("Gated launch waiting for activation. rank=0")
        wait_until(lambda: http_status(f"http://127.0.0.1:{gate}/health") == 200, 10, "the gate's /health")
        activated_at = time.monotonic()
        assert _post(f"http://127.0.0.1:{gate}/gate/activate", {})[0] == 200
        single.wait_healthy()
        assert single.arrival_of("Load weight begin") > activated_at
    finally:
        single.stop()


def test_with_metrics_for_all_schedulers_rank1_shows_the_batch_under_its_own_tp_rank() -> None:
    with running_ranks(2, "--enable-metrics", "--enable-metrics-for-all-schedulers") as (rank0, rank1):
        rank1.wait_for("Dummy health check server started")
        body = {"text": "a long one", "sampling_params": {"max_new_tokens": 6000, "ignore_eos": True}}  # 3 s
        request = urllib.request.Request(
            rank0.url + "/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        sent = threading.Thread(target=lambda: urllib.request.urlopen(request, timeout=120).read(), daemon=True)
        sent.start()

        def running_on_rank1() -> bool:
            text = _get(rank1.url + "/metrics")[1].decode()
            running = [
                sample
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name == "sglang:num_running_reqs"
            ]
            return any(
                s.labels.get("tp_rank") == "1" and s.labels.get("engine_type") == "unified" and s.value == 1.0
                for s in running
            )

        wait_until(running_on_rank1, 30, "rank 1's scheduler gauge to show rank 0's running request")
