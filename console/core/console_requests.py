"""The console's own requests, told apart in the service's journal (pure).

SGLang logs every HTTP request it serves (uvicorn's access log, `INFO:     127.0.0.1:37124 - "GET /health
HTTP/1.1" 200 OK`), so a console that polls once a second writes about a line a second into the journal it
shows. The session's client notes every request it sends (SentRequests.record: method, target, when); an access
line from a loopback address (the SSH forward's end on the host, or the console on the same machine) for the same
method and target, within the window of one of those requests, is the console's own (SentRequests.claim). Each
request accounts for one line at most: another client polling the same paths from the host itself keeps its
lines beyond what this console sent.

The window is on the journal's clock (the host's) against the console's: CLOCK_SKEW_S of the host's clock being
behind, and the client's timeout plus that skew after it (uvicorn logs a request when it answers it). A host
whose clock is further off gets nothing folded: its lines show, as they did before.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from console.host.base import JournalEntry

CLOCK_SKEW_S = 2.0
ANSWER_WITHIN_S = 10.0  # console.sglang.client's timeout: a later answer the client no longer waits for
KEPT = 2048  # requests remembered (the console sends 1-3 a second; a journal line arrives within seconds)

# uvicorn's access line as SGLang configures it (the stand-in's sim/sglang_log.py `access`), after SGLang's stamp
ACCESS = re.compile(r'INFO:\s+(?P<peer>\S+):\d+ - "(?P<method>[A-Z]+) (?P<target>\S+) HTTP/[0-9.]+" \d{3}\b')


@dataclass(frozen=True)
class AccessLine:
    peer: str  # the client's address as uvicorn writes it (no port)
    method: str
    target: str  # path and query string, as requested


def parse_access(message: str) -> AccessLine | None:
    """The request an access line logs, or None for any other line."""
    found = ACCESS.search(message)
    if found is None:
        return None
    return AccessLine(found["peer"], found["method"], found["target"])


def is_loopback(peer: str) -> bool:
    return peer.startswith("127.") or peer in ("::1", "[::1]", "localhost")


@dataclass(frozen=True)
class ConsoleRequest(JournalEntry):
    """A journal line that logs a request of this console (folded in the journal pane, shown on request)."""

    @classmethod
    def of(cls, entry: JournalEntry) -> ConsoleRequest:
        return cls(entry.cursor, entry.timestamp, entry.message, entry.priority, entry.pid)


class SentRequests:
    """The requests one session's client sent (recorded as they go out), matched against access lines."""

    def __init__(self, *, answer_within_s: float = ANSWER_WITHIN_S, skew_s: float = CLOCK_SKEW_S) -> None:
        self._sent: deque[tuple[str, str, datetime]] = deque(maxlen=KEPT)
        self._early = timedelta(seconds=skew_s)
        self._late = timedelta(seconds=answer_within_s + skew_s)
        self.claimed = 0  # lines recognised so far

    def record(self, method: str, target: str, at: datetime | None = None) -> None:
        self._sent.append((method, target, at or datetime.now(UTC)))

    def claim(self, entry: JournalEntry) -> bool:
        """True when the line logs one of the requests sent (that request is then spent)."""
        line = parse_access(entry.message)
        if line is None or not is_loopback(line.peer):
            return False
        at = entry.timestamp
        sent = self._sent
        while sent and sent[0][2] + self._late < at:  # lines come in time order: older requests are done
            sent.popleft()
        for index, (method, target, sent_at) in enumerate(sent):
            if sent_at - self._early > at:
                return False  # sent after the line was written, and so is every later one
            if method == line.method and target == line.target:
                del sent[index]
                self.claimed += 1
                return True
        return False

    def tag(self, entry: JournalEntry) -> JournalEntry:
        """The entry, as a ConsoleRequest when it logs one of the requests sent."""
        return ConsoleRequest.of(entry) if self.claim(entry) else entry
