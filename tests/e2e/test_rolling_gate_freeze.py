"""`--gate bench` and `freeze @GROUP` end to end: the real CLI -> real sshd -> real systemd -> the stand-in as
sglang.service, on two testbed hosts of one group (no router: the gate and the set do not need one; the router's
steps are tests/e2e/test_rolling.py's). Every outcome is read on the hosts themselves (unit bytes, MainPID,
/server_info, is-enabled, the documents).

- The gate: without a record of the canary at the level the roll is a usage error that changes nothing; after an
  `opsconsole bench` of the canary, a change that keeps its throughput rolls over both hosts (the canary's figures
  and the baseline's in --json); a change that loses it (speculation taken off: the stand-in's decode is then about
  half as fast at this level) is halted by the gate: the canary rolled back to the unit it had, the second host
  never touched.
- The set: `freeze @duo --name NAME` freezes both hosts as NAME.HOST (documents, enabled units, snapshots) and keeps
  the set's index; a host changed afterwards drifts from its part of the set (status --json); `restore @duo NAME
  --rolling` brings each host back to its own snapshot.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import OPSCONSOLE, json_output, server_info
from tests.support.cli_run import run_cli
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

ALIASES = ("duo1", "duo2")
TIMEOUT = "120"
LEVEL = "2"
BENCH = ("--requests", "8", "--input-len", "64", "--output-len", "32", "--repeat", "2")
GATE = ("--gate", "bench", "--gate-concurrency", LEVEL, "--gate-max-regression", "25%")
NO_SPEC = tuple(f"--unset={flag}" for flag in ("speculative-algorithm", "speculative-num-steps",
                                               "speculative-eagle-topk", "speculative-num-draft-tokens"))  # fmt: skip


@dataclass
class Duo:
    hosts: list[GpuHost]
    home: Path
    workspace: Path

    def opsconsole(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        env = self.hosts[0].client_env()
        env["HOME"] = str(self.home)
        argv = [str(OPSCONSOLE), "--workspace", str(self.workspace), *args]
        return run_cli(argv, timeout=timeout, env=env, cwd=self.home)

    def state(self, host: GpuHost) -> tuple[str, str]:
        return host.unit_sha256(), host.service_properties("MainPID")["MainPID"]


@pytest.fixture(scope="module")
def duo(testbed_ready: None) -> Iterator[Duo]:
    hosts: list[GpuHost] = []
    temp = Path(tempfile.mkdtemp(prefix="opsconsole-duo-"))
    try:
        for alias in ALIASES:
            hosts.append(GpuHost.boot(alias))
        home, workspace = temp / "home", temp / "workspace"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        (home / ".ssh" / "config").write_text("".join(h.ssh_config.read_text() for h in hosts))
        (workspace / "profiles").mkdir(parents=True)
        (workspace / "logs").mkdir()
        for host in hosts:
            profile = host.workspace / "profiles" / f"{host.alias}.toml"
            (workspace / "profiles" / profile.name).write_text(profile.read_text())
        (workspace / "profiles" / "groups.toml").write_text(f"duo = {json.dumps(list(ALIASES))}\n")
        yield Duo(hosts, home, workspace)
    finally:
        for host in hosts:
            host.teardown()


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {h["host"]: h["outcome"] for h in report["hosts"]}


def test_the_gate_lets_a_change_that_keeps_the_throughput_roll_and_halts_one_that_loses_it(duo: Duo) -> None:
    canary, second = duo.hosts
    before = [duo.state(h) for h in duo.hosts]

    # 1. No record of the canary at the level: a usage error naming the bench command; nothing changes.
    refused = duo.opsconsole("apply", "@duo", "--rolling", *GATE, "--set", "mem-fraction-static=0.84", "--yes")
    assert refused.returncode == 2, refused.stderr
    assert f"run `opsconsole bench duo1 --concurrency {LEVEL} --repeat 3` first" in refused.stderr
    assert [duo.state(h) for h in duo.hosts] == before

    # 2. The operator benchmarks the canary as it runs now.
    bench = duo.opsconsole("bench", "duo1", "--concurrency", LEVEL, *BENCH, "--json")
    assert bench.returncode == 0, bench.stderr
    measured = json.loads(bench.stdout)
    baseline = statistics.median(r["output_throughput"] for r in measured)

    # 3. A change that keeps the throughput: the gate passes, the waves follow.
    done = duo.opsconsole("apply", "@duo", "--rolling", *GATE, "--set", "mem-fraction-static=0.84", "--yes", "--json",
                          "--timeout", TIMEOUT)  # fmt: skip
    report = json_output(done)
    assert done.returncode == 0, done.stderr
    assert outcomes(report) == {"duo1": "done", "duo2": "done"}, report
    gate = report["hosts"][0]["gate"]
    assert gate["passed"] is True and gate["level"] == f"C={LEVEL}", gate
    assert gate["baseline"] == pytest.approx(baseline) and gate["baseline_run"]["run_id"] == measured[0]["run_id"]
    assert len(gate["values"]) == 2 and gate["value"] == pytest.approx(statistics.median(gate["values"]))
    assert report["hosts"][1]["gate"] is None  # only the canary is benchmarked
    assert report["gate"]["max_regression_pct"] == 25.0
    for host in duo.hosts:
        assert server_info(host)["mem_fraction_static"] == pytest.approx(0.84), host.alias
    gate_runs = [json.loads(line) for path in (duo.workspace / "logs").glob("bench-*.jsonl")
                 for line in path.read_text().splitlines() if '"gate@' in line]  # fmt: skip
    assert {r["label"] for r in gate_runs} == {"gate@duo:duo1"} and {r["target"] for r in gate_runs} == {"duo1"}

    # 4. Speculation taken off: the canary's throughput falls far beyond 25 %: halted, the canary rolled back.
    canary_unit, second_state = canary.unit_sha256(), duo.state(second)
    done = duo.opsconsole("apply", "@duo", "--rolling", *GATE, *NO_SPEC, "--yes", "--json", "--timeout", TIMEOUT)
    report = json_output(done)
    assert done.returncode == 1, done.stderr
    assert outcomes(report) == {"duo1": "rolled_back", "duo2": "not_started"}, report
    gate = report["hosts"][0]["gate"]
    assert gate["passed"] is False and gate["value"] < 0.75 * gate["baseline"], gate
    assert gate["baseline"] == pytest.approx(baseline)  # the operator's run, not the gate's own of step 3
    assert "the gate halted the roll" in report["stopped"] and f"at C={LEVEL}" in report["stopped"]
    assert report["hosts"][0]["result"]["verified"]["ok"] is True  # it was verified before the gate judged it
    assert canary.unit_sha256() == canary_unit  # back on the unit it had
    canary.wait_healthy()
    assert server_info(canary)["speculative_algorithm"] == "EAGLE"
    assert duo.state(second) == second_state  # never touched: same unit bytes, same MainPID


def test_a_group_freeze_keeps_one_snapshot_set_and_restore_brings_each_host_back(duo: Duo) -> None:
    done = duo.opsconsole("freeze", "@duo", "--name", "fleet1", "--note", "the duo's setup", "--yes", "--json")
    report = json_output(done)
    assert done.returncode == 0, done.stderr
    assert outcomes(report) == {"duo1": "done", "duo2": "done"}, report
    kept = report["snapshot_set"]
    assert kept["complete"] is True and kept["members"] == {"duo1": "fleet1.duo1", "duo2": "fleet1.duo2"}
    index = duo.workspace / "profiles" / "snapshot-sets" / "fleet1.toml"
    assert kept["path"] == str(index) and 'duo1 = "fleet1.duo1"' in index.read_text()
    for host in duo.hosts:
        assert (duo.workspace / "profiles" / "snapshots" / f"fleet1.{host.alias}.toml").is_file()
        document = host.root_run(["cat", f"/home/ops/production_fleet1.{host.alias}.md"]).stdout
        assert "the duo's setup" in document
        assert host.root_run(["systemctl", "is-enabled", host.unit]).stdout.strip() == "enabled"

    # duo2 changes afterwards: it drifts from its part of the set, duo1 does not.
    changed = duo.opsconsole("apply", "duo2", "--set", "speculative-num-steps=3", "--set",
                             "speculative-num-draft-tokens=4", "--yes", "--json", "--timeout", TIMEOUT)  # fmt: skip
    assert changed.returncode == 0, changed.stderr
    production = {h.alias: json_output(duo.opsconsole("status", h.alias, "--json"))["production"] for h in duo.hosts}
    assert (production["duo1"]["snapshot"], production["duo1"]["in_sync"]) == ("fleet1.duo1", True)
    assert (production["duo2"]["snapshot"], production["duo2"]["in_sync"]) == ("fleet1.duo2", False)
    assert "steps 3, production fleet1.duo2 has 2" in production["duo2"]["drift"][0]["text"]

    # restore @duo fleet1: each host from its own snapshot; duo1 already runs it, duo2 is brought back.
    duo1_state = duo.state(duo.hosts[0])
    done = duo.opsconsole("restore", "@duo", "fleet1", "--rolling", "--yes", "--json", "--timeout", TIMEOUT)
    report = json_output(done)
    assert done.returncode == 0, done.stderr
    assert outcomes(report) == {"duo1": "unchanged", "duo2": "done"}, report
    assert duo.state(duo.hosts[0]) == duo1_state
    assert server_info(duo.hosts[1])["speculative_num_steps"] == 2
    assert json_output(duo.opsconsole("status", "duo2", "--json"))["production"]["in_sync"] is True
