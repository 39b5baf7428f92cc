"""The fleet's figures per host, from Prometheus's answers (pure: the caller brings the answers and the clock).

Which host a label value names (HostNames), what each host shows (HostFigures: the newest figures, or the last
ones with their age when its series went away), and the fleet as a whole (FleetView: when it was asked, what went
wrong asking, which hosts Prometheus does not know). Staleness: a host whose newest scrape is older than two scrape
intervals, or whose scrape fails (up = 0, the series then vanish), keeps its last figures, dimmed, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from console.fleet.promql import HostSeries
from console.fleet.router import WorkerAtRouter

STALE_INTERVALS = 2
_PORT = re.compile(r":[0-9]+$")


class HostNames:
    """Label value -> host: the host's name, or another name it goes by (its ssh host, the HostName its ssh_config
    gives that), once `:port` is taken off. A host's own name wins over another's alias; an alias two hosts share
    (two profiles reached through one address) names neither: better "not in Prometheus" than another host's
    figures."""

    def __init__(self, hosts: Mapping[str, Iterable[str]]) -> None:
        """hosts: each host's label -> the other names it goes by."""
        self.hosts = tuple(hosts)
        owners: dict[str, set[str]] = {}
        for host, aliases in hosts.items():
            for name in aliases:
                owners.setdefault(name, set()).add(host)
        self._by_name = {name: next(iter(hs)) for name, hs in owners.items() if len(hs) == 1}
        self._by_name.update({host: host for host in hosts})
        self.ambiguous = tuple(sorted(name for name, hs in owners.items() if len(hs) > 1 and name not in hosts))

    def host_of(self, value: str) -> str | None:
        """`value` as a label gives it: a name, an address, either with `:port`, or a URL (smg's `worker` label,
        "http://10.0.0.5:30000"), which names its host."""
        if "://" in value:
            value = value.split("://", 1)[1].split("/", 1)[0]
        bare = value[1:].split("]")[0] if value.startswith("[") else _PORT.sub("", value)
        return self._by_name.get(value) or self._by_name.get(bare)


@dataclass(frozen=True)
class HostFigures:
    host: str
    figures: Mapping[str, float]  # promql.FIGURES names -> value (absent: the host has no such series)
    up: Mapping[str, float]  # job -> 1/0, as last scraped
    seen_at: float  # unix time of the newest scrape these figures come from
    stale: str = ""  # why the figures are old ("" while fresh)

    def get(self, figure: str) -> float | None:
        return self.figures.get(figure)


@dataclass(frozen=True)
class FleetView:
    prometheus: str
    asked_at: float | None = None  # unix time of the answer the figures come from (None: never answered)
    error: str | None = None  # Prometheus could not be asked this time (down, refused, a bad answer)
    hosts: Mapping[str, HostFigures] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()  # the fleet's hosts Prometheus has no series of
    routers: Mapping[str, WorkerAtRouter] = field(default_factory=dict)  # host -> smg's view of its worker
    overloaded: Mapping[str, int] = field(default_factory=dict)  # model -> workers smg counts overloaded

    @property
    def down(self) -> bool:
        return self.error is not None

    def taken_out(self) -> dict[str, list[str]]:
        """The hosts smg does not route to now, and why (console.fleet.router), in the fleet's order."""
        return {host: state.out for host, state in self.routers.items() if state.out}


class FleetTracker:
    """Each refresh's answer folded into what the overview shows, keeping a host's last figures when they go."""

    def __init__(self, prometheus: str, names: HostNames, *, scrape_interval_s: float) -> None:
        self.names = names
        self.scrape_interval_s = scrape_interval_s
        self.view = FleetView(prometheus)

    def answered(
        self,
        series: Mapping[str, HostSeries],
        asked_at: float,
        routers: Mapping[str, WorkerAtRouter] | None = None,
        overloaded: Mapping[str, int] | None = None,
    ) -> FleetView:
        """One answer folded in: `series` per label value; `routers` per worker URL (console.fleet.router),
        matched to hosts by the URL's address."""
        known: dict[str, HostFigures] = {}
        for value, host_series in series.items():
            host = self.names.host_of(value)
            if host is None:
                continue  # another fleet's host, scraped by the same Prometheus
            known[host] = _merge(known.get(host), host, host_series)
        hosts: dict[str, HostFigures] = {}
        for host in self.names.hosts:
            now, before = known.get(host), self.view.hosts.get(host)
            if now is not None and before is not None and (not now.figures or 0 in now.up.values()):
                # a failing scrape's series are gone: its last figures stay (said stale), the rest are new
                now = replace(now, figures={**before.figures, **now.figures}, seen_at=min(before.seen_at, now.seen_at))
            chosen = now or before
            if chosen is not None:
                hosts[host] = replace(chosen, stale=self._staleness(chosen, asked_at, fresh=now is not None))
        unknown = tuple(h for h in self.names.hosts if h not in known)
        by_host: dict[str, WorkerAtRouter] = {}
        for url, state in (routers or {}).items():
            host = self.names.host_of(url)
            if host is not None:
                by_host[host] = state
        ordered = {h: by_host[h] for h in self.names.hosts if h in by_host}
        self.view = FleetView(self.view.prometheus, asked_at, None, hosts, unknown, ordered, dict(overloaded or {}))
        return self.view

    def failed(self, error: str, now: float) -> FleetView:
        """Prometheus could not be asked: every figure kept, each aged, and the error said."""
        hosts = {h: replace(f, stale=self._staleness(f, now, fresh=False)) for h, f in self.view.hosts.items()}
        self.view = replace(self.view, error=error, hosts=hosts)
        return self.view

    def _staleness(self, figures: HostFigures, now: float, *, fresh: bool) -> str:
        failing = sorted(job for job, up in figures.up.items() if up == 0)
        age = now - figures.seen_at
        if failing:
            return f"scrape failing: {', '.join(failing)}"
        if age > STALE_INTERVALS * self.scrape_interval_s:
            return f"stale {age:.0f}s"
        return "" if fresh else f"as of {age:.0f}s ago"


def _merge(before: HostFigures | None, host: str, series: HostSeries) -> HostFigures:
    """Two label values naming one host (SGLang's instance and dcgm-exporter's): their figures together."""
    seen = [at for job, at in series.scraped_at.items() if series.up.get(job) == 1] or list(series.scraped_at.values())
    seen_at = min(seen) if seen else 0.0
    if before is None:
        return HostFigures(host, dict(series.figures), dict(series.up), seen_at)
    return HostFigures(
        host,
        {**before.figures, **series.figures},
        {**before.up, **series.up},
        min(before.seen_at, seen_at) if before.seen_at and seen_at else max(before.seen_at, seen_at),
    )
