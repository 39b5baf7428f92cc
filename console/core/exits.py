"""How the service's main process ended, and which journal lines belong to it (pure: no I/O).

SGLang 0.5.17 ends a graceful stop by SIGKILLing its own process tree, itself included (`kill_process_tree(...,
include_parent=True)` after the drain): the main process dies of SIGKILL 4-6 s after the SIGTERM. systemd does not
count SIGKILL as a clean exit (only SIGHUP, SIGINT, SIGTERM and SIGPIPE are), so `systemctl stop` leaves such a unit
`failed` with Result=signal, ExecMainCode=2 (CLD_KILLED), ExecMainStatus=9 until the next start. That is a stop
that went as SGLang intends, not a crash and not a failed start:

- `stopped_by_own_sigkill()` tells it apart from a crash: systemd left the active state (the stop began) before
  the main process exited. A process that dies on its own exits first and the unit leaves `active` after.
- `describe()` is the one-line account `status` shows ("stopped (SGLang exits by SIGKILL on stop)").
- `entered_inactive_since()` says whether a `failed`/`inactive` state is new since `before` (judging a restart by
  the new process, not by the state the old one left behind).
- `OldProcessLines` picks out, at the head of a restart's journal, the lines of the old process's stop (its own
  shutdown lines and systemd's "Main process exited, code=killed, status=9/KILL", "Failed with result 'signal'"),
  so that they are not taken for the new start failing.

SGLang 0.5.23 exits 0 instead (its source: `include_parent=False`, then `sys.exit(0)`); nothing here assumes either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.host.base import ServiceState

# What `systemctl show` must be asked for besides the basics (console.host.systemd.SHOW_PROPERTIES).
EXIT_PROPERTIES = (
    "ExecMainCode",
    "ExecMainStatus",
    "ExecMainExitTimestampMonotonic",
    "ActiveExitTimestampMonotonic",
    "InactiveEnterTimestampMonotonic",
)
# siginfo's si_code for the main process, as systemd prints ExecMainCode: CLD_EXITED, CLD_KILLED, CLD_DUMPED.
_CODES = {"1": "exited", "2": "killed", "3": "dumped"}
SIGKILL = 9
STOPPED_BY_SIGKILL = "stopped (SGLang exits by SIGKILL on stop)"


@dataclass(frozen=True)
class MainExit:
    """The main process's end as systemd recorded it: code exited|killed|dumped, status = exit status or signal."""

    code: str
    status: int

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "status": self.status}


def main_exit(state: ServiceState) -> MainExit | None:
    """How the last main process ended; None while it runs or when systemd has no record (never started)."""
    props = state.properties
    code = _CODES.get(props.get("ExecMainCode", ""))
    status = _int(props.get("ExecMainStatus"))
    if code is None or status is None or state.main_pid is not None:
        return None
    return MainExit(code, status)


def stopped_by_own_sigkill(state: ServiceState) -> bool:
    """The unit is `failed` only because a stop ended the way SGLang ends it: its main process SIGKILLed itself
    after the stop began (systemd left `active` before the process exited)."""
    ended = main_exit(state)
    if state.active_state != "failed" or state.result != "signal" or ended is None:
        return False
    if (ended.code, ended.status) != ("killed", SIGKILL):
        return False
    left_active = _int(state.properties.get("ActiveExitTimestampMonotonic"))
    exited = _int(state.properties.get("ExecMainExitTimestampMonotonic"))
    return bool(left_active and exited and left_active < exited)


def describe(state: ServiceState) -> str:
    """One line for a person: what the service is doing, or how it ended."""
    if stopped_by_own_sigkill(state):
        return STOPPED_BY_SIGKILL
    if state.running:
        return f"{state.active_state} ({state.sub_state})"
    ended = main_exit(state)
    how = ""
    if ended is not None and ended.code == "exited":
        how = f", exit status {ended.status}"
    elif ended is not None:
        how = f", {ended.code} by signal {ended.status}"
    if state.active_state == "failed":
        return f"failed (result: {state.result}{how})"
    return f"{state.active_state}{f' (last exit: {how[2:]})' if how else ''}"


def exit_json(state: ServiceState) -> dict[str, object]:
    """The status keys `last_exit` and `summary`."""
    ended = main_exit(state)
    return {"last_exit": ended.to_json() if ended else None, "summary": describe(state)}


def entered_inactive_since(before: ServiceState, now: ServiceState) -> bool:
    """Whether the unit went inactive/failed after `before` was read (rather than still being so from before).

    InactiveEnterTimestampMonotonic moves every time the unit enters inactive or failed; where it is not reported,
    a new main process (PID or start time) is the sign that something happened since."""
    then, later = (s.properties.get("InactiveEnterTimestampMonotonic") for s in (before, now))
    if then is not None and later is not None:
        return then != later
    if now.main_pid is not None and now.main_pid != before.main_pid:
        return True
    return now.started_at is not None and now.started_at != before.started_at


# systemd's own lines (PID 1) about a unit being stopped, in every wording since systemd 240.
_STOP_LINE = re.compile(
    r"^Stopping |: Main process exited, |: Failed with result '|^Stopped |: Consumed .* CPU time|"
    r": Deactivated successfully|: State '[\w-]+' timed out|: Killing process |: Unit process \d+ remains|"
    r": Succeeded\.$"
)
_START_LINE = re.compile(r"^Start(?:ing|ed) ")
_SYSTEMD_PID = 1


@dataclass
class OldProcessLines:
    """Reads a restart's journal from its start and says which lines are the old process's stop.

    Those come first: the old main process's own shutdown lines (its PID), then systemd's lines about its exit.
    The stop is over at systemd's "Starting"/"Started" line or at the first line of another process."""

    old_pid: int | None
    over: bool = False

    def is_old(self, message: str, pid: int | None) -> bool:
        if self.over:
            return False
        if self.old_pid is not None and pid == self.old_pid:
            return True
        if pid is not None and pid != _SYSTEMD_PID:
            self.over = True  # the new process speaks
            return False
        if _START_LINE.search(message):
            self.over = True
            return False
        return bool(_STOP_LINE.search(message))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None
