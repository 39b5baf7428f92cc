"""smg quietly taking workers out of routing, said by the fleet's overview and `status @GROUP`, against real parts:
two stand-ins (on 127.0.0.2 and .3, each its own host), the smg 1.13 wheel's router in front of them, and Debian's
Prometheus scraping the stand-ins and smg's metrics port.

- Overload: the second stand-in's queue held at 8 or more by requests sent to it directly (it runs 2 at a time).
  smg leaves it out of routing (its own request counter for that worker stops moving while requests go through
  smg), nothing in smg's worker list says so (still `ready`), and the overview's row, its banner, `status @duo
  --json` and its table say "overloaded", naming the host. When the load stops, it is said no more.
- Circuit: the second stand-in killed and requests sent through smg until its circuit breaker opens: said as
  "circuit open" (and "unhealthy" once smg's health checks, every second here, fail).
The first stand-in, routed to all along, is the control: nothing is said of it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.cli.connect import build_app
from console.core.status import fleet_view_once, host_names
from console.fleet.settings import FleetSettings
from console.fleet.telemetry import FleetView
from console.host.targets import resolve_target
from console.tui.app import OpsConsoleApp
from console.tui.widgets.fleet_overview import FleetTable
from tests.fleet.test_prometheus_fleet import _banner, _row
from tests.support.demo import OPSCONSOLE
from tests.support.prometheus import Prometheus, running_prometheus
from tests.support.routers import RouterProcess, running_router, wait_until
from tests.support.simproc import FAST, SimProcess, running_sim
from tests.tui.support import wait_until as wait_on_app

pytestmark = pytest.mark.system

HOSTS = {"gpu-a": "127.0.0.2", "gpu-b": "127.0.0.3"}
# smg polls its workers' loads and health every second here (its defaults: 10 s and 60 s), so that what it decides
# reaches Prometheus within a few seconds.
SMG_FLAGS = ["--load-monitor-interval", "1", "--health-check-interval-secs", "1"]
QUEUE_THREADS = 14  # requests held at the second stand-in: 2 running, the rest queued (smg: overloaded at 8)
QUEUE_MAX_S = 120.0


@dataclass
class Setup:
    sims: dict[str, SimProcess]
    smg: RouterProcess
    prometheus: Prometheus
    workspace: Path

    def settings(self) -> FleetSettings:
        return FleetSettings(prometheus=self.prometheus.url, label="host", scrape_interval_s=1.0)

    async def view(self) -> FleetView:
        profiles = self.workspace / "profiles"
        targets = {h: resolve_target(h, profiles_dir=profiles) for h in HOSTS}
        return await fleet_view_once(self.settings(), host_names(targets))

    def status(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(OPSCONSOLE), "--workspace", str(self.workspace), "status", "@duo", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    def routed(self) -> dict[str, float]:
        """smg's count of requests it sent to each worker (smg_worker_requests_total)."""
        counts: dict[str, float] = {}
        for line in self.smg.metrics().splitlines():
            found = re.match(r'smg_worker_requests_total\{worker="([^"]+)".*\} ([0-9.e+]+)$', line)
            if found:
                counts[found.group(1)] = counts.get(found.group(1), 0.0) + float(found.group(2))
        return counts


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    args = [*FAST, "--enable-metrics", "--max-running-requests", "2"]
    with running_sim([*args, "--host", HOSTS["gpu-a"]]) as a, running_sim([*args, "--host", HOSTS["gpu-b"]]) as b:
        sims = {"gpu-a": a, "gpu-b": b}
        with running_router("smg", [a.url, b.url], extra=SMG_FLAGS, log_dir=tmp_path) as smg:
            scraped = [{"host": h, "address": HOSTS[h], "sglang": sim.port} for h, sim in sims.items()]
            extra = {"smg": [f"127.0.0.1:{smg.metrics_port}"]}
            with running_prometheus(tmp_path / "prom", scraped, interval_s=1.0, extra_targets=extra) as prometheus:
                workspace = tmp_path / "ws"
                (workspace / "profiles").mkdir(parents=True)
                for host, address in HOSTS.items():  # SSH to the discard port: everything comes from Prometheus
                    (workspace / "profiles" / f"{host}.toml").write_text(f'[host]\nssh = "ops@{address}:9"\n')
                (workspace / "profiles" / "groups.toml").write_text(f'[duo]\nmembers = ["gpu-a", "gpu-b"]\nrouter = '
                                                                    f'"{smg.url}"\n')  # fmt: skip
                (workspace / "console.toml").write_text(
                    f'[fleet]\nlabel = "host"\nscrape_interval_s = 1\nprometheus = "{prometheus.url}"\n'
                )
                yield Setup(sims, smg, prometheus, workspace)


