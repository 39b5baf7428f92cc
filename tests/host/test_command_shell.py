"""The command shell (console.host.shell) against a real sshd: one round trip per command, exact bytes both ways,
nothing left on the host when the console goes, and a host without base64 falls back to plain channels."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from console.host.base import HostError
from console.host.linkmeter import CHANNEL_OPEN, EXEC, SHELL
from console.host.shell import ShellAnswer, encode_request, parse_answer
from console.host.ssh import SshTransport
from console.host.targets import Target
from tests.host.sshd_lab import TEST_USER, ClientSide, Sshd


def _transport(client: ClientSide) -> SshTransport:
    return SshTransport(Target(label="lab", transport="ssh", ssh_host="lab", ssh_config=(str(client.config),)))


def test_request_and_answer_round_trip_any_bytes() -> None:
    line = encode_request("r7", "printf '%s\\n' 'a b'", b"\x00\xffunit\n")
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.startswith(b"r7 ")
    parsed = parse_answer(b"r7 3 aGVsbG8K -")
    assert parsed == ("r7", ShellAnswer(3, b"hello\n", b""))
    assert parse_answer(b"not an answer") is None
    assert parse_answer(b"r1 0 %%% -") is None  # broken base64 is not an answer


async def test_commands_after_the_first_cost_one_round_trip_and_no_channel(client: ClientSide) -> None:
    transport = _transport(client)
    try:
        first = await transport.run(["sh", "-c", "cat; echo err >&2; exit 3"], input="line 1\nline 2")
        assert (first.exit_status, first.stdout, first.stderr) == (3, "line 1\nline 2", "err\n")
        before = transport.meter.reading()
        second = await transport.run(["printf", "%s|", "a b", "$HOME", "'q'"])
        cost = transport.meter.reading() - before
        assert second.stdout == "a b|$HOME|'q'|"
        assert cost.depth == 1 and cost.counts.get(SHELL) == 1
        assert cost.counts.get(CHANNEL_OPEN, 0) == 0 and cost.counts.get(EXEC, 0) == 0
    finally:
        await transport.close()


async def test_commands_sent_together_share_one_round_trip(client: ClientSide) -> None:
    transport = _transport(client)
    try:
        await asyncio.gather(*(transport.run(["true"]) for _ in range(3)))
        # every shell of the pool up: three commands can be served by two shells while the third still starts (on a
        # loaded machine), and its start ending in the window below would count as a round before the commands
        deadline = asyncio.get_running_loop().time() + 30
        while transport.command_shells < 3:
            assert asyncio.get_running_loop().time() < deadline, transport.command_shells
            await asyncio.sleep(0.01)
        before = transport.meter.reading()
        results = await asyncio.gather(*(transport.run(["echo", str(i)]) for i in range(3)))
        cost = transport.meter.reading() - before
        assert [r.stdout for r in results] == ["0\n", "1\n", "2\n"]
        assert cost.depth == 1 and cost.counts == {SHELL: 3}
    finally:
        await transport.close()


async def test_a_ping_measures_the_round_trip(client: ClientSide) -> None:
    transport = _transport(client)
    try:
        seconds = await transport.round_trip(samples=3)
        assert 0 < seconds < 1.0 and transport.meter.round_trip_s is not None
    finally:
        await transport.close()


def _test_user_processes(pattern: str) -> list[str]:
    argv = ["ps", "-ww", "-u", TEST_USER, "-o", "pid=,args="]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return [line for line in done.stdout.splitlines() if pattern in line]


async def test_the_shell_and_its_files_go_when_the_console_closes(client: ClientSide) -> None:
    transport = _transport(client)
    # each command runs as `sh DIR/c`, DIR the shell's private dir: read it from the parent's command line
    result = await transport.run(["sh", "-c", 'tr "\\0" "\\n" < /proc/$PPID/cmdline'])
    shell_dir = Path(result.stdout.split()[-1]).parent
    assert shell_dir.name.startswith("opsconsole-shell.") and shell_dir.is_dir()
    assert _test_user_processes("opsconsole-shell")
    await transport.close()
    deadline = time.monotonic() + 10
    while (_test_user_processes("opsconsole-shell") or shell_dir.exists()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _test_user_processes("opsconsole-shell") == []
    assert not shell_dir.exists()


async def test_a_command_that_times_out_closes_only_its_shell(client: ClientSide) -> None:
    transport = _transport(client)
    try:
        assert (await transport.run(["true"])).exit_status == 0  # connected, a shell idle: the 0.3 s are the command's
        with pytest.raises(HostError, match=r"did not finish within 0\.3 s"):
            await transport.run(["sleep", "5"], timeout=0.3)
        assert (await transport.run(["echo", "after"])).stdout == "after\n"
    finally:
        await transport.close()


async def test_without_base64_commands_run_on_their_own_channels(client: ClientSide, sshd: Sshd) -> None:
    """A host where base64 does not work (a broken one first on PATH): the shell refuses to start, and every
    command still runs, each on a channel of its own."""
    fake = sshd.root / "bin" / "base64"  # the lab puts ROOT/bin first on the test user's PATH
    fake.write_text("#!/bin/sh\nexit 127\n")
    os.chmod(fake, 0o755)
    transport = _transport(client)
    try:
        before = transport.meter.reading()
        first = await transport.run(["printf", "%s", "still works"])
        second = await transport.run(["sh", "-c", "cat", "sh"], input="in")
        cost = transport.meter.reading() - before
        assert (first.stdout, second.stdout) == ("still works", "in")
        assert cost.counts.get(SHELL, 0) == 0 and cost.counts[EXEC] >= 2
    finally:
        await transport.close()
        fake.unlink()
