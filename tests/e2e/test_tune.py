"""`opsconsole tune` end to end: the real CLI -> real sshd -> real systemd -> the simulator, and back.

The host's unit gets `--sim-speedup 40 --stream-interval 8` (the stand-in 40× faster than the Qwen profile,
tests/tune/simhost.py) so that a benchmark level takes seconds; the pristine_gpu_host fixture puts the
original unit back after each test. Outcomes are read on the host itself (the unit's bytes, systemctl,
/server_info on its loopback, the guard's files in /run/lock), never through the console.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from console.host.audit import AUDIT_FILE_NAME
from tests.e2e.cli import OPSCONSOLE, json_output, opsconsole, server_info
from tests.support.cli_run import finish_cli, start_cli
from tests.testbed.host import GpuHost
from tests.testbed.system import TestbedError, poll_until

pytestmark = pytest.mark.testbed

FAST = "--sim-time-scale 0.01 --sim-speedup 40 --stream-interval 8"
SHORT_RUNS = ("--concurrency", "1,4", "--duration", "2", "--input-len", "128", "--output-len", "256", "--warmup",
              "1", "--timeout", "60")  # fmt: skip
# One setup that the rules accept but that cannot start: its draft model is not on the host.
SPACE_WITH_A_BROKEN_SETUP = """
[[candidate]]
algorithm = "EAGLE"
steps = 2
topk = 1
spec_v2 = "on"

[[candidate]]
algorithm = "EAGLE3"
steps = 2
topk = 1
spec_v2 = "on"
draft_model_path = "/models/missing-draft"

[[candidate]]
algorithm = "EAGLE"
steps = 3
topk = 1
spec_v2 = "on"
"""


@pytest.fixture
def fast_host(pristine_gpu_host: GpuHost) -> Iterator[GpuHost]:
    """The host with its simulator sped up: that unit is the 'original' the tune must put back."""
    host = pristine_gpu_host
    host.install_unit(host.unit_text.replace("--sim-time-scale 0.01", FAST))
    yield host


def _space_file(host: GpuHost, text: str) -> Path:
    path = host.workspace / "space.toml"
    path.write_text(text)
    return path


def _tune(host: GpuHost, *args: str) -> subprocess.Popen[str]:
    argv = [str(OPSCONSOLE), "--workspace", str(host.workspace), "tune", host.name, *args, "--yes", "--json"]
    return start_cli(argv, env=host.client_env())


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[dict[str, object], str]:
    """Its JSON object and stderr; past `timeout` (or the test's own time) what it was doing (finish_cli)."""
    stdout, stderr = finish_cli(proc, timeout=timeout)
    return json_output(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)), stderr


def _guard_files(host: GpuHost) -> list[str]:
    listing = host.root_run(["sh", "-c", f"ls -A /run/lock | grep -F 'opsconsole-{host.unit}.tune-' || true"])
    return listing.stdout.split()


def _lock_free(host: GpuHost) -> bool:
    return host.root_run(["flock", "-n", f"/run/lock/opsconsole-{host.unit}.lock", "true"], check=False).returncode == 0


def _healthy(host: GpuHost) -> bool:
    try:
        host.wait_healthy(timeout=0.5)
    except TestbedError:
        return False
    return True


@pytest.mark.long(39)  # its measured seconds: started first (tests/tiers.py)
def test_a_setup_that_fails_to_start_is_rolled_back_and_skipped_and_the_original_is_back(fast_host: GpuHost) -> None:
    host = fast_host
    original = host.unit_file_text()
    space = _space_file(host, SPACE_WITH_A_BROKEN_SETUP)
    done = opsconsole(host, "tune", host.name, "--space", str(space), *SHORT_RUNS, "--yes", "--json", timeout=240)
    result = json_output(done)
    assert done.returncode == 0, done.stderr
    trials = {t["name"]: t for t in result["trials"]}  # type: ignore[union-attr]
    broken = next(t for t in trials.values() if t["config"]["speculative_algorithm"] == "EAGLE3")
    assert broken["state"] == "failed" and "missing-draft" in broken["error"], broken
    assert broken["levels"] == []
    others = [t for t in trials.values() if t is not broken]
    assert [t["state"] for t in others] == ["benchmarked", "benchmarked"]
    assert all({lv["concurrency"] for lv in t["levels"]} == {1, 4} for t in others)
    assert {r["concurrency"] for r in result["recommendations"]} == {1, 4}  # type: ignore[union-attr]
    assert all(r["config"]["speculative_algorithm"] == "EAGLE" for r in result["recommendations"])  # type: ignore[union-attr]
    # Back on the original unit, byte for byte, healthy, and the guard gone: no copy left, the lock free.
    assert (result["final_unit"], result["host_healthy"], result["guarded"]) == ("original", True, True)
    assert host.unit_file_text() == original
    assert host.service_properties("ActiveState")["ActiveState"] == "active"
    host.wait_healthy(timeout=10)
    assert server_info(host)["speculative_num_steps"] == 2
    assert _guard_files(host) == []
    poll_until(lambda: _lock_free(host), timeout=10, what="the tune's lock to be released on the host")
    # The journal lines that explain the failed start come with it, and the others' records are in logs/.
    assert any("missing-draft" in line for line in broken["journal"]), broken["journal"]
    labels = {json.loads(line)["label"] for f in (host.workspace / "logs").glob("bench-*.jsonl")
              for line in f.read_text().splitlines()}  # fmt: skip
    tune_run = others[0]["labels"][0].split("/")[0]  # the host's workspace also holds other tests' records
    ours = {lab.split("/")[1] for lab in labels if lab.startswith(tune_run + "/")}
    assert ours == {t["labels"][0].split("/")[1] for t in others}


