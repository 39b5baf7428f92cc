"""The loopback sshd's test user (tests/host/sshd_lab.py) across pytest sessions on one machine.

Two sessions (two checkouts, CI beside a developer) both have a worker gw0; a lab's teardown ends every process of
its user, so the user must be the session's own. And a session that crashed before its teardown must not leave its
user behind for good.
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.host.sshd_lab import TEST_USER, USER_PREFIX, ClientSide, sshd_lab
from tests.support.procs import alive

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[2]

# Another session's worker of the same name: a lab opened and closed, as its session fixture does.
OTHER_SESSION = "from tests.host.sshd_lab import sshd_lab\nwith sshd_lab():\n    pass\n"

# A session that crashes with its lab open: a process of its test user running, then SIGKILL, no teardown.
CRASHING_SESSION = """
import os, signal, subprocess, sys
from tests.host.sshd_lab import TEST_USER, sshd_lab
with sshd_lab() as server:
    left = subprocess.Popen(["sleep", "600"], user=TEST_USER, start_new_session=True)
    print(TEST_USER, left.pid, server.process.pid, server.root, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _same_worker_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.setdefault("PYTEST_XDIST_WORKER", "main")  # sshd_lab's own default: the name this process has
    return env


def _wait_for(condition: Callable[[], object], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def test_the_user_fits_useradd_and_names_this_process() -> None:
    assert TEST_USER.startswith(USER_PREFIX) and TEST_USER.endswith(f"-{os.getpid()}")
    assert len(f"{USER_PREFIX}gw127-{2**22}") <= 32  # useradd's limit, with the largest worker and PID


def test_another_sessions_lab_of_the_same_worker_leaves_this_sessions_ssh_sessions_alone(client: ClientSide) -> None:
    session = subprocess.Popen(
        ["ssh", "-F", str(client.config), "-o", "BatchMode=yes", client.alias, "sleep 120"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        uid = pwd.getpwnam(TEST_USER).pw_uid

        def remote_sleep() -> list[Path]:
            return [
                p for p in Path("/proc").iterdir() if p.name.isdigit() and _owned_by(p, uid) and b"sleep" in _cmdline(p)
            ]

        assert _wait_for(remote_sleep, 30), "the SSH session's command never started"
        other = subprocess.run(
            [sys.executable, "-c", OTHER_SESSION], env=_same_worker_env(), capture_output=True, text=True, timeout=120
        )
        assert other.returncode == 0, other.stderr
        assert session.poll() is None, (
            f"the other session's teardown ended this one's SSH session: {session.communicate()[1]!r}"
        )
        assert remote_sleep(), "the other session's teardown killed this session's remote command"
    finally:
        session.kill()
        session.wait()


def test_a_crashed_sessions_user_and_its_processes_go_with_the_next_lab(tmp_path: Path) -> None:
    # Its output to a file: what it leaves running holds the descriptors it had, and a pipe would never end.
    with (tmp_path / "out").open("w+") as out:
        crashed = subprocess.run(
            [sys.executable, "-c", CRASHING_SESSION], env=_same_worker_env(), stdout=out, stderr=out, timeout=120
        )
        out.seek(0)
        said = out.read()
    assert crashed.returncode == -signal.SIGKILL, said
    user, pid, listener, root = said.split()
    left = [int(pid), int(listener)]
    try:
        assert _user_exists(user) and all(map(alive, left)), "the crash left nothing behind: the test proves nothing"
        with sshd_lab():
            pass
        assert not _user_exists(user), f"{user} of the crashed session is still there"
        assert _wait_for(lambda: not any(map(alive, left)), 10), f"{user}'s process or its sshd still runs"
        assert not Path(root).exists(), f"the crashed lab's {root} is still there"
    finally:  # whatever the lab left, so that a failure here leaves nothing behind either
        for process in filter(alive, left):
            os.kill(process, signal.SIGKILL)
        subprocess.run(["userdel", "-r", user], check=False, capture_output=True)
        subprocess.run(["rm", "-rf", root], check=False)


def _owned_by(proc: Path, uid: int) -> bool:
    try:
        return proc.stat().st_uid == uid
    except OSError:
        return False


def _cmdline(proc: Path) -> bytes:
    try:
        return proc.joinpath("cmdline").read_bytes()
    except OSError:
        return b""
