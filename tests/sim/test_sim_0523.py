"""The stand-in as SGLang 0.5.23 (wave5-facts "What the stand-in must mimic" §1 and §3), a real process over HTTP:
adaptive tiers moving internal_states and the gauges (not the top-level /server_info), startup_time, its startup
lines in order, /ready, /v1/loads, owned_by, /health 503 while starting and stopping, SIGTERM draining in-flight
requests, SGLANG_ENABLE_SPEC_V2 ignored, --cuda-graph-max-bs refused as argparse would. (The meta_info keys are held to
the wheel in tests/sglang/test_spec_meta_wheels.py.)"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.core.phases import PhaseState, PhaseTracker
from console.sim.profiles import EAGLE_REPEAT_DRAFT
from tests.support.simproc import free_port, http_status, running_sim, start_sim

pytestmark = pytest.mark.system

EAGLE = [
    "--sim-profile", "tiny-test", "--model-path", "sim/tiny-test", "--speculative-algorithm", "EAGLE",
    "--speculative-draft-model-path", EAGLE_REPEAT_DRAFT, "--sim-sglang-version", "0.5.23", "--enable-metrics",
]  # fmt: skip
FAST = ["--sim-time-scale", "0.001"]


def gauge(metrics: str, name: str) -> float:
    found = re.search(rf"^sglang:{name}\{{[^}}]*\}} (\S+)$", metrics, re.M)
    assert found, name
    return float(found.group(1))


def generate(url: str, tokens: int, **extra: Any) -> dict[str, Any]:
    body = {"text": "hello there", "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True, "temperature": 0}}
    response = httpx.post(url + "/generate", json={**body, **extra}, timeout=60)
    response.raise_for_status()
    return dict(response.json())


def test_adaptive_moves_internal_states_and_the_gauge_not_the_launch_config(tmp_path: Path) -> None:
    """A config of two tiers (2 and 4, launch: the union's middle, 4) with fast updates: the repeat draft accepts
    little, so the slot drops to 2; /server_info's internal_states and sglang:spec_num_steps say 2, its top level
    keeps 4, and the log says why."""
    config = tmp_path / "adaptive.json"
    config.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}, "warmup_batches": 2, "update_interval": 2}))
    flags = [*EAGLE, *FAST, "--speculative-adaptive", "--speculative-adaptive-config", str(config)]
    with running_sim(flags) as sim:
        assert "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=5" in sim.output()
        meta = generate(sim.url, 200)["meta_info"]
        info = httpx.get(sim.url + "/server_info").json()
        metrics = httpx.get(sim.url + "/metrics").text
    state = info["internal_states"][0]
    assert info["speculative_num_steps"] == 4 and info["speculative_num_draft_tokens"] == 5  # the launch config
    assert state["speculative_num_steps"] == 2 and state["speculative_num_draft_tokens"] == 3
    assert gauge(metrics, "spec_num_steps") == 2 and gauge(metrics, "spec_num_draft_tokens") == 3
    assert "Adaptive spec params updated: steps 4 -> 2 (ema_accept_len=" in sim.output()
    assert "Switch adaptive runtime state: steps 4 -> 2, draft_tokens 5 -> 3" in sim.output()
    # the histogram spans the tiers the request went through; proposed drafts use the launch config (4 a round)
    assert sum(meta["spec_correct_drafts_histogram"]) == meta["spec_verify_ct"]
    assert meta["spec_num_proposed_drafts"] == meta["spec_verify_ct"] * 4


def test_adaptive_default_tiers_per_batch_size() -> None:
    """SGLang's default config: launch steps 3 (the middle of 0, 1, 3, 5, 7), each of its batch-size slots starting
    at its own candidates; graphs are captured for every candidate."""
    with running_sim([*EAGLE, *FAST, "--speculative-adaptive"]) as sim:
        info = httpx.get(sim.url + "/server_info").json()
    assert info["speculative_num_steps"] == 3 and info["speculative_eagle_topk"] == 1
    verify = [line for line in sim.lines if "Capture target verify CUDA graph begin" in line]
    assert [re.search(r"num_tokens_per_req=(\d+)", line).group(1) for line in verify] == ["2", "4", "6", "8"]  # type: ignore[union-attr]
    assert sum("Capture target decode CUDA graph begin" in line for line in sim.lines) == 1  # the 0-step tier


def test_adaptive_steps_outside_the_config_fail_like_sglang(tmp_path: Path) -> None:
    config = tmp_path / "adaptive.json"
    config.write_text(json.dumps({"1": {"candidate_steps": [1, 3]}}))
    argv = [sys.executable, "-m", "console.sim", "--port", str(free_port()), *EAGLE, "--speculative-adaptive"]
    bad_steps = subprocess.run(
        [*argv, "--speculative-adaptive-config", str(config), "--speculative-num-steps", "2"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad_steps.returncode == 1
    assert bad_steps.stderr.strip().splitlines()[-1] == (
        "ValueError: --speculative-num-steps=2 is not in the adaptive config candidate_steps [1, 3]. "
        "Pass one of those values."
    )
    missing = subprocess.run(
        [*argv, "--speculative-adaptive-config", str(tmp_path / "nope.json")], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert missing.returncode == 1 and "FileNotFoundError" in missing.stderr.strip().splitlines()[-1]


def test_startup_lines_in_order_startup_time_and_the_phase_tracker() -> None:
    with running_sim([*EAGLE, *FAST, *["--speculative-num-steps", "2", "--speculative-eagle-topk", "1"]]) as sim:
        info = httpx.get(sim.url + "/server_info").json()
    lines = sim.lines
    order = [
        "Init parallel begin.", "Init parallel ends.", "Load weight begin.", "Load weight end.", "Memory pool end.",
        "Capture target prefill CUDA graph begin.", "Capture target verify CUDA graph end. bs=[",
        "Capture draft decode CUDA graph begin.", "Capture draft extend CUDA graph end.",
        "Engine startup timings (s): load_weight=", "The server is fired up and ready to roll!",
    ]  # fmt: skip
    at = [next(i for i, line in enumerate(lines) if marker in line) for marker in order]
    assert at == sorted(at), [lines[i] for i in at]
    assert not any("KV Cache is allocated" in line or "Init torch distributed" in line for line in lines)
    startup = info["startup_time"]
    assert set(startup) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "cuda_graph", "tokenizer_e2e"}
    assert set(startup["cuda_graph"]) == {
        "prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend"
    }  # fmt: skip
    assert startup["cuda_graph"]["target_verify"] > 0 and startup["cuda_graph"]["decode"] == 0
    assert info["internal_states"][0]["startup_time"] == {k: v for k, v in startup.items() if k != "tokenizer_e2e"}
    tracker = PhaseTracker.for_start(speculative=True)
    for line in lines:
        tracker.feed(line, datetime.now())
    assert tracker.ready and [p.state for p in tracker.phases] == [PhaseState.DONE] * len(tracker.phases)


def test_routes_of_0_5_23() -> None:
    with running_sim([*EAGLE, *FAST]) as sim:
        assert http_status(sim.url + "/ready") == 200
        models = httpx.get(sim.url + "/v1/models").json()
        loads = httpx.get(sim.url + "/v1/loads")
        assert http_status(sim.url + "/get_load") == 404  # no route in 0.5.23
    assert models["data"][0]["owned_by"] == "sglang"
    assert loads.status_code == 200 and loads.json()["version"] == "0.5.23"


def test_health_is_503_while_starting() -> None:
    """Warm-up after the port is bound: /health and /ready answer 503 until the server is fired up."""
    sim = start_sim([*EAGLE, "--sim-time-scale", "1"])
    try:
        seen: list[int | None] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not seen or seen[-1] != 200):
            seen.append(http_status(sim.url + "/health", timeout=5))
        assert seen[-1] == 200 and 503 in seen
        assert seen.index(503) < seen.index(200)
        sim.wait_for("The server is fired up and ready to roll!")
    finally:
        sim.stop()


def test_sigterm_turns_health_503_at_once_finishes_in_flight_and_exits_0() -> None:
    sim = start_sim([*EAGLE, "--sim-time-scale", "0.02"])
    try:
        sim.wait_healthy()
        result: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: result.update(generate(sim.url, 3000)))
        thread.start()
        deadline = time.monotonic() + 30
        while httpx.get(sim.url + "/v1/loads").json()["loads"][0]["num_running_reqs"] != 1:
            assert time.monotonic() < deadline, "the request never ran"  # polled: the condition, not a timed wait
        sim.proc.send_signal(signal.SIGTERM)
        sim.wait_for("SIGTERM received.")
        assert http_status(sim.url + "/health") == 503 and http_status(sim.url + "/ready") == 503
        thread.join(120)
        assert result["meta_info"]["completion_tokens"] == 3000  # the request in flight finished
        assert sim.proc.wait(60) == 0
        assert "Health check request received during shutdown. Returning 503." in sim.output()
        assert "Gracefully exiting... Remaining number of requests 1." in sim.output()
    finally:
        sim.stop()


def test_spec_v2_env_is_ignored_and_cuda_graph_max_bs_is_ambiguous() -> None:
    flags = [*EAGLE, *FAST, *["--speculative-num-steps", "2", "--speculative-eagle-topk", "1"]]
    with running_sim(flags, env={"SGLANG_ENABLE_SPEC_V2": "0"}) as sim:
        info = httpx.get(sim.url + "/server_info").json()
    assert info["disable_overlap_schedule"] is False  # 0.5.9-0.5.12 would turn the overlap off (spec v1)
    assert not any("SPEC_V2" in line for line in sim.lines)
    done = subprocess.run(
        [sys.executable, "-m", "console.sim", "--port", str(free_port()), *EAGLE, "--cuda-graph-max-bs", "64"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill"
    )
