"""Journal follow: resumes from the saved cursor after a drop and never yields an entry twice.

The transport here is a scripted stand-in (this is a unit test of the resume logic); the real SSH
stream's drop detection is tested in test_ssh_transport.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence

from console.host.base import CommandResult, ConnectionDropped
from console.host.journal import follow_journal


def entry(n: int) -> str:
    return json.dumps({"__CURSOR": f"c{n}", "__REALTIME_TIMESTAMP": str(1_796_000_000_000_000 + n), "MESSAGE": f"m{n}"})


class DroppingTransport:
    """First stream: entries 1-3 then the link drops. Second: entries 3-5 (3 again, as systemd #30288 can)."""

    label = "scripted"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def run(
        self, argv: Sequence[str], *, sudo: bool = False, timeout: float | None = None, input: str | None = None
    ) -> CommandResult:
        raise AssertionError("not used")

    async def stream(self, argv: Sequence[str], *, sudo: bool = False) -> AsyncIterator[str]:
        self.calls.append(list(argv))
        if len(self.calls) == 1:
            for n in (1, 2, 3):
                yield entry(n)
            raise ConnectionDropped("link down")
        for n in (3, 4, 5):
            yield entry(n)

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        raise AssertionError("not used")

    async def close(self) -> None:
        return None


async def test_resume_after_drop_without_duplicates() -> None:
    transport = DroppingTransport()
    seen = [e.message async for e in follow_journal(transport, "sglang.service", sudo=True, lines=10, follow=True)]
    assert seen == ["m1", "m2", "m3", "m4", "m5"]
    first, second = transport.calls
    assert "-n" in first and "-f" in first
    assert "--after-cursor=c3" in second and "-n" not in second
