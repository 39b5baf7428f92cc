"""`opsconsole apply` end to end: real CLI -> real sshd -> real systemd -> the simulator, and back."""

from __future__ import annotations

import asyncio
import difflib
import json
import statistics
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from console.core.session import open_session
from console.host.base import UnitBackup
from console.workspace import Workspace
from tests.e2e.cli import OPSCONSOLE, json_output, opsconsole, server_info, unit_dir_listing
from tests.support.cli_run import finish_cli, start_cli
from tests.testbed.host import GpuHost
from tests.testbed.system import TestbedError, poll_until

pytestmark = pytest.mark.testbed

APPLY_TIMEOUT = "120"  # seconds the CLI waits for readiness; the simulator starts in about a second
STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
STEPS_2 = ("--set", "speculative-num-steps=2", "--set", "speculative-num-draft-tokens=3")  # the host's own
# The longest the link stays down: it comes back as soon as the host finished restarting on its own.
MAX_OUTAGE_S = 5.0


def test_a_valid_change_is_written_restarted_and_verified(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    before = host.service_properties("MainPID")
    done = opsconsole(host, "apply", host.name, *STEPS_3, "--yes", "--json", "--timeout", APPLY_TIMEOUT)
    result = json_output(done)
    assert done.returncode == 0, done.stderr
    assert result["ok"] is True and result["rolled_back"] is False
    # The unit on the host: exactly the two flag lines changed, everything else byte-identical.
    new_unit = host.unit_file_text()
    changed = [line for line in difflib.ndiff(host.unit_text.splitlines(), new_unit.splitlines()) if line[:1] in "+-"]
    assert sorted(changed) == sorted(
        [
            "-     --speculative-num-steps 2 \\",
            "+     --speculative-num-steps 3 \\",
            "-     --speculative-num-draft-tokens 3 \\",
            "+     --speculative-num-draft-tokens 4 \\",
        ]
    ), "\n".join(changed)
    # The server restarted and resolved the new values.
    assert host.service_properties("MainPID")["MainPID"] != before["MainPID"]
    info = server_info(host)
    assert info["speculative_num_steps"] == 3
    assert info["speculative_num_draft_tokens"] == 4
    # How promptly it noticed readiness is test_readiness_is_noticed_within_half_a_second_of_the_ready_line's.
    # A backup of the old unit stays on the host, and no temp file is left next to the unit.
    assert result["backup"]
    assert host.root_run(["cat", result["backup"]]).stdout == host.unit_text
    assert [name for name in unit_dir_listing(host) if name.startswith("sglang.service") and "tmp" in name] == []
    # The editor's presets find that backup through the session, with its text.
    backups, text = asyncio.run(_backups_through_a_session(host))
    assert [b.path for b in backups] == [result["backup"]] and text == host.unit_text


async def _backups_through_a_session(host: GpuHost) -> tuple[list[UnitBackup], str]:
    async with open_session(host.name, Workspace(host.workspace), ssh_config=str(host.ssh_config)) as session:
        backups = await session.service.backups()
        return backups, await session.service.read_backup(backups[0])


def test_a_change_the_rules_refuse_leaves_the_host_untouched(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    before_sha = host.unit_sha256()
    before = host.service_properties("MainPID", "NRestarts", "ExecMainStartTimestampMonotonic")
    listing = unit_dir_listing(host)
    done = opsconsole(host, "apply", host.name, "--set", "speculative-num-steps=two", "--yes", "--json")
    result = json_output(done)
    assert done.returncode == 1, done.stderr
    assert result["ok"] is False and result["state"] == "refused"
    assert any("speculative" in " ".join(error["flags"]) for error in result["report"]["errors"]), result["report"]
    assert host.unit_sha256() == before_sha
    assert host.service_properties("MainPID", "NRestarts", "ExecMainStartTimestampMonotonic") == before
    assert unit_dir_listing(host) == listing  # not even a backup


def test_a_user_whose_sudo_wants_a_password_gets_told_and_nothing_changes(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    (host.workspace / "profiles" / "gpu1-nosudo.toml").write_text(f'[host]\nssh = "nosudo@{host.name}"\nsudo = true\n')
    before_sha, listing = host.unit_sha256(), unit_dir_listing(host)
    before = host.service_properties("MainPID", "NRestarts")
    try:
        done = opsconsole(host, "apply", "gpu1-nosudo", *STEPS_3, "--yes", "--json", "--timeout", APPLY_TIMEOUT)
    finally:
        (host.workspace / "profiles" / "gpu1-nosudo.toml").unlink()
    result = json_output(done)
    assert done.returncode == 1
    assert "asked for a password" in result["error"] and "sudo -n" in result["error"], result["error"]
    assert host.unit_sha256() == before_sha
    assert unit_dir_listing(host) == listing
    assert host.service_properties("MainPID", "NRestarts") == before


def test_a_value_the_server_adjusts_silently_is_reported(pristine_gpu_host: GpuHost) -> None:
    """With topk 1 SGLang sets draft tokens to steps + 1 whatever was asked: apply says so and keeps the change."""
    host = pristine_gpu_host
    done = opsconsole(host, "apply", host.name, "--set", "speculative-num-draft-tokens=5", "--yes", "--json",
                      "--timeout", APPLY_TIMEOUT)  # fmt: skip
    result = json_output(done)
    assert done.returncode == 0, done.stderr
    draft = result["verified"]["values"]["speculative_num_draft_tokens"]
    assert (draft["requested"], draft["actual"], draft["status"]) == (5, 3, "adjusted")
    assert "--speculative-num-draft-tokens 5 \\\n" in host.unit_file_text()
    assert server_info(host)["speculative_num_draft_tokens"] == 3


def test_spec_v2_with_topk_2_is_refused_for_the_version_the_server_runs(pristine_gpu_host: GpuHost) -> None:
    """The operators' real trap: SGLang 0.5.9 refuses spec v2 with topk > 1 only at startup."""
    host = pristine_gpu_host
    host.install_unit(
        host.unit_text.replace("--sim-time-scale 0.01", "--sim-time-scale 0.01 --sim-sglang-version 0.5.9")
    )
    before_sha = host.unit_sha256()
    before = host.service_properties("MainPID", "NRestarts")
    done = opsconsole(host, "apply", host.name, "--set", "speculative-eagle-topk=2",
                      "--set", "speculative-num-draft-tokens=4", "--yes", "--json")  # fmt: skip
    result = json_output(done)
    assert done.returncode == 1, done.stderr
    assert (result["state"], result["sglang_version"]) == ("refused", "0.5.9")
    assert [e["code"] for e in result["report"]["errors"]] == ["spec-v2-topk"]
    assert host.unit_sha256() == before_sha
    assert host.service_properties("MainPID", "NRestarts") == before


def test_a_change_that_fails_at_startup_is_rolled_back(pristine_gpu_host: GpuHost) -> None:
    """The rules cannot know the host's disks: a missing draft model only fails when the server starts."""
    host = pristine_gpu_host
    before_sha = host.unit_sha256()
    before_pid = host.service_properties("MainPID")["MainPID"]
    done = opsconsole(host, "apply", host.name, "--set", "speculative-draft-model-path=/models/missing-draft",
                      "--yes", "--json", "--timeout", APPLY_TIMEOUT)  # fmt: skip
    result = json_output(done)
    assert done.returncode == 1, done.stderr
    assert result["ok"] is False and result["rolled_back"] is True
    assert any("missing-draft" in line for line in result["journal_excerpt"]), result["journal_excerpt"]
    # Back on the old unit, running and healthy, on a fresh process.
    assert host.unit_sha256() == before_sha
    props = host.service_properties("ActiveState", "SubState", "MainPID")
    assert props["ActiveState"] == "active" and props["SubState"] == "running"
    assert props["MainPID"] != before_pid
    host.wait_healthy(timeout=10)
    assert server_info(host)["speculative_draft_model_path"] is None


def test_a_start_slower_than_the_timeout_is_rolled_back(pristine_gpu_host: GpuHost) -> None:
    """--sim-time-scale 1 makes the simulator start like a real 122B model (minutes): apply gives up after
    --timeout and goes back to the old unit, which starts in about a second."""
    host = pristine_gpu_host
    before_sha = host.unit_sha256()
    done = opsconsole(host, "apply", host.name, "--set", "sim-time-scale=1", "--yes", "--json", "--timeout", "4")
    result = json_output(done)
    assert done.returncode == 1, done.stderr
    assert (result["state"], result["rolled_back"]) == ("healthy_on_old", True), result["history"]
    assert "not healthy within 4 s" in result["error"]
    assert host.unit_sha256() == before_sha
    assert host.service_properties("ActiveState")["ActiveState"] == "active"
    host.wait_healthy(timeout=10)


@pytest.mark.parametrize("cut_when", ["unit_written", "restart_issued"])
def test_ssh_dropped_during_apply_finishes_or_rolls_back_with_nothing_half_written(
    pristine_gpu_host: GpuHost, cut_when: str
) -> None:
    """The link goes down right after the new unit lands (before or after the console's restart reaches the
    host); the host carries on alone and the link returns once its server is healthy, or after MAX_OUTAGE_S."""
    host = pristine_gpu_host
    original = host.unit_text
    before_pid = host.service_properties("MainPID")["MainPID"]
    apply = start_cli(
        [str(OPSCONSOLE), "--workspace", str(host.workspace), "apply", host.name, *STEPS_3, "--yes", "--json",
         "--timeout", APPLY_TIMEOUT],
        env=host.client_env(),
    )  # fmt: skip
    try:
        poll_until(lambda: host.unit_file_text() != original or apply.poll() is not None, timeout=60,
                   what="apply to write the unit")  # fmt: skip
        if cut_when == "restart_issued":
            poll_until(lambda: _main_pid(host) != before_pid or apply.poll() is not None, timeout=60,
                       what="apply to restart the service")  # fmt: skip
        assert apply.poll() is None, f"apply ended before the link was cut: {apply.communicate()}"
        host.link_down()
        _wait_for(lambda: _restarted_and_healthy(host, before_pid), timeout=MAX_OUTAGE_S)
        host.link_up()
        stdout, stderr = finish_cli(apply, timeout=180)
    finally:
        host.link_up()
        if apply.poll() is None:
            apply.kill()
            apply.wait()
    result = json_output(subprocess.CompletedProcess(apply.args, apply.returncode, stdout, stderr))
    unit = host.unit_file_text()
    assert apply.returncode in (0, 1), stderr
    assert result["state"] in ("verified", "healthy_on_old"), result["history"]
    assert [name for name in unit_dir_listing(host) if name.startswith("sglang.service") and "tmp" in name] == []
    if apply.returncode == 0:
        assert result["ok"] is True
        assert "--speculative-num-steps 3" in unit and "--speculative-num-draft-tokens 4" in unit
        assert server_info(host)["speculative_num_steps"] == 3
    else:
        assert result["rolled_back"] is True
        assert unit == original
        assert server_info(host)["speculative_num_steps"] == 2
    props = host.service_properties("ActiveState", "SubState")
    assert props == {"ActiveState": "active", "SubState": "running"}


def _slow_apply(host: GpuHost) -> subprocess.Popen[str]:
    """An apply whose new unit starts slowly (sim-time-scale 0.05, seconds): long enough to run another beside it."""
    return start_cli(
        [str(OPSCONSOLE), "--workspace", str(host.workspace), "apply", host.name, *STEPS_3,
         "--set", "sim-time-scale=0.05", "--yes", "--json", "--timeout", APPLY_TIMEOUT],
        env=host.client_env(),
    )  # fmt: skip


def _lock_free_on_host(host: GpuHost) -> bool:
    lock = f"/run/lock/opsconsole-{host.unit}.lock"
    return host.root_run(["flock", "-n", lock, "true"], check=False).returncode == 0


def test_a_second_apply_is_refused_while_the_first_runs_and_works_after_it(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    original = host.unit_text
    steps_1 = ("--set", "speculative-num-steps=1", "--set", "speculative-num-draft-tokens=2")
    first = _slow_apply(host)
    try:
        poll_until(lambda: host.unit_file_text() != original or first.poll() is not None, timeout=60,
                   what="the first apply to write the unit")  # fmt: skip
        first_unit = host.unit_file_text()
        assert first.poll() is None, first.communicate()
        second = opsconsole(host, "apply", host.name, *steps_1, "--yes", "--json", "--timeout", APPLY_TIMEOUT)
        assert first.poll() is None, "the first apply ended before the second was refused: the test proves nothing"
        assert host.unit_file_text() == first_unit  # the refused apply did not touch the unit
        stdout, stderr = finish_cli(first, timeout=180)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    refused = json_output(second)
    assert second.returncode == 1, second.stderr
    assert (refused["state"], refused["ok"]) == ("locked", False)
    assert f"opsconsole apply, pid {first.pid}) since " in refused["error"], refused["error"]
    assert first.returncode == 0, stderr
    assert json_output(subprocess.CompletedProcess(first.args, 0, stdout, stderr))["state"] == "verified"
    # The first apply is over, its lock released on the host (sudo and all): the refused apply now goes through.
    poll_until(lambda: _lock_free_on_host(host), timeout=10, what="the lock to be released on the host")
    done = opsconsole(host, "apply", host.name, *steps_1, "--yes", "--json", "--timeout", APPLY_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert json_output(done)["state"] == "verified"
    assert server_info(host)["speculative_num_steps"] == 1


def test_a_killed_apply_releases_its_lock_on_the_host(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    first = _slow_apply(host)
    try:
        poll_until(lambda: host.unit_file_text() != host.unit_text or first.poll() is not None, timeout=60,
                   what="the apply to write the unit")  # fmt: skip
        assert first.poll() is None, first.communicate()
        assert not _lock_free_on_host(host)
        first.kill()  # SIGKILL: only the closed SSH connection tells the host
        first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    poll_until(lambda: _lock_free_on_host(host), timeout=10, what="the dead console's lock to be released")
    assert "flock -n 9" not in host.root_run(["ps", "-eo", "args"]).stdout  # no holder (sudo, sh) left behind


@pytest.mark.alone  # a time held to half a second: one at a time, at the top CPU weight (tests/tiers.py)
def test_readiness_is_noticed_within_half_a_second_of_the_ready_line(pristine_gpu_host: GpuHost) -> None:
    """The console polls /health every 0.1 s: it notices a started server within 0.5 s of its "ready to roll" line.
    The median of three applies is held to it: one apply's gap is one sample of where the line fell in a poll's
    interval and of the machine's load at that instant (over SSH, and a busy machine's scheduler, one can be late)."""
    host = pristine_gpu_host
    gaps = []
    for steps in (STEPS_3, STEPS_2, STEPS_3):
        done = opsconsole(host, "apply", host.name, *steps, "--yes", "--json", "--timeout", APPLY_TIMEOUT)
        result = json_output(done)
        assert done.returncode == 0, done.stderr
        healthy_at = datetime.fromisoformat(next(t["at"] for t in result["history"] if t["state"] == "healthy"))
        gaps.append((healthy_at - _ready_line_time(host)).total_seconds())
    assert statistics.median(gaps) < 0.5, gaps


def _ready_line_time(host: GpuHost) -> datetime:
    """When the server's latest start logged that it is ready (/health turns 200 with that line)."""
    journal = host.root_run(["journalctl", "-u", host.unit, "-o", "json", "-n", "500"]).stdout.splitlines()
    ready = [json.loads(line) for line in journal if "The server is fired up and ready to roll!" in line][-1]
    return datetime.fromtimestamp(int(ready["__REALTIME_TIMESTAMP"]) / 1e6, UTC)


def _main_pid(host: GpuHost) -> str:
    return host.service_properties("MainPID")["MainPID"]


def _restarted_and_healthy(host: GpuHost, before_pid: str) -> bool:
    props = host.service_properties("MainPID", "SubState")
    if props["MainPID"] in (before_pid, "0") or props["SubState"] != "running":
        return False
    try:
        host.wait_healthy(timeout=0.2)
    except TestbedError:
        return False
    return True


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    """Like poll_until, but running out of time is an outcome here, not a failure."""
    try:
        poll_until(condition, timeout=timeout, what="", interval=0.05)
    except TestbedError:
        return False
    return True
