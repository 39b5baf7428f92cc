"""The service journal: `journalctl -u UNIT -o json`, decoded defensively, resumable by cursor.

journalctl writes fields that are not valid UTF-8 (or contain control bytes) as arrays of byte values,
and a field may repeat as an array of values; `decode_field` copes with all of them. After a dropped
connection a follow resumes with --after-cursor and skips cursors it already yielded (systemd #30288:
--after-cursor with -u could repeat or skip one entry on older versions).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from console.host.base import ConnectionDropped, HostError, JournalEntry, Transport


def decode_field(value: Any) -> str | None:
    """A journal JSON field -> text: strings as is, byte arrays decoded (replacing bad bytes), null -> None."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(v, int) and 0 <= v < 256 for v in value):
            return bytes(value).decode("utf-8", "replace")
        parts = [decode_field(v) for v in value]  # a repeated field: keep the last value, like journalctl -o cat
        texts = [p for p in parts if p is not None]
        return texts[-1] if texts else None
    return str(value)


def parse_journal_line(line: str) -> JournalEntry | None:
    """One line of `journalctl -o json` -> JournalEntry, or None for lines that are not journal entries."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    cursor = decode_field(data.get("__CURSOR"))
    if not cursor:
        return None
    micros = _int(decode_field(data.get("__REALTIME_TIMESTAMP")))
    timestamp = datetime.fromtimestamp(micros / 1e6, UTC) if micros is not None else datetime.fromtimestamp(0, UTC)
    return JournalEntry(
        cursor=cursor,
        timestamp=timestamp,
        message=decode_field(data.get("MESSAGE")) or "",
        priority=_int(decode_field(data.get("PRIORITY"))),
        pid=_int(decode_field(data.get("_PID"))),
    )


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class CursorDeduplicator:
    """Remembers the last few thousand cursors so a resumed stream never yields an entry twice."""

    def __init__(self, capacity: int = 4096) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._capacity = capacity

    def first_time(self, cursor: str) -> bool:
        if cursor in self._seen:
            return False
        self._seen[cursor] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True


def journalctl_argv(unit: str, *, lines: int, follow: bool, after_cursor: str | None) -> list[str]:
    # --all: without it `-o json` prints a field over 4096 bytes as null, and SGLang's server_args line (every
    # setting, logged at each start) is longer than that.
    argv = ["journalctl", "-u", unit, "-o", "json", "--all", "--no-pager"]
    if after_cursor:
        argv.append(f"--after-cursor={after_cursor}")
    else:
        argv += ["-n", str(max(0, int(lines)))]
    if follow:
        argv.append("-f")
    return argv


async def follow_journal(
    transport: Transport,
    unit: str,
    *,
    sudo: bool,
    lines: int = 100,
    follow: bool = False,
    after_cursor: str | None = None,
    max_resumes: int = 100,
) -> AsyncIterator[JournalEntry]:
    """Backlog (and with follow, new entries) of UNIT; resumes from the last cursor after a drop.

    A backlog alone is one command (`run`: one round trip on a command shell); a follow is a stream."""
    seen = CursorDeduplicator()
    cursor = after_cursor
    resumes = 0
    while True:
        argv = journalctl_argv(unit, lines=lines, follow=follow, after_cursor=cursor)
        try:
            async for line in transport.stream(argv, sudo=sudo) if follow else _backlog(transport, argv, sudo):
                entry = parse_journal_line(line)
                if entry is None or not seen.first_time(entry.cursor):
                    continue
                cursor = entry.cursor
                yield entry
            return
        except ConnectionDropped:
            resumes += 1
            if resumes > max_resumes:
                raise
            if cursor is None:
                lines = 0 if follow else lines  # nothing seen yet: do not replay an already-shown backlog
            continue  # the transport reconnects on the next stream()


async def _backlog(transport: Transport, argv: list[str], sudo: bool) -> AsyncIterator[str]:
    """The lines of a journalctl that ends by itself, read as one command."""
    result = await transport.run(argv, sudo=sudo, timeout=120)
    if not result.ok and not result.stdout:
        raise HostError(f"{transport.label}: `journalctl -u ...` failed: {(result.stderr or '').strip()[:500]}")
    for line in result.stdout.splitlines():
        yield line
