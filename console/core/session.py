"""One open host, as every operation of the core uses it — the CLI for one command, the console for hours.

    async with open_session("gpu-host", workspace) as session:
        status = await read_status(session)                     # console.core.status
        pending = await plan_apply(session, edits)              # console.core.apply
        async for line in session.service.journal(follow=True): ...

A session is one connection (SSH, local or the demo host), the service manager on it, the SGLang client
through the connection's port forward, and the host's GPUs. Secrets are masked where they enter: the
session learns the unit's keys and tokens whenever the unit is read (and before the first journal line),
journal lines are masked as they arrive, and every JSON answer of the SGLang API is masked by the client.
So no event, result, record or exception text built from them can carry a secret.

The API key the console sends the server: the profile's (`api_key_env`), which always wins; else, when the
server answers 401, the unit's own `--api-key` (the console reads the unit as root anyway), kept in memory and
read anew at each 401 (an apply may have changed it). The session says so once (`take_notices`, which status
and the console show), never the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Literal, TypeVar

from console.core.change import VersionSource, choose_version
from console.core.console_requests import SentRequests
from console.errors import NamesFields
from console.host.base import HostError, JournalEntry, ServiceManager, ServiceState, UnitBackup, UnitLocked
from console.host.connect import HostPoll, HostSession, open_host
from console.host.gpu import GpuSnapshot
from console.host.ssh import ConnectionState
from console.host.targets import Target, resolve_target
from console.host.unit_switch import UnitSwitch
from console.secrets import SecretMask, secrets_in_unit
from console.sglang.client import SglangClient, SglangError
from console.sglang.unit import unit_api_key
from console.workspace import Workspace

# How long a server that does not answer may take to say its version before the rules fall back.
VERSION_TIMEOUT_S = 10.0
UNIT_KEY_NOTICE = (
    "the server asks for an API key and no profile names one (api_key_env): using the unit's --api-key, "
    "kept in memory only"
)


# A unit's lock is held by a live connection and let go of by closing it; the host notices at its next heartbeat (0.2 s
# on systemd hosts, console/host/systemd.py; 50 ms on the demo host's supervisor), later on a loaded machine. How
# long a lock this very process let go of may take to be released there before a new take of it gives up.
OWN_LOCK_RELEASE_S = 10.0
OWN_LOCK_RETRY_S = 0.05

_T = TypeVar("_T")


class _OwnLocks:
    """The unit locks this process holds open and the ones it let go of lately, by their owner line. A lock refused
    as held by one this process let go of is on its way to being released (the host has not noticed the closed
    connection yet): it is waited for. One held by anyone else, or by this process's own lock still open (an apply
    beside a tune in the console), is refused at once."""

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()
        self.let_go: dict[str, float] = {}

    def hold(self, owner: str) -> None:
        self.open[_line(owner)] += 1

    def release(self, owner: str) -> None:
        key = _line(owner)
        self.open[key] -= 1
        if self.open[key] <= 0:
            del self.open[key]
            now = time.monotonic()
            self.let_go[key] = now
            for old in [k for k, at in self.let_go.items() if now - at > OWN_LOCK_RELEASE_S]:
                del self.let_go[old]

    def on_its_way(self, holder: str) -> bool:
        key = _line(holder)
        return key in self.let_go and key not in self.open


_OWN_LOCKS = _OwnLocks()


def _line(owner: str) -> str:
    return " ".join(owner.split())  # as the host keeps it (one line in the lock file)


@asynccontextmanager
async def _own_lock(owner: str, take: Callable[[], AbstractAsyncContextManager[_T]]) -> AsyncIterator[_T]:
    """The unit's lock (or guard) as `take` gives it; UnitLocked when another holds it. A lock this very process let
    go of a moment ago (two tunes one after the other, an apply after a tune) is waited for until the host lets go of
    it, instead of refused: every operation that takes the lock goes through here (MaskedService)."""
    taken = False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OWN_LOCK_RELEASE_S

    def let_go() -> None:  # after the lock's own exit: its connection closed, the host yet to notice
        if taken:
            _OWN_LOCKS.release(owner)

    async with AsyncExitStack() as stack:
        stack.callback(let_go)
        while True:
            try:
                value = await stack.enter_async_context(take())
                break
            except UnitLocked as exc:
                if not _OWN_LOCKS.on_its_way(exc.holder) or loop.time() >= deadline:
                    raise
            await asyncio.sleep(OWN_LOCK_RETRY_S)
        taken = True
        _OWN_LOCKS.hold(owner)
        yield value


class HostInputError(NamesFields, HostError):
    """The host cannot do what one of the operator's inputs asked (a document path its user may not write, a load
    generator it has no Python for): a HostError (exit 1, nothing changed) whose message names that input by field,
    for each renderer to say its own way (console.errors.NamesFields)."""


class MaskedService:
    """The host's ServiceManager with secrets masked at the source: the unit's keys are learned whenever it
    is read, and every journal line is masked before anyone sees it. The unit text itself is returned as
    it is on disk, because only that can be written back; nothing that shows it may skip the mask."""

    def __init__(self, inner: ServiceManager, secrets: SecretMask) -> None:
        self.inner = inner
        self.secrets = secrets
        self.unit = inner.unit
        self._learned = False
        self.unit_api_key: str | None = None  # the unit's --api-key as last read (a secret: never shown)
        self.unit_read = False

    async def state(self) -> ServiceState:
        return await self.inner.state()

    async def read_unit(self) -> str:
        text = await self.inner.read_unit()
        self.secrets.learn(secrets_in_unit(text))
        self.unit_api_key = unit_api_key(text)
        self._learned = self.unit_read = True
        return text

    async def learn_secrets(self) -> None:
        """Read the unit once, so that its secrets are known before the first journal line is shown."""
        if not self._learned:
            with contextlib.suppress(Exception):  # a host without the unit still has a journal to show
                await self.read_unit()
            self._learned = True

    async def write_unit(self, text: str) -> UnitBackup:
        self.secrets.learn(secrets_in_unit(text))
        return await self.inner.write_unit(text)

    @property
    def switches(self) -> bool:
        """Whether the host's service manager switches to a new unit in one command (switch())."""
        return callable(getattr(self.inner, "switch", None))

    async def switch(self, text: str) -> UnitSwitch:
        """State, journal cursor, write, daemon-reload, restart in one command (SystemdService.switch); only where
        `switches` says so."""
        self.secrets.learn(secrets_in_unit(text))
        switch: Callable[[str], Awaitable[UnitSwitch]] = self.inner.switch  # type: ignore[attr-defined]
        return await switch(text)

    async def restore_unit(self, backup: UnitBackup) -> None:
        await self.inner.restore_unit(backup)

    async def backups(self) -> list[UnitBackup]:
        return await self.inner.backups()

    async def read_backup(self, backup: UnitBackup) -> str:
        text = await self.inner.read_backup(backup)
        self.secrets.learn(secrets_in_unit(text))
        return text

    async def daemon_reload(self) -> None:
        await self.inner.daemon_reload()

    async def restart(self) -> None:
        await self.inner.restart()

    async def stop(self) -> None:
        await self.inner.stop()

    async def enable(self) -> None:
        await self.inner.enable()

    def lock(self, owner: str) -> AbstractAsyncContextManager[None]:
        """The host's unit lock; a lock this process let go of a moment ago is waited for (_own_lock)."""
        return _own_lock(owner, lambda: self.inner.lock(owner))

    def guard(self, owner: str, *, grace_s: float) -> AbstractAsyncContextManager[Any] | None:
        """The unit's lock with a restore-on-exit guard (console.host.systemd.SystemdService.guard) where the
        host's service manager offers one; None where it does not (the caller holds the plain lock). As lock(), a
        lock this process let go of a moment ago is waited for."""
        make = getattr(self.inner, "guard", None)
        return None if make is None else _own_lock(owner, lambda: make(owner, grace_s=grace_s))

    async def journal(
        self, *, lines: int = 100, follow: bool = False, after_cursor: str | None = None
    ) -> AsyncIterator[JournalEntry]:
        await self.learn_secrets()
        async for entry in self.inner.journal(lines=lines, follow=follow, after_cursor=after_cursor):
            yield dataclasses.replace(entry, message=self.secrets.text(entry.message))


