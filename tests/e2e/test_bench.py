"""`opsconsole bench TARGET` end to end: the load runs through the SSH port forward against the host's server."""

from __future__ import annotations

import json

import pytest

from tests.e2e.cli import opsconsole, server_info
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

SPECULATIVE = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)


def test_bench_over_ssh_measures_the_hosts_server_with_full_provenance(gpu_host: GpuHost) -> None:
    host = gpu_host
    # through the forward (`--client auto` may run the load on the host when a loaded machine slows the link)
    done = opsconsole(host, "bench", host.name, "--concurrency", "1,4", "--requests", "8", "--input-len", "128",
                      "--output-len", "64", "--label", "testbed", "--client", "console", "--json",
                      timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    assert [r["max_concurrency"] for r in records] == [1, 4]
    info = server_info(host)
    for record in records:
        assert (record["completed"], record["failed"]) == (8, 0), record["errors"]
        assert record["total_output_tokens"] == 8 * 64
        assert record["output_throughput"] > 0 and record["mean_tpot_ms"] > 0
        assert record["accept_length"] > 1.0  # speculation on: more than one token per verify step
        assert (record["target"], record["client_location"], record["label"]) == (host.name, "console", "testbed")
        assert record["sglang_version"] == info["version"]
        assert {k: record["server_args"][k] for k in SPECULATIVE} == {k: info[k] for k in SPECULATIVE}
        assert record["unit_hash"] == "sha256:" + host.unit_sha256()[:16]
        assert len(record["gpus"]) == 4
    # The same records are appended to the workspace's bench log.
    logged = [json.loads(line) for path in (host.workspace / "logs").glob("bench-*.jsonl") for line in path.open()]
    assert [r["run_id"] for r in logged if r["label"] == "testbed"][-2:] == [r["run_id"] for r in records]
