"""The host's command shell: one long-lived `sh` on an SSH channel running the console's commands, a round trip each.

A command on a fresh SSH channel costs two round trips before its output comes back (CHANNEL_OPEN, then the
exec request) and some CPU on both ends to set the channel up and tear it down. On a link with a 300 ms round
trip that is most of what a refresh or an apply costs. So the SSH transport keeps a small pool of these shells
per connection (console.host.ssh) and runs short commands through them: a request is one line out, the answer
one line back.

The protocol (pure, below): a request is `ID COMMAND INPUT`, COMMAND the command line (as `shell_command`
quotes it) and INPUT its stdin, both base64, `-` for no input; the answer is `ID STATUS STDOUT STDERR`, both
outputs base64 and `-` when empty. `ping TOKEN` is answered at once with `ping TOKEN` by the shell itself (no
process started): the link's own round trip. The shell keeps its temporary files in a private directory that it
removes when it ends; it ends when its stdin does (the console closed the channel, went away, or the connection
dropped and sshd closed the session), so nothing of it outlives the console's connection.

It needs only POSIX sh and base64 (coreutils or busybox); the first line it prints says it is ready, so a host
without base64 is noticed at once and its commands go on separate channels instead.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import asyncssh

from console.host.linkmeter import PING, SHELL, Exchange, LinkMeter

READY = b"opsconsole-shell ready"
# Runs under `sh -c`. `read -r` takes one request line; each command runs in its own `sh` with its own stdin, so
# a command can neither read the next request nor change the shell's state. The temp dir is private (mktemp -d:
# mode 700), removed on every way out but SIGKILL (EOF on stdin, SIGHUP, SIGTERM), and in the user's runtime dir
# where there is one (systemd-logind removes that when the user's last session ends).
SHELL_SCRIPT = r"""[ "$(printf 'b2s=' | base64 -d 2>/dev/null)" = ok ] || { echo 'no working base64' >&2; exit 69; }
d=$(mktemp -d "${XDG_RUNTIME_DIR:-${TMPDIR:-/tmp}}/opsconsole-shell.XXXXXX") || exit 70
trap 'rm -rf "$d"' EXIT
trap 'exit 129' HUP
trap 'exit 143' TERM
echo 'opsconsole-shell ready'
while IFS=' ' read -r id cmd inp; do
  if [ "$id" = ping ]; then echo "ping $cmd"; continue; fi
  if ! printf '%s' "$cmd" | base64 -d > "$d/c" 2>/dev/null; then echo "$id 125 - -"; continue; fi
  if [ "$inp" = - ]; then
    sh "$d/c" < /dev/null > "$d/o" 2> "$d/e"
  else
    printf '%s' "$inp" | base64 -d 2>/dev/null | sh "$d/c" > "$d/o" 2> "$d/e"
  fi
  rc=$?
  printf '%s %s ' "$id" "$rc"
  if [ -s "$d/o" ]; then base64 -w0 < "$d/o"; else printf -; fi
  printf ' '
  if [ -s "$d/e" ]; then base64 -w0 < "$d/e"; else printf -; fi
  echo
