"""The SSH transport: one long-lived asyncssh connection per host.

- Host keys are always verified against known_hosts (the ssh_config's UserKnownHostsFile or
  ~/.ssh/known_hosts); an unknown or changed key raises HostKeyRefused with the fingerprint.
- Keys come from the agent and IdentityFile, ProxyJump and the rest from ssh_config (asyncssh reads it).
- A channel budget (a semaphore below sshd's MaxSessions, default 10) so that bursts of concurrent
  commands queue instead of failing with "open failed".
- Keepalive; after a drop, a background reconnect with exponential backoff whose progress is
  visible as `state` (connected / reconnecting(attempt, last error)).
- A command whose channel never opened is retried once on a fresh connection; a command that was
  running when the link died raises ConnectionDropped (its effect on the host is unknown).
- Every command is written to the audit log (redacted), never its stdin.
"""

from __future__ import annotations

import asyncio
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

from console.host.audit import AuditLog
from console.host.base import AccessRefused, CommandResult, ConnectionDropped, HostError
from console.host.commands import shell_command, sudo_error, sudo_wants_password
from console.host.knownhosts import HostIdentity, HostKeyStatus, key_status, known_hosts_files, refusal
from console.host.targets import Target

DEFAULT_CHANNEL_BUDGET = 6  # sshd's MaxSessions defaults to 10; leave room for the operator's own ssh
_CHANNEL_FAILURES = (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError)
# ChannelOpenError: a ProxyJump host could not reach the target, as good as a refused TCP connect.
_RETRIABLE = (OSError, asyncssh.ConnectionLost, asyncssh.DisconnectError, asyncssh.ChannelOpenError, TimeoutError)


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


