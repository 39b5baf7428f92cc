"""How the service's main process ended, and which restart lines are the old process's stop (pure)."""

from __future__ import annotations

from dataclasses import replace

from console.core.exits import (
    STOPPED_BY_SIGKILL,
    OldProcessLines,
    describe,
    entered_inactive_since,
    exit_json,
    main_exit,
    stopped_by_own_sigkill,
)
from console.host.base import ServiceState
from console.host.systemd import SHOW_PROPERTIES, parse_show

# `systemctl show` of sglang.service after `systemctl stop` of SGLang 0.5.17 (the stop began at 1000 µs, the main
# process SIGKILLed itself at 5,001,000 µs).
SHOW_AFTER_STOP = """\
Id=sglang.service
ActiveState=failed
SubState=failed
MainPID=0
ExecMainStartTimestamp=Mon 2026-11-30 14:28:09 UTC
NRestarts=0
Result=signal
UnitFileState=enabled
NeedDaemonReload=no
FragmentPath=/etc/systemd/system/sglang.service
LoadState=loaded
ExecMainCode=2
ExecMainStatus=9
ExecMainExitTimestampMonotonic=5001000
ActiveExitTimestampMonotonic=1000
InactiveEnterTimestampMonotonic=5001100
"""


def after_stop() -> ServiceState:
    return parse_show(SHOW_AFTER_STOP, "sglang.service")


def test_the_show_properties_include_what_tells_a_stop_from_a_crash() -> None:
    assert {"ExecMainCode", "ExecMainStatus", "ActiveExitTimestampMonotonic", "ExecMainExitTimestampMonotonic"} <= set(
        SHOW_PROPERTIES
    )


def test_a_stop_ending_in_sglangs_own_sigkill_is_a_stop() -> None:
    state = after_stop()
    assert main_exit(state) is not None and main_exit(state).to_json() == {"code": "killed", "status": 9}  # type: ignore[union-attr]
    assert stopped_by_own_sigkill(state)
    assert describe(state) == STOPPED_BY_SIGKILL
    assert exit_json(state) == {"last_exit": {"code": "killed", "status": 9}, "summary": STOPPED_BY_SIGKILL}


def test_a_sigkill_before_the_unit_left_active_is_a_crash() -> None:
    props = {**after_stop().properties, "ActiveExitTimestampMonotonic": "5001050"}  # left active after the exit
    crash = replace(after_stop(), properties=props)
    assert not stopped_by_own_sigkill(crash)
    assert describe(crash) == "failed (result: signal, killed by signal 9)"


def test_other_ends_are_described_by_how_they_ended() -> None:
    exited = replace(
        after_stop(),
        result="exit-code",
        properties={**after_stop().properties, "ExecMainCode": "1", "ExecMainStatus": "1"},
    )
    assert describe(exited) == "failed (result: exit-code, exit status 1)"
    timeout = replace(after_stop(), result="timeout")  # systemd had to SIGKILL it after TimeoutStopSec
    assert not stopped_by_own_sigkill(timeout) and describe(timeout) == "failed (result: timeout, killed by signal 9)"
    clean = replace(
        after_stop(),
        active_state="inactive",
        sub_state="dead",
        result="success",
        properties={"ExecMainCode": "1", "ExecMainStatus": "0"},
    )
    assert describe(clean) == "inactive (last exit: exit status 0)"
    running = replace(after_stop(), active_state="active", sub_state="running", main_pid=42, result="success")
    assert describe(running) == "active (running)" and main_exit(running) is None


def test_entering_inactive_again_is_what_makes_a_state_new() -> None:
    before = after_stop()
    assert not entered_inactive_since(before, before)
    again = replace(before, properties={**before.properties, "InactiveEnterTimestampMonotonic": "9000000"})
    assert entered_inactive_since(before, again)


def test_old_process_lines_are_its_shutdown_and_systemds_lines_about_its_exit() -> None:
    journal = [  # (pid, message) of a restart as the journal has it after the apply's cursor
        (1, "Stopping sglang.service - SGLang server..."),
        (700, "[2026-11-30 14:26:10] SIGTERM received. signum=None frame=None. Draining requests and shutting down..."),
        (700, "[2026-11-30 14:26:15] kill_process_tree called: parent_pid=700, include_parent=True, pid=700"),
        (1, "sglang.service: Main process exited, code=killed, status=9/KILL"),
        (1, "sglang.service: Failed with result 'signal'."),
        (1, "Stopped sglang.service - SGLang server."),
        (1, "sglang.service: Consumed 1min 2.345s CPU time."),
        (1, "Started sglang.service - SGLang server."),
        (800, "[2026-11-30 14:27:19] Load weight begin. avail mem=139.09 GB"),
        (800, "Traceback (most recent call last):"),
        (1, "sglang.service: Main process exited, code=exited, status=1/FAILURE"),
        (1, "sglang.service: Failed with result 'exit-code'."),
    ]
    old = OldProcessLines(old_pid=700)
    kept = [message for pid, message in journal if not old.is_old(message, pid)]
    assert kept == [message for _, message in journal[7:]]


def test_without_a_start_line_the_new_process_ends_the_old_ones() -> None:
    old = OldProcessLines(old_pid=700)
    assert old.is_old("sglang.service: Main process exited, code=killed, status=9/KILL", 1)
    assert not old.is_old("new process line", 801)
    assert not old.is_old("sglang.service: Main process exited, code=killed, status=9/KILL", 1)  # now the new one's


def test_a_restart_of_a_stopped_unit_has_no_old_lines() -> None:
    old = OldProcessLines(old_pid=None)
    assert not old.is_old("Started sglang.service - SGLang server.", 1)
    assert not old.is_old("sglang.service: Failed with result 'exit-code'.", 1)
