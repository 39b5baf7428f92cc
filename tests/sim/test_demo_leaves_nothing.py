"""`opsconsole demo` leaves no process behind, however it ends: SIGHUP (the terminal closed: tmux session killed,
SSH dropped), SIGTERM, SIGKILL, or a real terminal hang-up.

Each test starts a real demo in its own session, waits for its ready line, notes the simulator's PID (as
`opsconsole status demo --json` reports it) and every process descended from the console, signals the console's
PID only, and then waits, with a deadline, until each of those processes is gone and the SGLang port is free.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.system  # real processes (tests/tiers.py)

OPSCONSOLE = [sys.executable, "-m", "console"]
READY_LINE = "Ctrl-C stops the demo host."
START_DEADLINE_S = 90.0
GONE_DEADLINE_S = 30.0  # the demo unit's TimeoutStopSec; the stand-in exits on SIGTERM well within it


@dataclass(frozen=True)
class Proc:
    pid: int
    started: str  # /proc/PID/stat starttime: tells a reused PID apart

    def alive(self) -> bool:
        """Running (a zombie waiting to be reaped, or a new process under a reused PID, counts as gone)."""
        stat = _stat(self.pid)
        return stat is not None and stat[2] != "Z" and stat[21] == self.started


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    name_end = text.rindex(")")  # the command name may hold spaces and parentheses
    return [text[: text.index(" ")], text[text.index("(") : name_end + 1], *text[name_end + 2 :].split()]


def descendants(root: int) -> list[Proc]:
    """Every process below `root`, with its start time."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(int(stat[3]), []).append(int(entry.name))
    found: list[Proc] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        stat = _stat(pid)
        if stat is not None:
            found.append(Proc(pid, stat[21]))
            todo += children.get(pid, [])
    return found


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_until(condition: Callable[[], bool], deadline_s: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"after {deadline_s:.0f} s: {what()}"
        time.sleep(0.05)


def read_until(fd: int, marker: str, deadline_s: float, seen: list[str]) -> None:
    """Read the console's output from `fd` until `marker` shows (or fail with what it printed)."""
    deadline = time.monotonic() + deadline_s
    while marker not in "".join(seen):
        left = deadline - time.monotonic()
        assert left > 0, "the demo never said it was ready:\n" + "".join(seen)[-3000:]
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # a pty whose other side closed
                chunk = b""
            assert chunk, "the demo exited before it was ready:\n" + "".join(seen)[-3000:]
            seen.append(chunk.decode("utf-8", "replace"))


@dataclass
class RunningDemo:
    pid: int
    workspace: Path
    port: int
    sim_pid: int
    processes: list[Proc]  # everything below the console, the simulator among them


def inspect(pid: int, workspace: Path) -> RunningDemo:
    profile = tomllib.loads((workspace / "profiles" / "demo.toml").read_text())
    status = subprocess.run(
        [*OPSCONSOLE, "--workspace", str(workspace), "status", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    sim_pid = json.loads(status.stdout)["service"]["main_pid"]
    processes = descendants(pid)
    assert sim_pid in [p.pid for p in processes], (sim_pid, processes)
    assert not port_free(profile["sglang"]["port"])
    return RunningDemo(pid, workspace, profile["sglang"]["port"], sim_pid, processes)


def assert_nothing_left(demo: RunningDemo) -> None:
    wait_until(
        lambda: not any(p.alive() for p in demo.processes),
        GONE_DEADLINE_S,
        lambda: f"still running: {[p.pid for p in demo.processes if p.alive()]} (simulator {demo.sim_pid})",
    )
    wait_until(lambda: port_free(demo.port), GONE_DEADLINE_S, lambda: f"port {demo.port} is still held")


def demo_argv(workspace: Path) -> list[str]:
    return [*OPSCONSOLE, "--workspace", str(workspace), "demo", "--no-ui", "--profile", "tiny-test"]


@pytest.fixture
def leftovers() -> Iterator[list[Proc]]:
    """Processes a failed test must not leave running: killed by PID (if still the same process) at the end."""
    noted: list[Proc] = []
    yield noted
    for proc in noted:
        if proc.alive():
            os.kill(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signalled_demo_leaves_no_process_behind(tmp_path: Path, sig: signal.Signals, leftovers: list[Proc]) -> None:
    console = subprocess.Popen(
        demo_argv(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # like a terminal's job: nothing here reaches it but the signal sent to its PID
    )
    assert console.stdout is not None
    try:
        output: list[str] = []
        read_until(console.stdout.fileno(), READY_LINE, START_DEADLINE_S, output)
        demo = inspect(console.pid, tmp_path)
        leftovers += demo.processes
        os.kill(console.pid, sig)
        code = console.wait(GONE_DEADLINE_S)
        assert_nothing_left(demo)
        rest = console.stdout.read().decode()
        if sig == signal.SIGKILL:
            assert code == -signal.SIGKILL
        else:  # stopped like Ctrl-C: the simulator stopped through the unit, the demo's files removed
            assert code == 0 and "Demo host stopped." in rest, rest
            assert not (tmp_path / "profiles" / "demo.toml").exists()
    finally:
        if console.poll() is None:
            console.kill()
            console.wait()
        console.stdout.close()


def test_closing_the_terminal_leaves_no_process_behind(tmp_path: Path, leftovers: list[Proc]) -> None:
    """The user's case itself: the demo runs on a terminal (a pty it controls) and the terminal goes away."""
    argv = demo_argv(tmp_path)
    pid, terminal = pty.fork()  # the child: a new session whose controlling terminal is the pty
    if pid == 0:  # pragma: no cover - the child only execs
        os.execvp(argv[0], argv)
    try:
        output: list[str] = []
        read_until(terminal, READY_LINE, START_DEADLINE_S, output)
        demo = inspect(pid, tmp_path)
        leftovers += demo.processes
        os.close(terminal)  # the terminal window closes: the kernel hangs up the session (SIGHUP)
        terminal = -1
        deadline = time.monotonic() + GONE_DEADLINE_S
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            assert time.monotonic() < deadline, "the console outlived its terminal"
            time.sleep(0.05)
        pid = 0
        assert_nothing_left(demo)
    finally:
        if terminal >= 0:
            os.close(terminal)
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
