"""When a service state means the start has failed (pure)."""

from __future__ import annotations

from console.core.rollout import start_failure
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

    from console.core.rollout import is_new_start

    old = replace(state("active", "running"), main_pid=100, started_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert not is_new_start(old, old)
    assert is_new_start(old, replace(old, main_pid=101))
    assert is_new_start(old, replace(old, started_at=datetime(2026, 1, 2, tzinfo=UTC)))
    assert not is_new_start(old, replace(old, main_pid=None, started_at=None))
    stopped = replace(old, main_pid=None, started_at=None)
    assert is_new_start(stopped, old)
