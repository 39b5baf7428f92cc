"""`bench --shape-from-server [WINDOW]`: observe the server's own traffic for a window, then benchmark a workload
drawn from it (console.sglang.traffic_shape reads the figures, console.bench.shape draws the requests).

The window is observed, not looked back on: /metrics only holds totals since the server started and the console
keeps no history of them, so the shape is the difference between a scrape now and one WINDOW later (what
Prometheus' increase() over the window would say). The refusals that need no waiting come first: no /metrics, or a
version that records no token histograms without --collect-tokens-histogram. Nothing is sent to the server but the
two GETs of /metrics (and /server_info, /v1/models for its version).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from console.bench.client import BenchClient
from console.bench.engine import SweepConfig, fetch_server_info
from console.bench.shape import ShapeSpec
from console.sglang.traffic_shape import Scrape, TrafficShape, parse_scrape, refuse_before, window_shape

Fetch = Callable[[], Awaitable[str | None]]  # /metrics' text, None when the server serves none


async def observe(
    fetch: Fetch,
    window_s: float,
    *,
    version: str | None,
    server_args: dict[str, object],
    wait: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_observing: Callable[[float], None] | None = None,
) -> TrafficShape:
    """Scrape, wait the window (`wait`), scrape again: the shape of the requests finished in between, over the time
    measured between the two scrapes. ShapeUnavailable (before the wait where it can) says what is missing."""
    first = await fetch()
    then: Scrape | None = parse_scrape(first) if first is not None else None
    refuse_before(then, version, server_args)
    assert then is not None
    started = clock()
    if on_observing is not None:
        on_observing(window_s)
    await wait(window_s)
    second = await fetch()
    elapsed = clock() - started
    refuse_before(parse_scrape(second) if second is not None else None, version, server_args)
    assert second is not None
    return window_shape(then, parse_scrape(second), elapsed)


async def observe_url(
    base_url: str,
    window_s: float,
    *,
    api_key: str | None = None,
    on_observing: Callable[[float], None] | None = None,
    wait: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> TrafficShape:
    """observe() against the server at base_url (its version from /server_info)."""
    async with BenchClient(base_url, api_key=api_key) as client:
        info = await fetch_server_info(client)

        async def fetch() -> str | None:
            status, text = await client.get_text("/metrics")
            return text if status == 200 else None

        return await observe(
            fetch, window_s, version=info.version, server_args=info.server_args, wait=wait, on_observing=on_observing
        )


def shaped_sweep(config: SweepConfig, shape: TrafficShape, scales: list[float]) -> SweepConfig:
    """The sweep at the observed arrival rate times each scale (Poisson), its requests drawn from the shape."""
    spec = ShapeSpec(
        prompt_buckets=shape.prompt.buckets,
        output_buckets=shape.output.buckets,
        cache_hit=shape.cache_hit,
        rate=shape.rate,
        window_s=shape.window_s,
        requests=shape.requests,
    )
    workload = replace(config.workload, name="shape", api="generate", shape=spec, dataset=None)
    rates = [float(f"{shape.rate * scale:.4g}") for scale in scales]
    return replace(config, workload=workload, request_rates=rates)
