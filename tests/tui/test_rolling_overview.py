"""Rolling changes from the console's overview against real hosts: three demo hosts (each `opsconsole demo --no-ui`:
the SGLang stand-in, a real HTTP server, run as a unit under the demo's service manager), one workspace naming
them as the group @trio, and the real console (`connect @trio`, Pilot in-process). Every outcome is read on the hosts
themselves, around the console (unit bytes, MainPID).

- Two of three hosts selected (space), `r`: both restarted (new MainPIDs), the third untouched, the report lists both.
- The Prometheus fleet overview (Debian's Prometheus scraping the three stand-ins): two hosts selected, `F`: both
  frozen as one snapshot set (its index names them), the third untouched.
- All three selected, `e` with a value every host's rules refuse: each host named with its refusal, nothing restarted;
  then a draft model that exists on roll-a and roll-c only (each host's working directory has its own `draft`): the
  canary roll-a done, roll-b rolled back (its unit bytes as before, healthy), roll-c never started (same unit, same
  MainPID), and the report says so host by host.

(tests/e2e/test_rolling.py is the CLI's roll behind SGLang's router over testbed hosts.)
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.text import Text
from textual.pilot import Pilot

from console.cli.connect import build_app
from console.core.roll import HostOutcome
from console.tui.app import OpsConsoleApp
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.progress import ProgressScreen
from console.tui.screens.roll import RollScreen
from console.tui.widgets.fleet_overview import FleetTable
from console.tui.widgets.overview import Overview
from tests.support.demo import Demo, running_demo
from tests.support.prometheus import Prometheus, running_prometheus
from tests.tui.support import screen_text, wait_until

pytestmark = pytest.mark.system

NAMES = ("roll-a", "roll-b", "roll-c")
SIZE = (120, 40)
ROLL_TIMEOUT = 120.0  # a roll of three demo starts (about a second each) on a busy machine


@dataclass
class Trio:
    root: Path
    workspace: Path
    demos: dict[str, Demo]

    async def unit(self, name: str) -> str:
        return await asyncio.to_thread(self.demos[name].host().unit)

    async def pid(self, name: str) -> int | None:
        return await asyncio.to_thread(self.demos[name].host().main_pid)

    async def healthy(self, name: str) -> bool:
        return await asyncio.to_thread(self.demos[name].host().healthy)

    def port(self, name: str) -> int:
        profile = tomllib.loads((self.workspace / "profiles" / f"{name}.toml").read_text())
        return int(profile["sglang"]["port"])


@pytest.fixture(scope="module")
def trio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trio]:
    root = tmp_path_factory.mktemp("roll")
    workspace = root / "trio"
    (workspace / "profiles").mkdir(parents=True)
    (workspace / "logs").mkdir()
    with ExitStack() as stack:
        demos = {name: stack.enter_context(running_demo(root / f"demo-{name}")) for name in NAMES}
        for name, demo in demos.items():  # the demo's profile (its control socket, its port) under the host's name
            profile = (demo.workspace / "profiles" / "demo.toml").read_text()
            (workspace / "profiles" / f"{name}.toml").write_text(profile)
        (workspace / "profiles" / "groups.toml").write_text(f"trio = {list(NAMES)!r}\n".replace("'", '"'))
        yield Trio(root, workspace, demos)


def _args(workspace: Path, **extra: Any) -> argparse.Namespace:
    values: dict[str, Any] = {"workspace": str(workspace), "ssh_config": None, "refresh": 0.5, "read_only": False,
                              "targets": ["@trio"], "prometheus": None}  # fmt: skip
    values.update(extra)
    return argparse.Namespace(**values)


async def _roll(pilot: Pilot[Any], key: str, *typed: str) -> ProgressScreen[Any, Any]:
    """`key` on the overview's selection, the form filled (`typed` into its first field), planned, confirmed; the
    progress screen once the roll is over."""
    app = pilot.app
    await pilot.press(key)
    await wait_until(pilot, lambda: isinstance(app.screen, RollScreen), "the roll's form")
    if typed:
        await pilot.press(*typed)
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", ROLL_TIMEOUT)
    await pilot.press("y")
    await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), "the progress")
    screen = app.screen
    assert isinstance(screen, ProgressScreen)
    await wait_until(pilot, lambda: screen.done, "the roll to end", ROLL_TIMEOUT)
    return screen


def _answer(prometheus: Prometheus, expr: str) -> float:
    try:
        return prometheus.query(expr, time.time()).get("", 0.0)
    except httpx.HTTPError:
        return 0.0


def _poll(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


def _fleet_state(table: FleetTable, host: str) -> str:
    try:
        return table.get_row(host)[1].plain
    except KeyError:  # no answer from Prometheus shown yet
        return ""


def _host_line(app: OpsConsoleApp, host: str) -> str:
    """The report's row of `host` (its mark, batch, state, time, detail)."""
    return next(line for line in screen_text(app).splitlines() if re.search(rf"^\s*\S\s+{host}\s", line))


