"""How many round trips the link to a host costs, counted from what goes over it (pure: no clock, no I/O).

Every exchange the console starts on an SSH connection and has to wait for is recorded as begin/end: a channel
opened (CHANNEL_OPEN -> confirmation), a command started on it (exec request -> reply), a command sent to the
host's command shell (request line -> answer line), an HTTP request through the port forward (request bytes ->
first answer bytes), a ping. On a link with a long round trip each of these costs one round trip, unless it
overlaps another one.

`depth` is the length of the longest chain of exchanges where each began after the one before it ended: the
number of round trips the console had to sit through. Exchanges that went out together share a round: an
exchange's round is one more than the highest round among the exchanges that had ended when it began. The
difference of `depth` before and after an operation is what that operation cost in round trips, whatever the
link's latency; `counts` says what kind of exchanges they were (e.g. `channel_open`, `exec`, `shell`, `http`).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

# The kinds of exchange, as counted.
CHANNEL_OPEN = "channel_open"  # a session channel (exec) or a forwarded TCP connection opened
EXEC = "exec"  # a command started on an opened session channel
SHELL = "shell"  # a command run by the host's long-lived command shell
HTTP = "http"  # an HTTP request through the port forward
PING = "ping"  # an echo of the command shell: the link's round trip, without the host's work


@dataclass(frozen=True)
class Exchange:
    kind: str
    round: int


@dataclass(frozen=True)
class MeterReading:
    """The meter at one moment; subtract two readings for what happened in between."""

    depth: int
    counts: dict[str, int] = field(default_factory=dict)

    def __sub__(self, earlier: MeterReading) -> MeterReading:
        kinds = sorted(set(self.counts) | set(earlier.counts))
        counts = {k: self.counts.get(k, 0) - earlier.counts.get(k, 0) for k in kinds}
        return MeterReading(self.depth - earlier.depth, {k: n for k, n in counts.items() if n})

    @property
    def requests(self) -> int:
        """Everything the console sent and waited for (channels opened, commands, HTTP requests, pings)."""
        return sum(self.counts.values())


class LinkMeter:
    """Counts exchanges and the round trips they cost; keeps the recent round-trip times of pings."""

    def __init__(self, keep_round_trips: int = 5) -> None:
        self._ended_depth = 0  # the highest round among the exchanges that ended
        self._depth = 0  # the highest round handed out
        self._counts: Counter[str] = Counter()
        self._round_trips: deque[float] = deque(maxlen=keep_round_trips)

    def begin(self, kind: str) -> Exchange:
        exchange = Exchange(kind, self._ended_depth + 1)
        self._depth = max(self._depth, exchange.round)
        self._counts[kind] += 1
        return exchange

    def end(self, exchange: Exchange | None) -> None:
        if exchange is not None:
            self._ended_depth = max(self._ended_depth, exchange.round)

    def reading(self) -> MeterReading:
        return MeterReading(self._depth, dict(self._counts))

    def round_trip_measured(self, seconds: float) -> None:
        self._round_trips.append(seconds)

    @property
    def round_trip_s(self) -> float | None:
        """The median of the last few pings (one slow answer does not move it), or None before the first."""
        if not self._round_trips:
            return None
        ordered = sorted(self._round_trips)
        return ordered[len(ordered) // 2]
