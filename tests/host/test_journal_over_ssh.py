"""`logs -f` semantics over the real sshd: the follow survives an sshd kill, resumes from the saved cursor
and never shows an entry twice. journalctl is a stand-in on the test user's PATH (no systemd here);
the nspawn testbed runs the real one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from console.host.audit import AuditLog
from console.host.ssh import SshTransport
from console.host.systemd import SystemdService
from console.host.targets import resolve_target
from tests.host.sshd_lab import ClientSide, Sshd, install_journal_stub


def append(entries: Path, *numbers: int) -> None:
    with entries.open("a") as handle:
        for n in numbers:
            entry = {"__CURSOR": f"c{n}", "__REALTIME_TIMESTAMP": str(1_796_000_000_000_000 + n), "MESSAGE": f"m{n}"}
            handle.write(json.dumps(entry) + "\n")


async def test_follow_resumes_after_the_sshd_is_killed(client: ClientSide, sshd: Sshd) -> None:
    entries = install_journal_stub(sshd)
    append(entries, 1, 2, 3)
    target = resolve_target("lab", profiles_dir=client.dir, ssh_config=str(client.config))
    transport = SshTransport(target, audit=AuditLog(client.dir / "audit.jsonl"))
    service = SystemdService(transport, "sglang.service", sudo=False)
    seen: list[str] = []
    try:
        follow = service.journal(lines=2, follow=True)
        seen += [(await asyncio.wait_for(anext(follow), 10)).message for _ in range(2)]
        assert seen == ["m2", "m3"]  # -n 2
        sshd.stop()
        append(entries, 4, 5)  # written while the console is cut off
        await asyncio.to_thread(sshd.start)
        while len(seen) < 4:
            seen.append((await asyncio.wait_for(anext(follow), 15)).message)
        append(entries, 6)
        seen.append((await asyncio.wait_for(anext(follow), 10)).message)
        await follow.aclose()
    finally:
        await transport.close()
        if sshd.process is None:
            sshd.start()
    assert seen == ["m2", "m3", "m4", "m5", "m6"]
    commands = [json.loads(line)["command"] for line in (client.dir / "audit.jsonl").read_text().splitlines()]
    assert any("--after-cursor=c3" in c for c in commands), commands


async def test_backlog_without_follow(client: ClientSide, sshd: Sshd) -> None:
    entries = install_journal_stub(sshd)
    append(entries, *range(1, 8))
    target = resolve_target("lab", profiles_dir=client.dir, ssh_config=str(client.config))
    transport = SshTransport(target)
    try:
        got = [e.message async for e in SystemdService(transport, "sglang.service", sudo=False).journal(lines=3)]
    finally:
        await transport.close()
    assert got == ["m5", "m6", "m7"]