done"""


class ShellClosed(Exception):
    """The shell's channel closed before the answer came (the command's effect on the host is unknown)."""


@dataclass(frozen=True)
class ShellAnswer:
    exit_status: int
    stdout: bytes
    stderr: bytes


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii") if data else "-"


def _unb64(text: bytes) -> bytes:
    return b"" if text == b"-" else base64.b64decode(text, validate=True)


def encode_request(request_id: str, command: str, input: bytes | None) -> bytes:
    """One request line. Pure."""
    if not request_id.isalnum():
        raise ValueError(f"request id must be alphanumeric: {request_id!r}")
    return f"{request_id} {_b64(command.encode())} {_b64(input or b'')}\n".encode()


def parse_answer(line: bytes) -> tuple[str, ShellAnswer] | None:
    """`ID STATUS STDOUT STDERR` -> (ID, answer); None for a line that is not an answer. Pure."""
    parts = line.split(b" ")
    if len(parts) != 4 or not parts[1].lstrip(b"-").isdigit():
        return None
    try:
        return parts[0].decode("ascii"), ShellAnswer(int(parts[1]), _unb64(parts[2]), _unb64(parts[3]))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


class CommandShell(asyncssh.SSHClientSession[bytes]):
    """The client side of one command shell: requests out, answers matched back to their callers.

    One command at a time: the pool (console.host.ssh) hands a shell only to one caller, so that a command
    that hangs can be dealt with by closing its shell without taking anyone else's command with it."""

    def __init__(self, meter: LinkMeter, on_started: Callable[[], None] | None = None) -> None:
        self._meter = meter
        self._on_started = on_started
        self._chan: asyncssh.SSHClientChannel[bytes] | None = None
        self._buffer = b""
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting: dict[str, tuple[asyncio.Future[ShellAnswer], Exchange]] = {}
        self._pings: dict[str, tuple[asyncio.Future[float], float, Exchange]] = {}
        self._ids = itertools.count(1)
        self._stderr = b""
        self.closed = False
        self.busy = False

    # -- asyncssh callbacks ---------------------------------------------------------------------------

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self._chan = chan

    def session_started(self) -> None:
        if self._on_started is not None:
            self._on_started()

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            self._stderr = (self._stderr + data)[-2000:]
            return
        if b"\n" not in data:  # a long answer (a journal backlog) arrives in many pieces: scan only the new one
            self._buffer += data
            return
        lines = (self._buffer + data).split(b"\n")
        self._buffer = lines.pop()
        for line in lines:
            self._line(line)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        why = ShellClosed(str(exc) if exc else "the command shell's channel closed")
        if not self._ready.done():
            detail = self._stderr.decode("utf-8", "replace").strip()
            self._ready.set_exception(ShellClosed(detail or str(why)))
        for future, exchange in self._waiting.values():
            self._meter.end(exchange)
            if not future.done():
                future.set_exception(why)
        for ping, _sent, exchange in self._pings.values():
            self._meter.end(exchange)
            if not ping.done():
                ping.set_exception(why)
        self._waiting.clear()
        self._pings.clear()

    def _line(self, line: bytes) -> None:
        if not self._ready.done():
            if line == READY:
                self._ready.set_result(None)
            return
        if line.startswith(b"ping "):
            token = line[5:].decode("ascii", "replace")
            entry = self._pings.pop(token, None)
            if entry is not None:
                ping, sent, exchange = entry
                self._meter.end(exchange)
                if not ping.done():
                    ping.set_result(asyncio.get_running_loop().time() - sent)
            return
        parsed = parse_answer(line)
        if parsed is None:
            return
        request_id, answer = parsed
        waiting = self._waiting.pop(request_id, None)
        if waiting is not None:
            future, exchange = waiting
            self._meter.end(exchange)
            if not future.done():
                future.set_result(answer)

    # -- use ------------------------------------------------------------------------------------------

    async def wait_ready(self) -> None:
        await self._ready

    async def run(self, command: str, input: bytes | None = None) -> ShellAnswer:
        """Run one command line; raises ShellClosed when the channel closes first. The caller bounds the wait
        (and closes the shell when it gives up: the command may still be running on the host)."""
        if self.closed or self._chan is None:
            raise ShellClosed("the command shell is closed")
        request_id = f"r{next(self._ids)}"
        future: asyncio.Future[ShellAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (future, self._meter.begin(SHELL))
        self._chan.write(encode_request(request_id, command, input))
        return await future

    async def ping(self) -> float:
        """The link's round trip in seconds: answered by the shell's own loop, without starting a process (so
        only on a shell that is not running a command: the loop reads the next line when a command ends)."""
        if self.closed or self._chan is None:
            raise ShellClosed("the command shell is closed")
        token = f"p{next(self._ids)}"
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._pings[token] = (future, asyncio.get_running_loop().time(), self._meter.begin(PING))
        self._chan.write(f"ping {token}\n".encode())
        return await future

    def close(self) -> None:
        self.closed = True
        if self._chan is not None:
            self._chan.close()
