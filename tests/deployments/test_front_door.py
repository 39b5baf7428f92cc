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

from console.bench.records import read_records
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
    done = opsconsole(pd, "bench", "demo", *SWEEP, "--label", "pd-a")
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    (record,) = doc["records"]
    assert record["completed"] == 8 and record["failed"] == 0 and record["target"] == "demo", record
    assert smg_requests(pd) - routed >= 8  # through smg (and its warm-up requests too), not a server of its own
    sides = doc["per_side"]
    assert sides["prefill"]["ttft_ms_servers"] > 0 and sides["prefill"]["ttft_ms_smg"] is not None
    assert sides["decode"]["tpot_ms_servers"] > 0 and sides["decode"]["kv_transfer_ms"] is not None
    assert all(v == 0 for v in sides["decode"]["failures"].values())
    # The level's own figures, its measured requests alone, kept in its record in logs/ (not only printed).
    (kept,) = [r for f in (pd / "logs").glob("bench-*.jsonl") for r in read_records(f) if r.label == "pd-a"]
    assert kept.per_side == record["per_side"] and kept.pd_decode_tpot_ms and kept.pd_prefill_ttft_ms
    assert kept.pd_failures == 0 and kept.pd_kv_transfer_ms is not None
    human = opsconsole(pd, "bench", "demo", *SWEEP[:-1], "--label", "pd-b")
    assert "per side: prefill: TTFT" in human.stderr
    # compare shows both runs' sides
    compared = opsconsole(pd, "compare", "pd-a", "pd-b")
    assert compared.returncode == 0, compared.stderr
    for row in ("prefill TTFT (prefill servers)", "decode TPOT (decode servers)", "KV transfer", "PD failures"):
        assert row in compared.stdout, compared.stdout
    as_json = json.loads(opsconsole(pd, "compare", "pd-a", "pd-b", "--json").stdout)
    metrics = as_json["levels"][0]["runs"][1]["metrics"]
    assert metrics["pd_decode_tpot_ms"]["median"] > 0 and metrics["pd_failures"]["median"] == 0


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
    # rank 1 alone: refused, nothing changed; a tune of it alone too (the deployment's tune: test_tune.py)
    alone = opsconsole(two_node, "apply", "demo-rank1", "--set", "speculative-num-steps=3", "--yes")
    assert alone.returncode == 1 and "is rank 1 of the deployment demo" in alone.stderr, alone.stderr
    tune = opsconsole(two_node, "tune", "demo-rank1", "--steps", "3", "--yes")
    assert tune.returncode == 1 and "is rank 1 of the deployment demo" in tune.stderr, tune.stderr


PREDICT_LEVELS = ("--concurrency", "2,8", "--duration", "4")


@pytest.mark.long(90)  # its measured seconds (85 on the 2-core VM): started first (tests/tiers.py)
def test_a_pd_prediction_answers_through_smg_and_holds_when_the_setup_is_then_measured(pd: Path) -> None:
    """predict demo (PD): the running setup benchmarked through smg (no restart), steps 2 predicted from those records
    with what the model covers and not; then steps 2 applied to the deployment and measured through smg: inside
    the predicted band at each level."""
    from console.core.tune import PD_SCOPE

    routed = smg_requests(pd)
    done = opsconsole(pd, "predict", "demo", "--steps", "1,2", *PREDICT_LEVELS, "--yes", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["target"] == "demo" and result["scope"] == list(PD_SCOPE)
    assert smg_requests(pd) - routed >= 2 * (2 + 8)  # the running setup's benchmark went through smg
    assert set(result["per_side"]) == {"2", "8"} and result["per_side"]["8"]["decode"]["tpot_ms_servers"] > 0
    running, steps2 = result["setups"][0], next(s for s in result["setups"] if s["speculative_num_steps"] == 2)
    assert running["speculative_num_steps"] == 1
    applied = opsconsole(pd, "apply", "demo", "--set", "speculative-num-steps=2", "--set",
                         "speculative-num-draft-tokens=3", "--yes", "--json", "--timeout", "120")  # fmt: skip
    assert applied.returncode == 0, applied.stderr[-3000:]
    bench = opsconsole(pd, "bench", "demo", *PREDICT_LEVELS, "--repeat", "2", "--input-len", "1024", "--output-len",
                       "256", "--temperature", "0", "--json")  # fmt: skip
    assert bench.returncode == 0, bench.stderr[-3000:]
    measured: dict[int, list[float]] = {}
    for record in json.loads(bench.stdout)["records"]:
        measured.setdefault(record["max_concurrency"], []).append(record["output_throughput"])
    lines = []
    for level in steps2["levels"]:
        median = sorted(measured[level["concurrency"]])[len(measured[level["concurrency"]]) // 2]
        low, high = level["output_throughput_low"], level["output_throughput_high"]
        lines.append(f"C={level['concurrency']}: predicted {level['output_throughput']:.0f} [{low:.0f}, {high:.0f}], "
                     f"measured {median:.0f} tok/s")  # fmt: skip
        assert low <= median <= high, lines
    print("\nPD predict (steps 1 -> 2) through smg: " + "; ".join(lines))
