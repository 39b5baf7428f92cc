"""When a service state means the start has failed (pure)."""

from __future__ import annotations

from console.core.change import start_failure
from console.host.base import ServiceState


def state(active: str, sub: str, restarts: int = 0, result: str = "success") -> ServiceState:
    return ServiceState(
        unit="sglang.service",
        active_state=active,
        sub_state=sub,
        main_pid=1234 if active == "active" else None,
        started_at=None,
        n_restarts=restarts,
        result=result,
        unit_file_state="enabled",
        need_daemon_reload=False,
        fragment_path="/etc/systemd/system/sglang.service",
    )


def test_running_or_starting_is_not_a_failure() -> None:
    assert start_failure(state("active", "running"), 0) == ""
    assert start_failure(state("activating", "start"), 0) == ""
    assert start_failure(state("active", "running", restarts=2), 2) == ""


def test_failed_state() -> None:
    assert "failed (result: exit-code)" in start_failure(state("failed", "failed", result="exit-code"), 0)


def test_restart_loop() -> None:
    assert "restarting in a loop" in start_failure(state("activating", "auto-restart", 1, "exit-code"), 0)
    assert "NRestarts 3" in start_failure(state("active", "running", restarts=3), 2)


def test_stopped() -> None:
    assert "stopped" in start_failure(state("inactive", "dead"), 0)


def test_inactive_right_after_restart_is_not_yet_a_failure() -> None:
    assert start_failure(state("inactive", "dead"), 0, seen_running=False) == ""


def test_a_new_start_is_a_new_pid_or_a_new_start_time() -> None:
    from dataclasses import replace
    from datetime import UTC, datetime

    from console.core.change import is_new_start

    old = replace(state("active", "running"), main_pid=100, started_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert not is_new_start(old, old)
    assert is_new_start(old, replace(old, main_pid=101))
    assert is_new_start(old, replace(old, started_at=datetime(2026, 1, 2, tzinfo=UTC)))
    assert not is_new_start(old, replace(old, main_pid=None, started_at=None))
    stopped = replace(old, main_pid=None, started_at=None)
    assert is_new_start(stopped, old)


def stopped_by_sglang(inactive_enter_us: str = "7000") -> ServiceState:
    """What systemd shows after `systemctl stop` of SGLang 0.5.17: it SIGKILLed itself 5 s after the stop began."""
    from dataclasses import replace

    return replace(
        state("failed", "failed", result="signal"),
        properties={
            "ExecMainCode": "2",
            "ExecMainStatus": "9",
            "ActiveExitTimestampMonotonic": "1000",
            "ExecMainExitTimestampMonotonic": "6000",
            "InactiveEnterTimestampMonotonic": inactive_enter_us,
        },
    )


def test_a_failed_state_left_by_the_stop_before_the_restart_is_not_the_new_start_failing() -> None:
    before = stopped_by_sglang()
    assert start_failure(before, 0, seen_running=False, before=before) == ""  # the new process is not up yet
    stuck = start_failure(before, 0, seen_running=True, before=before)  # no new process after the grace time
    assert "did not start again" in stuck and "stopped (SGLang exits by SIGKILL on stop)" in stuck


def test_a_new_failure_after_the_restart_counts() -> None:
    before = stopped_by_sglang()
    failed_again = state("failed", "failed", result="exit-code")
    failed_again = failed_again.__class__(
        **{**failed_again.__dict__, "properties": {"InactiveEnterTimestampMonotonic": "9000"}}
    )
    assert "failed (result: exit-code)" in start_failure(failed_again, 0, before=before)


def test_without_the_timestamps_a_new_process_marks_a_new_failure() -> None:
    from dataclasses import replace
    from datetime import UTC, datetime

    before = replace(state("failed", "failed", result="signal"), started_at=datetime(2026, 1, 1, tzinfo=UTC))
    same = replace(before)
    assert start_failure(same, 0, seen_running=False, before=before) == ""
    newer = replace(before, result="exit-code", started_at=datetime(2026, 1, 2, tzinfo=UTC))
    assert "failed (result: exit-code)" in start_failure(newer, 0, before=before)
