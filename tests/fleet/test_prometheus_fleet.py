"""The fleet's overview against real parts: Debian's Prometheus, started here, scraping simulated hosts (one
process, each host with its own SGLang and dcgm-exporter ports). The overview's figures are the PromQL answers
(asked here in PromQL written out by hand, at the same evaluation time); a host Prometheus does not scrape, a host
that goes away and a killed Prometheus are each said on the overview. Profiles that reach their hosts through
ssh_config aliases are matched by the addresses Prometheus scraped (its default label, instance)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.cli.connect import build_app
from console.core.status import FleetWatcher, host_names
from console.fleet.settings import FleetSettings
from console.fleet.telemetry import FleetView, HostNames
from console.host.targets import resolve_target
from console.tui.app import OpsConsoleApp
from console.tui.widgets.fleet_overview import COLUMNS, FleetOverview, FleetTable
from tests.support.demo import OPSCONSOLE
from tests.support.prometheus import Prometheus, SimFleet, running_prometheus, sim_fleet, wait_scraped
from tests.tui.support import screen_text, wait_until

pytestmark = pytest.mark.system

# The overview's column -> the PromQL that answers it, written out here (not taken from console.fleet.promql),
# and how the overview writes the number.
BY_HAND = {
    "gen tok/s": ("sum by (host) (sglang:gen_throughput)", lambda v: f"{v:,.0f}"),
    "accept": ("avg by (host) (sglang:spec_accept_length)", lambda v: f"{v:,.2f}"),
    "KV %": ("100 * max by (host) (sglang:token_usage)", lambda v: f"{v:,.0f}"),
    "TTFT p99 ms": (
        "1000 * histogram_quantile(0.99, sum by (host, le) (rate(sglang:time_to_first_token_seconds_bucket[1m])))",
        lambda v: f"{v:,.0f}",
    ),
    "ITL p99 ms": (
        "1000 * histogram_quantile(0.99, sum by (host, le) (rate(sglang:inter_token_latency_seconds_bucket[1m])))",
        lambda v: f"{v:,.0f}",
    ),
    "GPU util %": ("avg by (host) (DCGM_FI_DEV_GPU_UTIL)", lambda v: f"{v:,.0f}"),
    "GPU mem %": (
        "100 * sum by (host) (DCGM_FI_DEV_FB_USED) / sum by (host) (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
        lambda v: f"{v:,.0f}",
    ),
    "power W": ("sum by (host) (DCGM_FI_DEV_POWER_USAGE)", lambda v: f"{v:,.0f}"),
    "temp °C": ("max by (host) (DCGM_FI_DEV_GPU_TEMP)", lambda v: f"{v:,.0f}"),
}
SCRAPED = ["gpu-001", "gpu-002"]  # gpu-003 runs, but Prometheus is not told about it


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[SimFleet, Prometheus]]:
    with sim_fleet(tmp_path, 3) as sims:
        scraped = [h for h in sims.hosts if h["host"] in SCRAPED]
        with running_prometheus(tmp_path / "prom", scraped, interval_s=1.0) as prometheus:
            wait_scraped(prometheus, 2 * len(scraped))
            yield sims, prometheus


def _settings(url: str) -> FleetSettings:
    return FleetSettings(prometheus=url, label="host", scrape_interval_s=1.0)


async def test_the_watchers_figures_are_prometheuss_answers(fleet: tuple[SimFleet, Prometheus]) -> None:
    _sims, prometheus = fleet
    views: list[FleetView] = []
    names = HostNames({h: [] for h in ("gpu-001", "gpu-002", "gpu-003")})
    watcher = FleetWatcher(_settings(prometheus.url), names, on_view=views.append, interval_s=1.0)
    view = await watcher.refresh()
    assert view.error is None and view.unknown == ("gpu-003",) and set(view.hosts) == set(SCRAPED)
    assert view.asked_at is not None
    for figure, expr in (("throughput", "sum by (host) (sglang:gen_throughput)"),
                         ("running", "sum by (host) (sglang:num_running_reqs)"),
                         ("gpus", "count by (host) (DCGM_FI_DEV_GPU_UTIL)"),
                         ("fb_used_mib", "sum by (host) (DCGM_FI_DEV_FB_USED)")):  # fmt: skip
        answer = prometheus.query(expr, view.asked_at)
        assert {h: view.hosts[h].get(figure) for h in SCRAPED} == {h: answer[h] for h in SCRAPED}, figure
    assert view.hosts["gpu-001"].get("gpus") == 2 and view.hosts["gpu-001"].up == {"sglang": 1, "dcgm": 1}


def _workspace(root: Path, url: str) -> Path:
    (root / "profiles").mkdir(parents=True)
    for host in ("gpu-001", "gpu-002", "gpu-003"):
        # nothing listens there: opening the host tries SSH and says it cannot connect
        (root / "profiles" / f"{host}.toml").write_text('[host]\nssh = "ops@127.0.0.1:9"\n')
    (root / "profiles" / "groups.toml").write_text('prod = ["gpu-*"]\n')
    (root / "console.toml").write_text(f'[fleet]\nlabel = "host"\nscrape_interval_s = 1\nprometheus = "{url}"\n')
    return root


def _row(app: OpsConsoleApp, host: str) -> dict[str, str]:
    table = app.query_one(FleetTable)
    return dict(zip(COLUMNS, (cell.plain for cell in table.get_row(host)), strict=True))


def _banner(app: OpsConsoleApp) -> str:
    return str(app.query_one(FleetOverview).query_one(".fleet-banner").render())


async def test_the_overview_shows_prometheus_figures_unknown_hosts_lost_hosts_and_a_dead_prometheus(
    fleet: tuple[SimFleet, Prometheus], tmp_path: Path
) -> None:
    sims, prometheus = fleet
    workspace = _workspace(tmp_path / "ws", "http://127.0.0.1:9")  # --prometheus wins over console.toml
    args = argparse.Namespace(workspace=str(workspace), ssh_config=None, refresh=0.5, read_only=True,
                              targets=["@prod"], prometheus=prometheus.url)  # fmt: skip
    app = build_app(args, ["@prod"])
    async with app.run_test(size=(200, 30)) as pilot:
        await wait_until(pilot, lambda: app.fleet_view is not None and app.fleet_view.asked_at is not None
                         and not app.fleet_view.down, "Prometheus's first answer")  # fmt: skip
        assert app.query_one(FleetOverview).query_one(".fleet-title").render().plain.startswith("@prod: 3 hosts")
        # the figures on screen are the answers at the time the overview asked; the queries here block the
        # app's event loop (the test runs on it), so no refresh comes between the view, its rows and the answers
        await pilot.pause(0)
        view = app.fleet_view
        assert view is not None and view.asked_at is not None
        rows = {h: _row(app, h) for h in SCRAPED}
        expected = _expected(prometheus, view.asked_at)
        assert app.fleet_view is view
        for host in SCRAPED:
            assert rows[host]["state"] == "up"
            assert {c: rows[host][c] for c in BY_HAND} == expected[host], host
            assert (
                rows[host]["run/queue"] == f"{view.hosts[host].get('running'):.0f}/{view.hosts[host].get('queued'):.0f}"
            )
        assert _row(app, "gpu-003")["state"] == "unknown" and _row(app, "gpu-003")["notes"] == "not in Prometheus"
        assert "not in Prometheus (1): gpu-003" in _banner(app)

        # Enter: the host's tab opens and connects over SSH on its own; its header has Prometheus's percentiles
        app.query_one(FleetTable).move_cursor(row=0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.labels == ["gpu-001"] and "gpu-001" in app.sources, "gpu-001's tab")
        assert app.current_host == "gpu-001"
        await wait_until(pilot, lambda: "gpu-001" in app.views and app.views["gpu-001"].error is not None,
                         "gpu-001's SSH connection to be tried")  # fmt: skip
        await wait_until(pilot, lambda: "Prometheus: TTFT p50/p99" in screen_text(app), "the header's Prometheus note")
        assert re.search(
            r"Prometheus: TTFT p50/p99 [\d,]+/[\d,]+ ms · ITL p50/p99 \d+/\d+ ms · KV \d+ %", screen_text(app)
        )
        await pilot.press("o")
        await wait_until(pilot, lambda: app.current_host is None, "the overview again")

        sims.stop_host("gpu-002")  # its scrapes fail: up = 0 and its series go; its last figures stay, said so
        await wait_until(pilot, lambda: "scrape failing: dcgm, sglang" in _row(app, "gpu-002")["notes"],
                         "both of gpu-002's scrapes failing")  # fmt: skip
        assert _row(app, "gpu-002")["state"] == "down"
        assert _row(app, "gpu-002")["gen tok/s"] not in ("", "–") and _row(app, "gpu-001")["state"] == "up"

        prometheus.kill()
        await wait_until(pilot, lambda: "Prometheus DOWN" in _banner(app), "the overview to say Prometheus is down")
        assert "connection refused" in _banner(app)
        await wait_until(pilot, lambda: _row(app, "gpu-001")["state"] == "stale", "gpu-001 dimmed")
        assert "Prometheus down" in _row(app, "gpu-001")["notes"]


def _expected(prometheus: Prometheus, at: float) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {h: {} for h in SCRAPED}
    for column, (expr, shown) in BY_HAND.items():
        answer: dict[str, Any] = prometheus.query(expr, at)
        for host in SCRAPED:
            out[host][column] = shown(answer[host])
    return out


# Profiles named neither as Prometheus's labels nor as the hosts: each reaches its host through an ssh_config alias
ALIASED = {"one": ("a-one", "gpu-001"), "two": ("a-two", "gpu-002"), "three": ("a-three", "gpu-003")}


@pytest.fixture
def addressed_fleet(tmp_path: Path) -> Iterator[tuple[SimFleet, Prometheus]]:
    """Each simulated host on a loopback address of its own; Prometheus scrapes gpu-001 and gpu-002."""
    with sim_fleet(tmp_path, 3, distinct_addresses=True) as sims:
        scraped = [h for h in sims.hosts if h["host"] in SCRAPED]
        with running_prometheus(tmp_path / "prom", scraped, interval_s=1.0) as prometheus:
            wait_scraped(prometheus, 2 * len(scraped))
            yield sims, prometheus


def _aliased_workspace(root: Path, sims: SimFleet, url: str) -> tuple[Path, Path]:
    """profiles one/two/three (`ssh = "ops@a-one"` ...) and the ssh_config giving each alias its host's address (and
    the discard port, where nothing listens: the figures cannot come from SSH)."""
    address = {h["host"]: h["address"] for h in sims.hosts}
    assert len(set(address.values())) == 3 and "127.0.0.1" not in address.values()
    config = root / "ssh_config"
    (root / "profiles").mkdir(parents=True)
    for label, (alias, host) in ALIASED.items():
        (root / "profiles" / f"{label}.toml").write_text(f'[host]\nssh = "ops@{alias}"\n')
        with config.open("a") as out:
            out.write(f"Host {alias}\n    HostName {address[host]}\n    Port 9\n")
    (root / "profiles" / "groups.toml").write_text('aliased = ["one", "two", "three"]\n')
    (root / "console.toml").write_text(f'[fleet]\nscrape_interval_s = 1\nprometheus = "{url}"\n')  # label: instance
    return root, config


async def test_profiles_named_by_ssh_aliases_get_the_figures_of_the_addresses_prometheus_scraped(
    addressed_fleet: tuple[SimFleet, Prometheus], tmp_path: Path
) -> None:
    sims, prometheus = addressed_fleet
    workspace, config = _aliased_workspace(tmp_path / "ws", sims, prometheus.url)
    targets = {label: resolve_target(label, profiles_dir=workspace / "profiles", ssh_config=str(config))
               for label in ALIASED}  # fmt: skip
    settings = FleetSettings(prometheus=prometheus.url, scrape_interval_s=1.0)
    assert settings.label == "instance"
    watcher = FleetWatcher(settings, host_names(targets), on_view=lambda _view: None, interval_s=1.0)
    view = await watcher.refresh()
    assert view.error is None and view.asked_at is not None
    assert set(view.hosts) == {"one", "two"} and view.unknown == ("three",)
    entry = {h["host"]: h for h in sims.hosts}
    throughput = prometheus.query("sum by (instance) (sglang:gen_throughput)", view.asked_at, label="instance")
    gpus = prometheus.query("count by (instance) (DCGM_FI_DEV_GPU_UTIL)", view.asked_at, label="instance")
    for label in ("one", "two"):
        host = entry[ALIASED[label][1]]
        figures = view.hosts[label]
        assert figures.get("throughput") == throughput[f"{host['address']}:{host['sglang']}"], label
        assert figures.get("gpus") == gpus[f"{host['address']}:{host['dcgm']}"] == 2, label
        assert figures.up == {"sglang": 1, "dcgm": 1}, label  # both of the host's instances, one address

    # the console's overview of the group: the same matching, through connect's own wiring
    args = argparse.Namespace(workspace=str(workspace), ssh_config=str(config), refresh=0.5, read_only=True,
                              targets=["@aliased"], prometheus=None)  # fmt: skip
    app = build_app(args, ["@aliased"])
    async with app.run_test(size=(200, 30)) as pilot:
        await wait_until(pilot, lambda: app.fleet_view is not None and app.fleet_view.asked_at is not None,
                         "Prometheus's first answer")  # fmt: skip
        await wait_until(pilot, lambda: _row(app, "one")["state"] == "up" and _row(app, "two")["state"] == "up",
                         "one and two up")  # fmt: skip
        assert _row(app, "three")["notes"] == "not in Prometheus" and "not in Prometheus (1): three" in _banner(app)


def _status(workspace: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OPSCONSOLE), "--workspace", str(workspace), "status", "@aliased", "--ssh-config",
                           str(config), *args], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_status_of_a_group_reads_prometheus_and_opens_ssh_only_for_a_host_it_does_not_know(
    addressed_fleet: tuple[SimFleet, Prometheus], tmp_path: Path
) -> None:
    """Every member's SSH is unreachable (the discard port): one and two still get their figures, from Prometheus;
    three, which Prometheus does not scrape, is the one tried over SSH. The control, --ssh, reads one and two over
    SSH too and cannot reach them: the figures above cannot have come from there."""
    sims, prometheus = addressed_fleet
    workspace, config = _aliased_workspace(tmp_path / "ws", sims, prometheus.url)
    done = _status(workspace, config, "--json")
    assert done.returncode == 1, done.stderr  # three cannot be reached
    report = json.loads(done.stdout)
    asked_at = report["prometheus"]["asked_at"]
    assert report["prometheus"]["error"] is None and report["prometheus"]["url"] == prometheus.url
    assert list(report["hosts"]) == ["one", "two", "three"] and report["ok"] is False
    entry = {h["host"]: h for h in sims.hosts}
    throughput = prometheus.query("sum by (instance) (sglang:gen_throughput)", asked_at, label="instance")
    for label in ("one", "two"):
        member, host = report["hosts"][label], entry[ALIASED[label][1]]
        assert member["source"] == "prometheus" and member["state"] == "up" and "error" not in member, member
        assert member["figures"]["throughput"] == throughput[f"{host['address']}:{host['sglang']}"], label
        assert member["figures"]["gpus"] == 2 and member["up"] == {"sglang": 1, "dcgm": 1}
    three = report["hosts"]["three"]
    assert three["source"] == "ssh" and three["why_ssh"] == "not in Prometheus", three
    assert entry["gpu-003"]["address"] in three["error"], three  # the alias's HostName: SSH was tried, and failed

    text = _status(workspace, config)
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"@aliased from Prometheus {prometheus.url}, asked at ") and "2 of 3 hosts" in lines[0]
    assert lines[1].split()[:3] == ["host", "state", "gen"]
    assert [line.split()[:2] for line in lines[2:4]] == [["one", "up"], ["two", "up"]]
    assert "opsconsole status @aliased --ssh" in text.stdout
    assert "over SSH, not in Prometheus: three" in text.stdout and "\nthree  [cannot be reached: " in text.stdout

    control = json.loads(_status(workspace, config, "--json", "--ssh").stdout)
    assert "prometheus" not in control
    for label in ALIASED:
        assert control["hosts"][label]["source"] == "ssh" and "error" in control["hosts"][label], label


def test_status_of_a_group_with_prometheus_down_reads_every_member_over_ssh(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    for host in ("one", "two"):
        (tmp_path / "profiles" / f"{host}.toml").write_text('[host]\nssh = "ops@127.0.0.1:9"\n')
    (tmp_path / "profiles" / "groups.toml").write_text('aliased = ["one", "two"]\n')
    config = tmp_path / "ssh_config"
    config.write_text("")
    done = _status(tmp_path, config, "--json", "--prometheus", "http://127.0.0.1:9")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert "connection refused" in report["prometheus"]["error"] and report["prometheus"]["asked_at"] is None
    for member in report["hosts"].values():
        assert member["source"] == "ssh" and member["why_ssh"].startswith("Prometheus could not be asked (")
    text = _status(tmp_path, config, "--prometheus", "http://127.0.0.1:9").stdout
    assert text.startswith("Prometheus http://127.0.0.1:9 could not be asked (") and "every host read over SSH" in text
