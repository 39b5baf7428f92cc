"""Running the machine's own tools for the testbed, and waiting for conditions with a deadline."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from tests.support.budget import inner_timeout

T = TypeVar("T")


class TestbedError(Exception):
    """The testbed could not be built, booted or torn down; the message says what failed and what to check."""

    __test__ = False  # not a test class, though its name starts with "Test"


class CommandTimedOut(TestbedError):
    """A command inside a host ran past its timeout and was killed; carries what it printed until then."""

    def __init__(self, message: str, stdout: str, stderr: str) -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


def run(
    argv: Sequence[str],
    *,
    timeout: float = 60,
    what: str | None = None,
    check: bool = True,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a tool of this machine; on failure raise TestbedError with its stderr (check=False: just return)."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(f"{what or argv[0]}: no answer after {timeout:.0f} s ({' '.join(argv)})") from exc
    if check and done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip())[-2000:]
        raise TestbedError(f"{what or argv[0]} failed (exit {done.returncode}): {' '.join(argv)}\n{detail}")
    return done


def poll_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
    explain: Callable[[], str] | None = None,
) -> T:
    """Call probe until it returns something other than None/False; TestbedError after timeout seconds (or sooner,
    where the running test's own pytest timeout would fire first: tests/support/budget.py).

    explain() is asked for extra detail (a log tail, the last state seen) only when the wait fails.
    """
    timeout = inner_timeout(timeout)
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() >= deadline:
            detail = f"\n{explain()}" if explain else ""
            raise TestbedError(f"timed out after {timeout:.1f} s waiting for {what}{detail}")
        time.sleep(interval)
