"""Where one apply (or restart) stands (pure): its states, the transitions allowed between them, and its start judged
from the service state systemd reports.

`Rollout` is the apply's state machine, every step recorded with its time; an illegal transition is a programming
error. `start_failure()` and `is_new_start()` judge a (re)start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from console.errors import ExitCode

if TYPE_CHECKING:
    from console.host.base import ServiceState


def is_new_start(before: ServiceState, now: ServiceState) -> bool:
    """Whether `now` describes a different process than `before` (a restart took place)."""
    if now.main_pid is not None and now.main_pid != before.main_pid:
        return True
    return now.started_at is not None and now.started_at != before.started_at


def start_failure(
    state: ServiceState, baseline_restarts: int, *, seen_running: bool = True, before: ServiceState | None = None
) -> str:
    """Why this state means the start failed, or "" while it may still come up.

    `inactive` right after a restart can be the moment before the new process is spawned, so it counts only
    once the service has been seen running since the restart (seen_running). With `before` (the state read
    before the restart) a `failed`/`inactive` state counts only when the unit entered it after the restart:
    a stop that ended in SGLang's own SIGKILL leaves the unit `failed` (Result=signal), and that is the old
    process's end, not the new one's."""
    from console.core.exits import describe, entered_inactive_since

    stale = state.active_state in ("failed", "inactive") and before is not None
    if stale and before is not None and not entered_inactive_since(before, state):
        if not seen_running:
            return ""
        return f"the service did not start again: it is still {describe(state)} from before the restart"
    if state.active_state == "failed":
        return f"the service failed (result: {state.result})"
    if state.sub_state == "auto-restart" or state.n_restarts > baseline_restarts:
        return f"the service is restarting in a loop (NRestarts {state.n_restarts}, result: {state.result})"
    if state.active_state == "inactive" and seen_running:
        return f"the service stopped (result: {state.result})"
    return ""


class ApplyState(StrEnum):
    VALIDATED = "validated"
    REFUSED = "refused"  # the rules found errors: nothing touched
    UNCHANGED = "unchanged"  # the edit changes nothing: nothing touched
    ABORTED = "aborted"  # the operator said no: nothing touched
    BACKED_UP = "backed_up"
    WRITTEN = "written"
    DAEMON_RELOADED = "daemon_reloaded"
    RESTARTING = "restarting"
    STARTING = "starting"  # the new process runs; phases follow
    HEALTHY = "healthy"
    VERIFIED = "verified"
    MISMATCH = "mismatch"  # healthy, but /server_info differs from what the rules predicted: kept, reported
    FAILED = "failed"  # the new unit did not come up: roll back
    ROLLING_BACK = "rolling_back"
    RESTORED = "restored"
    HEALTHY_ON_OLD = "healthy_on_old"
    ROLLBACK_FAILED = "rollback_failed"
    WRITE_FAILED = "write_failed"  # the unit could not be written; the old one is still in place
    RESTART_FAILED = "restart_failed"  # a restart without edits did not come up (nothing to roll back to)


_S = ApplyState
TRANSITIONS: dict[ApplyState, frozenset[ApplyState]] = {
    _S.VALIDATED: frozenset({_S.REFUSED, _S.UNCHANGED, _S.ABORTED, _S.BACKED_UP, _S.WRITE_FAILED}),
    _S.BACKED_UP: frozenset({_S.WRITTEN, _S.WRITE_FAILED}),
    _S.WRITTEN: frozenset({_S.DAEMON_RELOADED, _S.FAILED}),
    _S.DAEMON_RELOADED: frozenset({_S.RESTARTING, _S.FAILED}),
    _S.RESTARTING: frozenset({_S.STARTING, _S.FAILED}),
    _S.STARTING: frozenset({_S.HEALTHY, _S.FAILED}),
    _S.HEALTHY: frozenset({_S.VERIFIED, _S.MISMATCH, _S.FAILED}),
    _S.FAILED: frozenset({_S.ROLLING_BACK}),
    _S.ROLLING_BACK: frozenset({_S.RESTORED, _S.ROLLBACK_FAILED}),
    _S.RESTORED: frozenset({_S.HEALTHY_ON_OLD, _S.ROLLBACK_FAILED}),
}
# A restart without edits: nothing is written, so a failed start has nothing to roll back to.
RESTART_TRANSITIONS: dict[ApplyState, frozenset[ApplyState]] = {
    _S.VALIDATED: frozenset({_S.RESTARTING, _S.ABORTED}),
    _S.RESTARTING: frozenset({_S.STARTING, _S.RESTART_FAILED}),
    _S.STARTING: frozenset({_S.HEALTHY, _S.RESTART_FAILED}),
    _S.HEALTHY: frozenset({_S.VERIFIED, _S.MISMATCH, _S.RESTART_FAILED}),
}
TERMINAL = frozenset(
    {
        _S.REFUSED,
        _S.UNCHANGED,
        _S.ABORTED,
        _S.VERIFIED,
        _S.MISMATCH,
        _S.HEALTHY_ON_OLD,
        _S.ROLLBACK_FAILED,
        _S.WRITE_FAILED,
        _S.RESTART_FAILED,
    }
)
SUCCESS = frozenset({_S.VERIFIED, _S.UNCHANGED})


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True)
class Transition:
    state: ApplyState
    at: datetime
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"state": self.state.value, "at": self.at.isoformat(), "detail": self.detail}


@dataclass
class Rollout:
    """Where one apply stands; every step is recorded with its time."""

    history: list[Transition] = field(default_factory=list)
    restart_only: bool = False  # a restart without edits (RESTART_TRANSITIONS)

    @classmethod
    def start(cls, at: datetime, *, restart_only: bool = False) -> Rollout:
        return cls([Transition(ApplyState.VALIDATED, at)], restart_only)

    @property
    def state(self) -> ApplyState:
        return self.history[-1].state

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    @property
    def ok(self) -> bool:
        return self.state in SUCCESS

    @property
    def rolled_back(self) -> bool:
        return any(t.state is ApplyState.RESTORED for t in self.history)

    @property
    def touched_host(self) -> bool:
        return any(t.state is ApplyState.BACKED_UP for t in self.history)

    def advance(self, state: ApplyState, at: datetime, detail: str = "") -> Transition:
        table = RESTART_TRANSITIONS if self.restart_only else TRANSITIONS
        if state not in table.get(self.state, frozenset()):
            raise IllegalTransition(f"apply cannot go from {self.state.value} to {state.value}")
        transition = Transition(state, at, detail)
        self.history.append(transition)
        return transition

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.ok else ExitCode.FAILED