def _default_ssh_config() -> list[str]:
    path = Path("~/.ssh/config").expanduser()
    return [str(path)] if os.access(path, os.R_OK) else []


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


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
    ) -> None:
        if target.transport != "ssh" or not target.ssh_host:
            raise HostError(f"{target.label} is not an SSH target")
        self.target = target
        self.label = target.label
        self.audit = audit
        self.reconnect_policy = reconnect or ReconnectPolicy()
        self._channels = asyncio.Semaphore(channel_budget)
        self._keepalive = keepalive_interval_s
        self._connect_timeout = connect_timeout_s
        self._on_state = on_state
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connect_lock = asyncio.Lock()
        self._reconnect_task: asyncio.Task[Any] | None = None
        self._ever_connected = False
        self._closed = False
        self._forward_ports: dict[tuple[str, int], int] = {}  # (remote host, port) -> local port, kept across drops
        self._listeners: dict[tuple[str, int], asyncssh.SSHListener] = {}
        self.state = ConnectionState("idle")
        self.options = self._resolve_options()
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
        conn, _client = await asyncssh.create_connection(
            lambda: _Watcher(self._connection_lost),
            **self._connect_kwargs(),
            known_hosts=self.known_hosts,
            keepalive_interval=self._keepalive,
            keepalive_count_max=3,
            connect_timeout=self._connect_timeout,
        )
        for (remote_host, remote_port), local_port in list(self._forward_ports.items()):
            try:  # same local port as before the drop, so clients holding the URL keep working
                self._listeners[(remote_host, remote_port)] = await conn.forward_local_port(
                    "127.0.0.1", local_port, remote_host, remote_port
                )
            except (OSError, asyncssh.Error):
                del self._forward_ports[(remote_host, remote_port)]  # forward_port() picks a new one
        return conn

    async def _connection(self) -> asyncssh.SSHClientConnection:
        if self._closed:
            raise HostError(f"the connection to {self.label} is closed")
        conn = self._conn
        if conn is not None:
            return conn
        async with self._connect_lock:
            if self._conn is not None:
                return self._conn
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
                return self._conn

    def _connection_lost(self, conn: asyncssh.SSHClientConnection, exc: Exception | None) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        self._listeners.clear()
        if self._closed:
            return
        self._set_state(ConnectionState("reconnecting", 0, _describe(exc) if exc else "connection closed"))
        self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect_quietly())

    async def _reconnect_quietly(self) -> None:
        try:
            await self._connection()
        except HostError:
            pass  # the state says why; the next command tries again and reports the error

    async def close(self) -> None:
        self._closed = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            await conn.wait_closed()
        self._set_state(ConnectionState("closed"))

    # -- commands -------------------------------------------------------------------------------------

    def _audit(self, command: str, exit_status: int | None, started: float, note: str = "") -> None:
        if self.audit is not None:
            self.audit.record(host=self.label, command=command, exit_status=exit_status, started=started, note=note)

    async def run(
        self,
        argv: Sequence[str],
        *,
        sudo: bool = False,
        timeout: float | None = None,
        input: str | None = None,
    ) -> CommandResult:
        command = shell_command(argv, sudo=sudo)
        started = time.monotonic()
        for attempt in (1, 2):
            conn = await self._connection()
            async with self._channels:
                try:
                    process = await conn.create_process(command, encoding="utf-8", errors="replace")
                except _CHANNEL_FAILURES as exc:
                    # The channel never opened (typically: the link died and the drop is not noticed yet),
                    # so the command did not run: retry once on a fresh connection.
                    self._forget(conn)
                    if attempt == 1:
                        continue
                    self._audit(command, None, started, note=f"channel open failed: {_describe(exc)}")
                    raise HostError(f"{self.label}: could not open a channel ({_describe(exc)})") from None
                try:
                    if not input:
                        process.stdin.write_eof()  # communicate() closes stdin only after writing input
                    stdout, stderr = await asyncio.wait_for(process.communicate(input or None), timeout)
                except TimeoutError:
                    process.close()
                    self._audit(command, None, started, note="timeout")
                    raise HostError(f"{self.label}: `{shlex.join(argv)}` did not finish within {timeout} s") from None
                except _CHANNEL_FAILURES as exc:
                    self._audit(command, None, started, note=f"connection lost: {_describe(exc)}")
                    raise ConnectionDropped(
                        f"the connection to {self.label} dropped while running `{shlex.join(argv)}`"
                    ) from None
            if process.exit_status is None and process.exit_signal is None:
                self._audit(command, None, started, note="connection lost")
                raise ConnectionDropped(f"the connection to {self.label} dropped while running `{shlex.join(argv)}`")
            exit_status = process.exit_status if process.exit_status is not None else 255
            self._audit(command, exit_status, started)
            stderr_text = _text(stderr)
            if sudo and exit_status != 0 and sudo_wants_password(stderr_text):
                raise sudo_error(self.label, self.options.username, argv)
            return CommandResult(command, exit_status, _text(stdout), stderr_text, time.monotonic() - started)
        raise AssertionError("unreachable")

    def _forget(self, conn: asyncssh.SSHClientConnection) -> None:
        """Stop using a connection that failed to open a channel; the next call reconnects."""
        if conn is self._conn:
            self._conn = None
            self._listeners.clear()
            conn.abort()
            if not self._closed:
                self._set_state(ConnectionState("reconnecting", 0, "the connection stopped opening channels"))

    async def stream(self, argv: Sequence[str], *, sudo: bool = False) -> AsyncIterator[str]:
        command = shell_command(argv, sudo=sudo)
        started = time.monotonic()
        conn = await self._connection()
        exit_status: int | None = None
        note = ""
        async with self._channels:
            try:
                process = await conn.create_process(command, encoding="utf-8", errors="replace")
            except _CHANNEL_FAILURES as exc:
                self._audit(command, None, started, note=f"stream not started: {_describe(exc)}")
                raise ConnectionDropped(f"{self.label}: could not start `{shlex.join(argv)}`") from None
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
                await process.wait_closed()
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

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        key = (remote_host, remote_port)
        conn = await self._connection()
        if key in self._listeners:
            return self._forward_ports[key]
        try:
            listener = await conn.forward_local_port(
                "127.0.0.1", self._forward_ports.get(key, 0), remote_host, remote_port
            )
        except (OSError, asyncssh.Error) as exc:
            raise HostError(
                f"{self.label}: cannot forward a local port to {remote_host}:{remote_port}: {exc}"
            ) from None
        self._listeners[key] = listener
        self._forward_ports[key] = listener.get_port()
        return self._forward_ports[key]


def _text(data: object) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return str(data)
