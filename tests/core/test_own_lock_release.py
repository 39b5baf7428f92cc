"""A unit lock this very process let go of a moment ago is waited for, not refused (console.core.session's
MaskedService.lock and guard, which every operation that changes the unit takes the lock through).

The lock is held by a live connection and let go of by closing it; the host notices at its next heartbeat (the demo
supervisor checks its holder's connection every LOCK_CHECK_S, a systemd host every 0.2 s). A second tune planned
right after the first (tests/tune/test_tune_traffic_demo.py::test_tune_with_an_slo_on_chat_and_on_code, once under
load) was refused with UnitLocked naming the first: apply waited for its own previous lock, tune took the host's lock
directly. Here the demo supervisor's control socket runs in this process with its check every second, so that the
window between letting go and the host noticing is wide and sure; everything else is the real supervisor and its
real client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.core.session import MaskedService
from console.host.base import UnitLocked
from console.secrets import SecretMask
from console.sim import supervisor
from console.sim.supervisor import DemoServiceManager, UnitSupervisor, serve_control

FIRST = "ops@console-1 (opsconsole tune, pid 4242) since 2026-12-07T10:00:00+00:00"
SECOND = "ops@console-1 (opsconsole tune, pid 4242) since 2026-12-07T10:05:00+00:00"
ANOTHER = "ops@console-2 (opsconsole apply, pid 77) since 2026-12-07T10:04:00+00:00"
NOTICE_S = 1.0  # how often the supervisor checks that its lock holder's connection is still open, in this test
REFUSED_WITHIN_S = 5.0  # a refusal is one round trip on a local socket; an own lock's release is waited for 10 s


@pytest.fixture
async def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[UnitSupervisor, Path]]:
    monkeypatch.setattr(supervisor, "LOCK_CHECK_S", NOTICE_S)
    unit = tmp_path / "demo.service"
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    sup = UnitSupervisor("demo.service", unit, tmp_path / "backups")
    sock = tmp_path / "c.sock"
    runner = await serve_control(sup, sock)
    try:
        yield sup, sock
    finally:
        await sup.close()
        await runner.cleanup()


def service(sock: Path) -> MaskedService:
    """The service as a session gives it to every operation (a new one each time, as each tune opens its own)."""
    return MaskedService(DemoServiceManager(sock, "demo.service"), SecretMask())


async def test_a_lock_this_process_let_go_of_is_waited_for_not_refused(host: tuple[UnitSupervisor, Path]) -> None:
    sup, sock = host
    async with service(sock).lock(FIRST):
        assert sup.lock_owner == FIRST
    # let go of: the connection is closed, and the supervisor has not noticed yet (it checks every second)
    assert sup.lock_owner == FIRST, "the supervisor noticed before the second take: the window this test needs closed"
    async with service(sock).lock(SECOND):  # before the fix: UnitLocked, held by FIRST
        assert sup.lock_owner == SECOND


async def test_a_lock_another_holds_or_this_process_holds_open_is_refused_at_once(
    host: tuple[UnitSupervisor, Path],
) -> None:
    """Another console's lock, and this process's own still open (an apply beside a running tune), are no release on
    its way: refused at once, naming the holder (well before the wait for an own lock would give up)."""
    sup, sock = host
    async with DemoServiceManager(sock, "demo.service").lock(ANOTHER):
        with pytest.raises(UnitLocked, match="console-2"):
            await asyncio.wait_for(service(sock).lock(SECOND).__aenter__(), REFUSED_WITHIN_S)
    while sup.lock_owner is not None:  # the other console's lock let go of: the supervisor notices at its check
        await asyncio.sleep(0.05)
    async with service(sock).lock(FIRST):
        with pytest.raises(UnitLocked, match="10:00:00"):
            await asyncio.wait_for(service(sock).lock(SECOND).__aenter__(), REFUSED_WITHIN_S)
