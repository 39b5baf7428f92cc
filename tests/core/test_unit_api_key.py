"""Issue 22, item 5 on the demo host: the unit starts SGLang with `--api-key`, and the target names no key (the demo's
profile has no api_key_env). The console reads the unit as root anyway, so status, the dashboard and a benchmark
use the unit's key, say so once, and never show it; a profile's api_key_env still wins.

Each test checks that the server really refuses a request without the key, so that it cannot pass by luck."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from console.bench.engine import SweepConfig
from console.bench.workloads import WorkloadSpec
from console.core.bench import bench_host
from console.core.session import UNIT_KEY_NOTICE, open_session
from console.core.status import HostView, HostWatcher, read_status
from console.host.base import JournalEntry
from console.workspace import Workspace
from tests.support.demo import Demo, running_demo

pytestmark = pytest.mark.system

KEY = "sk-unit-only-5Rk2Wq9x"


async def _put_the_key_in_the_unit(workspace: Workspace) -> str:
    """Write `--api-key KEY` into the demo's unit and restart it (as an operator would, outside the console);
    the server's URL once it is healthy again."""
    async with open_session("demo", workspace) as session:
        unit = await session.service.read_unit()
        await session.service.write_unit(unit.replace("--enable-metrics", f"--enable-metrics --api-key {KEY}"))
        await session.service.daemon_reload()
        await session.service.restart()
        client = await session.sglang()
        assert await client.wait_until_healthy(60), "the demo server did not come back with the key"
        return client.base_url


@pytest.fixture(scope="module")
def keyed_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """One demo host whose unit carries --api-key, for the tests of this module (they only read it)."""
    with running_demo(tmp_path_factory.mktemp("keyed") / "ws") as demo:
        url = asyncio.run(_put_the_key_in_the_unit(Workspace.resolve(demo.workspace)))
        refused = httpx.get(f"{url}/server_info", timeout=10)
        assert refused.status_code == 401, "the server answers without the key: these tests would prove nothing"
        yield demo


def _no_key_in_the_workspace(demo: Demo) -> list[str]:
    return [
        str(p)
        for p in demo.workspace.rglob("*")
        if p.is_file() and ".demo" not in p.parts and KEY in p.read_text(errors="replace")
    ]


def test_status_uses_the_units_key_says_so_once_and_never_prints_it(keyed_demo: Demo) -> None:
    text = keyed_demo.run("status", "demo")
    as_json = keyed_demo.run("status", "demo", "--json")
    assert text.returncode == 0 and as_json.returncode == 0, (text.stderr, as_json.stderr)
    status = json.loads(as_json.stdout)
    assert status["sglang"]["version"] == "0.5.9" and "error" not in status["sglang"], status["sglang"]
    assert status["sglang"]["speculative_algorithm"] == "EAGLE"  # /server_info answered
    assert status["notices"] == [UNIT_KEY_NOTICE]
    assert "version 0.5.9" in text.stdout and text.stdout.count(UNIT_KEY_NOTICE) == 1
    # What a refused request prints ("401 Unauthorized; set the API key …"), not a bare "401": the server's random
    # port (127.0.0.1:40153) carried one once and failed CI.
    assert "Unauthorized" not in text.stdout + as_json.stdout
    for done in (text, as_json):
        assert KEY not in done.stdout + done.stderr
    assert _no_key_in_the_workspace(keyed_demo) == []


async def test_the_dashboard_reads_the_server_and_says_where_the_key_came_from_once(keyed_demo: Demo) -> None:
    views: list[HostView] = []
    journal: list[JournalEntry] = []
    watcher = HostWatcher(
        "demo", Workspace.resolve(keyed_demo.workspace), on_view=views.append, on_journal=journal.extend, interval_s=0.1
    )
    dashboard = asyncio.create_task(watcher.run())
    following = asyncio.create_task(watcher.follow_journal())

    def refreshed(n: int) -> bool:
        return sum(1 for v in views if v.status is not None and v.status.sglang.version == "0.5.9") >= n

    try:
        deadline = time.monotonic() + 60
        while not (refreshed(5) and any("api_key='***'" in e.message for e in journal)):
            assert time.monotonic() < deadline, "the dashboard did not read the server five times and the journal"
            await asyncio.sleep(0.05)
    finally:
        for task in (dashboard, following):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    last = views[-1]
    assert last.status is not None and last.status.sglang.error is None
    assert last.status.sglang.speculative_num_steps is not None
    notices = [e.message for e in journal if UNIT_KEY_NOTICE in e.message]
    assert notices == [f"opsconsole: demo: {UNIT_KEY_NOTICE}"]
    assert not any(KEY in e.message for e in journal)  # SGLang logs its ServerArgs, key included: masked
    assert not any(KEY in repr(v) for v in views)


async def test_a_benchmark_sends_the_units_key(keyed_demo: Demo) -> None:
    config = SweepConfig(WorkloadSpec(input_len=16, output_len=8), concurrencies=[1], requests=2, warmup=0)
    async with open_session("demo", Workspace.resolve(keyed_demo.workspace)) as session:
        records = await bench_host(session, config, label="keyed")
        assert session.api_key_source == "unit" and session.take_notices() == [UNIT_KEY_NOTICE]
    assert records and records[0].completed == 2 and not records[0].failed and records[0].sglang_version == "0.5.9"
    assert KEY not in json.dumps([r.model_dump(mode="json") for r in records])


async def test_a_profiles_api_key_env_still_wins(keyed_demo: Demo, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = Workspace.resolve(keyed_demo.workspace)
    demo_profile = (workspace.profiles / "demo.toml").read_text()
    named = workspace.profiles / "demo-named-key.toml"
    named.write_text(demo_profile + 'api_key_env = "OPSCONSOLE_TEST_OTHER_KEY"\n')
    monkeypatch.setenv("OPSCONSOLE_TEST_OTHER_KEY", "sk-not-the-units")
    try:
        async with open_session("demo-named-key", workspace) as session:
            status = await read_status(session)
            assert session.api_key_source == "profile" and status.notices == ()
    finally:
        named.unlink()
    assert status.sglang.error is not None and "401" in status.sglang.error  # the profile's key, not the unit's
    assert "api_key_env" in status.sglang.error and KEY not in status.sglang.error


def test_the_demo_profile_names_no_key(keyed_demo: Demo) -> None:
    """The premise: the target of the tests above gives no key (no api_key_env), and none is in the environment."""
    profile = (Path(keyed_demo.workspace) / "profiles" / "demo.toml").read_text()
    assert "api_key_env" not in profile and KEY not in os.environ.values()