def test_a_tune_that_is_not_confirmed_lets_go_at_once_and_the_host_restores_nothing(fast_host: GpuHost) -> None:
    host = fast_host
    before = host.service_properties("MainPID", "NRestarts")
    done = opsconsole(host, "tune", host.name, "--steps", "1,3", *SHORT_RUNS, "--restore-after", "1")  # no --yes
    assert done.returncode == 2 and "re-run with --yes" in done.stderr, done.stderr
    assert _guard_files(host) == []  # disarmed before it was let go
    poll_until(lambda: _lock_free(host), timeout=10, what="the lock to be released")
    # past the guard's grace: nothing was restarted behind anyone's back
    try:
        poll_until(lambda: host.service_properties("MainPID", "NRestarts") != before, timeout=4, what="")
        raise AssertionError("the service was restarted after a tune that changed nothing")
    except TestbedError:
        pass


def test_a_second_apply_is_refused_while_a_tune_holds_the_unit_and_ctrl_c_puts_the_original_back(
    fast_host: GpuHost,
) -> None:
    host = fast_host
    original = host.unit_file_text()
    tune = _tune(host, "--steps", "1,2,3", "--topk", "1", *SHORT_RUNS[:2], "--duration", "30", *SHORT_RUNS[4:])
    try:
        poll_until(lambda: host.unit_file_text() != original or tune.poll() is not None, timeout=60,
                   what="the tune to start its first trial unit")  # fmt: skip
        assert tune.poll() is None, tune.communicate()
        refused = opsconsole(host, "apply", host.name, "--set", "speculative-num-steps=1", "--yes", "--json")
        assert refused.returncode == 1 and json_output(refused)["state"] == "locked"
        assert "opsconsole tune, pid " in str(json_output(refused)["error"])
        assert _guard_files(host), "a guarded tune keeps the original unit's copy on the host"
        tune.send_signal(signal.SIGINT)  # Ctrl-C: stop, roll back / stop the benchmark, put the original back
        result, stderr = _finish(tune)
    finally:
        if tune.poll() is None:
            tune.kill()
            tune.wait()
    assert tune.returncode == 130, stderr
    assert result["stopped"] == "interrupted (Ctrl-C)" and result["final_unit"] == "original"
    assert result["host_healthy"] is True
    assert host.unit_file_text() == original
    host.wait_healthy(timeout=10)
    assert _guard_files(host) == []


# The console's SSH keepalive (console/host/ssh.py): one every 5 s, 3 missed and the connection is dropped, so a
# dead link is noticed within 15-20 s. A shorter outage is a stall the connection survives, not a drop.
KEEPALIVE_NOTICE_S = 5 * (3 + 1)


def _audit_since(host: GpuHost, since: datetime) -> list[dict[str, Any]]:
    """The workspace's audit entries written after `since` (the host's workspace also holds other tests')."""
    path = host.workspace / "logs" / AUDIT_FILE_NAME
    lines = path.read_text().splitlines() if path.exists() else []
    entries = [json.loads(line) for line in lines if line.strip()]
    return [e for e in entries if datetime.fromisoformat(e["time"]) >= since]


def _listed(entries: list[dict[str, Any]]) -> str:
    return "".join(f"\n  {e['time']} {e['exit_status']} {e.get('note', '')}: {e['command'][:100]}" for e in entries)


def _connection_lost(host: GpuHost, since: datetime) -> list[dict[str, Any]]:
    return [e for e in _audit_since(host, since) if str(e.get("note", "")).startswith("connection lost")]


