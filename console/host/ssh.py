"""The SSH transport: one long-lived asyncssh connection per host.

- Host keys are always verified against known_hosts (the ssh_config's UserKnownHostsFile or
  ~/.ssh/known_hosts); an unknown or changed key raises HostKeyRefused with the fingerprint.
- Keys come from the agent and IdentityFile, ProxyJump and the rest from ssh_config (asyncssh reads it).
- A channel budget (a semaphore below sshd's MaxSessions, default 10) so that bursts of concurrent
  commands queue instead of failing with "open failed"; a refused session waits for a slot, and where the
  host's MaxSessions is so low that the command shells fill it, an idle shell gives its session up.
- Keepalive; after a drop, a background reconnect with exponential backoff whose progress is
  visible as `state` (connected / reconnecting(attempt, last error)).
- A command whose channel never opened is retried once on a fresh connection; a command that was
  running when the link died raises ConnectionDropped (its effect on the host is unknown).
- Short commands (`run`) go through a small pool of long-lived command shells on the host (console.host.shell):
  one round trip each instead of the two a fresh channel costs (open, exec), and no channel set up and torn
  down per command. A host without the shell's tools, or a burst wider than the pool, gets fresh channels.
- The port forward (console.host.forward) is a local listener that opens a channel per connection on whatever
  connection is current, so its port and URL survive reconnects.
- Every wait on the host before a command or stream starts (the connection, a command shell, a free channel, the
  channel's opening) ends within the caller's timeout and at most `peer_wait_s` (PEER_WAIT_S): a host or link that
  stopped answering becomes HostNotAnswering, saying what was waited for and how long, not a console that waits
  for minutes (keepalive notices a dead link in ~20 s, but a reconnect to a host that accepts TCP and never answers
  SSH costs connect_timeout per attempt, ten attempts).
- `meter` (console.host.linkmeter) counts every exchange the console waits for and the round trips they cost;
  `round_trip()` measures the link's round trip with a ping answered by the command shell itself.
- Every command is written to the audit log (redacted), never its stdin.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shlex
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from console.host.audit import AuditLog
from console.host.base import AccessRefused, CommandResult, ConnectionDropped, HostError, HostNotAnswering
from console.host.bounded import opened_by
from console.host.commands import shell_command, sudo_error, sudo_wants_password
from console.host.forward import PortForward
from console.host.knownhosts import HostIdentity, HostKeyStatus, key_status, known_hosts_files, refusal
from console.host.linkmeter import CHANNEL_OPEN, EXEC, Exchange, LinkMeter
from console.host.shell import SHELL_SCRIPT, CommandShell, ShellAnswer, ShellClosed
from console.host.targets import Target

# sshd's MaxSessions defaults to 10: up to SHELL_POOL command shells plus this many other channels at once (streams,
# commands beyond the shells), which leaves room for the operator's own ssh.
DEFAULT_CHANNEL_BUDGET = 5
SHELL_POOL = 3  # command shells per connection: the reads of one refresh or one apply step go out together
SHELL_START_TIMEOUT_S = 30.0
SESSION_SLOT_WAIT_S = 10.0  # how long a command waits for sshd to free a session slot (MaxSessions) before failing
# A refusal that outlasts this is the host's MaxSessions, not a slot freed late: an idle command shell gives its
# session up then (sshd frees a closed channel's slot within milliseconds, or a second on a loaded host).
SHELL_YIELD_AFTER_S = 1.0
_CHANNEL_FAILURES = (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError)
# ChannelOpenError: a ProxyJump host could not reach the target, as good as a refused TCP connect.
# How an sshd refuses a session channel on a healthy connection. OpenSSH answers one past MaxSessions with
# OPEN_CONNECT_FAILED ("open failed", the default reason in its serverloop.c); other servers say prohibited.
_SESSION_REFUSED = (asyncssh.OPEN_CONNECT_FAILED, asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED)
_RETRIABLE = (OSError, asyncssh.ConnectionLost, asyncssh.DisconnectError, asyncssh.ChannelOpenError, TimeoutError)
# The longest a command, a stream or a forwarded connection waits on the host before it starts (the connection, a
# command shell, a free channel slot, the channel's opening), when its caller gives no shorter timeout.
PEER_WAIT_S = 30.0
_CHECK_HOST = "check that the host is up and answers `ssh HOST true`; the console reconnects by itself once it does"


@dataclass(frozen=True)
class _Bound:
    """How long a call may wait on the host before its command starts: from `since` to `until` (the loop's clock)."""

    since: float
    until: float

    @classmethod
    def within(cls, seconds: float) -> _Bound:
        now = asyncio.get_running_loop().time()
        return cls(now, now + seconds)

    def waited(self) -> float:
        return asyncio.get_running_loop().time() - self.since

    def left_of(self, timeout: float | None) -> float | None:
        """What is left of a call's `timeout` counted from `since` (None: no timeout)."""
        return None if timeout is None else max(0.0, timeout - self.waited())


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A connect that failed after every caller gave up waiting: its error is in `state`, not logged by asyncio."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class ConnectionState:
    phase: str  # idle, connecting, connected, reconnecting, failed, closed
    attempt: int = 0
    last_error: str | None = None

    def describe(self) -> str:
        if self.phase == "reconnecting":
            return f"reconnecting (attempt {self.attempt}, last error: {self.last_error})"
        if self.phase == "failed":
            return f"failed ({self.last_error})"
        return self.phase


@dataclass(frozen=True)
class ReconnectPolicy:
    initial_delay_s: float = 0.2
    max_delay_s: float = 5.0
    max_attempts: int = 10
    jitter: float = 0.2  # fraction of the delay, so that many consoles do not reconnect in lockstep

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        base = min(self.max_delay_s, self.initial_delay_s * (2 ** max(0, attempt - 1)))
        spread = (rng or random).uniform(-self.jitter, self.jitter) if self.jitter else 0.0
        return max(0.0, base * (1 + spread))


class _Watcher(asyncssh.SSHClient):
    """Tells the transport when its connection dies, so that it can reconnect in the background."""

    def __init__(self, on_lost: Callable[[asyncssh.SSHClientConnection, Exception | None], None]) -> None:
        self._on_lost = on_lost
        self._conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self._conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._on_lost(self._conn, exc)


def preferred_ciphers(resolved: Sequence[bytes]) -> list[str] | None:
    """The ciphers to offer, AES-GCM first, when `resolved` (what the ssh_config leaves asyncssh with) is asyncssh's
    own default list; None when the config names its Ciphers, which then stand as written. asyncssh makes a
    chacha20-poly1305 cipher object for every packet (~30 µs a packet, against ~4 µs for AES-GCM here), and the
    console sends and receives a dozen packets a second for every host it watches. The server still chooses from
    the list; the rest of the defaults follow, in their order."""
    defaults = list(get_default_encryption_algs())
    if list(resolved) != defaults:
        return None
    first = [alg for alg in defaults if alg.endswith(b"-gcm@openssh.com")]
    return [alg.decode("ascii") for alg in (*first, *(alg for alg in defaults if alg not in first))]


def _default_ssh_config() -> list[str]:
    path = Path("~/.ssh/config").expanduser()
    return [str(path)] if os.access(path, os.R_OK) else []


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


# How long close() waits for its cancelled background tasks (a reconnect, the shells starting) to end.
CLOSE_WAIT_S = 5.0


class SshTransport:
    """console.host.base.Transport over one asyncssh connection."""

    def __init__(
        self,
        target: Target,
        *,
        audit: AuditLog | None = None,
        channel_budget: int = DEFAULT_CHANNEL_BUDGET,
        keepalive_interval_s: float = 5.0,  # a dead link is noticed within ~15 s (3 missed)
        connect_timeout_s: float = 15.0,
        reconnect: ReconnectPolicy | None = None,
        on_state: Callable[[ConnectionState], None] | None = None,
        peer_wait_s: float = PEER_WAIT_S,
    ) -> None:
        if target.transport != "ssh" or not target.ssh_host:
            raise HostError(f"{target.label} is not an SSH target")
        self.target = target
        self.label = target.label
        self.audit = audit
        self.reconnect_policy = reconnect or ReconnectPolicy()
        self._channels = asyncio.Semaphore(channel_budget)
        self._channel_budget = channel_budget
        self.peer_wait_s = peer_wait_s
        self._keepalive = keepalive_interval_s
        self._connect_timeout = connect_timeout_s
        self._on_state = on_state
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connecting: asyncio.Task[asyncssh.SSHClientConnection] | None = None  # the attempt every caller awaits
        self._reconnect_task: asyncio.Task[Any] | None = None
        self._ever_connected = False
        self._closed = False
        self._forwards: dict[tuple[str, int], PortForward] = {}  # (remote host, port): listeners kept across drops
        self._shells: list[CommandShell] = []
        self._shell_starting = 0
        self._shell_tasks: set[asyncio.Task[None]] = set()
        self._pool_changed = asyncio.Condition()  # a shell became ready or free, or failed to start
        self._waiting_for_shell = 0
        self._shells_unavailable: str | None = None  # why this host cannot run the command shell, once known
        self._shell_pool = SHELL_POOL  # lowered when the host's MaxSessions leaves no session for anything else
        self.meter = LinkMeter()
        self.state = ConnectionState("idle")
        self.options = self._resolve_options()
        self.ciphers = preferred_ciphers(self.options.encryption_algs)  # None: the ssh_config's own Ciphers
        self.identity = HostIdentity(host=self.options.host, port=self.options.port, alias=self.options.host_key_alias)

    # -- options and host keys ------------------------------------------------------------------------

    def _connect_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"host": self.target.ssh_host}
        if self.target.ssh_port is not None:
            kwargs["port"] = self.target.ssh_port
        if self.target.ssh_user is not None:
            kwargs["username"] = self.target.ssh_user
        # Always explicit: asyncssh.connect() reads ~/.ssh/config by itself, but SSHClientConnectionOptions
        # (used here to find HostName and UserKnownHostsFile for host-key checks and `trust`) does not.
        kwargs["config"] = list(self.target.ssh_config) or _default_ssh_config()
        return kwargs

    def _resolve_options(self) -> asyncssh.SSHClientConnectionOptions:
        try:
            return asyncssh.SSHClientConnectionOptions(**self._connect_kwargs())
        except (OSError, ValueError, asyncssh.KeyImportError) as exc:
            raise HostError(f"{self.label}: cannot read the SSH settings ({_describe(exc)})") from None

    @property
    def known_hosts(self) -> list[str]:
        configured = self.options.known_hosts
        files = known_hosts_files(None if configured is None else list(configured))  # type: ignore[arg-type]
        return [str(p) for p in files]

    async def server_host_key(self) -> asyncssh.SSHKey:
        """The key the server presents, fetched without trusting it (for display and `trust`)."""
        kwargs = self._connect_kwargs()
        kwargs.pop("username", None)
        try:
            key = await asyncio.wait_for(asyncssh.get_server_host_key(**kwargs), self._connect_timeout)
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            raise HostError(f"cannot reach {self.label} to read its host key: {_describe(exc)}") from None
        if key is None:
            raise HostError(f"{self.label} presented no host key")
        return key

    async def _explain_host_key(self) -> HostError:
        key = await self.server_host_key()
        status, _ = key_status([Path(p) for p in self.known_hosts], self.identity, key)
        if status is HostKeyStatus.TRUSTED:  # verification failed for another reason (e.g. algorithm)
            return HostError(f"{self.label}: host key verification failed although the key is recorded")
        return refusal(self.label, self.identity, key, status)

    # -- connection lifecycle -------------------------------------------------------------------------

    def _set_state(self, state: ConnectionState) -> None:
        self.state = state
        if self._on_state is not None:
            self._on_state(state)

    async def connect(self) -> None:
        await self._connection()

    async def _open(self) -> asyncssh.SSHClientConnection:
        ciphers: dict[str, Any] = {} if self.ciphers is None else {"encryption_algs": self.ciphers}
        conn, _client = await asyncssh.create_connection(
            lambda: _Watcher(self._connection_lost),
            **self._connect_kwargs(),
            **ciphers,
            known_hosts=self.known_hosts,
            keepalive_interval=self._keepalive,
            keepalive_count_max=3,
            connect_timeout=self._connect_timeout,
        )
        return conn

    async def _connection(self, bound: _Bound | None = None) -> asyncssh.SSHClientConnection:
        """The open connection, or the one being opened (one attempt, shared by every caller). With `bound`, a caller
        stops waiting for it at the bound's end (HostNotAnswering); the attempt goes on for the others."""
        if self._closed:
            raise HostError(f"the connection to {self.label} is closed")
        conn = self._conn
        if conn is not None:
            return conn
        connecting = self._connecting
        if connecting is None or connecting.done():
            connecting = self._connecting = asyncio.get_running_loop().create_task(self._connect())
            connecting.add_done_callback(_retrieve)
        if bound is None:
            return await asyncio.shield(connecting)
        try:
            async with asyncio.timeout_at(bound.until):
                return await asyncio.shield(connecting)
        except TimeoutError:
            raise self._not_answering(f"waiting for the connection ({self.state.describe()})", bound) from None

    async def _connect(self) -> asyncssh.SSHClientConnection:
        attempt = 0
        while True:
            if not self._ever_connected:
                self._set_state(ConnectionState("connecting"))
            try:
                self._conn = await self._open()
            except asyncssh.HostKeyNotVerifiable:
                error = await self._explain_host_key()
                self._set_state(ConnectionState("failed", attempt, str(error)))
                raise error from None
            except asyncssh.PermissionDenied as exc:
                user = self.options.username
                message = (
                    f"{self.label}: the server refused to log in {user} ({_describe(exc)}); load a key into "
                    f"ssh-agent or set IdentityFile for this host in ~/.ssh/config"
                )
                self._set_state(ConnectionState("failed", attempt, message))
                raise AccessRefused(message) from None
            except _RETRIABLE as exc:
                attempt += 1
                error_text = _describe(exc)
                if not self._ever_connected or attempt > self.reconnect_policy.max_attempts:
                    self._set_state(ConnectionState("failed", attempt, error_text))
                    hint = ""
                    if isinstance(exc, socket.gaierror):  # a typo, or a profile that is not there
                        hint = (
                            " (no host of that name; TARGET is a profile in the workspace's profiles/, "
                            "an ~/.ssh/config alias, or [user@]host[:port])"
                        )
                    raise HostError(f"cannot connect to {self.label}: {error_text}{hint}") from None
                self._set_state(ConnectionState("reconnecting", attempt, error_text))
                await asyncio.sleep(self.reconnect_policy.delay(attempt))
                continue
            except asyncssh.Error as exc:  # anything else asyncssh refuses with: not worth retrying
                message = f"cannot connect to {self.label}: {_describe(exc)}"
                self._set_state(ConnectionState("failed", attempt, message))
                raise HostError(message) from None
            self._ever_connected = True
            self._set_state(ConnectionState("connected"))
            self._fill_shells(self._conn)
            return self._conn

    def _connection_lost(self, conn: asyncssh.SSHClientConnection, exc: Exception | None) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        self._shells.clear()  # their channels died with the connection
        if self._closed:
            return
        self._set_state(ConnectionState("reconnecting", 0, _describe(exc) if exc else "connection closed"))
        self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect_quietly())

    async def _reconnect_quietly(self) -> None:
        try:
            await self._connection()
        except HostError:
            pass  # the state says why; the next command tries again and reports the error

    @property
    def command_shells(self) -> int:
        """How many command shells the current connection holds open."""
        return len([s for s in self._shells if not s.closed])

    @property
    def peer_address(self) -> str | None:
        """The remote address of the open connection (None while there is none)."""
        conn = self._conn
        peer = conn.get_extra_info("peername") if conn is not None else None
        return str(peer[0]) if peer else None

    async def close(self) -> None:
        self._closed = True
        background = (self._reconnect_task, self._connecting)
        ending = [*self._shell_tasks, *(task for task in background if task is not None)]
        for task in ending:
            task.cancel()
        for forward in self._forwards.values():
            forward.close()
        for shell in self._shells:
            shell.close()
        self._shells.clear()
        conn, self._conn = self._conn, None
        unfinished = None
        if conn is not None:
            conn.close()
            # asyncssh's close aborts the socket at once, but wait_closed also waits for a ProxyCommand to exit (and an
            # agent's socket to close): bounded, so that a closing console never hangs on what it cannot control.
            try:
                async with asyncio.timeout(CLOSE_WAIT_S):
                    await conn.wait_closed()
            except TimeoutError:
                unfinished = f"the connection did not finish closing within {CLOSE_WAIT_S:.0f} s (its ProxyCommand?)"
        # Waited for, not only cancelled: a reconnect cancelled while it starts a ProxyCommand must finish that
        # here. Left to asyncio.run's final sweep, which cancels the subprocess's own pipe setup as well, it
        # never ends (Python 3.11), and the CLI hangs on exit after a dropped link. Bounded: closing must not
        # wait on a task that ignores its cancellation.
        ending = [t for t in ending if t is not asyncio.current_task() and not t.done()]
        if ending:
            await asyncio.wait(ending, timeout=CLOSE_WAIT_S)
        self._set_state(ConnectionState("closed", last_error=unfinished))

    def _not_answering(self, what: str, bound: _Bound, hint: str = _CHECK_HOST) -> HostNotAnswering:
        return HostNotAnswering(f"{self.label}: no answer for {bound.waited():.0f} s while {what}; {hint}")

    def _bound(self, timeout: float | None = None) -> _Bound:
        """The bound of a call's waits on the host: its own timeout, at most peer_wait_s."""
        return _Bound.within(self.peer_wait_s if timeout is None else min(timeout, self.peer_wait_s))

    @contextlib.asynccontextmanager
    async def _channel_slot(self, bound: _Bound) -> AsyncIterator[None]:
        """One of the channel budget's slots, held while the block runs."""
        try:
            async with asyncio.timeout_at(bound.until):
                await self._channels.acquire()
        except TimeoutError:
            raise self._not_answering(
                f"waiting for a free channel (all {self._channel_budget} this console opens to the host are busy "
                "with streams and commands)",
                bound,
                "they end with their own timeouts, or when the link drops; try again then",
            ) from None
        try:
            yield
        finally:
            self._channels.release()

    # -- channels -------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _started_process(
        self, argv: Sequence[str], command: str, started: float, not_started: str
    ) -> AsyncIterator[tuple[asyncssh.SSHClientConnection, asyncssh.SSHClientProcess[Any]]]:
        """A long-lived command's connection and process, holding a channel slot while the block runs. A start that
        fails is audited ("<not_started>: why") and raised: HostNotAnswering as it is, a refused channel as
        ConnectionDropped."""
        bound = self._bound()
        running = False  # past the start, the caller's block audits what happens
        try:
            conn = await self._connection(bound)
            async with self._channel_slot(bound):
                try:
                    process = await self._start_process(conn, command, bound)
                except _CHANNEL_FAILURES as exc:
                    self._audit(command, None, started, note=f"{not_started}: {_describe(exc)}")
                    raise ConnectionDropped(f"{self.label}: could not start `{shlex.join(argv)}`") from None
                running = True
                yield conn, process
        except HostNotAnswering as exc:
            if not running:
                self._audit(command, None, started, note=f"{not_started}: {exc}")
            raise

    async def _start_process(
        self, conn: asyncssh.SSHClientConnection, command: str, bound: _Bound, *, encoding: str | None = "utf-8"
    ) -> asyncssh.SSHClientProcess[Any]:
        """conn.create_process(command), with its two round trips (channel open, exec request) metered."""
        meter = self.meter
        steps: list[Exchange] = []

        def opened() -> _MeteredProcess:
            meter.end(steps[0])
            steps.append(meter.begin(EXEC))
            return _MeteredProcess(meter, steps[1])

        refused_since = time.monotonic()
        deadline = refused_since + SESSION_SLOT_WAIT_S
        pause = 0.02
        while True:
            steps[:] = [meter.begin(CHANNEL_OPEN)]
            try:
                opening = conn.create_session(opened, command, encoding=encoding, errors="replace")
                _chan, session = await opened_by(opening, bound.until)
                break
            except TimeoutError:
                raise self._not_answering("opening a channel", bound) from None
            except asyncssh.ChannelOpenError as exc:
                # sshd refuses a session past MaxSessions. It frees a closed channel's slot a moment after this
                # side has seen it close, so a burst can meet that refusal on a healthy connection: wait for a
                # slot instead of treating the connection as dead (dropping it would end every other command).
                if exc.code not in _SESSION_REFUSED or time.monotonic() + pause > deadline:
                    raise
            finally:
                for step in steps:
                    meter.end(step)
            if time.monotonic() - refused_since >= SHELL_YIELD_AFTER_S and self._yield_shell(conn):
                refused_since, pause = time.monotonic(), 0.02  # its slot frees a moment after its channel closes
            await asyncio.sleep(pause)  # a backoff: sshd sends no notice when a slot frees
            pause = min(pause * 2, 0.5)
        assert isinstance(session, _MeteredProcess)
        await session.redirect(asyncssh.PIPE, asyncssh.PIPE, asyncssh.PIPE)
        return session

    # -- the command shells ---------------------------------------------------------------------------

    def _yield_shell(self, conn: asyncssh.SSHClientConnection) -> bool:
        """Close an idle command shell of this connection and keep one fewer from now on, so that a host whose
        MaxSessions the shells fill still opens streams and other channels; False when none is idle."""
        idle = [s for s in self._shells if not s.closed and not s.busy] if conn is self._conn else []
        if not idle:
            return False
        idle[0].close()
        self._shells.remove(idle[0])
        self._shell_pool = min(self._shell_pool, self.command_shells)
        return True

    async def _start_shell(self, conn: asyncssh.SSHClientConnection) -> CommandShell:
        meter = self.meter
        steps: list[Exchange] = [meter.begin(CHANNEL_OPEN)]
        shell: list[CommandShell] = []

        def opened() -> CommandShell:
            meter.end(steps[0])
            steps.append(meter.begin(EXEC))
            shell.append(CommandShell(meter, on_started=lambda: meter.end(steps[1])))
            return shell[0]

        command = shlex.join(["sh", "-c", SHELL_SCRIPT, "opsconsole-shell"])  # $0: what `ps` shows it as
        until = asyncio.get_running_loop().time() + SHELL_START_TIMEOUT_S
        try:
            await opened_by(conn.create_session(opened, command, encoding=None), until)
            async with asyncio.timeout_at(until):
                await shell[0].wait_ready()
        except BaseException:
            if shell:
                shell[0].close()
            raise
        finally:
            for step in steps:
                meter.end(step)
        return shell[0]

    def _fill_shells(self, conn: asyncssh.SSHClientConnection) -> None:
        """Start the pool's shells side by side (two round trips for all of them), in the background: a fresh
        connection has them ready by the time its first commands come."""
        if self._shells_unavailable is not None:
            return
        missing = self._shell_pool - self.command_shells - self._shell_starting
        for _ in range(max(0, missing)):
            self._shell_starting += 1  # counted now: a caller looking at the pool before the task runs waits for it
            task = asyncio.get_running_loop().create_task(self._add_shell(conn))
            self._shell_tasks.add(task)
            task.add_done_callback(self._shell_tasks.discard)

    async def _add_shell(self, conn: asyncssh.SSHClientConnection) -> None:
        try:
            shell = await self._start_shell(conn)
        except ShellClosed as exc:
            # The shell ran but said it cannot work here (no base64): use plain channels from now on.
            if self._shells_unavailable is None:
                self._shells_unavailable = str(exc)
                self._audit("sh -c <opsconsole command shell>", None, time.monotonic(), note=f"no command shell: {exc}")
            return
        except (*_CHANNEL_FAILURES, TimeoutError, asyncssh.Error):
            return  # the connection is going away; its commands find out on their own
        finally:
            self._shell_starting -= 1
            async with self._pool_changed:
                self._pool_changed.notify_all()
        if conn is not self._conn or self._closed:  # the connection died meanwhile
            shell.close()
            return
        self._shells.append(shell)

    async def _take_shell(self, conn: asyncssh.SSHClientConnection, bound: _Bound) -> CommandShell | None:
        """An idle command shell on this connection, marked busy: one that is free, else one that is starting
        (the pool is filled when the connection opens), else None when the host cannot run one or every shell is
        busy (the caller opens a channel of its own then)."""
        async with self._pool_changed:
            while True:
                if self._shells_unavailable is not None or conn is not self._conn:
                    return None
                self._shells = [s for s in self._shells if not s.closed]
                for shell in self._shells:
                    if not shell.busy:
                        shell.busy = True
                        return shell
                if len(self._shells) + self._shell_starting < self._shell_pool:
                    self._fill_shells(conn)
                if self._shell_starting == 0:
                    return None
                self._waiting_for_shell += 1
                try:
                    async with asyncio.timeout_at(bound.until):
                        await self._pool_changed.wait()
                except TimeoutError:
                    raise self._not_answering("a command shell was starting", bound) from None
                finally:
                    self._waiting_for_shell -= 1

    def _release(self, shell: CommandShell) -> None:
        shell.busy = False
        if self._waiting_for_shell:  # only when a caller waits for one (a task per command would cost CPU)
            task = asyncio.get_running_loop().create_task(self._notify_pool())
            self._shell_tasks.add(task)
            task.add_done_callback(self._shell_tasks.discard)

    async def _notify_pool(self) -> None:
        async with self._pool_changed:
            self._pool_changed.notify_all()

    async def _run_on_shell(
        self, shell: CommandShell, command: str, input: str | None, timeout: float | None
    ) -> ShellAnswer:
        """One command on a taken shell. A timeout closes the shell (the command may still run on the host, as a
        closed channel leaves it); a cancelled caller leaves the shell busy until the host answers."""
        answer = asyncio.ensure_future(shell.run(command, input.encode() if input else None))
        try:
            async with asyncio.timeout(timeout):
                result = await asyncio.shield(answer)
        except TimeoutError:
            shell.close()
            answer.cancel()
            raise
        except asyncio.CancelledError:
            answer.add_done_callback(lambda _done: self._release(shell))
            raise
        except BaseException:
            shell.close()
            raise
        self._release(shell)
        return result

    async def round_trip(self, samples: int = 1) -> float:
        """The link's round trip in seconds (the median of `samples` pings of a command shell), also kept in
        `meter.round_trip_s`. Raises HostError when the host cannot be reached."""
        measured: list[float] = []
        for _ in range(max(1, samples)):
            bound = self._bound()
            conn = await self._connection(bound)
            try:
                shell = await self._take_shell(conn, bound)
            except _CHANNEL_FAILURES as exc:
                self._forget(conn)
                raise HostError(f"{self.label}: could not open a channel ({_describe(exc)})") from None
            if shell is None:  # no shell to answer: time the smallest command on a channel of its own
                started = time.monotonic()
                await self.run(["true"], timeout=30)
                measured.append((time.monotonic() - started) / 2)  # a channel costs two round trips
                continue
            try:
                async with asyncio.timeout(30):
                    measured.append(await shell.ping())
            except (ShellClosed, TimeoutError) as exc:
                shell.close()
                raise HostError(f"{self.label}: no answer to a ping ({_describe(exc)})") from None
            finally:
                self._release(shell)
        for value in measured:
            self.meter.round_trip_measured(value)
        return sorted(measured)[len(measured) // 2]

    # -- commands -------------------------------------------------------------------------------------

    def _audit(self, command: str, exit_status: int | None, started: float, note: str = "") -> None:
        if self.audit is not None:
            self.audit.record(host=self.label, command=command, exit_status=exit_status, started=started, note=note)

    def _dropped(self, argv: Sequence[str], command: str, started: float, why: str) -> ConnectionDropped:
        """Audit a command whose connection went away under it, and the error that says so (its effect is unknown)."""
        self._audit(command, None, started, note=f"connection lost: {why}")
        return ConnectionDropped(f"the connection to {self.label} dropped while running `{shlex.join(argv)}` ({why})")

    async def run(
        self,
        argv: Sequence[str],
        *,
        sudo: bool = False,
        timeout: float | None = None,
        input: str | None = None,
    ) -> CommandResult:
        """`timeout` bounds the whole call: the waits before the command starts (at most peer_wait_s of it:
        HostNotAnswering past that) and the command itself (HostError past it)."""
        command = shell_command(argv, sudo=sudo)
        started = time.monotonic()
        bound = self._bound(timeout)
        try:
            return await self._run(argv, command, sudo, timeout, input, started, bound)
        except HostNotAnswering as exc:
            self._audit(command, None, started, note=f"not started: {exc}")
            raise

    async def _run(
        self,
        argv: Sequence[str],
        command: str,
        sudo: bool,
        timeout: float | None,
        input: str | None,
        started: float,
        bound: _Bound,
    ) -> CommandResult:
        for attempt in (1, 2):
            conn = await self._connection(bound)
            try:
                shell = await self._take_shell(conn, bound)
            except _CHANNEL_FAILURES as exc:
                # The shell's channel never opened (typically: the link died and the drop is not noticed yet),
                # so the command did not run: retry once on a fresh connection.
                self._forget(conn)
                if attempt == 1:
                    continue
                self._audit(command, None, started, note=f"channel open failed: {_describe(exc)}")
                raise HostError(f"{self.label}: could not open a channel ({_describe(exc)})") from None
            if shell is not None:
                try:
                    answer = await self._run_on_shell(shell, command, input, bound.left_of(timeout))
                except TimeoutError:
                    self._audit(command, None, started, note="timeout")
                    raise HostError(f"{self.label}: `{shlex.join(argv)}` did not finish within {timeout} s") from None
                except ShellClosed as exc:
                    raise self._dropped(argv, command, started, _describe(exc)) from None
                return self._result(argv, command, sudo, answer.exit_status, answer.stdout, answer.stderr, started)
            result = await self._run_on_channel(conn, argv, command, sudo, timeout, input, started, attempt, bound)
            if result is not None:
                return result
        raise AssertionError("unreachable")

    def _result(
        self,
        argv: Sequence[str],
        command: str,
        sudo: bool,
        exit_status: int,
        stdout: object,
        stderr: object,
        started: float,
    ) -> CommandResult:
        self._audit(command, exit_status, started)
        stderr_text = _text(stderr)
        if sudo and exit_status != 0 and sudo_wants_password(stderr_text):
            raise sudo_error(self.label, self.options.username, argv)
        return CommandResult(command, exit_status, _text(stdout), stderr_text, time.monotonic() - started)

    async def _run_on_channel(
        self,
        conn: asyncssh.SSHClientConnection,
        argv: Sequence[str],
        command: str,
        sudo: bool,
        timeout: float | None,
        input: str | None,
        started: float,
        attempt: int,
        bound: _Bound,
    ) -> CommandResult | None:
        """The command on a channel of its own; None when the channel did not open on the first attempt. The command
        gets what is left of the call's `timeout` once its channel is open."""
        async with self._channel_slot(bound):
            try:
                process = await self._start_process(conn, command, bound)
            except _CHANNEL_FAILURES as exc:
                self._forget(conn)
                if attempt == 1:
                    return None
                self._audit(command, None, started, note=f"channel open failed: {_describe(exc)}")
                raise HostError(f"{self.label}: could not open a channel ({_describe(exc)})") from None
            try:
                if not input:
                    process.stdin.write_eof()  # communicate() closes stdin only after writing input
                stdout, stderr = await asyncio.wait_for(process.communicate(input or None), bound.left_of(timeout))
            except TimeoutError:
                process.close()
                self._audit(command, None, started, note="timeout")
                raise HostError(f"{self.label}: `{shlex.join(argv)}` did not finish within {timeout} s") from None
            except _CHANNEL_FAILURES as exc:
                raise self._dropped(argv, command, started, _describe(exc)) from None
        if process.exit_status is None and process.exit_signal is None:
            raise self._dropped(argv, command, started, "no exit status came back")
        exit_status = process.exit_status if process.exit_status is not None else 255
        return self._result(argv, command, sudo, exit_status, stdout, stderr, started)

    def _forget(self, conn: asyncssh.SSHClientConnection) -> None:
        """Stop using a connection that failed to open a channel; the next call reconnects."""
        if conn is self._conn:
            self._conn = None
            self._shells.clear()
            conn.abort()
            if not self._closed:
                self._set_state(ConnectionState("reconnecting", 0, "the connection stopped opening channels"))

    async def stream(self, argv: Sequence[str], *, sudo: bool = False) -> AsyncIterator[str]:
        command = shell_command(argv, sudo=sudo)
        started = time.monotonic()
        exit_status: int | None = None
        note = ""
        async with self._started_process(argv, command, started, "stream not started") as (conn, process):
            process.stdin.write_eof()  # streams take no input; a reader of stdin must not wait forever
            try:
                try:
                    async for line in process.stdout:
                        if not line:  # asyncssh yields '' at EOF
                            break
                        yield line.rstrip("\n")
                except (asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError) as exc:
                    note = f"connection lost: {_describe(exc)}"
                    raise ConnectionDropped(
                        f"the connection to {self.label} dropped during `{shlex.join(argv)}`"
                    ) from None
                if self._conn is not conn and process.exit_status is None:
                    note = "connection lost"
                    raise ConnectionDropped(f"the connection to {self.label} dropped during `{shlex.join(argv)}`")
                closing = self._bound()  # its output ended: the exit status follows unless the host stopped answering
                try:
                    async with asyncio.timeout_at(closing.until):
                        await process.wait_closed()
                except TimeoutError:
                    note = "no exit status"
                    what = f"waiting for the exit status of `{shlex.join(argv)}` (its output had ended)"
                    raise self._not_answering(what, closing) from None
                exit_status = process.exit_status
                if sudo and exit_status not in (0, None):
                    stderr = _text(await process.stderr.read())
                    if sudo_wants_password(stderr):
                        raise sudo_error(self.label, self.options.username, argv)
            finally:
                process.close()
                self._audit(
                    command, exit_status, started, note=note or ("stream closed" if exit_status is None else "")
                )

    @contextlib.asynccontextmanager
    async def interact(self, argv: Sequence[str], *, note: str = "") -> AsyncIterator[RemoteProcess]:
        """A command whose stdin the caller writes and whose stdout lines it reads while it runs (the benchmark
        load generator on the host). Leaving the block closes the channel: the command sees EOF on its stdin,
        and sshd closes its session. The command line is audited; what goes over stdin is not."""
        command = shell_command(argv)
        started = time.monotonic()
        async with self._started_process(argv, command, started, "not started") as (_conn, process):
            remote = RemoteProcess(self.label, process)
            try:
                yield remote
            finally:
                process.close()
                exit_status = process.exit_status
                self._audit(command, exit_status, started, note=note or ("closed" if exit_status is None else ""))

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        key = (remote_host, remote_port)
        await self._connection(self._bound())  # a host that cannot be reached says so here, not at the first request
        if key not in self._forwards:
            connection = lambda: self._connection(self._bound())  # noqa: E731
            forward = PortForward(connection, remote_host, remote_port, self.meter, open_wait_s=self.peer_wait_s)
            try:
                await forward.start()
            except OSError as exc:
                raise HostError(
                    f"{self.label}: cannot listen on a local port for {remote_host}:{remote_port}: {exc}"
                ) from None
            self._forwards[key] = forward
        return self._forwards[key].port


class _MeteredProcess(asyncssh.SSHClientProcess[Any]):
    """asyncssh's process, telling the meter when the exec request was answered."""

    def __init__(self, meter: LinkMeter, exec_step: Exchange) -> None:
        super().__init__()
        self._meter = meter
        self._exec_step = exec_step

    def session_started(self) -> None:
        self._meter.end(self._exec_step)
        super().session_started()


class RemoteProcess:
    """A running command: write its stdin, read its stdout by lines (see SshTransport.interact)."""

    def __init__(self, label: str, process: asyncssh.SSHClientProcess[Any]) -> None:
        self.label = label
        self._process = process

    def write(self, text: str) -> None:
        self._process.stdin.write(text)

    async def drain(self) -> None:
        await self._process.stdin.drain()

    def write_eof(self) -> None:
        with contextlib.suppress(OSError, asyncssh.Error):
            self._process.stdin.write_eof()

    async def readline(self) -> str:
        """The next line of stdout without its newline; '' at the end. ConnectionDropped when the link died."""
        try:
            line: str = await self._process.stdout.readline()
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError) as exc:
            raise ConnectionDropped(f"the connection to {self.label} dropped ({_describe(exc)})") from None
        return line.rstrip("\n")

    async def stderr_tail(self, limit: int = 4000) -> str:
        """What the command wrote on stderr (read once it ended)."""
        try:
            async with asyncio.timeout(2):
                text = _text(await self._process.stderr.read())
        except (TimeoutError, asyncssh.Error, OSError):
            return ""
        return text[-limit:]

    @property
    def exit_status(self) -> int | None:
        return self._process.exit_status


def _text(data: object) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return str(data)
