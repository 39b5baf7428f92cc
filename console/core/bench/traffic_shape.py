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
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from console.bench.client import BenchClient
from console.bench.engine import SweepConfig, fetch_server_info
from console.bench.shape import ShapeSpec
from console.sglang.traffic_shape import Scrape, TrafficShape, parse_scrape, refuse_before, window_shape

Fetch = Callable[[], Awaitable[str | None]]  # /metrics' text, None when the server serves none


@dataclass(frozen=True)
class ShapeAsk:
    """What the operator asked for: watch the server's traffic for window_s, then run at its rate times each
    scale (`--shape-from-server WINDOW --rate-scale X,Y`, the bench form's shape window and rate scale)."""

    window_s: float
    scales: tuple[float, ...] = (1.0,)


@dataclass(frozen=True)
class ShapeObserving:
    """The window starts: nothing is sent until `until` (the CLI and the console say so)."""

    window_s: float
    until: datetime

    def text(self) -> str:
        return (
            f"watching the server's /metrics for {self.window_s:g} s (until {self.until:%H:%M:%S}): the traffic of "
            "that window is the shape (/metrics holds totals since the server started; the console keeps no history "
            "of them)"
        )


@dataclass(frozen=True)
class ShapeObserved:
    """The window's shape and the request rates the sweep will run at, said before anything is sent."""

    shape: TrafficShape
    rates: tuple[float, ...]

    def text(self) -> str:
        return f"shape: {self.shape.summary()}"

    def workload_text(self) -> str:
        return f"workload: drawn from that shape, Poisson arrivals at {', '.join(f'{r:g}' for r in self.rates)} req/s"


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


async def shape_the_sweep(
    base_url: str,
    config: SweepConfig,
    ask: ShapeAsk,
    *,
    api_key: str | None = None,
    on_event: Callable[[ShapeObserving | ShapeObserved], None] | None = None,
    wait: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> SweepConfig:
    """Observe the server at base_url for the window, then the sweep drawn from its shape: ShapeObserving when the
    window starts, ShapeObserved (the shape line and the rates) before anything is sent. ShapeUnavailable says
    what is missing (nothing sent)."""
    emit = on_event or (lambda _event: None)

    def observing(seconds: float) -> None:
        emit(ShapeObserving(seconds, datetime.now() + timedelta(seconds=seconds)))

    shape = await observe_url(base_url, ask.window_s, api_key=api_key, on_observing=observing, wait=wait)
    shaped = shaped_sweep(config, shape, list(ask.scales))
    emit(ShapeObserved(shape, tuple(shaped.request_rates)))
    return shaped
