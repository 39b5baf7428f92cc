"""Contracts between the verbs and the hosts they act on.

A host is reached through a Transport (SSH or local) and its SGLang service is managed through a
ServiceManager (systemd over a transport, or the demo's own supervisor). The verbs in console.core
only see these protocols, so every verb works the same on a real GPU host, on the nspawn testbed and
on the embedded demo host.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable


class HostError(Exception):
    """An operation on a host failed; the message says what happened and what to do."""


class AccessRefused(HostError):
    """The host refused us for a reason no retry fixes: an unknown or changed host key, a refused login."""


class SudoPasswordRequired(HostError):
    """sudo asked for a password; the console only uses sudo non-interactively."""


class UnitLocked(HostError):
    """Another console holds the unit's lock (another apply is running); holder says who, when known."""

    def __init__(self, host: str, unit: str, holder: str) -> None:
        self.holder = holder
        who = f"held by {holder}" if holder else "its holder did not say who it is"
        super().__init__(
            f"{host}: another apply is changing {unit} right now ({who}); "
            "wait for it to finish, then check the unit and run this apply again"
        )


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_status: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@runtime_checkable
class Transport(Protocol):
    """Runs commands on one host. Commands are argv lists; the transport quotes them."""

    label: str  # what the operator calls the host (profile name, alias or user@host)

    async def run(
        self,
        argv: Sequence[str],
        *,
        sudo: bool = False,
        timeout: float | None = None,
        input: str | None = None,
    ) -> CommandResult: ...

    def stream(self, argv: Sequence[str], *, sudo: bool = False) -> AsyncIterator[str]:
        """Lines of stdout of a long-running command; ends when the command exits or the stream is closed."""
        ...

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        """A local TCP port that reaches remote_host:remote_port as seen from the host."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class ServiceState:
    """What `systemctl show` says about a unit (or the demo supervisor's equivalent)."""

    unit: str
    active_state: str  # active, activating, deactivating, inactive, failed
    sub_state: str  # running, start, auto-restart, dead, failed, ...
    main_pid: int | None
    started_at: datetime | None  # ExecMainStartTimestamp
    n_restarts: int
    result: str  # success, exit-code, signal, timeout, ...
    unit_file_state: str  # enabled, disabled, static, ...
    need_daemon_reload: bool
    fragment_path: str | None
    properties: dict[str, str] = field(default_factory=dict)  # everything else that was read

    @property
    def running(self) -> bool:
        return self.active_state in {"active", "activating", "reloading"}


@dataclass(frozen=True)
class JournalEntry:
    cursor: str
    timestamp: datetime
    message: str
    priority: int | None = None
    pid: int | None = None


@dataclass(frozen=True)
class UnitBackup:
    path: str  # where the backup lives on the host
    taken_at: datetime | None = None  # when it was taken (from its name), when known


@runtime_checkable
class ServiceManager(Protocol):
    """The service that runs SGLang on a host: systemd, or the demo's supervisor."""

    unit: str

    async def state(self) -> ServiceState: ...

    async def read_unit(self) -> str:
        """The unit file's text as it is on disk (FragmentPath)."""
        ...

    async def write_unit(self, text: str) -> UnitBackup:
        """Back up the current unit (timestamped, on the host), then replace it atomically."""
        ...

    async def restore_unit(self, backup: UnitBackup) -> None: ...

    async def backups(self) -> list[UnitBackup]:
        """The unit's backups on the host (those write_unit took), newest first."""
        ...

    async def read_backup(self, backup: UnitBackup) -> str:
        """One backup's text, for a person to compare or bring back through an apply."""
        ...

    async def daemon_reload(self) -> None: ...

    async def restart(self) -> None: ...

    async def stop(self) -> None: ...

    async def enable(self) -> None: ...

    def journal(
        self, *, lines: int = 100, follow: bool = False, after_cursor: str | None = None
    ) -> AsyncIterator[JournalEntry]: ...

    def lock(self, owner: str) -> AbstractAsyncContextManager[None]:
        """Hold the unit's lock on the host while the block runs; raise UnitLocked when another holds it.

        owner (user@host, pid, start time) is recorded for whoever is refused. The lock is held by a live
        connection, so a console that dies or loses the host releases it without anyone cleaning up.
        """
        ...


class ConnectionDropped(HostError):
    """The connection to the host died while a command or stream was running on it.

    Whether the command took effect on the host is unknown; streams catch this and resume.
    """


class HostNotAnswering(ConnectionDropped):
    """Nothing came back from the host within the bound while waiting to start a command or stream: the connection,
    a channel, a command shell, a free channel slot. The command was not started; the message says what was waited
    for, how long, and what to do. A ConnectionDropped, so that what retries across a reconnect retries this too."""
