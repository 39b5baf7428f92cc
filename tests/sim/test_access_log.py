"""The stand-in's access log: uvicorn's line for each HTTP request, on the stream of its other lines, with SGLang's
--uvicorn-access-log-exclude-prefixes (0.5.9 and later) and uvicorn's level (--log-level-http, else --log-level).
The line's format is held to the real 0.5.17 capture in test_real_0517_parity.py."""

from __future__ import annotations

import re
import signal
import time

import httpx
import pytest

from console.sim import sglang_log as L
from tests.support.simproc import FAST, SimProcess, running_sim

ACCESS = re.compile(r'INFO:     127\.0\.0\.1:\d+ - "([A-Z]+) (\S+) HTTP/1\.1" (\d{3}) ')


def logged(output: str) -> list[tuple[str, str, int]]:
    return [(m[1], m[2], int(m[3])) for m in ACCESS.finditer(output)]


def read_until(sim: SimProcess, line: str, count: int = 1, timeout: float = 30.0) -> str:
    """The stand-in's output once `count` lines holding `line` have been read (later lines come later)."""
    deadline = time.monotonic() + timeout
    while (output := sim.output()).count(line) < count:
        assert time.monotonic() < deadline, f"fewer than {count} {line!r} in:\n{output}"
        time.sleep(0.01)
    return output


def test_the_line_is_uvicorns_with_the_status_phrase() -> None:
    assert L.access("127.0.0.1:37124", "GET", "/health", 503) == (
        'INFO:     127.0.0.1:37124 - "GET /health HTTP/1.1" 503 Service Unavailable'
    )
    assert L.access("127.0.0.1:1", "POST", "/v1/chat/completions", 200).endswith('HTTP/1.1" 200 OK')


def test_exclusion_is_a_plain_prefix_of_the_path_without_its_query() -> None:
    excluded = L.access_log_excluded({"uvicorn_access_log_exclude_prefixes": ["/health", "", "/metrics", "/health"]})
    assert excluded == ("/health", "/metrics")  # empty ones dropped, duplicates once, in order
    assert not L.access_logged("/health_generate", excluded)  # startswith, no segment boundary
    assert not L.access_logged("/metrics?name=x", excluded)
    assert L.access_logged("/v1/loads?include=/metrics", excluded)
    assert L.access_logged("/health", L.access_log_excluded({"uvicorn_access_log_exclude_prefixes": []}))
    assert L.access_log_excluded({}) == ()  # 0.5.6 has no such flag


@pytest.mark.parametrize(
    ("resolved", "on"),
    [
        ({}, True),
        ({"log_level": "info", "log_level_http": None}, True),
        ({"log_level": "warning", "log_level_http": None}, False),
        ({"log_level": "warning", "log_level_http": "info"}, True),  # --log-level-http wins
        ({"log_level": "info", "log_level_http": "error"}, False),
        ({"log_level": "DEBUG"}, True),
    ],
)
def test_uvicorn_prints_access_lines_at_info_and_below(resolved: dict[str, object], on: bool) -> None:
    assert L.access_log_on(resolved) is on


@pytest.mark.system  # the stand-in as a process (tests/tiers.py)
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_excluded_prefixes_are_not_logged_and_the_rest_is(version: str) -> None:
    args = [*FAST, "--sim-sglang-version", version, "--enable-metrics"]
    with running_sim([*args, "--uvicorn-access-log-exclude-prefixes", "/health", "/metrics"]) as sim:
        for path in ("/health", "/health_generate", "/metrics", "/metrics?x=1", "/v1/models", "/no_such_endpoint"):
            httpx.get(sim.url + path, timeout=30)
        httpx.post(sim.url + "/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 2}}, timeout=30)
        requests = logged(read_until(sim, '"POST /generate HTTP/1.1" 200 OK', count=2))  # the warm-up's, this one
    assert not [r for r in requests if r[1].startswith(("/health", "/metrics"))]
    assert {("GET", "/v1/models", 200), ("GET", "/no_such_endpoint", 404)} <= set(requests)
    assert requests.count(("POST", "/generate", 200)) == 2


@pytest.mark.system  # the stand-in as a process (tests/tiers.py)
def test_without_exclusions_every_request_is_logged_on_every_version() -> None:
    with running_sim([*FAST, "--sim-sglang-version", "0.5.6", "--enable-metrics"]) as sim:
        for path in ("/health", "/metrics", "/v1/models"):
            httpx.get(sim.url + path, timeout=30)
        requests = logged(read_until(sim, '"GET /v1/models HTTP/1.1" 200 OK'))
    assert {("GET", "/health", 200), ("GET", "/metrics", 200), ("GET", "/v1/models", 200)} <= set(requests)


@pytest.mark.system  # the stand-in as a process (tests/tiers.py)
def test_log_level_http_above_info_silences_the_access_log_only() -> None:
    with running_sim([*FAST, "--sim-sglang-version", "0.5.17", "--log-level-http", "warning"]) as sim:
        httpx.get(sim.url + "/v1/models", timeout=30)
        httpx.post(sim.url + "/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 2}}, timeout=30)
        sim.proc.send_signal(signal.SIGTERM)
        output = read_until(sim, "kill_process_tree called")  # 0.5.17's last line: all the rest was read
    assert logged(output) == [] and "The server is fired up and ready to roll!" in output
