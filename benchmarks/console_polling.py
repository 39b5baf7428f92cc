"""What one open console writes into the server's own log, and how often it refreshes: the console's refresh loop
(console.core.status.HostWatcher, 1 Hz) against the demo host for --seconds, at each SGLang version of
--versions (the demo's unit is rewritten and restarted for each). SGLang logs every request it serves; 0.5.17's
/health, a one-token generation, answers after about a second (it looks for the probe's output once a second).

Reported per version, from the demo's journal and the watcher:
- the access lines from the loopback address while the watcher ran, per path, and per refresh;
- the refreshes delivered (the dashboard's cadence), how long the light and the full reads took, and the SGLang
  part of a light read alone (medians; the demo's GPU poll starts a Python process each time, so on the demo the
  whole read is the GPUs' time, not the server's);
- what the dashboard showed of health (every refresh's `healthy`);
- what one GET /health and one GET /metrics take on their own (median of --requests each, one after another).

    .venv/bin/python benchmarks/console_polling.py [--seconds 60] [--versions 0.5.9,0.5.17]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import console.core.status.host as status_module
import console.core.status.monitor as monitor
from console.core.console_requests import is_loopback, parse_access
from console.core.session import open_session
from console.core.status import HostView, HostWatcher
from console.workspace import Workspace
from tests.support.demo import poll, running_demo

VERSION_FLAG = re.compile(r"--sim-sglang-version \S+")


async def set_version(workspace: Workspace, version: str) -> None:
    """The demo's unit at `version`, restarted, healthy."""
    async with open_session("demo", workspace) as session:
        unit = await session.service.read_unit()
        wanted = VERSION_FLAG.sub(f"--sim-sglang-version {version}", unit)
        if wanted == unit:
            return
        await session.service.write_unit(wanted)
        await session.service.daemon_reload()
        await session.service.restart()
        client = await session.sglang()
        if not await client.wait_until_healthy(120.0, interval_s=0.5):
            raise SystemExit(f"the demo did not come back healthy at {version}")
        if (await client.server_info()).get("version") != version:
            raise SystemExit(f"the demo runs {client.last_server_info and client.last_server_info.get('version')}")


async def access_lines(workspace: Workspace, since: datetime, until: datetime) -> Counter[str]:
    """The loopback access lines the demo's journal holds between `since` and `until`, per method and path."""
    counts: Counter[str] = Counter()
    async with open_session("demo", workspace) as session:
        async for entry in session.service.journal(lines=100_000, follow=False):
            if not since <= entry.timestamp <= until:
                continue
            line = parse_access(entry.message)
            if line is not None and is_loopback(line.peer):
                counts[f"{line.method} {line.target.partition('?')[0]}"] += 1
    return counts


async def request_times(workspace: Workspace, count: int) -> dict[str, float]:
    async with open_session("demo", workspace) as session:
        client = await session.sglang()
        out: dict[str, float] = {}
        for name, ask in (("health", client.healthy), ("metrics", client.metrics)):
            times = []
            for _ in range(count):
                started = time.perf_counter()
                await ask()
                times.append(time.perf_counter() - started)
            out[f"{name}_ms_median"] = round(1000 * statistics.median(times), 1)
        return out


async def watch(workspace: Workspace, seconds: float) -> dict[str, Any]:
    views: list[HostView] = []
    reads: dict[str, list[float]] = {"light": [], "full": [], "sglang light": []}
    real_read = monitor.read_status
    real_sglang = status_module.read_sglang

    async def timed_read(session: Any, *, light: bool = False) -> Any:
        started = time.perf_counter()
        try:
            return await real_read(session, light=light)
        finally:
            reads["light" if light else "full"].append(time.perf_counter() - started)

    async def timed_sglang(client: Any, *, light: bool = False, health_stands: Any = None) -> Any:
        started = time.perf_counter()
        try:
            if health_stands is None:  # before the console could skip /health: read_sglang(client, light=...)
                return await real_sglang(client, light=light)
            return await real_sglang(client, light=light, health_stands=health_stands)
        finally:
            if light:
                reads["sglang light"].append(time.perf_counter() - started)

    monitor.read_status = timed_read  # type: ignore[assignment]
    status_module.read_sglang = timed_sglang  # type: ignore[assignment]
    watcher = HostWatcher("demo", workspace, on_view=views.append, interval_s=1.0)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(_first_refresh(views), 60)
        since = datetime.now(UTC)
        first = len(views)
        await asyncio.sleep(seconds)  # the measured span: the watcher refreshes on its own meanwhile
        until = datetime.now(UTC)
        refreshed = [v for v in views[first:] if v.status is not None]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        monitor.read_status = real_read
        status_module.read_sglang = real_sglang
    await asyncio.sleep(1.0)  # the last answers reach the journal
    counts = await access_lines(workspace, since, until)
    span = (until - since).total_seconds()
    total = sum(counts.values())
    return {
        "seconds": round(span, 1),
        "refreshes": len(refreshed),
        "refreshes_per_s": round(len(refreshed) / span, 2),
        "light_read_ms_median": _median_ms(reads["light"]),
        "full_read_ms_median": _median_ms(reads["full"]),
        "sglang_light_ms_median": _median_ms(reads["sglang light"]),
        "access_lines": total,
        "access_lines_per_s": round(total / span, 2),
        "access_lines_per_refresh": round(total / max(1, len(refreshed)), 2),
        "by_path": dict(sorted(counts.items())),
        "healthy_shown": dict(Counter(str(v.status.sglang.healthy) for v in refreshed if v.status is not None)),
    }


def _median_ms(values: list[float]) -> float | None:
    return round(1000 * statistics.median(values), 1) if values else None


async def _first_refresh(views: list[HostView]) -> None:
    while not any(v.status is not None and v.status.sglang.healthy for v in views):
        await asyncio.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--versions", default="0.5.9,0.5.17")
    parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()
    from console.sim.plugin import register

    register()  # a composition root: the demo host's transport and the stand-in's units (console/sim/plugin.py)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, running_demo(Path(tmp) / "ws") as demo:
        workspace = Workspace.resolve(demo.workspace)
        for version in args.versions.split(","):
            asyncio.run(set_version(workspace, version))
            poll(demo.host().healthy, 60, f"the demo at {version}")
            results[version] = asyncio.run(watch(workspace, args.seconds))
            results[version].update(asyncio.run(request_times(workspace, args.requests)))
            print(version, json.dumps(results[version]), flush=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
