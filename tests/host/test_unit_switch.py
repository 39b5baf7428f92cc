"""The switch to a new unit in one command (console.host.unit_switch): the real script run by sh against stand-ins of
systemctl and journalctl that log every call and fail where a test says, and its output read back by parse_switch.

What must hold: nothing is written when the state cannot be read, nothing is reloaded or restarted when the write
fails, no restart after a failed daemon-reload, the backup is a byte copy of the old unit and the unit the new text,
and the caller learns which step stopped it and why. The whole switch against real systemd: tests/e2e/test_apply.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from console.host.systemd import SHOW_PROPERTIES, parse_show
from console.host.unit_switch import SWITCH_SCRIPT, UnitSwitch, parse_switch

pytestmark = pytest.mark.system

OLD = "[Service]\nExecStart=/usr/bin/python -m sglang.launch_server --speculative-num-steps 2\n"
NEW = "[Service]\nExecStart=/usr/bin/python -m sglang.launch_server --speculative-num-steps 3\n"
CURSOR = "s=abc;i=5"
# systemctl: `show -p FragmentPath --value` prints the unit file; `show` the state; daemon-reload and restart are
# logged; the step named in $FAIL fails with a message.
SYSTEMCTL = """#!/bin/sh
echo "systemctl $*" >> "$LOG"
case "$*" in
  *"-p FragmentPath --value"*) [ "$FAIL" = fragment ] || echo "$UNIT_FILE" ;;
  *show*) [ "$FAIL" = state ] && { echo "Failed to connect to bus" >&2; exit 1; }
    printf 'Id=sglang.service\\nActiveState=active\\nSubState=running\\nMainPID=4242\\nNRestarts=0\\n'
    printf 'FragmentPath=%s\\nLoadState=loaded\\n' "$UNIT_FILE" ;;
  *daemon-reload*) [ "$FAIL" = daemon-reload ] && { echo "Access denied" >&2; exit 1; } ;;
  *restart*) [ "$FAIL" = restart ] && { echo "Job for sglang.service failed." >&2; exit 1; } ;;
esac
exit 0
"""
JOURNALCTL = f"""#!/bin/sh
echo "journalctl $*" >> "$LOG"
echo '{json.dumps({"__CURSOR": CURSOR, "__REALTIME_TIMESTAMP": "1764476400000000", "MESSAGE": "hello"})}'
"""


def run_switch(tmp_path: Path, fail: str = "") -> tuple[UnitSwitch, list[str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("systemctl", SYSTEMCTL), ("journalctl", JOURNALCTL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    unit_file = tmp_path / "sglang.service"
    unit_file.write_text(OLD)
    log = tmp_path / "calls.log"
    log.write_text("")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(log), "UNIT_FILE": str(unit_file), "FAIL": fail}
    argv = ["sh", "-c", SWITCH_SCRIPT, "sh", "sglang.service", ",".join(SHOW_PROPERTIES), ".bak-20261204T120000Z"]
    done = subprocess.run(argv, input=NEW, capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    switch = parse_switch(done.stdout, lambda shown: parse_show(shown, "sglang.service"))
    calls = [line.split(" ", 1)[1] for line in log.read_text().splitlines()]
    return switch, calls, unit_file


def steps(calls: list[str]) -> list[str]:
    """The calls that change something, in order."""
    return [c for c in calls if c.startswith(("--no-pager daemon-reload", "--no-pager restart"))]


def test_every_step_in_order_with_the_state_and_cursor_from_before(tmp_path: Path) -> None:
    switch, calls, unit_file = run_switch(tmp_path)
    assert switch.failed is None and switch.written and switch.reloaded
    assert switch.before is not None and switch.before.main_pid == 4242 and switch.before.active_state == "active"
    assert switch.cursor == CURSOR
    assert switch.backup is not None and switch.backup.path == f"{unit_file}.bak-20261204T120000Z"
    assert Path(switch.backup.path).read_text() == OLD and unit_file.read_text() == NEW
    assert not list(tmp_path.glob("*.opsconsole-tmp"))
    assert steps(calls) == ["--no-pager daemon-reload", "--no-pager restart sglang.service"]
    assert calls.index(next(c for c in calls if c.startswith("-u sglang.service"))) < calls.index(steps(calls)[0])


def test_a_state_that_cannot_be_read_stops_it_before_anything_changes(tmp_path: Path) -> None:
    switch, calls, unit_file = run_switch(tmp_path, fail="state")
    assert (switch.failed, switch.written) == ("state", False)
    assert "Failed to connect to bus" in switch.error
    assert unit_file.read_text() == OLD and not list(tmp_path.glob("*.bak-*"))
    assert steps(calls) == []


def test_a_failed_write_is_neither_reloaded_nor_restarted(tmp_path: Path) -> None:
    switch, calls, unit_file = run_switch(tmp_path, fail="fragment")
    assert (switch.failed, switch.written, switch.reloaded) == ("write", False, False)
    assert "systemd reports no unit file (FragmentPath) for sglang.service" in switch.error
    assert unit_file.read_text() == OLD
    assert steps(calls) == []


def test_a_failed_daemon_reload_is_not_restarted(tmp_path: Path) -> None:
    switch, calls, unit_file = run_switch(tmp_path, fail="daemon-reload")
    assert (switch.failed, switch.written, switch.reloaded) == ("daemon-reload", True, False)
    assert "Access denied" in switch.error
    assert unit_file.read_text() == NEW  # written: the caller rolls it back from the backup
    assert steps(calls) == ["--no-pager daemon-reload"]


def test_a_failed_restart_says_so_after_the_write_and_the_reload(tmp_path: Path) -> None:
    switch, calls, _unit_file = run_switch(tmp_path, fail="restart")
    assert (switch.failed, switch.written, switch.reloaded) == ("restart", True, True)
    assert "Job for sglang.service failed." in switch.error
    assert switch.before is not None  # the caller judges the restart against the state from before
    assert steps(calls) == ["--no-pager daemon-reload", "--no-pager restart sglang.service"]


def test_an_answer_cut_short_counts_the_missing_step_as_failed() -> None:
    """Pure: output that ends after the write's report (the rest lost) says the reload did not report."""
    shown = "Id=sglang.service\nActiveState=active\nSubState=running\nMainPID=1\nLoadState=loaded\nFragmentPath=/u\n"
    marker = "@@opsconsole-switch@@"
    out = f"{shown}{marker} state 0\n{marker} cursor 1\n/u.bak-1\n{marker} write 0\n"
    switch = parse_switch(out, lambda text: parse_show(text, "sglang.service"))
    assert (switch.failed, switch.written, switch.cursor) == ("daemon-reload", True, None)
    assert switch.error == "the daemon-reload step did not report"
    assert parse_switch("", lambda text: parse_show(text, "sglang.service")).failed == "state"
