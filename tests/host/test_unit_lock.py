"""SystemdService.lock over a real OpenSSH sshd: flock under /run/lock, held by one streaming channel.

Only `sh` and `flock` are needed on the host, so the loopback sshd of tests/host/sshd_lab.py stands in
for a GPU host (without sudo: the test user writes /run/lock, which is world-writable with the sticky bit).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.host.base import HostError, UnitLocked
from console.host.ssh import SshTransport
from console.host.systemd import SystemdService, lock_path
from console.host.targets import resolve_target
from tests.host.sshd_lab import ClientSide, Sshd

RELEASE_DEADLINE_S = 10.0  # the host notices a closed channel at its next heartbeat (0.2 s)


def make_service(client: ClientSide, unit: str) -> SystemdService:
    target = resolve_target(client.alias, profiles_dir=client.dir / "profiles", ssh_config=str(client.config))
    return SystemdService(SshTransport(target), unit, sudo=False)


@pytest.fixture
def unit() -> Iterator[str]:
    """A unit name of this test's own, so that its lock file is too; the file is removed afterwards."""
    name = f"opsct-lock-{uuid.uuid4().hex[:12]}.service"
    yield name
    Path(lock_path(name)).unlink(missing_ok=True)


async def can_lock(service: SystemdService) -> bool:
    try:
        async with service.lock("test@probe"):
            return True
    except UnitLocked:
        return False


async def wait_free(service: SystemdService) -> None:
    """Poll until the lock can be taken (each attempt that wins releases it again on the way out)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RELEASE_DEADLINE_S
    while not await can_lock(service):
        if loop.time() > deadline:
            raise AssertionError(f"the lock was not released within {RELEASE_DEADLINE_S} s")
        await asyncio.sleep(0.05)


async def test_a_held_lock_refuses_a_second_console_and_names_its_owner(client: ClientSide, unit: str) -> None:
    first, second = make_service(client, unit), make_service(client, unit)
    try:
        async with first.lock("alice@console1 (opsconsole apply, pid 42) since 2026-11-30 05:00:00 UTC"):
            with pytest.raises(UnitLocked) as refused:
                async with second.lock("bob@console2"):
                    raise AssertionError("two holders at once")
            message = str(refused.value)
            assert "another apply is changing" in message and unit in message
            assert "held by alice@console1 (opsconsole apply, pid 42) since 2026-11-30 05:00:00 UTC" in message
        await wait_free(second)  # released once the first console let go
    finally:
        await first.transport.close()
        await second.transport.close()


async def test_the_owner_cannot_inject_lines_or_shell(client: ClientSide, unit: str) -> None:
    first, second = make_service(client, unit), make_service(client, unit)
    marker = Path(f"/tmp/opsct-lock-injected-{uuid.uuid4().hex}")
    try:
        async with first.lock(f'eve@x\n$(touch {marker}) "; echo locked'):
            with pytest.raises(UnitLocked) as refused:
                async with second.lock("bob@console2"):
                    pass
        assert f'held by eve@x $(touch {marker}) "; echo locked' in str(refused.value)
        assert not marker.exists()
    finally:
        await first.transport.close()
        await second.transport.close()


_HOLDER = """
import asyncio, sys
from console.host.ssh import SshTransport
from console.host.systemd import SystemdService
from pathlib import Path
from console.host.targets import resolve_target

async def main() -> None:
    alias, profiles, config, unit = sys.argv[1:]
    target = resolve_target(alias, profiles_dir=Path(profiles), ssh_config=config)
    async with SystemdService(SshTransport(target), unit, sudo=False).lock("killed@console"):
        print("held", flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


async def test_a_killed_console_releases_the_lock(client: ClientSide, unit: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, client.alias, str(client.dir / "profiles"), str(client.config), unit],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(client.dir)},
    )
    service = make_service(client, unit)
    try:
        assert holder.stdout is not None
        assert (await asyncio.to_thread(holder.stdout.readline)).strip() == "held"
        assert not await can_lock(service)
        holder.send_signal(signal.SIGKILL)  # no cleanup of its own: only its closed connection tells the host
        await asyncio.to_thread(holder.wait, 10)
        await wait_free(service)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
        await service.transport.close()


def _held_on_host(unit: str) -> bool:
    """Whether anyone holds the lock, asked on the host itself (the lab's host is this machine)."""
    return subprocess.run(["flock", "-n", lock_path(unit), "true"], check=False).returncode != 0


async def _until_on_host(condition: Callable[[], bool], what: str) -> None:
    """Poll the host until `condition` holds: its sessions notice a dropped channel at their next heartbeat."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RELEASE_DEADLINE_S
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not within {RELEASE_DEADLINE_S} s: {what}")
        await asyncio.sleep(0.05)


async def test_the_lock_is_taken_again_after_a_dropped_connection(client: ClientSide, sshd: Sshd, unit: str) -> None:
    holder, other = make_service(client, unit), make_service(client, unit)
    try:
        async with holder.lock("alice@console1"):
            sshd.stop()  # the connection drops, and the sessions on the host end with it: the lock is free
            await _until_on_host(lambda: not _held_on_host(unit), "the lock freed by the dropped connection")
            await asyncio.to_thread(sshd.start)
            await _until_on_host(lambda: _held_on_host(unit), "the lock taken again after the reconnect")
            with pytest.raises(UnitLocked, match="held by alice@console1"):
                async with other.lock("bob@console2"):
                    pass
        await wait_free(other)
    finally:
        await holder.transport.close()
        await other.transport.close()
        if sshd.process is None:
            sshd.start()


async def test_a_guard_for_a_unit_without_a_unit_file_says_so_and_leaves_nothing_on_the_host(
    client: ClientSide, unit: str
) -> None:
    """The guard's own script asks systemd for the unit file (FragmentPath): a unit it does not know (or a host
    without systemd, as the lab's) is refused before anything is locked, copied or watched."""
    service = make_service(client, unit)
    try:
        with pytest.raises(HostError, match=r"does not exist on the host|no unit file \(FragmentPath\)") as refused:
            async with service.guard("alice@console1", grace_s=1):
                raise AssertionError("a guard without a unit file to copy")
        assert unit in str(refused.value)
        assert not Path(lock_path(unit)).exists()
        assert list(Path("/run/lock").glob(f"opsconsole-{unit}.tune-*")) == []
    finally:
        await service.transport.close()
