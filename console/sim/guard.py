"""The demo supervisor's guard: stops the unit's processes when the supervisor's process dies, however it dies.

    python -m console.sim.guard        (started by UnitSupervisor; reads its instructions on stdin)

A supervisor that is stopped (Ctrl-C, SIGTERM, SIGHUP) stops its unit itself. One that is killed outright
(SIGKILL, the OOM killer, a crash) cannot, and its service would run on as an orphan holding its port. So the
supervisor starts this small process in a session of its own, keeps the only write end of its stdin, and tells
it every process group it starts and every one that is gone:

    start PGID TIMEOUT_S      a unit process group started; TimeoutStopSec in seconds (inf: none)
    gone PGID                 that group is stopped (its number may now be reused: never signal it again)

When stdin reaches end of file (the supervisor closed it, or the kernel did because the supervisor died) the
guard stops each group still listed the way systemd stops a unit (SIGTERM to the whole group, SIGKILL after
TIMEOUT_S) and exits. Terminal signals do not stop it (a closed terminal must not take the guard first), and
standard library only, so it starts fast.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import time
from collections.abc import Iterable

POLL_S = 0.05


def read_groups(lines: Iterable[str]) -> dict[int, float]:
    """The groups still running when the instructions end: pgid -> stop timeout (s). Bad lines are skipped."""
    groups: dict[int, float] = {}
    for line in lines:
        words = line.split()
        try:
            if len(words) == 3 and words[0] == "start":
                groups[int(words[1])] = float(words[2])
            elif len(words) == 2 and words[0] == "gone":
                groups.pop(int(words[1]), None)
        except ValueError:
            continue
    return groups


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. An exited one that its parent has not reaped yet (a zombie)
    does not count: it holds no port and no memory, and the guard cannot reap another's child."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; not ours to judge
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return True  # no /proc: the group exists, that is all we can tell
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        except OSError:
            continue  # exited meanwhile
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_groups(groups: dict[int, float]) -> None:
    """SIGTERM to every group, then SIGKILL to each one still there after its timeout."""
    deadlines: dict[int, float] = {}
    for pgid, timeout_s in groups.items():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
            deadlines[pgid] = time.monotonic() + timeout_s if math.isfinite(timeout_s) else math.inf
    while deadlines:
        now = time.monotonic()
        for pgid, deadline in list(deadlines.items()):
            if not group_alive(pgid):
                del deadlines[pgid]
            elif now >= deadline:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                del deadlines[pgid]
        if deadlines:
            time.sleep(POLL_S)


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
        signal.signal(sig, signal.SIG_IGN)
    stop_groups(read_groups(sys.stdin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
