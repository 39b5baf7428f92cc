"""A supervisor that dies leaves no unit process behind: each safety on its own, with real processes.

- the guard (console/sim/guard.py) stops every group it was told about once its stdin closes: SIGTERM to the
  whole group (grandchildren too), SIGKILL after the unit's TimeoutStopSec;
- the kernel's parent-death signal ends the unit's main process even when the guard is gone too;
- a unit whose main process exits on its own takes the rest of its group with it (KillMode=control-group).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.sim.guard import read_groups, stop_groups
from console.sim.supervisor import UnitSupervisor
from tests.support.procs import alive, children_of

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 20.0

# The supervisor in a process of its own (as in `opsconsole demo`): starts the unit, says who is who, waits.
HOST = """
import asyncio, sys
from pathlib import Path
from console.sim.supervisor import UnitSupervisor
from tests.support.procs import alive, children_of

async def main():
    sup = UnitSupervisor("t.service", Path(sys.argv[1]), Path(sys.argv[2]))
    sup.daemon_reload()
    await sup.start()
    while not any("service up" in e.message for e in sup.entries(1000, None)):
        await sup.wait_for_entries(sup.last_seq, 1.0)
    print("READY", sup._guard.pid, sup.process.pid, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""

# The unit's service: a grandchild in its group, then (optionally) deaf to SIGTERM.
SERVICE = """
import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("child", child.pid, flush=True)
if sys.argv[1] == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("service up", flush=True)
time.sleep(600)
"""


def wait_gone(pids: list[int], deadline_s: float = DEADLINE_S) -> float:
    """Seconds until none of `pids` runs (fails after the deadline)."""
    started = time.monotonic()
    while any(alive(pid) for pid in pids):
        assert time.monotonic() - started < deadline_s, f"still running: {[p for p in pids if alive(p)]}"
        time.sleep(0.02)
    return time.monotonic() - started


@pytest.fixture
def reap() -> Iterator[list[int]]:
    """PIDs a failing test must not leave running; killed (by PID) at the end."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def start_host(tmp_path: Path, mode: str, timeout_stop: str) -> tuple[subprocess.Popen[str], int, int, int]:
    """The supervisor process, its guard, the unit's main process and that one's child."""
    script = tmp_path / "service.py"
    script.write_text(SERVICE)
    unit = tmp_path / "t.service"
    unit.write_text(f"[Service]\nExecStart={sys.executable} -u {script} {mode}\nTimeoutStopSec={timeout_stop}\n")
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(unit), str(tmp_path / "backups")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert host.stdout is not None
    ready, _, _ = select.select([host.stdout], [], [], DEADLINE_S)
    assert ready, "the supervisor did not start its unit"
    words = host.stdout.readline().split()
    assert words[:1] == ["READY"], words
    guard, main = int(words[1]), int(words[2])
    grandchildren = children_of(main)
    assert len(grandchildren) == 1
    return host, guard, main, grandchildren[0]


def kill_host(host: subprocess.Popen[str]) -> None:
    os.kill(host.pid, signal.SIGKILL)
    host.wait()
    assert host.stdout is not None
    host.stdout.close()


@pytest.mark.system
def test_a_killed_supervisor_leaves_nothing_of_its_unit(tmp_path: Path, reap: list[int]) -> None:
    host, guard, main, grandchild = start_host(tmp_path, "polite", "30")
    reap += [host.pid, guard, main, grandchild]
    kill_host(host)
    wait_gone([main, grandchild, guard])


@pytest.mark.system
def test_the_guard_kills_a_unit_deaf_to_sigterm_after_its_stop_timeout(tmp_path: Path, reap: list[int]) -> None:
    host, guard, main, grandchild = start_host(tmp_path, "deaf", "1.5")
    reap += [host.pid, guard, main, grandchild]
    kill_host(host)
    took = wait_gone([main, guard])
    assert took >= 1.4  # SIGTERM was ignored: SIGKILL came with TimeoutStopSec, not before
    wait_gone([grandchild])


@pytest.mark.system
def test_without_its_guard_the_units_main_process_still_ends_with_the_supervisor(
    tmp_path: Path, reap: list[int]
) -> None:
    host, guard, main, grandchild = start_host(tmp_path, "polite", "30")
    reap += [host.pid, guard, main, grandchild]
    os.kill(guard, signal.SIGKILL)  # the first safety gone ...
    wait_gone([guard])
    kill_host(host)  # ... the kernel's parent-death signal still ends the main process
    wait_gone([main])


@pytest.mark.system
async def test_a_unit_that_exits_takes_the_rest_of_its_group_along(tmp_path: Path, reap: list[int]) -> None:
    child_pid = tmp_path / "child.pid"
    unit = tmp_path / "t.service"
    unit.write_text(f"[Service]\nExecStart=/bin/sh -c 'sleep 600 & echo $$! > {child_pid}; exit 3'\nTimeoutStopSec=5\n")
    sup = UnitSupervisor("t.service", unit, tmp_path / "backups")
    sup.daemon_reload()
    try:
        await sup.start()
        await wait_for(lambda: sup.active_state == "failed", lambda: [e.message for e in sup.entries(100, None)])
        assert child_pid.exists()
        reap.append(int(child_pid.read_text()))
        wait_gone([int(child_pid.read_text())])
    finally:
        await sup.close()


async def wait_for(condition: Callable[[], bool], explain: Callable[[], object]) -> None:
    import asyncio

    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, explain()
        await asyncio.sleep(0.02)


@pytest.mark.system
def test_close_ends_the_guard(tmp_path: Path) -> None:
    import asyncio

    unit = tmp_path / "t.service"
    unit.write_text("[Service]\nExecStart=/bin/sleep 600\n")

    async def run() -> int:
        sup = UnitSupervisor("t.service", unit, tmp_path / "backups")
        sup.daemon_reload()
        await sup.start()
        assert sup._guard is not None
        guard = sup._guard.pid
        await sup.close()
        return guard

    guard = asyncio.run(run())
    wait_gone([guard])


# ---- the guard's parts -------------------------------------------------------------------------------------


def test_the_guard_forgets_groups_that_are_gone_and_skips_garbage() -> None:
    lines = ["start 100 30\n", "start 200 inf\n", "gone 100\n", "nonsense\n", "start x 1\n", "gone\n"]
    assert read_groups(lines) == {200: float("inf")}


@pytest.mark.system
def test_stop_groups_terminates_then_kills(reap: list[int]) -> None:
    polite = subprocess.Popen(["sleep", "600"], start_new_session=True)
    deaf = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(600)",
        ],
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    reap += [polite.pid, deaf.pid]
    assert deaf.stdout is not None and deaf.stdout.readline()  # its handler is in place
    started = time.monotonic()
    stop_groups({polite.pid: 30.0, deaf.pid: 0.5})
    assert 0.5 <= time.monotonic() - started < 10
    assert polite.wait(5) == -signal.SIGTERM and deaf.wait(5) == -signal.SIGKILL
    deaf.stdout.close()
