"""Benchmarks of a deployment go through its front door: rank 0 for ranks (the demo's two-node deployment), smg for PD
(the demo's prefill + decode behind the real smg), with the PD run's figures side by side: prefill's TTFT (smg's and
the prefill server's), decode's TPOT (the decode server's), the KV transfer, and every failure counter's increase."""

from __future__ import annotations

import json
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deployments.demo_support import opsconsole, running_deployment_demo

pytestmark = pytest.mark.system

SWEEP = ("--concurrency", "2", "--requests", "8", "--input-len", "256", "--output-len", "64", "--json")


@pytest.fixture
def pd(tmp_path: Path) -> Iterator[Path]:
    with running_deployment_demo(tmp_path, "pd") as workspace:
        yield workspace


@pytest.fixture
def two_node(tmp_path: Path) -> Iterator[Path]:
    with running_deployment_demo(tmp_path, "two-node") as workspace:
        yield workspace


def smg_requests(workspace: Path) -> float:
    """Requests smg has routed so far (its own counter, on its Prometheus port)."""
    profile = tomllib.loads((workspace / "profiles" / "deployments" / "demo.toml").read_text())
    with urllib.request.urlopen(profile["router"]["metrics"] + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("smg_router_requests_total"))  # fmt: skip


def test_a_pd_benchmark_goes_through_smg_and_keeps_each_sides_figures(pd: Path) -> None:
    routed = smg_requests(pd)
    done = opsconsole(pd, "bench", "demo", *SWEEP)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    (record,) = doc["records"]
    assert record["completed"] == 8 and record["failed"] == 0 and record["target"] == "demo", record
    assert smg_requests(pd) - routed >= 8  # through smg (and its warm-up requests too), not a server of its own
    sides = doc["per_side"]
    assert sides["prefill"]["ttft_ms_servers"] > 0 and sides["prefill"]["ttft_ms_smg"] is not None
    assert sides["decode"]["tpot_ms_servers"] > 0 and sides["decode"]["kv_transfer_ms"] is not None
    assert all(v == 0 for v in sides["decode"]["failures"].values())
    assert "per side: prefill: TTFT" in opsconsole(pd, "bench", "demo", *SWEEP[:-1]).stderr


def test_a_ranks_benchmark_goes_through_rank_0(two_node: Path) -> None:
    done = opsconsole(two_node, "bench", "demo", *SWEEP)
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = json.loads(done.stdout)
    assert record["completed"] == 8 and record["target"] == "demo-rank0", record  # rank 0's server


def test_freeze_keeps_every_member_and_one_document_and_a_member_alone_is_not_changed(two_node: Path) -> None:
    done = opsconsole(two_node, "freeze", "demo", "--name", "v1", "--yes", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["state"] == "frozen" and set(result["members"]) == {"demo-rank0", "demo-rank1"}
    snapshots = two_node / "profiles" / "snapshots"
    assert (snapshots / "v1.demo-rank0.toml").is_file() and (snapshots / "v1.demo-rank1.toml").is_file()
    document = (two_node / "profiles" / "snapshot-sets" / "v1.md").read_text()
    assert "| demo-rank1 | demo-rank1 | sglang-demo-rank1.service | rank 1 | v1.demo-rank1 |" in document
    assert "stop demo-rank0: rank 0 first" in document and document.count("```ini") == 2
    # rank 1 alone: refused, nothing changed; tune of the deployment: refused with what to run instead
    alone = opsconsole(two_node, "apply", "demo-rank1", "--set", "speculative-num-steps=3", "--yes")
    assert alone.returncode == 1 and "is rank 1 of the deployment demo" in alone.stderr, alone.stderr
    tune = opsconsole(two_node, "tune", "demo", "--yes")
    assert tune.returncode == 2 and "tune of the deployment demo is not supported yet" in tune.stderr, tune.stderr
