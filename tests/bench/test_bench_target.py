"""`opsconsole bench TARGET` end to end: real sshd, real systemd, the simulator as sglang.service, the port
forward on the SSH connection, GPU telemetry from the host's nvidia-smi, the unit's hash as provenance."""

from __future__ import annotations

import json

import pytest

from tests.e2e.cli import opsconsole
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed


def test_bench_a_host_through_its_ssh_forward(gpu_host: GpuHost) -> None:
    host = gpu_host
    done = opsconsole(
        host, "bench", host.name, "--concurrency", "1,4", "--requests", "8", "--input-len", "64",
        "--output-len", "32", "--label", "testbed", "--client", "console", "--json", timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    driver = host.root_run("nvidia-smi --query-gpu=driver_version --format=csv,noheader").stdout.split()[0]
    assert [r["max_concurrency"] for r in records] == [1, 4]
    for r in records:
        assert r["target"] == host.name and r["client_location"] == "console"
        assert r["completed"] == 8 and r["failed"] == 0 and r["total_output_tokens"] == 8 * 32
        assert r["unit_hash"] == "sha256:" + host.unit_sha256()[:16]
        assert r["sglang_version"] and next(iter(r["server_args"])) == "speculative_algorithm"
        assert r["gpu_samples"] >= 1 and r["mean_power_w"] > 0 and len(r["gpus"]) == 4
        assert r["tokens_per_joule"] > 0
        assert r["driver_version"] == driver
        assert r["accept_length"] is not None
    logged = (host.workspace / "logs").glob("bench-*.jsonl")
    assert any("testbed" in path.read_text() for path in logged)