async def test_a_rolling_restart_of_two_selected_hosts_leaves_the_third_untouched(trio: Trio) -> None:
    pids = {name: await trio.pid(name) for name in NAMES}
    units = {name: await trio.unit(name) for name in NAMES}
    app = build_app(_args(trio.workspace), ["@trio"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await wait_until(pilot, lambda: screen_text(app).count("healthy") >= 3, "the three hosts healthy", 60)
        table = app.query_one(Overview)
        table.focus()
        await pilot.press("space", "space")  # roll-a, then roll-b (space moves on)
        await wait_until(pilot, lambda: "2 selected" in screen_text(app), "two selected")
        assert table.selected_hosts() == ("roll-a", "roll-b")
        screen = await _roll(pilot, "r")
        report = screen.result
        assert report is not None and report.ok, screen_text(app)
        assert report.ledger.outcomes() == {"roll-a": HostOutcome.DONE, "roll-b": HostOutcome.DONE}
        assert [report.ledger.records[h].batch for h in ("roll-a", "roll-b")] == ["canary 1", "wave 1"]
        shown = ("rolling restart done", "2 done", "esc: back to the overview")
        await wait_until(pilot, lambda: all(s in screen_text(app) for s in shown), "the report, whole")
        for host in ("roll-a", "roll-b"):
            assert " done " in _host_line(app, host)
        assert "roll-c" not in screen_text(app).split("host", 1)[1]  # not in the roll at all
    for host in ("roll-a", "roll-b"):
        assert await trio.pid(host) not in (None, pids[host]), host
        assert await trio.healthy(host)
    assert (await trio.pid("roll-c"), await trio.unit("roll-c")) == (pids["roll-c"], units["roll-c"])


async def test_a_fleet_freeze_from_the_prometheus_overview_keeps_one_set(trio: Trio) -> None:
    hosts = [{"host": name, "sglang": trio.port(name), "dcgm": trio.port(name)} for name in NAMES]
    pid_b, unit_b = await trio.pid("roll-b"), await trio.unit("roll-b")
    with running_prometheus(trio.root / "prom", hosts, interval_s=1.0) as prometheus:
        # every target scraped (the idle stand-ins' latency rates stay 0, so wait_scraped's second condition does not
        # apply); the overview's rows say "up" only once their figures come from Prometheus
        await asyncio.to_thread(_poll, lambda: _answer(prometheus, "sum(up)") >= 2 * len(hosts), "6 targets up")
        (trio.workspace / "console.toml").write_text('[fleet]\nlabel = "host"\nscrape_interval_s = 1\n')
        try:
            app = build_app(_args(trio.workspace, prometheus=prometheus.url), ["@trio"])
            async with app.run_test(size=SIZE) as pilot:
                table = app.query_one(FleetTable)
                await wait_until(pilot, lambda: all(_fleet_state(table, h) == "up" for h in NAMES), "the rows up", 60)
                table.focus()
                await pilot.press("space", "down", "space")  # roll-a and roll-c
                await wait_until(pilot, lambda: "2 selected" in screen_text(app), "two selected")
                assert table.selected_hosts() == ("roll-a", "roll-c") and app.labels == []  # no tab opened
                screen = await _roll(pilot, "F")
                report = screen.result
                assert report is not None and report.ok, screen_text(app)
                assert report.ledger.outcomes() == {"roll-a": HostOutcome.DONE, "roll-c": HostOutcome.DONE}
                assert report.snapshot_set is not None
                name = report.snapshot_set["name"]
                await wait_until(pilot, lambda: f"snapshot set {name}: complete" in screen_text(app), "the set")
        finally:
            (trio.workspace / "console.toml").unlink()
    index = tomllib.loads((trio.workspace / "profiles" / "snapshot-sets" / f"{name}.toml").read_text())
    assert index["members"] == {"roll-a": f"{name}.roll-a", "roll-c": f"{name}.roll-c"}
    assert (await trio.pid("roll-b"), await trio.unit("roll-b")) == (pid_b, unit_b)


async def test_a_rolling_set_refused_per_host_then_failing_on_one_host(trio: Trio) -> None:
    # Each host its own working directory, ./draft in roll-a's and roll-c's only: a draft model path that starts
    # there and fails on roll-b (the unit is written behind the console's back; the roll's apply writes it again).
    for name in NAMES:
        home = trio.root / f"home-{name}"
        home.mkdir()
        if name != "roll-b":
            (home / "draft").mkdir()
        unit = re.sub(r"^WorkingDirectory=.*$", f"WorkingDirectory={home}", await trio.unit(name), flags=re.M)
        await asyncio.to_thread(trio.demos[name].host().write_unit_behind_its_back, unit)
    pids = {name: await trio.pid(name) for name in NAMES}
    units = {name: await trio.unit(name) for name in NAMES}
    app = build_app(_args(trio.workspace), ["@trio"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await wait_until(pilot, lambda: screen_text(app).count("healthy") >= 3, "the three hosts healthy", 60)
        app.query_one(Overview).focus()
        await pilot.press("a")
        await wait_until(pilot, lambda: "3 selected" in screen_text(app), "all three selected")

        # refused by every host's own rules: said host by host, nothing restarted
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, RollScreen), "the roll's form")
        await pilot.press(*"speculative-num-steps=many", "ctrl+s")
        await wait_until(pilot, lambda: "REFUSED: nothing was changed" in screen_text(app), "the refusal", ROLL_TIMEOUT)
        form = app.screen
        assert isinstance(form, RollScreen) and isinstance(form.outcome, Text)
        for name in NAMES:
            assert re.search(rf"^  {name}: .*many", form.outcome.plain, flags=re.M), (name, form.outcome.plain)
        assert {name: await trio.pid(name) for name in NAMES} == pids
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, RollScreen), "the form closed")

        screen = await _roll(pilot, "e", *"speculative-draft-model-path=./draft")
        report = screen.result
        assert report is not None and not report.ok
        assert report.ledger.outcomes() == {"roll-a": HostOutcome.DONE, "roll-b": HostOutcome.ROLLED_BACK,
                                            "roll-c": HostOutcome.NOT_STARTED}  # fmt: skip
        shown = ("STOPPED", "1 done", "1 rolled back", "1 not started", "esc: back to the overview")
        await wait_until(pilot, lambda: all(s in screen_text(app) for s in shown), "the report, whole")
        assert " done " in _host_line(app, "roll-a")
        assert " rolled back " in _host_line(app, "roll-b")
        assert " not started " in _host_line(app, "roll-c") and "untouched" in _host_line(app, "roll-c")
    assert "--speculative-draft-model-path ./draft" in await trio.unit("roll-a")
    assert await trio.unit("roll-b") == units["roll-b"] and await trio.healthy("roll-b")
    assert (await trio.pid("roll-c"), await trio.unit("roll-c")) == (pids["roll-c"], units["roll-c"])
