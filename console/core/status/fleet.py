"""The fleet's telemetry for the console (and, once, for `status @GROUP`): one Prometheus query a refresh for every
host (console.fleet), folded into a FleetView and handed to the renderer. SSH is not touched here: a host opened in
the console has its own HostWatcher, which is also what the console falls back to for the open hosts while
Prometheus is down."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from console.fleet.prometheus import PrometheusClient, PrometheusUnavailable
from console.fleet.promql import fleet_query, router_samples, split_by_host
from console.fleet.router import workers_at_router
from console.fleet.settings import FleetSettings
from console.fleet.telemetry import FleetTracker, FleetView, HostNames
from console.host.sshconfig import configured_host_name
from console.host.targets import Target


def host_names(targets: Mapping[str, Target]) -> HostNames:
    """Each host's label, the host of its SSH destination and the HostName its ssh_config gives that, as names
    Prometheus's label may use: its default label, instance, is the address it scraped ("10.0.0.5:30000"), where
    a profile often names an ssh_config alias ("gpu-a"). Reads the ssh_config files, connects nowhere."""
    names: dict[str, list[str]] = {}
    for label, target in targets.items():
        aliases = [target.ssh_host] if target.ssh_host else []
        configured = configured_host_name(target)
        if configured is not None and configured not in aliases:
            aliases.append(configured)
        names[label] = aliases
    return HostNames(names)


class FleetWatcher:
    def __init__(
        self,
        settings: FleetSettings,
        names: HostNames,
        *,
        on_view: Callable[[FleetView], None],
        interval_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        assert settings.prometheus is not None
        self.settings = settings
        self.on_view = on_view
        self.interval_s = interval_s
        self.clock = clock
        self.query = fleet_query(settings)
        self.tracker = FleetTracker(settings.prometheus, names, scrape_interval_s=settings.scrape_interval_s)
        self._client = PrometheusClient(settings.prometheus, timeout_s=max(1.0, min(10.0, interval_s)))
        self._wake = asyncio.Event()

    async def refresh(self) -> FleetView:
        return await _ask(self._client, self.query, self.settings, self.tracker, self.clock)

    def refresh_now(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        try:
            while True:
                self.on_view(await self.refresh())
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), self.interval_s)
                except TimeoutError:
                    pass
        finally:
            await self._client.aclose()


async def fleet_view_once(
    settings: FleetSettings, names: HostNames, *, clock: Callable[[], float] = time.time
) -> FleetView:
    """One answer for `names`, as the overview's first refresh (`status @GROUP`): the figures of the hosts Prometheus
    knows, those it does not, or why it could not be asked."""
    assert settings.prometheus is not None
    tracker = FleetTracker(settings.prometheus, names, scrape_interval_s=settings.scrape_interval_s)
    client = PrometheusClient(settings.prometheus)
    try:
        return await _ask(client, fleet_query(settings), settings, tracker, clock)
    finally:
        await client.aclose()


async def _ask(
    client: PrometheusClient, query: str, settings: FleetSettings, tracker: FleetTracker, clock: Callable[[], float]
) -> FleetView:
    try:
        samples, asked_at = await client.query(query, at=clock())
    except PrometheusUnavailable as exc:
        return tracker.failed(str(exc), clock())
    routers, overloaded = workers_at_router(
        router_samples(samples),
        overload_waiting=settings.router_overload_waiting,
        overload_token_usage=settings.router_overload_token_usage,
    )
    return tracker.answered(split_by_host(samples, settings.label), asked_at, routers, overloaded)