@pytest.mark.long(75)  # its measured seconds (68-81 s, a 20 s outage in it): started first (tests/tiers.py)
def test_the_link_drops_mid_tune_the_tune_carries_on_and_the_original_is_back(fast_host: GpuHost) -> None:
    """The link goes down while a trial unit runs, until the console has seen its connection die (its keepalive
    gave up: an audit entry "connection lost"): the tune reconnects and claims the host's guard again from the new
    connection (the guard's `retake`), the guard restores nothing behind the tune's back, the benchmark that lost
    requests runs again, and the tune ends with the original unit. Its requests time out well inside this test."""
    host = fast_host
    original = host.unit_file_text()
    tune = _tune(host, "--steps", "1,2,3", *SHORT_RUNS[:2], "--duration", "4", *SHORT_RUNS[4:],
                 "--request-timeout", "30", "--restore-after", "20")  # fmt: skip
    try:
        poll_until(lambda: host.unit_file_text() != original or tune.poll() is not None, timeout=60,
                   what="the tune to start a trial unit")  # fmt: skip
        assert tune.poll() is None, tune.communicate()
        down_at = datetime.now(UTC)
        host.link_down()
        try:
            # Down until the console has noticed (by its keepalive, 15-20 s), or the tune ended (it must not).
            poll_until(lambda: tune.poll() is not None or bool(_connection_lost(host, down_at)), interval=0.2,
                       timeout=KEEPALIVE_NOTICE_S * 2, what="the console to see its connection die")  # fmt: skip
            assert tune.poll() is None, f"the tune ended while its link was down: {tune.communicate()}"
        finally:
            host.link_up()
            outage_s = (datetime.now(UTC) - down_at).total_seconds()
        result, stderr = _finish(tune, timeout=150)  # ~40 s after the link is back; requests end within 30 s
    finally:
        host.link_up()
        if tune.poll() is None:
            tune.kill()
            tune.wait()
    assert tune.returncode == 0, stderr
    assert (result["final_unit"], result["host_healthy"], result["stopped"]) == ("original", True, None)
    assert [t["state"] for t in result["trials"]] != []  # type: ignore[union-attr]
    # It really lost its connection, and came back on a new one: the guard was claimed again from there.
    audit = _audit_since(host, down_at)
    lost = [e for e in audit if str(e.get("note", "")).startswith("connection lost")]
    assert lost, f'the tune never lost its connection: no audit entry says "connection lost": {_listed(audit)}'
    retaken = [e for e in audit if ".tune-" in e["command"] and " retake " in f" {e['command']} "]
    assert retaken, f"the tune never claimed its guard again from a new connection: {_listed(audit)}"
    print(f"\nthe link was down {outage_s:.1f} s; lost with it:{_listed(lost)}\nclaimed again:{_listed(retaken)}")
    assert all(not name.endswith(".restored") for name in _guard_files(host))
    assert host.unit_file_text() == original
    assert host.service_properties("ActiveState")["ActiveState"] == "active"
    host.wait_healthy(timeout=10)


def test_a_console_killed_mid_tune_gets_the_original_unit_back_from_the_hosts_guard(fast_host: GpuHost) -> None:
    host = fast_host
    original = host.unit_file_text()
    tune = _tune(host, "--steps", "1,3", *SHORT_RUNS[:2], "--duration", "60", *SHORT_RUNS[4:], "--restore-after", "3")
    try:
        poll_until(lambda: host.unit_file_text() != original or tune.poll() is not None, timeout=60,
                   what="the tune to start a trial unit")  # fmt: skip
        assert tune.poll() is None, tune.communicate()
        trial_unit = host.unit_file_text()
        tune.kill()  # SIGKILL: nothing of the console runs any more; only the closed connection tells the host
        tune.communicate(timeout=30)
    finally:
        if tune.poll() is None:
            tune.kill()
            tune.wait()
    # The guard waits 3 s for the console, then writes the unit back and restarts the service (marker last).
    poll_until(lambda: any(name.endswith(".restored") for name in _guard_files(host)), timeout=30,
               what="the host's guard to restore the original unit")  # fmt: skip
    assert host.unit_file_text() == original
    assert [name.rsplit(".", 1)[-1] for name in _guard_files(host)] == ["restored"]  # no copy, no heartbeat left
    poll_until(lambda: _healthy(host), timeout=30, what="the original unit to be healthy again")
    assert server_info(host)["speculative_num_steps"] == 2
    poll_until(lambda: _lock_free(host), timeout=10, what="the guard to let go of the lock")
    # the trial unit it replaced is kept as a backup next to the unit
    backups = host.root_run(["sh", "-c", f"cat {host.unit_path}.bak-*"]).stdout
    assert trial_unit in backups
    host.root_run(["sh", "-c", f"rm -f /run/lock/opsconsole-{host.unit}.tune-*"])
