"""The SGLang client against real HTTP servers on ephemeral ports (aiohttp), shaped like SGLang 0.5.6/0.5.23."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from console.sglang.client import Endpoints, SglangClient, parse_metrics, summarize
from console.sglang.histograms import Histogram

METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="0"} 3.0
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="1"} 2.0
# HELP sglang:spec_accept_length Accept length.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m"} 2.75
"""


async def serve(routes: list[web.RouteDef]) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
async def old_server() -> AsyncIterator[tuple[str, list[str]]]:
    """SGLang 0.5.6-like: only the deprecated /get_server_info answers here, /get_load, an API key."""
    auth: list[str] = []

    def guarded(payload: Any) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            auth.append(request.headers.get("Authorization", ""))
            if request.headers.get("Authorization") != "Bearer sk-test":
                return web.json_response({"error": "Unauthorized"}, status=401)
            return web.json_response(payload)

        return handler

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=METRICS)

    info = {"version": "0.5.6", "max_running_requests": 48, "speculative_num_steps": 3, "internal_states": []}
    runner, url = await serve(
        [
            web.get("/get_server_info", guarded(info)),
            web.get("/get_model_info", guarded({"model_path": "/models/q"})),
            web.get("/get_load", guarded([{"dp_rank": 0, "num_reqs": 4, "num_waiting_reqs": 1, "num_tokens": 9}])),
            web.get("/metrics", metrics),
        ]
    )
    yield url, auth
    await runner.cleanup()


async def test_old_version_uses_old_endpoints_and_the_key(old_server: tuple[str, list[str]]) -> None:
    url, auth = old_server
    async with SglangClient(url, api_key="sk-test") as client:
        assert await client.detect_version() == "0.5.6"
        assert client.endpoints.load == "/get_load"
        summary = summarize(await client.server_info(), await client.model_info(), await client.load())
    assert summary["num_running_reqs"] == 4 and summary["num_queue_reqs"] == 1
    assert summary["speculative_num_steps"] == 3 and summary["model_path"] == "/models/q"
    assert all(a == "Bearer sk-test" for a in auth)


async def test_wrong_key_is_a_clear_error(old_server: tuple[str, list[str]]) -> None:
    url, _ = old_server
    async with SglangClient(url, api_key="wrong") as client:
        with pytest.raises(Exception, match="401") as raised:
            await client.detect_version()
        assert "wrong" not in str(raised.value)


async def test_a_401_is_answered_with_the_key_the_session_gives_once(old_server: tuple[str, list[str]]) -> None:
    """No key: the first refused request asks for one (the host session gives the unit's --api-key), is sent again
    with it, and every later request carries it; a hook with nothing better leaves the 401 as it was."""
    url, auth = old_server
    asked: list[str | None] = []

    async def unit_key(refused: str | None) -> str | None:
        asked.append(refused)
        return "sk-test"

    async with SglangClient(url, on_unauthorized=unit_key) as client:
        assert await client.detect_version() == "0.5.6"
        await asyncio.gather(client.server_info(), client.model_info(), client.load())
    assert asked == [None] and client.api_key == "sk-test"
    assert auth == ["", "Bearer sk-test", "Bearer sk-test", "Bearer sk-test", "Bearer sk-test"]

    async def same_key(refused: str | None) -> str | None:
        return refused

    async with SglangClient(url, api_key="stale", on_unauthorized=same_key) as client:
        with pytest.raises(Exception, match="401"):
            await client.detect_version()


async def test_notices_health_turning_200_within_half_a_second() -> None:
    ready_at: list[float] = []

    async def health(request: web.Request) -> web.Response:
        return web.Response(status=200 if ready_at else 503)

    runner, url = await serve([web.get("/health", health)])
    try:
        async with SglangClient(url) as client:
            waiter = asyncio.create_task(client.wait_until_healthy(10))
            await asyncio.sleep(0.7)  # the server is "starting" for a while: 503s
            assert not waiter.done()
            ready_at.append(time.monotonic())
            assert await waiter
            noticed = time.monotonic() - ready_at[0]
        assert noticed < 0.5, f"readiness noticed after {noticed:.3f} s"
    finally:
        await runner.cleanup()


async def test_connection_refused_is_not_healthy_and_deadline_holds() -> None:
    async with SglangClient("http://127.0.0.1:9") as client:
        started = time.monotonic()
        assert not await client.wait_until_healthy(0.3)
        assert time.monotonic() - started < 1.0


