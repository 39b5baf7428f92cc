"""The console's own requests told apart in the journal (console/core/console_requests.py): pure matching of
access lines against the requests the client sent, on the lines real SGLang 0.5.17 writes (the capture)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.core.console_requests import ConsoleRequest, SentRequests, parse_access
from console.host.base import JournalEntry

CAPTURE = Path(__file__).resolve().parents[1] / "sim" / "fixtures" / "real-0.5.17" / "capture" / "server.log"
T0 = datetime(2026, 11, 30, 13, 16, 6, tzinfo=UTC)


def entry(message: str, at: datetime, cursor: str = "c") -> JournalEntry:
    return JournalEntry(cursor=cursor, timestamp=at, message=message)


def access(path: str, *, peer: str = "127.0.0.1", status: str = "200 OK", method: str = "GET") -> str:
    return f'[2026-11-30 13:16:06] INFO:     {peer}:37124 - "{method} {path} HTTP/1.1" {status}'


def test_the_access_lines_of_the_real_capture_are_read_as_requests_and_nothing_else_is() -> None:
    lines = CAPTURE.read_text().splitlines()
    requests = [parse_access(line) for line in lines]
    read = [r for r in requests if r is not None]
    assert len(read) == sum('HTTP/1.1" ' in line for line in lines) > 5
    first = read[0]
    assert (first.peer, first.method, first.target) == ("127.0.0.1", "GET", "/health")
    assert {r.target for r in read} >= {"/health", "/model_info", "/health_generate"}
    assert parse_access("[2026-11-30 13:16:06] INFO:     Uvicorn running on http://127.0.0.1:30000") is None


def test_a_line_of_a_request_sent_is_the_consoles_and_spends_that_request() -> None:
    sent = SentRequests()
    sent.record("GET", "/metrics", T0)
    sent.record("GET", "/health", T0)
    line = entry(access("/metrics"), T0 + timedelta(milliseconds=40))
    assert isinstance(sent.tag(line), ConsoleRequest)
    assert not sent.claim(entry(access("/metrics"), T0 + timedelta(milliseconds=60)))  # one line per request
    assert sent.claim(entry(access("/health", status="503 Service Unavailable"), T0 + timedelta(seconds=1)))
    assert sent.claimed == 2


def test_lines_that_are_not_the_consoles_stay_as_they_are() -> None:
    sent = SentRequests()
    for _ in range(3):
        sent.record("GET", "/metrics", T0)
    at = T0 + timedelta(milliseconds=30)
    assert not sent.claim(entry(access("/metrics", peer="10.0.0.7"), at))  # from another machine
    assert not sent.claim(entry(access("/v1/loads"), at))  # a path the console did not ask
    assert not sent.claim(entry(access("/metrics", method="POST"), at))
    assert not sent.claim(entry(access("/metrics?x=1"), at))  # another target
    assert not sent.claim(entry("[2026-11-30 13:16:06] Decode batch, #running-req: 1", at))
    assert not sent.claim(entry(access("/metrics"), T0 - timedelta(seconds=5)))  # written before it was sent
    assert not sent.claim(entry(access("/metrics"), T0 + timedelta(seconds=30)))  # long after: not its answer
    plain = entry(access("/metrics", peer="10.0.0.7"), at)
    assert sent.tag(plain) is plain


def test_the_window_allows_for_the_hosts_clock_being_a_little_off() -> None:
    sent = SentRequests(answer_within_s=10.0, skew_s=2.0)
    sent.record("GET", "/metrics", T0)
    sent.record("GET", "/metrics", T0 + timedelta(seconds=1))
    assert sent.claim(entry(access("/metrics"), T0 - timedelta(seconds=1.5)))  # the host's clock behind
    assert sent.claim(entry(access("/metrics"), T0 + timedelta(seconds=12.5)))  # slow answer, clock ahead
    assert not sent.claim(entry(access("/metrics"), T0 + timedelta(seconds=13)))  # both spent


def test_ipv6_loopback_counts_as_the_host_itself() -> None:
    sent = SentRequests()
    sent.record("GET", "/health", T0)
    assert sent.claim(entry(access("/health", peer="::1"), T0))