class Queue:
    """Requests sent straight to one stand-in from QUEUE_THREADS threads, bounded in time, until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(QUEUE_THREADS)]

    def __enter__(self) -> Queue:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def loop(self) -> None:
        body = json.dumps({"text": "queue me", "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}})
        started = time.monotonic()
        while not self.stop.is_set() and time.monotonic() - started < QUEUE_MAX_S:
            request = urllib.request.Request(f"{self.url}/generate", data=body.encode(),
                                             headers={"Content-Type": "application/json"})  # fmt: skip
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    answer.read()
            except (OSError, ValueError):
                pass


def through_smg(smg: RouterProcess, requests: int) -> int:
    """Requests through smg, one after the other: how many succeeded."""
    ok = 0
    body = json.dumps({"text": "route me", "sampling_params": {"max_new_tokens": 8}}).encode()
    for _ in range(requests):
        request = urllib.request.Request(f"{smg.url}/generate", data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                ok += answer.status == 200
        except (OSError, ValueError):
            pass
    return ok


def notes(app: OpsConsoleApp, host: str) -> str:
    """The row's notes once the overview has drawn it ("" before)."""
    return _row(app, host)["notes"] if host in app.query_one(FleetTable)._cells else ""


async def until_view(setup: Setup, condition: object, what: str, timeout: float = 60.0) -> FleetView:
    deadline = time.monotonic() + timeout
    view = await setup.view()
    while not condition(view):  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; the last view: {view.routers} {view.overloaded}")
        time.sleep(0.5)  # polling Prometheus's answer: the condition itself
        view = await setup.view()
    return view


async def test_smg_taking_workers_out_of_routing_is_said_by_the_overview_and_status(setup: Setup) -> None:
    a_url, b_url = setup.sims["gpu-a"].url, setup.sims["gpu-b"].url
    view = await until_view(setup, lambda v: set(v.routers) == set(HOSTS), "smg's series of both workers")
    assert view.taken_out() == {} and all(s.healthy and s.circuit == "closed" for s in view.routers.values())
    assert view.routers["gpu-b"].url == b_url

    # Overload: the second stand-in's queue held at 8 or more.
    with Queue(b_url):
        view = await until_view(setup, lambda v: list(v.taken_out()) == ["gpu-b"], "smg to flag gpu-b overloaded")
        why = view.taken_out()["gpu-b"]
        assert len(why) == 1 and why[0].startswith("overloaded (queue "), why
        assert view.overloaded == {"sim/test-model": 1} and view.routers["gpu-a"].out == []
        # smg's list still says ready: only its metrics tell
        assert [w["status"] for w in setup.smg.workers()] == ["ready", "ready"]
        # and it does route around it: of requests through smg now, none goes to gpu-b
        before = setup.routed()
        assert through_smg(setup.smg, 10) == 10
        after = setup.routed()
        assert after.get(b_url, 0) == before.get(b_url, 0) and after[a_url] >= before.get(a_url, 0) + 10

        done = setup.status("--json")
        report = json.loads(done.stdout)
        assert report["hosts"]["gpu-b"]["router"]["out"][0].startswith("overloaded"), report["hosts"]["gpu-b"]
        assert report["hosts"]["gpu-b"]["router"]["overloaded"] is True
        assert report["hosts"]["gpu-a"]["router"]["out"] == []
        assert "smg routes around 1: gpu-b (overloaded (queue " in setup.status().stdout

        # the console's overview of the group
        args = argparse.Namespace(workspace=str(setup.workspace), ssh_config=None, refresh=0.5, read_only=True,
                                  targets=["@duo"], prometheus=None)  # fmt: skip
        app = build_app(args, ["@duo"])
        async with app.run_test(size=(220, 30)) as pilot:
            await wait_on_app(pilot, lambda: notes(app, "gpu-b").startswith("smg: overloaded"),
                              "gpu-b's row to say smg left it out")  # fmt: skip
            assert _row(app, "gpu-a")["notes"] == "–"
            assert "smg routes around 1: gpu-b (overloaded" in _banner(app)
    await until_view(setup, lambda v: v.taken_out() == {}, "the overload to be said no more once the queue drains")

    # Circuit: the second stand-in gone, requests through smg fail on it until its circuit opens.
    setup.sims["gpu-b"].stop()

    def circuit_open() -> bool:
        through_smg(setup.smg, 4)
        return 'smg_worker_cb_state{worker="' + b_url + '"} 1' in setup.smg.metrics()

    wait_until(circuit_open, 60, "smg to open gpu-b's circuit")
    view = await until_view(setup, lambda v: "circuit open" in v.taken_out().get("gpu-b", []), "circuit open said")
    assert "gpu-a" not in view.taken_out()
    assert "circuit open" in json.loads(setup.status("--json").stdout)["hosts"]["gpu-b"]["router"]["out"]
