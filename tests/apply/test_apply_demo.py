"""`opsconsole apply` end to end on the demo host: the real CLI, the demo's supervisor, the simulator.

Everything here is a real process: `opsconsole demo --no-ui` runs the supervisor and the SGLang stand-in,
`opsconsole apply` is run as a subprocess against it, and the host is read back independently through the
supervisor's own client (the unit text, MainPID) and the server's /server_info.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from console.core.session import open_session
from console.host.base import UnitLocked
from console.workspace import Workspace
from tests.support.cli_run import finish_cli, start_cli
from tests.support.demo import APPLY_TIMEOUT, OPSCONSOLE, Demo, poll, running_demo


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """A fresh demo host for a test that changes it."""
    with running_demo(tmp_path / "ws") as running:
        yield running


@pytest.fixture(scope="module")
def untouched_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """One demo host shared by the tests that must leave it exactly as it was (they check that they do)."""
    with running_demo(tmp_path_factory.mktemp("untouched") / "ws") as running:
        yield running


def _spec_settings(info: dict[str, Any]) -> tuple[int, int]:
    return int(info["speculative_num_steps"]), int(info["speculative_num_draft_tokens"])


def test_a_valid_change_is_written_restarted_and_verified(demo: Demo) -> None:
    host = demo.host()
    unit_before, pid_before = host.unit(), host.main_pid()
    steps, _ = _spec_settings(host.server_info())
    new_steps = 3 if steps != 3 else 2
    done, result = demo.apply(
        "--set", f"speculative-num-steps={new_steps}", "--set", f"speculative-num-draft-tokens={new_steps + 1}",
        "--set", "speculative-eagle-topk=1", "--yes",
    )  # fmt: skip
    assert done.returncode == 0, (done.stderr, result.get("error"), result.get("journal_excerpt"))
    assert result["ok"] is True and result["state"] == "verified" and result["rolled_back"] is False
    assert result["verified"]["ok"] is True
    assert result["verified"]["values"]["speculative_num_steps"]["actual"] == new_steps
    # The unit on the host is the planned one: the diff's lines and nothing else.
    unit_after = host.unit()
    assert unit_after != unit_before
    assert f"{new_steps}" in unit_after and result["diff"]
    assert result["backup"]
    # A new process serves the new values.
    assert host.main_pid() != pid_before
    assert _spec_settings(host.server_info()) == (new_steps, new_steps + 1)
    # The startup was followed phase by phase, up to ready.
    phases = {p["name"]: p for p in result["phases"]}
    assert phases["load_weights"]["state"] == "done" and phases["load_weights"]["started_at"]
    assert all(p["state"] in ("done", "skipped") for p in result["phases"])
    # How soon readiness is noticed is test_readiness_is_noticed_within_a_second_of_the_ready_line's.
    states = [h["state"] for h in result["history"]]
    assert states == [
        "validated", "backed_up", "written", "daemon_reloaded", "restarting", "starting", "healthy", "verified",
    ]  # fmt: skip


def test_a_change_the_rules_refuse_leaves_the_host_untouched(untouched_demo: Demo) -> None:
    demo = untouched_demo
    host = demo.host()
    unit_before, pid_before = host.unit(), host.main_pid()
    done, result = demo.apply("--set", "speculative-num-steps=two", "--yes")
    assert done.returncode == 1
    assert result["ok"] is False and result["state"] == "refused" and result["backup"] is None
    assert any("--speculative-num-steps" in " ".join(e["flags"]) for e in result["report"]["errors"])
    assert host.unit() == unit_before
    assert host.main_pid() == pid_before


def test_a_change_that_fails_at_startup_is_rolled_back(demo: Demo) -> None:
    host = demo.host()
    unit_before = host.unit()
    info_before = host.server_info()
    done, result = demo.apply("--set", "speculative-draft-model-path=/models/missing-draft", "--yes")
    assert done.returncode == 1, done.stderr
    assert result["ok"] is False and result["rolled_back"] is True
    assert result["state"] == "healthy_on_old"
    assert any("missing-draft" in line for line in result["journal_excerpt"]), result["journal_excerpt"]
    assert host.unit() == unit_before
    assert host.state() == ("active", "running")
    assert host.healthy()
    assert _spec_settings(host.server_info()) == _spec_settings(info_before)


def test_without_a_terminal_it_asks_for_yes_and_changes_nothing(untouched_demo: Demo) -> None:
    demo = untouched_demo
    host = demo.host()
    unit_before, pid_before = host.unit(), host.main_pid()
    done, result = demo.apply("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
    assert done.returncode == 1
    assert result["state"] == "aborted" and "--yes" in result["error"]
    assert host.unit() == unit_before and host.main_pid() == pid_before


def test_human_output_shows_diff_report_and_phases(demo: Demo) -> None:
    done = demo.run("apply", "demo", "--set", "speculative-num-steps=2", "--set", "speculative-num-draft-tokens=3",
                    "--set", "speculative-eagle-topk=1", "--yes", "--timeout", APPLY_TIMEOUT)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "+++ " in out and "+    --speculative-num-steps 2" in out
    assert "loading weights" in out and "ready" in out and "verified" in out


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--env", "NOT A PAIR"],
        ["--set", "speculative-num-steps=2", "--unset", "speculative-num-steps"],
        ["--set", "speculative-num-steps=2", "--timeout", "0"],
    ],
)
@pytest.mark.system
def test_usage_errors_exit_2_before_touching_anything(tmp_path: Path, args: list[str]) -> None:
    done = subprocess.run(
        [str(OPSCONSOLE), "--workspace", str(tmp_path), "apply", "nowhere-host", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "opsconsole apply:" in done.stderr


def test_a_usage_error_found_once_the_host_is_read_is_exit_2_and_touches_nothing(untouched_demo: Demo) -> None:
    """Whether a flag takes a value is known from the host's SGLang version: a usage error found after connecting
    is still exit 2 with its message, not a host failure (no --json object of a failure)."""
    host = untouched_demo.host()
    unit_before, pid_before = host.unit(), host.main_pid()
    done = untouched_demo.run("apply", "demo", "--set", "speculative-num-steps", "--yes", "--json")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("opsconsole apply: --set speculative-num-steps: ") and "takes a value" in done.stderr
    assert done.stdout == ""
    assert host.unit() == unit_before and host.main_pid() == pid_before


@pytest.mark.system
def test_an_unknown_target_fails_clearly(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(OPSCONSOLE), "--workspace", str(tmp_path), "apply", "bad host!", "--set", "speculative-num-steps=2",
         "--yes"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "invalid host" in done.stderr


@pytest.mark.system
def test_an_unreachable_host_with_json_still_prints_one_object(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(OPSCONSOLE), "--workspace", str(tmp_path), "apply", "bad host!", "--set", "speculative-num-steps=2",
         "--yes", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["ok"] is False and result["state"] == "error" and "invalid host" in result["error"]


def test_on_a_terminal_it_asks_and_no_means_nothing_changes(untouched_demo: Demo) -> None:
    import pty

    demo = untouched_demo
    host = demo.host()
    unit_before, pid_before = host.unit(), host.main_pid()
    primary, secondary = pty.openpty()
    try:
        proc = start_cli(
            [str(OPSCONSOLE), "--workspace", str(demo.workspace), "apply", "demo", "--set", "speculative-num-steps=3",
             "--set", "speculative-num-draft-tokens=4", "--json"],
            env=dict(os.environ), stdin=secondary,
        )  # fmt: skip
        os.write(primary, b"n\n")
        stdout, stderr = finish_cli(proc, timeout=60)
    finally:
        os.close(primary)
        os.close(secondary)
    assert proc.returncode == 1
    assert "[y/N]" in stderr
    result = json.loads(stdout)
    assert result["state"] == "aborted" and "not confirmed" in result["error"]
    assert host.unit() == unit_before and host.main_pid() == pid_before


def test_ctrl_c_while_the_new_unit_starts_rolls_back(demo: Demo) -> None:
    host = demo.host()
    unit_before = host.unit()
    # The new unit's simulated start takes hours (time scale 100): whenever the Ctrl-C lands after the unit
    # was written, the new unit cannot have been verified yet, so the only right outcome is a rollback.
    proc = start_cli(
        [str(OPSCONSOLE), "--workspace", str(demo.workspace), "apply", "demo", "--set", "speculative-num-steps=3",
         "--set", "speculative-num-draft-tokens=4", "--set", "sim-time-scale=100", "--yes", "--json",
         "--timeout", APPLY_TIMEOUT],
        env=dict(os.environ),
    )  # fmt: skip
    try:
        poll(lambda: host.unit() != unit_before or proc.poll() is not None, 30, "apply to write the unit")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = finish_cli(proc, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stderr
    result = json.loads(stdout)
    assert result["rolled_back"] is True and result["state"] == "healthy_on_old"
    assert "interrupted" in result["error"]
    assert host.unit() == unit_before
    assert host.healthy()


def test_when_the_old_unit_does_not_come_back_either_the_rollback_fails_loudly(demo: Demo) -> None:
    host = demo.host()
    # Someone left a unit on the host that cannot start; the server still runs from before.
    broken = host.unit().replace("--enable-metrics", "--enable-metrics --speculative-draft-model-path /models/gone")
    host.write_unit_behind_its_back(broken)
    done, result = demo.apply("--set", "speculative-num-steps=2", "--set", "speculative-num-draft-tokens=3", "--yes")
    assert done.returncode == 1
    assert result["state"] == "rollback_failed" and result["rolled_back"] is True
    assert any("/models/gone" in line for line in result["journal_excerpt"])
    assert any("/models/gone" in line for line in result["rollback_journal_excerpt"])
    assert host.unit() == broken  # the unit as it was before apply, exactly


def _slow_apply(demo: Demo, *edits: str) -> subprocess.Popen[str]:
    """An apply whose new unit starts slowly (a simulated start 50 times longer): it holds the lock a while."""
    return start_cli(
        [str(OPSCONSOLE), "--workspace", str(demo.workspace), "apply", "demo", *edits,
         "--set", "sim-time-scale=0.05", "--yes", "--json", "--timeout", APPLY_TIMEOUT],
        env=dict(os.environ),
    )  # fmt: skip


def _lock_is_free(demo: Demo) -> bool:
    async def try_lock() -> bool:
        async with open_session("demo", Workspace.resolve(demo.workspace)) as host:
            try:
                async with host.service.lock("test@probe"):
                    return True
            except UnitLocked:
                return False

    return asyncio.run(try_lock())


def test_a_second_apply_is_refused_while_the_first_runs_and_works_after_it(demo: Demo) -> None:
    host = demo.host()
    unit_before = host.unit()
    first = _slow_apply(demo, "--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
    try:
        poll(lambda: host.unit() != unit_before or first.poll() is not None, 30, "the first apply to write the unit")
        assert first.poll() is None, first.communicate()
        first_unit = host.unit()
        done, result = demo.apply(
            "--set", "speculative-num-steps=1", "--set", "speculative-num-draft-tokens=2", "--yes"
        )
        assert first.poll() is None, "the first apply ended before the second was tried: the test proves nothing"
        unit_after_refusal = host.unit()
        first_out, first_err = finish_cli(first, timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert done.returncode == 1
    assert result["state"] == "locked" and result["ok"] is False
    assert "another apply" in result["error"] and f"pid {first.pid})" in result["error"], result["error"]
    assert "@" in result["error"] and " since " in result["error"]
    assert unit_after_refusal == first_unit  # the refused apply did not touch the unit
    assert first.returncode == 0, first_err
    assert json.loads(first_out)["state"] == "verified"
    # The first apply is over: the lock is free and the same apply now goes through.
    done, result = demo.apply("--set", "speculative-num-steps=1", "--set", "speculative-num-draft-tokens=2", "--yes")
    assert done.returncode == 0, done.stderr
    assert result["state"] == "verified"
    assert _spec_settings(host.server_info()) == (1, 2)


def test_a_killed_apply_releases_the_lock(demo: Demo) -> None:
    host = demo.host()
    unit_before = host.unit()
    first = _slow_apply(demo, "--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
    try:
        poll(lambda: host.unit() != unit_before or first.poll() is not None, 30, "the first apply to write the unit")
        assert first.poll() is None, first.communicate()
        assert not _lock_is_free(demo)
        first.kill()  # SIGKILL: no cleanup of its own, only its closed connection says it is gone
        first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    poll(lambda: _lock_is_free(demo), 10, "the supervisor to release the dead console's lock")
    done, result = demo.apply("--set", "speculative-num-steps=1", "--set", "speculative-num-draft-tokens=2", "--yes")
    assert done.returncode == 0, done.stderr
    assert result["state"] == "verified"


@pytest.mark.alone  # a time held to a second: one at a time, at the top CPU weight (tests/tiers.py)
def test_readiness_is_noticed_within_a_second_of_the_ready_line(demo: Demo) -> None:
    """Within 0.5 s of /health turning 200 (the console polls every 0.1 s); the log line comes just before /health
    turns 200: a second from the line. The median of three applies is held to it, as one apply's gap is one sample
    of a poll's phase and of the machine's load at that instant."""
    first = 3 if _spec_settings(demo.host().server_info())[0] != 3 else 2  # each apply a change
    gaps = []
    for steps in (first, 5 - first, first):
        done, result = demo.apply(
            "--set", f"speculative-num-steps={steps}", "--set", f"speculative-num-draft-tokens={steps + 1}",
            "--set", "speculative-eagle-topk=1", "--yes",
        )  # fmt: skip
        assert done.returncode == 0, (done.stderr, result.get("error"))
        ready_line = datetime.fromisoformat(next(p for p in result["phases"] if p["name"] == "warmup")["ended_at"])
        healthy_at = next(datetime.fromisoformat(h["at"]) for h in result["history"] if h["state"] == "healthy")
        gaps.append((healthy_at - ready_line).total_seconds())
    assert statistics.median(gaps) < 1.0, gaps
