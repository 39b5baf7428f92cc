"""A host that stops answering, against a real OpenSSH sshd on loopback: every wait of the SSH transport on the host
ends within the caller's bound with an error that says what was waited for, instead of a console that waits for
keepalive (~20 s) or for a reconnect to a host that accepts TCP and never answers SSH (connect_timeout per attempt,
ten attempts: minutes).

The sshd is SIGSTOPped: its listener and the processes serving this connection. The kernel still accepts TCP
connections into the stopped listener's backlog and acknowledges what is sent, so the client side sees exactly a
host whose sshd hangs (or a relay that went silent): nothing comes back.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from console.host.base import HostError, HostNotAnswering
from console.host.ssh import SHELL_POOL, SshTransport
from tests.host.sshd_lab import ClientSide, Sshd, sshd_lab, write_client
from tests.host.test_ssh_transport import make_transport
from tests.support.procs import children_of

pytestmark = pytest.mark.system

BOUND_S = 3.0  # the transport's peer_wait_s in these tests
# How late an error may come past its bound: the machine's load, not the transport (every wait measured here is
# 15 s or more without the bounds: keepalive's 4 missed intervals, or connect_timeout).
LATE_S = 5.0


@pytest.fixture
def own_sshd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Sshd, ClientSide]]:
    """An sshd of this test's own (it gets stopped: the session-wide one serves other tests)."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with sshd_lab() as server:
        yield server, write_client(tmp_path, server)


def _sshd_processes(sshd: Sshd) -> list[int]:
    """The listener and every sshd process under it (those serving connections), not the users' commands."""
    assert sshd.process is not None
    found = [sshd.process.pid]
    queue = [sshd.process.pid]
    while queue:
        for child in children_of(queue.pop()):
            queue.append(child)
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except FileNotFoundError:
                continue  # ended meanwhile
            if command.startswith(b"sshd"):
                found.append(child)
    return found


@asynccontextmanager
async def silent(sshd: Sshd) -> AsyncIterator[None]:
    stopped = _sshd_processes(sshd)
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


async def timed(call: object) -> tuple[float, BaseException | None]:
    """How long the call took (bounded by the test, far above what the transport may take) and what it raised."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with asyncio.timeout(BOUND_S + LATE_S + 10):
            await call  # type: ignore[misc]
    except TimeoutError:
        return loop.time() - started, None  # still waiting: what the bound is for
    except HostError as exc:
        return loop.time() - started, exc
    return loop.time() - started, None


def transport_for(client: ClientSide, **kwargs: object) -> SshTransport:
    # keepalive every second: the dead connection is noticed in ~4 s, so that the reconnect to the stopped sshd
    # (connect_timeout 15 s an attempt) is what the later calls wait on
    return make_transport(client, peer_wait_s=BOUND_S, keepalive_interval_s=1.0, **kwargs)


async def test_a_host_that_stops_answering_is_an_error_within_the_bound_that_says_what_was_waited_for(
    own_sshd: tuple[Sshd, ClientSide],
) -> None:
    sshd, client = own_sshd
    transport = transport_for(client)
    try:
        assert (await transport.run(["true"], timeout=30)).ok
        port = await transport.forward_port("127.0.0.1", sshd.port)  # any port on the host: the sshd's own
        async with silent(sshd):
            # More commands than command shells: the shells' commands time out (the caller's timeout), the others
            # wait for a channel the host never opens, then for the reconnect
            burst = await asyncio.gather(
                *(timed(transport.run(["true"], timeout=BOUND_S)) for _ in range(SHELL_POOL + 2))
            )
            for took, error in burst:
                assert error is not None and took < BOUND_S + LATE_S, burst
            unopened = [str(error) for _, error in burst if isinstance(error, HostNotAnswering)]
            assert unopened, burst
            assert all(f"no answer for {BOUND_S:.0f} s while " in text for text in unopened), unopened

            deadline = asyncio.get_running_loop().time() + 30
            while transport.state.phase == "connected":  # keepalive gives the connection up after ~4 s of silence
                assert asyncio.get_running_loop().time() < deadline, transport.state
                await asyncio.sleep(0.05)
            # the reconnect's TCP connect lands in the stopped listener's backlog: no SSH banner ever comes
            took, error = await timed(transport.run(["true"], timeout=60))
            assert isinstance(error, HostNotAnswering) and took < BOUND_S + LATE_S, (took, error)
            assert "while waiting for the connection (reconnecting" in str(error), error
            assert "check that the host is up" in str(error), error

            async def follow() -> None:
                async for _line in transport.stream(["journalctl", "-f"]):
                    pass

            took, error = await timed(follow())
            assert isinstance(error, HostNotAnswering) and took < BOUND_S + LATE_S, (took, error)

            took, error = await timed(transport.round_trip())
            assert isinstance(error, HostError) and took < BOUND_S + LATE_S, (took, error)

            # a local client of the forward: its channel needs the connection, which does not come
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            took, error = await timed(reader.read())
            writer.close()
            assert error is None and took < BOUND_S + LATE_S, (took, error)  # closed by the forward, not by the test
        # answering again: the same transport reconnects by itself (its attempt under way finishes, or the next)
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            try:
                assert (await transport.run(["echo", "back"], timeout=30)).stdout == "back\n"
                break
            except HostNotAnswering:
                assert asyncio.get_running_loop().time() < deadline, transport.state
        audit = (client.dir / "logs" / "audit.jsonl").read_text()
        assert "not started: lab: no answer for" in audit
    finally:
        took, _ = await timed(transport.close())
        assert took < 6.0, took


async def test_a_command_waiting_for_a_channel_slot_gives_up_within_its_timeout(client: ClientSide) -> None:
    """The channel budget (a semaphore) full of streams and the command shells all busy: a command that needs a
    channel of its own says so within its timeout instead of waiting for a stream to end (or forever)."""
    transport = make_transport(client, channel_budget=1)
    try:
        assert (await transport.run(["true"], timeout=30)).ok
        deadline = asyncio.get_running_loop().time() + 30
        while transport.command_shells < SHELL_POOL:
            assert asyncio.get_running_loop().time() < deadline, transport.command_shells
            await asyncio.sleep(0.02)
        stream = transport.stream(["sh", "-c", "echo holding; exec sleep 120"])
        assert await anext(stream) == "holding"  # the only channel slot, held
        sleepers = [asyncio.ensure_future(transport.run(["sleep", "120"], timeout=60)) for _ in range(SHELL_POOL)]
        while any(not shell.busy for shell in transport._shells):  # every shell running a sleep
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        took, error = await timed(transport.run(["true"], timeout=2.0))
        assert isinstance(error, HostNotAnswering) and took < 2.0 + LATE_S, (took, error)
        assert "waiting for a free channel (all 1 this console opens to the host are busy" in str(error), error
        for sleeper in sleepers:
            sleeper.cancel()
        await stream.aclose()
    finally:
        await transport.close()