def test_metrics_sum_ranks() -> None:
    values = parse_metrics(METRICS)
    assert values["sglang:num_running_reqs"] == 5.0 and values["sglang:spec_accept_length"] == 2.75


def test_metrics_of_two_dp_ranks_with_all_schedulers_reporting() -> None:
    # --dp-size 2 --tp-size 2 --enable-metrics-for-all-schedulers: TP rank 1 repeats its DP group's figures.
    rows = [(0, 0, 3, 2.5), (1, 0, 3, 2.5), (0, 1, 2, 3.0), (1, 1, 2, 3.0)]
    text = "# TYPE sglang:num_running_reqs gauge\n" + "".join(
        f'sglang:num_running_reqs{{tp_rank="{tp}",dp_rank="{dp}"}} {running}\n' for tp, dp, running, _ in rows
    )
    text += "# TYPE sglang:spec_accept_length gauge\n" + "".join(
        f'sglang:spec_accept_length{{tp_rank="{tp}",dp_rank="{dp}"}} {length}\n' for tp, dp, _, length in rows
    )
    values = parse_metrics(text)
    assert values["sglang:num_running_reqs"] == 5.0 and values["sglang:spec_accept_length"] == 2.75


def test_versions_and_endpoints() -> None:
    assert Endpoints.for_version("0.5.23.post1").load == "/v1/loads"
    assert Endpoints.for_version("v0.5.6rc2").load == "/get_load"
    assert Endpoints.for_version(None) == Endpoints() and Endpoints.for_version("not-a-version") == Endpoints()
    assert Endpoints.for_version("0.5.6").load == "/get_load"
    assert Endpoints.for_version("0.5.9").load == "/v1/loads"


async def test_a_new_server_read_through_the_old_info_route_keeps_its_load_route() -> None:
    # /server_info failed once (busy), the deprecated alias answered: 0.5.23 still has no /get_load.
    async def busy(request: web.Request) -> web.Response:
        return web.Response(status=503)

    async def info(request: web.Request) -> web.Response:
        return web.json_response({"version": "0.5.23", "internal_states": []})

    runner, url = await serve([web.get("/server_info", busy), web.get("/get_server_info", info)])
    try:
        async with SglangClient(url) as client:
            assert await client.detect_version() == "0.5.23"
            assert client.endpoints == Endpoints(server_info="/get_server_info", model_info="/get_model_info")
    finally:
        await runner.cleanup()


def test_summary_prefers_internal_state_and_v1_loads() -> None:
    info = {
        "version": "0.5.23",
        "speculative_num_steps": 2,
        "max_running_requests": 48,
        "internal_states": [{"speculative_num_steps": 3, "avg_spec_accept_length": 2.4}],
    }
    loads = {"loads": [{"num_running_reqs": 7, "num_waiting_reqs": 2, "gen_throughput": 500.0}]}
    summary = summarize(info, None, loads, {"sglang:spec_accept_rate": 0.6})
    assert summary["speculative_num_steps"] == 3 and summary["avg_spec_accept_length"] == 2.4
    assert (summary["num_running_reqs"], summary["num_queue_reqs"], summary["gen_throughput"]) == (7, 2, 500.0)
    assert summary["spec_accept_rate"] == 0.6


def _reference_parse(text: str) -> tuple[dict[str, float], dict[str, Histogram]]:
    """What the console computed with prometheus_client's general parser (before its own lean reader)."""
    from prometheus_client.parser import text_string_to_metric_families

    from console.sglang.client import RATIO_GAUGES
    from console.sglang.histograms import LATENCY_HISTOGRAMS, merged

    values: dict[str, float] = {}
    ranks: dict[str, int] = {}
    histograms: dict[str, Histogram] = {}
    for family in text_string_to_metric_families(text):
        if family.type == "histogram" and family.name in LATENCY_HISTOGRAMS:
            hist = merged(family)
            if hist is not None:
                histograms[family.name] = hist
        for sample in family.samples:
            if sample.name.endswith("_bucket") or sample.labels.get("tp_rank", "0") != "0":
                continue
            values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
            ranks[sample.name] = ranks.get(sample.name, 0) + 1
    for name in RATIO_GAUGES & values.keys():
        values[name] /= ranks[name]
    return values, histograms


