"""The running test's own pytest timeout, so that a wait inside a test ends before it and can say what it waited on.

pytest-timeout's timer (`timeout` in pyproject.toml, or a test's `timeout` mark: tests/tiers.py derives one from
`long(N)`) covers the test's setup, call and teardown, and when it fires it prints only stacks. A wait that expires
first can say what helps: a CLI's stderr so far, the audit log (tests/support/cli_run.py). So a wait asks
`inner_timeout(wanted)`: `wanted`, cut where the test's own time would run out first.

tests/conftest.py starts and stops the budget with pytest-timeout's own timer (its set_timer/cancel_timer hooks).
Outside a pytest run (a benchmark using the helpers) there is no budget and `wanted` is returned as it is.
"""

from __future__ import annotations

import time

# Left for what follows an inner wait that expired: its report (reading a log, killing the CLI), the teardown of the
# test's fixtures (a testbed host put back on its original unit is a restart: 5-20 s), and pytest's own report.
RESERVE_S = 30.0
# However little is left, a wait gets this long: it then fails with its report rather than at once.
MIN_WAIT_S = 1.0

_deadline: float | None = None
_timeout_s: float | None = None


def start(timeout_s: float | None) -> None:
    """The running test's timer has started (None or 0: no timeout)."""
    global _deadline, _timeout_s
    _timeout_s = timeout_s if timeout_s and timeout_s > 0 else None
    _deadline = time.monotonic() + _timeout_s if _timeout_s is not None else None


def stop() -> None:
    global _deadline, _timeout_s
    _deadline = _timeout_s = None


def inner_timeout(wanted_s: float) -> float:
    """`wanted_s`, or less: so much that the wait ends RESERVE_S before the running test's pytest timeout."""
    if _deadline is None:
        return wanted_s
    return max(MIN_WAIT_S, min(wanted_s, _deadline - time.monotonic() - RESERVE_S))


def describe() -> str:
    """The running test's timeout and how much of it is gone, for a wait's report."""
    if _deadline is None or _timeout_s is None:
        return "no pytest timeout"
    gone = _timeout_s - (_deadline - time.monotonic())
    return f"the test's pytest timeout {_timeout_s:.0f} s, {gone:.0f} s of it gone"
