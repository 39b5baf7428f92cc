"""`opsconsole ... --web` as a real process for tests: started in its own session, its address read from what it
prints, its console processes found among its descendants; and a websocket client that holds a browser tab's
connection without a browser."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from tests.sim.test_demo_leaves_nothing import Proc, descendants, read_until

OPSCONSOLE = [sys.executable, "-m", "console"]
URL_LINE = re.compile(r"The console in a browser(?: \(read-only\))?: (http://\S+)")
START_DEADLINE_S = 90.0
TIME_SCALE = "0.001"  # the simulated start takes about a second


@dataclass
class WebRun:
    proc: subprocess.Popen[bytes]
    url: str
    output: list[str]

    @property
    def origin(self) -> str:
        """http://127.0.0.1:PORT/ (the address without the token)."""
        return self.url.rsplit("/", 2)[0] + "/"

    @property
    def websocket(self) -> str:
        return "ws" + self.url.removeprefix("http") + "ws"

    def consoles(self) -> list[Proc]:
        """The console processes it runs (one per browser connection)."""
        return [p for p in descendants(self.proc.pid) if " connect " in cmdline(p.pid)]

    def read_rest(self) -> str:
        assert self.proc.stdout is not None
        return "".join(self.output) + self.proc.stdout.read().decode("utf-8", "replace")


def cmdline(pid: int) -> str:
    try:
        return " " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() + " "
    except OSError:
        return ""


def demo_web_argv(workspace: Path, *extra: str) -> list[str]:
    return [
        *OPSCONSOLE, "--workspace", str(workspace), "demo", "--web", "--profile", "tiny-test",
        "--time-scale", TIME_SCALE, *extra,
    ]  # fmt: skip


@contextmanager
def serving(argv: list[str]) -> Iterator[WebRun]:
    """Start it; yield once it printed its address; afterwards stop it (SIGINT, then SIGKILL to its session)."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    try:
        output: list[str] = []
        read_until(proc.stdout.fileno(), "Ctrl-C stops the server", START_DEADLINE_S, output)
        found = URL_LINE.search("".join(output))
        assert found, "".join(output)
        yield WebRun(proc, found.group(1), output)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        proc.stdout.close()


async def eventually(condition: Callable[[], bool], deadline_s: float, what: Callable[[], str]) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"after {deadline_s:.0f} s: {what()}"
        await asyncio.sleep(0.05)


async def first_screen(websocket: aiohttp.ClientWebSocketResponse, marker: bytes, deadline_s: float) -> bytes:
    """Read the console's output from a tab's websocket until `marker` shows (the console runs and draws)."""
    seen = b""
    deadline = time.monotonic() + deadline_s
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"the console never drew {marker!r}; it sent {seen[-2000:]!r}"
        message = await websocket.receive(timeout=left)
        assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), message
        if message.type == aiohttp.WSMsgType.BINARY:
            seen += message.data
    return seen
