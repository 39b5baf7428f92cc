"""A host that refuses the journal (sudo wants a password): the console says why, once, in the journal pane, and
asks again less and less often instead of opening a channel every second for as long as it runs.

Against the real sshd on loopback: its test user has no sudo rule, so `sudo -n journalctl` is refused."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from pathlib import Path

from console.core.status import HostView, HostWatcher
from console.host.base import JournalEntry
from console.workspace import Workspace
from tests.host.sshd_lab import ClientSide

ATTEMPTS = 3


def journal_attempts(audit: Path) -> list[datetime]:
    if not audit.exists():
        return []
    records = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
    return [datetime.fromisoformat(r["time"]) for r in records if "journalctl" in r["command"]]


async def test_a_refused_journal_is_said_once_and_asked_again_ever_less_often(
    client: ClientSide, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "profiles").mkdir(parents=True)
    (workspace / "profiles" / "labhost.toml").write_text('[host]\nssh = "lab"\n')
    batches: list[list[JournalEntry]] = []
    views: list[HostView] = []
    watcher = HostWatcher(
        "labhost", Workspace(workspace), on_view=views.append, on_journal=batches.append, ssh_config=str(client.config)
    )
    tasks = [asyncio.create_task(watcher.run()), asyncio.create_task(watcher.follow_journal())]
    audit = workspace / "logs" / "audit.jsonl"
    try:
        deadline = time.monotonic() + 30
        while len(journal_attempts(audit)) < ATTEMPTS:  # the third attempt comes after 2 + 4 s of pauses
            assert time.monotonic() < deadline, f"journal attempts: {journal_attempts(audit)}"
            await asyncio.sleep(0.1)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    notices = [entry.message for batch in batches for entry in batch]
    assert len(notices) == 1, notices  # three refusals, said once
    assert "cannot follow the journal" in notices[0] and "sudo" in notices[0] and "password" in notices[0]
    first, second, third = journal_attempts(audit)[:ATTEMPTS]
    assert (second - first).total_seconds() >= 1.9  # not every second: 2 s, then 4 s, ... up to 30 s
    assert (third - second).total_seconds() >= 3.9
