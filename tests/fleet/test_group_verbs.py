"""`@group` on the command line: `status @prod` over a real demo host and a host that cannot be reached, the
console's overview naming the group, and bad groups refused with exit 2 before anything is contacted."""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Tab

from console.cli.connect import build_app
from tests.support.demo import OPSCONSOLE, Demo, running_demo
from tests.tui.support import wait_until

pytestmark = pytest.mark.system

UNREACHABLE = '[host]\nssh = "ops@127.0.0.1:9"\n'  # nothing listens on the discard port


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    with running_demo(tmp_path_factory.mktemp("groups") / "ws") as running:
        (running.workspace / "profiles" / "gone.toml").write_text(UNREACHABLE)
        yield running


def opsconsole(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OPSCONSOLE), "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_status_of_a_group_reads_every_member(demo: Demo) -> None:
    (demo.workspace / "profiles" / "groups.toml").write_text('up = ["demo"]\nall = ["@up", "gone"]\n')
    done = opsconsole(demo.workspace, "status", "@up", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["group"] == "up" and report["ok"] is True and list(report["hosts"]) == ["demo"]
    assert report["hosts"]["demo"]["sglang"]["healthy"] is True

    done = opsconsole(demo.workspace, "status", "@all", "--json")
    assert done.returncode == 1  # one member cannot be reached: the others are still reported
    report = json.loads(done.stdout)
    assert list(report["hosts"]) == ["demo", "gone"] and report["ok"] is False
    assert report["hosts"]["demo"]["sglang"]["healthy"] is True and "127.0.0.1" in report["hosts"]["gone"]["error"]

    done = opsconsole(demo.workspace, "status", "@all")
    assert done.stdout.startswith("demo  [") and "\n\ngone  [cannot be reached: " in done.stdout


@pytest.mark.parametrize(
    ("groups", "target", "says"),
    [
        ('prod = ["demo", "gpu-x"]', "@prod", "group 'prod': 'gpu-x' is not a profile (profiles/gpu-x.toml)"),
        ("prod = []", "@prod", "group 'prod' is empty"),
        ('prod = ["demo", "@prod"]', "@prod", "group 'prod' names itself (@prod -> @prod)"),
        ('prod = ["demo"]', "@nope", "@nope: no such group in "),
    ],
)
@pytest.mark.parametrize("verb", ["status", "connect"])
def test_bad_groups_are_refused_with_exit_2(tmp_path: Path, groups: str, target: str, says: str, verb: str) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "demo.toml").write_text(UNREACHABLE)
    (tmp_path / "profiles" / "groups.toml").write_text(groups + "\n")
    done = opsconsole(tmp_path, verb, target)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"opsconsole {verb}: ") and says in done.stderr and done.stdout == ""


async def test_the_console_opens_a_groups_hosts_and_its_overview_names_the_group(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    for host in ("gpu-a", "gpu-b", "other"):
        (tmp_path / "profiles" / f"{host}.toml").write_text(UNREACHABLE)
    (tmp_path / "profiles" / "groups.toml").write_text('prod = ["gpu-*"]\n')
    args = argparse.Namespace(workspace=str(tmp_path), ssh_config=None, refresh=None, read_only=True,
                              targets=["@prod", "other"], prometheus=None)  # fmt: skip
    app = build_app(args, ["@prod", "other"])
    assert app.labels == ["gpu-a", "gpu-b", "other"] and app.fleet_hosts == []  # no Prometheus: a tab each
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_until(pilot, lambda: bool(app.query(Tab)), "the tabs")
        labels = [str(tab.label) for tab in app.query(Tab)]
        assert labels == ["1 gpu-a", "2 gpu-b", "3 other", "overview @prod"]


@pytest.mark.parametrize(
    ("console_toml", "option", "says"),
    [
        ('[fleet]\nprometheus = "prometheus:9090"\n', [], "fleet.prometheus: expected an http(s) URL"),
        ('[fleet]\nlabel = "__name__"\n', [], "fleet.label: expected a Prometheus label name"),
        ('[fleet]\nwindow = "5 minutes"\n', [], 'fleet.window: expected a PromQL duration such as "1m"'),
        ("", ["--prometheus", "ftp://p"], "--prometheus: expected an http(s) URL"),
    ],
)
def test_bad_fleet_settings_are_refused_with_exit_2(
    tmp_path: Path, console_toml: str, option: list[str], says: str
) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "gpu-a.toml").write_text(UNREACHABLE)
    (tmp_path / "console.toml").write_text(console_toml)
    done = opsconsole(tmp_path, "connect", "gpu-a", *option)
    assert done.returncode == 2 and says in done.stderr, done.stderr


@pytest.mark.parametrize("option", [["--ssh"], ["--prometheus", "http://127.0.0.1:9"]])
def test_status_options_for_a_group_are_refused_for_one_host(tmp_path: Path, option: list[str]) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "gpu-a.toml").write_text(UNREACHABLE)
    done = opsconsole(tmp_path, "status", "gpu-a", *option)
    assert done.returncode == 2 and f"{option[0]} is for @GROUP" in done.stderr, done.stderr
