"""A model over two nodes, each node a testbed host (real systemd + sshd, the multi-node stand-in as its unit): seen,
changed and restarted as one deployment (docs/deployments.md).

- status: one row, a row per rank; rank 1 judged by its unit and journal, never by its dummy /health.
- a speculative change: every rank restarted exactly once and together, verified at rank 0, the downtime one start
  long (measured); the same change with rank 1's start failing: both ranks back on their previous units, healthy.
- a rank killed: the deployment shown down within 10 s, the rank named.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest

from tests.deployments.bed import (
    GATE_PORT,
    Bed,
    deployment_bed,
    flags_unit,
    http_ok,
    open_gate_if_waiting,
    rank_flags,
    ranks_toml,
    wait_for,
)
from tests.e2e.cli import json_output, server_info
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

NAME = "duo"


def units(hosts: list[GpuHost]) -> list[str]:
    return [flags_unit(rank_flags(i, len(hosts), hosts[0].address)) for i in range(len(hosts))]


@pytest.fixture(scope="module")
def duo(testbed_ready: None) -> Iterator[Bed]:
    with deployment_bed(NAME, ("node0", "node1"), ranks_toml, units,
                        ready=lambda hosts: open_gate_if_waiting(hosts[0])) as bed:  # fmt: skip
        yield bed


def restore(bed: Bed) -> None:
    """Both ranks back on the units the bed booted with, started together (behind the console's back)."""
    bed.install([h.unit_text for h in bed.hosts])
    deadline = time.monotonic() + 120
    while not open_gate_if_waiting(bed.hosts[0]):
        assert time.monotonic() < deadline, "the ranks did not come back"
        time.sleep(0.2)  # polling the server's own answer


def test_status_shows_one_deployment_with_a_row_per_rank(duo: Bed) -> None:
    status = duo.status()
    assert status["deployment"] == NAME and status["kind"] == "multinode", status
    assert status["state"] == "up", status["reason"]
    rank0, rank1 = status["members"]
    assert (rank0["name"], rank0["role"], rank0["rank"], rank0["state"]) == ("rank0", "rank", 0, "up")
    assert rank0["health"]["healthy"] is True and rank0["sglang"]["version"]
    assert (rank1["name"], rank1["state"], rank1["health"]["healthy"]) == ("rank1", "up", None)
    assert "dummy" in rank1["health"]["source"]
    assert rank1["service"]["active_state"] == "active" and rank1["service"]["main_pid"]
    assert len(rank1["gpus"]) == 2  # TP 4 over two nodes
    assert status["checks"] == [], status["checks"]
    text = duo.opsconsole("status", NAME)
    assert text.returncode == 0 and text.stdout.startswith(f"{NAME}  multinode  UP"), text.stdout


def test_a_killed_rank_shows_the_deployment_down_within_10_s_naming_it(duo: Bed) -> None:
    try:
        assert duo.status()["state"] == "up"
        pid = duo.hosts[1].service_properties("MainPID")["MainPID"]
        killed = time.monotonic()
        duo.hosts[1].root_run(["kill", "-KILL", pid])
        seen: dict[str, object] = {}
        while time.monotonic() - killed < 10:
            status = duo.status()
            if status["state"] != "up":
                seen = status
                break
        shown_after = time.monotonic() - killed
        print(f"\nrank 1 killed: shown {seen.get('state')} after {shown_after:.1f} s: {seen.get('reason')}")
        assert seen, "still shown up 10 s after a rank was killed"
        assert seen["state"] == "down" and "rank1" in str(seen["reason"]), seen
    finally:
        restore(duo)


STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
DRAFT_DIR = "/var/lib/sglang/draft"  # exists on node0 only: a draft model there starts on rank 0, not on rank 1


class HealthProbe:
    """Rank 0's /health from this machine every 50 ms: the longest time it did not answer 200 (the downtime a
    client sees) and when it came back."""

    def __init__(self, host: GpuHost) -> None:
        self.host = host
        self.longest = 0.0
        self._down_since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            if http_ok(self.host):
                if self._down_since is not None:
                    self.longest = max(self.longest, now - self._down_since)
                    self._down_since = None
            elif self._down_since is None:
                self._down_since = now
            self._stop.wait(0.05)


def host_clock(host: GpuHost) -> str:
    """The host's clock now, as journalctl --since takes it (@seconds since the epoch)."""
    return "@" + host.root_run(["date", "+%s.%N"]).stdout.strip()


def groups_since(host: GpuHost, since: str) -> int:
    """How many times the unit's rank joined a whole group since `since` (host_clock's): its "Init parallel ends."
    lines (a start whose group never formed logs none)."""
    text = host.root_run(["journalctl", "-u", host.unit, "--since", since, "--no-pager", "-o", "cat"]).stdout
    return text.count("Init parallel ends.")


def start_time_s(host: GpuHost) -> float:
    return int(host.service_properties("ExecMainStartTimestampMonotonic")["ExecMainStartTimestampMonotonic"]) / 1e6


def test_a_speculative_change_restarts_every_rank_once_and_together(duo: Bed) -> None:
    try:
        pids = duo.main_pids()
        with HealthProbe(duo.hosts[0]) as probe:
            started = time.monotonic()
            done = duo.opsconsole("apply", NAME, *STEPS_3, "--yes", "--json", "--timeout", "120")
            took = time.monotonic() - started
        result = json_output(done)
        assert done.returncode == 0 and result["state"] == "verified", (result.get("error"), done.stderr[-3000:])
        assert [s["step"] for s in result["order"]] == ["write", "stop", "wait_down", "start", "open_gate",
                                                          "wait_ready", "verify"]  # fmt: skip
        new_pids = duo.main_pids()
        assert all(a != b for a, b in zip(pids, new_pids, strict=True)), (pids, new_pids)
        for name in ("rank0", "rank1"):
            member = result["members"][name]
            assert member["starts"] == 1 and member["outcome"] == "done" and member["changed"], member
            assert "+    --speculative-num-steps 3" in member["diff"], member["diff"]
        # Exactly one start of each rank since the change: one process each, ExecMainStart within a second or two.
        rank0_start, rank1_start = (start_time_s(h) for h in duo.hosts)
        assert abs(rank0_start - rank1_start) < 2.0, (rank0_start, rank1_start)
        for host in duo.hosts:
            assert host.service_properties("NRestarts")["NRestarts"] == "0"
        info = server_info(duo.hosts[0])
        assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (3, 4)
        assert result["members"]["rank0"]["verified"]["ok"] is True
        # The downtime: one start long. The probe's longest gap, the core's own figure (stop -> ready), and rank 0's
        # start alone (its process start -> the probe's first 200).
        start_s = result["downtime_s"]
        print(f"\n2-node speculative change: {took:.1f} s in all; rank 0 unreachable {probe.longest:.2f} s as a client "
              f"saw it; the console measured {result['downtime_s']} s from rank 0's stop to rank 0 ready; ranks "
              f"started {abs(rank0_start - rank1_start):.2f} s apart")  # fmt: skip
        assert probe.longest > 0 and start_s is not None
        assert probe.longest <= start_s + 1.0, (probe.longest, start_s)
    finally:
        restore(duo)


def test_rank_1_failing_to_start_puts_both_ranks_back_healthy(duo: Bed) -> None:
    try:
        duo.hosts[0].root_run(["mkdir", "-p", DRAFT_DIR])
        shas = [h.unit_sha256() for h in duo.hosts]
        done = duo.opsconsole("apply", NAME, "--set", f"speculative-draft-model-path={DRAFT_DIR}", "--yes", "--json",
                              "--timeout", "120")  # fmt: skip
        result = json_output(done)
        assert done.returncode == 1, done.stderr[-3000:]
        assert result["state"] == "healthy_on_old" and result["rolled_back"] is True, (result["state"], result["error"])
        assert result["failed_member"] == "rank1", result["error"]
        assert [h.unit_sha256() for h in duo.hosts] == shas  # both previous units back, byte for byte
        assert all(m["outcome"] == "rolled_back" for m in result["members"].values())
        status = duo.status()
        assert status["state"] == "up", status["reason"]
        info = server_info(duo.hosts[0])
        assert info["speculative_draft_model_path"] != DRAFT_DIR
        print(f"\nrank 1's start failed ({result['error']}); rolled back, the deployment up again")
    finally:
        duo.hosts[0].root_run(["rm", "-rf", DRAFT_DIR])
        restore(duo)


# A tune's space whose third setup cannot start on rank 1: its draft model is on node0 only.
SPACE_RANK1_FAILS = f"""
[[candidate]]
algorithm = "EAGLE"
steps = 2
topk = 1
spec_v2 = "on"

[[candidate]]
algorithm = "EAGLE"
steps = 3
topk = 1
spec_v2 = "on"

[[candidate]]
algorithm = "EAGLE"
steps = 2
topk = 1
spec_v2 = "on"
draft_model_path = "{DRAFT_DIR}"
"""
TUNE_SHORT = ("--concurrency", "2", "--duration", "2", "--repeat", "1", "--warmup", "1", "--input-len", "128",
              "--output-len", "64", "--timeout", "120")  # fmt: skip


@pytest.mark.long(120)
def test_a_tune_changes_both_ranks_per_trial_and_a_setup_failing_on_rank_1_rolls_both_back(duo: Bed) -> None:
    try:
        duo.hosts[0].root_run(["mkdir", "-p", DRAFT_DIR])
        since = [host_clock(h) for h in duo.hosts]
        shas = [h.unit_sha256() for h in duo.hosts]
        space = duo.workspace / "space.toml"
        space.write_text(SPACE_RANK1_FAILS)
        started = time.monotonic()
        done = duo.opsconsole("tune", NAME, "--space", str(space), *TUNE_SHORT, "--yes", "--json", timeout=600)
        took = time.monotonic() - started
        result = json_output(done)
        assert done.returncode == 0, (result.get("error"), done.stderr[-3000:])
        trials = result["trials"]
        (broken,) = [t for t in trials if t["state"] == "failed"]  # the setup with the draft (its config omits it)
        assert "rank1" in broken["error"] and DRAFT_DIR in broken["error"], broken
        assert any(line.startswith("rank1: ") and DRAFT_DIR in line for line in broken["journal"]), broken["journal"]
        assert [t["state"] for t in trials if t is not broken] == ["benchmarked", "benchmarked"]
        # Every member's original unit back, byte for byte, the deployment up.
        assert (result["final_unit"], result["host_healthy"]) == ("original", True)
        assert [h.unit_sha256() for h in duo.hosts] == shas
        assert duo.status()["state"] == "up"
        # Both ranks formed a group together as often as each other: every trial, the rollback and the put-back
        # restarted both (the failing trial's start formed none: rank 1 never joined).
        formed = [groups_since(h, at) for h, at in zip(duo.hosts, since, strict=True)]
        assert formed[0] == formed[1] and formed[0] >= result["restarts"] - 1, (formed, result["restarts"])
        print(f"\n2-node tune on testbed hosts: {len(trials)} setups in {took:.0f} s, {result['restarts']} restarts "
              f"({formed[0]} groups formed by both ranks, the rollback included); the setup failing on rank 1 rolled "
              f"back: {broken['error'][:120]}")  # fmt: skip
    finally:
        duo.hosts[0].root_run(["rm", "-rf", DRAFT_DIR])
        restore(duo)


def journal_since(host: GpuHost, since: str) -> list[tuple[float, str]]:
    """The unit's journal lines since `since` (host_clock's), each with its time (seconds since the epoch; the
    testbed's hosts share this machine's clock)."""
    text = host.root_run(["journalctl", "-u", host.unit, "--since", since, "--no-pager", "-o", "short-unix"]).stdout
    out = []
    for line in text.splitlines():
        stamp, _, rest = line.partition(" ")
        with contextlib.suppress(ValueError):
            out.append((float(stamp), rest.partition(": ")[2]))
    return out


def first(lines: list[tuple[float, str]], needle: str) -> float:
    found = [at for at, text in lines if needle in text]
    assert found, f"no {needle!r} in the journal: {[text for _, text in lines][-20:]}"
    return found[0]


SLOW_NODE_S = 3  # rank 1's node starts its process this much later than rank 0's (ExecStartPre in its unit)


def slow(unit: str) -> str:
    return unit.replace("ExecStart=", f"ExecStartPre=/bin/sleep {SLOW_NODE_S}\nExecStart=", 1)


def test_the_gate_opens_only_once_every_rank_has_joined_and_a_start_without_the_console_waits_at_it(duo: Bed) -> None:
    originals = [h.unit_text for h in duo.hosts]
    assert all(f"--gated-launch-port {GATE_PORT}" in u for u in originals)
    try:
        # Started as a reboot starts them (systemd, no console), rank 1's node slower: both wait at the gate.
        duo.install([originals[0], slow(originals[1])])
        since = host_clock(duo.hosts[0])
        waiting = "Gated launch still waiting for activation. rank=0 elapsed=10 s"
        wait_for(lambda: any(waiting in t for _, t in journal_since(duo.hosts[0], since)), 40, "rank 0 at the gate")
        assert not http_ok(duo.hosts[0]), "rank 0 serves although nobody opened the gate"
        # The console's restart: every rank down, started together, the gate opened once all have joined.
        since = host_clock(duo.hosts[0])
        done = duo.opsconsole("restart", NAME, "--yes", "--json", "--timeout", "120")
        result = json_output(done)
        assert done.returncode == 0 and result["state"] == "verified", (result.get("error"), done.stderr[-3000:])
        assert "open_gate" in [s["step"] for s in result["order"]]
        rank0, rank1 = (journal_since(h, since) for h in duo.hosts)
        joined = [first(lines, "Init parallel begin.") for lines in (rank0, rank1)]
        at_gate = [first(lines, "Gated launch waiting for activation") for lines in (rank0, rank1)]
        opened = [first(lines, "Gated launch activated") for lines in (rank0, rank1)]
        loads = [first(lines, "Load weight begin") for lines in (rank0, rank1)]
        last_joined = max(joined)
        assert joined[1] - joined[0] >= SLOW_NODE_S - 0.5, joined  # rank 1 did join last, seconds later
        assert min(loads) >= last_joined, (loads, joined)  # no rank loads weights before the last one joined
        assert min(opened) >= max(at_gate), (opened, at_gate)  # opened only once every rank was at the gate
        assert all(g < o <= w for g, o, w in zip(at_gate, opened, loads, strict=True)), (at_gate, opened, loads)
        print(f"\ngated restart: rank 1 joined {joined[1] - joined[0]:.2f} s after rank 0; the gate opened "
              f"{min(opened) - max(at_gate):.2f} s after the last rank reached it; weights began "
              f"{min(loads) - last_joined:.2f} s after the last join; down {result['downtime_s']} s")  # fmt: skip
    finally:
        duo.install(originals)
        deadline = time.monotonic() + 120
        while not open_gate_if_waiting(duo.hosts[0]):
            assert time.monotonic() < deadline, "the ranks did not come back"
            time.sleep(0.2)  # polling the server's own answer
