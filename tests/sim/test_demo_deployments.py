"""`opsconsole demo --profile two-node | pd` end to end: a real demo process that runs a deployment of stand-ins
(and the real smg) under its supervisors, reached through the host profiles and the deployment profile it writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest

from console.sim.supervisor import DemoServiceManager
from tests.support.procs import processes_with
from tests.support.simdeploy import wait_until

pytestmark = pytest.mark.system

OPSCONSOLE = [sys.executable, "-m", "console"]


def _post(url: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return dict(json.loads(r.read()))


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except OSError:
        return None


def _run_demo(tmp_path: Path, layout: str) -> subprocess.Popen[bytes]:
    out = (tmp_path / "demo.out").open("w")
    return subprocess.Popen(
        [*OPSCONSOLE, "--workspace", str(tmp_path), "demo", "--no-ui", "--profile", layout, "--time-scale", "0.005"],
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def _stop(demo: subprocess.Popen[bytes], tmp_path: Path) -> None:
    if demo.poll() is None:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(60)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()
    assert not processes_with(str(tmp_path / ".demo")), "a member of the demo deployment was left running"


async def test_the_two_node_demo_runs_two_ranks_behind_one_deployment_profile(tmp_path: Path) -> None:
    demo = _run_demo(tmp_path, "two-node")
    try:
        wait_until(lambda: "Ctrl-C stops the demo deployment." in (tmp_path / "demo.out").read_text(), 120, "the demo")
        profiles = tmp_path / "profiles"
        deployment = tomllib.loads((profiles / "deployments" / "demo.toml").read_text())
        members = {m["host"]: m for m in deployment["member"]}
        assert {(h, m["role"], m["rank"]) for h, m in members.items()} == {
            ("demo-rank0", "rank", 0), ("demo-rank1", "rank", 1),
        }  # fmt: skip
        rank0 = tomllib.loads((profiles / "demo-rank0.toml").read_text())
        rank1 = tomllib.loads((profiles / "demo-rank1.toml").read_text())
        assert members["demo-rank0"]["url"] == f"http://127.0.0.1:{rank0['sglang']['port']}"
        answer = _post(
            members["demo-rank0"]["url"] + "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 3}}
        )
        assert answer["meta_info"]["completion_tokens"] == 3  # type: ignore[index]
        assert _status(members["demo-rank1"]["url"] + "/health") == 200  # the dummy
        manager = DemoServiceManager(rank1["host"]["control"], rank1["host"]["unit"])
        unit = await manager.read_unit()
        assert "--nnodes 2" in unit and "--node-rank 1" in unit and "--dist-init-addr 127.0.0.1:" in unit
        messages = [e.message async for e in manager.journal(lines=500)]
        assert any("Dummy health check server started" in m for m in messages)
        gpus = subprocess.run([*rank1["host"]["gpu_command"], "-L"], capture_output=True, text=True, check=True)
        assert len(gpus.stdout.splitlines()) == 4  # TP 8 over two nodes
    finally:
        _stop(demo, tmp_path)
    assert not (tmp_path / "profiles" / "deployments" / "demo.toml").exists()
    assert not (tmp_path / "profiles" / "demo-rank0.toml").exists()


def test_the_pd_demo_serves_through_smg_over_a_prefill_and_a_decode(tmp_path: Path) -> None:
    demo = _run_demo(tmp_path, "pd")
    try:
        wait_until(lambda: "Ctrl-C stops the demo deployment." in (tmp_path / "demo.out").read_text(), 120, "the demo")
        deployment = tomllib.loads((tmp_path / "profiles" / "deployments" / "demo.toml").read_text())
        roles = {m["role"]: m for m in deployment["member"]}
        assert set(roles) == {"prefill", "decode"} and roles["prefill"]["bootstrap_port"]
        assert deployment["router"]["host"] == "demo-router" and deployment["router"]["unit"] == "smg-demo.service"
        assert _status(deployment["router"]["url"] + "/readiness") == 200
        answer = _post(
            deployment["router"]["url"] + "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 4}}
        )
        assert answer["meta_info"]["completion_tokens"] == 4  # type: ignore[index]
        with urllib.request.urlopen(roles["prefill"]["url"] + "/metrics", timeout=5) as r:
            assert 'sglang:kv_transfer_latency_ms_count{engine_type="prefill"' in r.read().decode()
        with urllib.request.urlopen(deployment["router"]["metrics"] + "/metrics", timeout=5) as r:
            assert "smg_" in r.read().decode()
    finally:
        _stop(demo, tmp_path)
    assert not list((tmp_path / "profiles").glob("demo-*.toml"))


def test_a_second_demo_is_refused_while_a_deployment_demo_runs(tmp_path: Path) -> None:
    demo = _run_demo(tmp_path, "two-node")
    try:
        wait_until(lambda: "Ctrl-C stops the demo deployment." in (tmp_path / "demo.out").read_text(), 120, "the demo")
        second = subprocess.run(
            [*OPSCONSOLE, "--workspace", str(tmp_path), "demo", "--no-ui", "--profile", "tiny-test"],
            capture_output=True, text=True, timeout=60, env={**os.environ},
        )  # fmt: skip
        assert second.returncode == 1 and "already running" in second.stderr
    finally:
        _stop(demo, tmp_path)
