"""The CLI, run as `python -m tests.support.taskdump ARGS...`: opsconsole's own main, plus SIGUSR1 printing the
stack of every asyncio task to stderr. A test that gives up waiting on the CLI sends it first, so that a hang says
where it hung (Python's faulthandler shows threads only, and every task waits in the same selector call)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from types import FrameType


def _dump(signum: int, frame: FrameType | None) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        print("taskdump: no event loop is running", file=sys.stderr, flush=True)
        return
    tasks = asyncio.all_tasks(loop)
    # How SIGINT would be taken now (a Ctrl-C that changed nothing: ignored, blocked, pending, or whose handler)
    status = Path("/proc/self/status").read_text().splitlines()
    fields = ("SigPnd", "ShdPnd", "SigBlk", "SigIgn")
    masks = " ".join(line.replace("\t", "") for line in status if line.startswith(fields))
    print(f"taskdump: SIGINT handler {signal.getsignal(signal.SIGINT)!r}; {masks}", file=sys.stderr)
    print(f"taskdump: {len(tasks)} tasks", file=sys.stderr)
    for task in tasks:
        print(f"--- {task!r}", file=sys.stderr)
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _dump)
    from console.cli import main

    sys.argv[0] = "opsconsole"
    sys.exit(main())