def test_the_lean_metrics_reader_gives_what_prometheus_clients_parser_gives() -> None:
    """On a real SGLang 0.5.17's /metrics (71 families, histograms with many label sets) and on a hand-made text
    with escapes, NaN, +Inf and two DP ranks."""
    import math

    from console.sglang.client import parse_metrics_text

    real = (Path(__file__).parents[1] / "sim/fixtures/real-0.5.17/capture/metrics_after.txt").read_text()
    odd = (
        '# HELP sglang:x A "quoted" help\n# TYPE sglang:x gauge\nsglang:x{model_name="a \\"b\\" c",tp_rank="0"} NaN\n'
        "# TYPE sglang:time_to_first_token_seconds histogram\n"
        'sglang:time_to_first_token_seconds_bucket{le="0.1",tp_rank="0"} 3.0\n'
        'sglang:time_to_first_token_seconds_bucket{le="+Inf",tp_rank="0"} 5.0\n'
        'sglang:time_to_first_token_seconds_bucket{le="0.1",tp_rank="1"} 1.0\n'
        'sglang:time_to_first_token_seconds_bucket{le="+Inf",tp_rank="1"} 2.0\n'
        'sglang:time_to_first_token_seconds_sum{tp_rank="0"} 0.7\nsglang:time_to_first_token_seconds_count 5.0\n'
        "# TYPE sglang:num_requests_total counter\nsglang:num_requests_total 42.0 1700000000000\n"
        + "".join(f'sglang:token_usage{{tp_rank="0",dp_rank="{dp}"}} {u}\n' for dp, u in ((0, 0.25), (1, 0.75)))
    )
    for text in (real, odd):
        mine, theirs = parse_metrics_text(text), _reference_parse(text)
        assert mine[1] == theirs[1]
        assert mine[0].keys() == theirs[0].keys()
        for key, value in theirs[0].items():
            assert mine[0][key] == value or (math.isnan(value) and math.isnan(mine[0][key])), key
    assert len(_reference_parse(real)[0]) > 50 and len(_reference_parse(real)[1]) == 3


def test_reading_only_the_samples_asked_gives_what_the_full_read_gives_of_them() -> None:
    """The dashboard's read of /metrics (only what summarize uses, and the TTFT and ITL histograms, found by a search
    of the text) against the full read, on real SGLang 0.5.17 texts and on names that start like wanted ones."""
    from console.sglang.client import SUMMARY_METRICS, parse_metrics_text
    from console.sglang.histograms import ITL, TTFT

    fixtures = Path(__file__).parents[1]
    texts = [
        (fixtures / "sim/fixtures/real-0.5.17/capture/metrics_after.txt").read_text(),
        (fixtures / "sglang/fixtures/real-0.5.17-metrics.txt").read_text(),
        # a wanted name first in the text, longer names that start with wanted ones, a tab, TP rank 1, CRLF
        'sglang:token_usage{tp_rank="0"} 0.5\nsglang:token_usage_max{tp_rank="0"} 9\n'
        "sglang:num_running_reqs\t3\nsglang:num_running_reqs_total 99\nsglang:cache_hit_rate2 9\n"
        'sglang:num_queue_reqs{tp_rank="1"} 7\r\nsglang:num_queue_reqs{tp_rank="0"} 2\r\n'
        "# TYPE sglang:time_to_first_token_seconds histogram\n"
        'sglang:time_to_first_token_seconds_bucket{le="0.1"} 1\n'
        'sglang:time_to_first_token_seconds_bucket{le="+Inf"} 4\n'
        'sglang:inter_token_latency_seconds_bucket{le="0.1"} 5',  # no TYPE line: not a histogram
    ]
    for text in texts:
        every_value, every_histogram = parse_metrics_text(text)
        values, histograms = parse_metrics_text(text, SUMMARY_METRICS, (TTFT, ITL))
        assert values == {name: v for name, v in every_value.items() if name in SUMMARY_METRICS}
        assert histograms == {name: h for name, h in every_histogram.items() if name in (TTFT, ITL)}
    odd_values, odd_histograms = parse_metrics_text(texts[2], SUMMARY_METRICS, (TTFT, ITL))
    assert odd_values == {"sglang:token_usage": 0.5, "sglang:num_running_reqs": 3.0, "sglang:num_queue_reqs": 2.0}
    assert list(odd_histograms) == [TTFT] and odd_histograms[TTFT].count == 4.0
    real_values, real_histograms = parse_metrics_text(texts[1], SUMMARY_METRICS, (TTFT, ITL))
    assert len(real_values) == len(SUMMARY_METRICS) and set(real_histograms) == {TTFT, ITL}