class Session:
    """An open host: label, connection state, masked service, SGLang client, GPUs, the version for the rules."""

    def __init__(self, host: HostSession, workspace: Workspace | None = None) -> None:
        self.host = host
        self.workspace = workspace
        self.secrets = SecretMask()
        self.profile_api_key = host.target.sglang.api_key()  # the profile's api_key_env: wins over the unit's key
        if self.profile_api_key:
            self.secrets.learn([self.profile_api_key])
        self.service = MaskedService(host.service, self.secrets)
        self.requests = SentRequests()  # what the client sent, to tell the console's own lines in the journal
        # Where the key the console sends comes from: the profile, the unit (taken at a 401), or none (yet).
        self.api_key_source: Literal["profile", "unit"] | None = "profile" if self.profile_api_key else None
        self._notices: list[str] = []
        self._key_lock = asyncio.Lock()

    @property
    def label(self) -> str:
        return self.host.label

    @property
    def target(self) -> Target:
        return self.host.target

    @property
    def connection(self) -> ConnectionState:
        return self.host.connection

    @property
    def has_api_key(self) -> bool:
        """Whether a profile gives this host's server an API key (api_key_env is set and the variable too)."""
        return self.profile_api_key is not None

    async def sglang(self) -> SglangClient:
        """The session's SGLang client (one per session), masking every answer as it arrives; without a profile's
        key it answers a 401 with the unit's --api-key."""
        client = await self.host.sglang()
        client.mask = self.secrets.data
        client.on_request = self.requests.record
        if self.profile_api_key is None:
            client.on_unauthorized = self._unit_key_after_401
        return client

    async def api_key(self) -> str | None:
        """The key for a client of this host's server made elsewhere (a benchmark's): the profile's, else the
        unit's --api-key (the unit read now if this session has not read it yet)."""
        if self.profile_api_key is not None:
            return self.profile_api_key
        if not self.service.unit_read:
            with contextlib.suppress(HostError):
                await self.service.read_unit()
        key = self.service.unit_api_key
        if key:
            self._using_the_units_key()
        return key

    async def _unit_key_after_401(self, refused: str | None) -> str | None:
        """The unit's --api-key for a request the server refused; the unit is read anew unless a key other than
        the refused one is already known (requests side by side all get their 401 at once: one read)."""
        async with self._key_lock:
            key = self.service.unit_api_key
            if not key or key == refused:
                with contextlib.suppress(HostError):
                    await self.service.read_unit()
                key = self.service.unit_api_key
            if key and key != refused:
                self._using_the_units_key()
            return key

    def _using_the_units_key(self) -> None:
        if self.api_key_source != "unit":
            self.api_key_source = "unit"
            self._notices.append(UNIT_KEY_NOTICE)

    def take_notices(self) -> list[str]:
        """What the session did on its own that the operator should know (said once: taken, then gone)."""
        notices, self._notices = self._notices, []
        return notices

    @property
    def last_server_info(self) -> dict[str, Any] | None:
        """The server's settings as last read (masked), without a request; None before the first read."""
        client = self.host.client
        return client.last_server_info if client is not None else None

    async def sglang_url(self) -> str:
        return await self.host.sglang_url()

    async def gpus(self) -> GpuSnapshot:
        return await self.host.gpus()

    async def poll(self) -> HostPoll:
        """The unit's state and the GPUs together (over SSH: one remote command, one round trip)."""
        return await self.host.poll()

    @property
    def round_trip_s(self) -> float | None:
        """The SSH link's round trip as last measured; None without a link (local, demo) or before a ping."""
        return self.host.round_trip_s

    async def measure_round_trip(self, samples: int = 3) -> float | None:
        """Ping the host now; None when there is no link to measure (local, demo)."""
        return await self.host.measure_round_trip(samples)

    async def server_version(self) -> str | None:
        """The running server's version (/server_info), or None when it does not answer (it may be down)."""
        try:
            client = await self.sglang()
            async with asyncio.timeout(VERSION_TIMEOUT_S):
                return await client.detect_version()
        except (SglangError, HostError, TimeoutError, OSError):  # the rules fall back; the caller goes on
            return None

    async def sglang_version(self) -> tuple[str, VersionSource]:
        """The version the rules check against: the running server's, else the profile's, else the newest."""
        from console.sglang.flags import NEWEST_VERSION

        return choose_version(await self.server_version(), self.target.sglang_version, NEWEST_VERSION)


@asynccontextmanager
async def open_session(
    target: str | Target,
    workspace: Workspace,
    *,
    ssh_config: str | None = None,
    on_connection: Callable[[ConnectionState], None] | None = None,
) -> AsyncIterator[Session]:
    """Resolve TARGET, connect (host-key problems surface here, as HostError) and close it all afterwards. A
    transport other than SSH and local (the demo host's) is whatever the composition root registered
    (console.host.registry): the core names none."""
    if isinstance(target, str):
        from console.core.deployment import refuse_deployment

        refuse_deployment(target, workspace.profiles, "this verb")  # a deployment's members, named, for one host
        target = resolve_target(target, profiles_dir=workspace.profiles, ssh_config=ssh_config)
    host = await open_host(target, logs_dir=workspace.logs, on_state=on_connection)
    try:
        yield Session(host, workspace)
    finally:
        await host.close()
