"""The load generator that runs on a GPU host (console.bench.agent, driven by console.bench.remote), here as a
local process behind the same interface as the SSH channel, against the known-schedule server: its figures are
the local engine's (within 1 % of the truth), its events arrive as the same objects, it runs on every Python
3.10+ found here with nothing but the standard library, and it stops, and stops its requests, when told to,
when its channel closes and when the console falls silent. (tests/e2e/test_bench_on_host.py: the same over SSH.)"""

from __future__ import annotations

import asyncio
import glob
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from console.bench import events as ev
from console.bench.engine import SweepConfig
from console.bench.remote import AGENT_FILES, HostSweep, RemoteBenchError, parse_probe, payload, python_candidates
from console.bench.workloads import WorkloadSpec
from tests.bench.conftest import ScheduleServer
from tests.support.localproc import local_process


def _pythons_310() -> list[str]:
    """Every Python 3.10 on this machine that runs (the oldest the agent supports; pyenv shims that do not
    select a version are left out)."""
    found = {
        p
        for p in (shutil.which("python3.10"), *glob.glob(str(Path.home() / ".pyenv/versions/3.10*/bin/python3.10")))
        if p
    }
    runs = []
    for path in sorted(found):
        done = subprocess.run(
            [path, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"], capture_output=True, check=False
        )
        if done.returncode == 0:
            runs.append(path)
    return runs[:1]


# The interpreters to run the agent with: this one, and a Python 3.10 where the machine has one.
PYTHONS = [sys.executable, *_pythons_310()]


def in_flight(server: ScheduleServer) -> int:
    with urllib.request.urlopen(server.url + "/in_flight", timeout=5) as answer:
        return int(json.load(answer)["streams"])


@pytest.mark.alone  # held to the known schedule within 1 % (tests/tiers.py)
@pytest.mark.parametrize("python", PYTHONS)
async def test_the_agent_measures_the_known_schedule_like_the_local_engine(
    schedule_server: Callable[..., ScheduleServer], python: str
) -> None:
    """The truth test's workload (tests/bench/test_agrees_with_bench_serving.py: 1.3 s requests, 3 per slot at
    C = 4), after a short C = 1 level: the same 1 % of the truth the local engine is held to."""
    server = schedule_server(ttft_ms=30, interval_ms=10, tokens_per_chunk=2, spec=True)
    events: list[ev.BenchEvent] = []
    config = SweepConfig(WorkloadSpec(input_len=32, output_len=256), concurrencies=[4], requests=12, warmup=0)
    warm = SweepConfig(WorkloadSpec(input_len=32, output_len=16), concurrencies=[1], requests=2, warmup=1)
    await HostSweep(local_process, python, server.url, warm, gpu_command=None, on_event=events.append).run()
    sweep = HostSweep(local_process, python, server.url, config, gpu_command=None, on_event=events.append)
    result = await sweep.run()
    truth = server.truth(256)
    (level,) = result.levels
    m = level.metrics
    assert (m["completed"], m["failed"], m["total_output_tokens"]) == (12, 0, 12 * 256)
    expected = 12 * 256 / (3 * truth["latency_ms"] / 1000)
    assert m["output_throughput"] == pytest.approx(expected, rel=0.01)
    assert m["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"], rel=0.01)
    assert m["accept_length"] == pytest.approx(truth["accept_length"])
    assert level.cache_flushed and level.level.concurrency == 4
    assert result.server.model == "schedule-test-model" and result.server.speculative
    kinds = [type(e) for e in events]
    assert kinds.count(ev.SweepStarted) == 2 and kinds.count(ev.SweepDone) == 2 and kinds[-1] is ev.SweepDone
    assert (
        kinds.count(ev.LevelStarted) == 2 and kinds.count(ev.LevelDone) == 2 and kinds.count(ev.RequestDone) == 2 + 12
    )
    assert all(isinstance(e.result.ttft, float) for e in events if isinstance(e, ev.RequestDone))
    assert set(kinds) <= {
        ev.SweepStarted,
        ev.LevelStarted,
        ev.RequestDone,
        ev.RunningFigures,
        ev.LevelDone,
        ev.SweepDone,
    }
    assert sweep.agent_python is not None and sweep.agent_pid is not None


async def _wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {seconds} s")
        await asyncio.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def test_a_cancelled_sweep_stops_the_load_and_keeps_the_finished_levels(
    schedule_server: Callable[..., ScheduleServer],
) -> None:
    server = schedule_server(ttft_ms=20, interval_ms=20, tokens_per_chunk=1)
    started = asyncio.Event()

    def on_event(event: ev.BenchEvent) -> None:
        if isinstance(event, ev.LevelStarted) and event.level.concurrency == 4:
            started.set()

    # the first level (4 requests of 8 s at C = 2: 2 rounds) finishes; the second is cancelled while it runs
    config = SweepConfig(WorkloadSpec(input_len=8, output_len=400), concurrencies=[2, 4], requests=4, warmup=0)
    sweep = HostSweep(local_process, sys.executable, server.url, config, gpu_command=None, on_event=on_event)
    task = asyncio.ensure_future(sweep.run())
    await asyncio.wait_for(started.wait(), 60)
    await _wait_for(lambda: in_flight(server) == 4, 10, "4 requests in flight")
    pid = sweep.agent_pid
    assert pid is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _wait_for(lambda: _gone(pid), 10, "the agent's exit")
    await _wait_for(lambda: in_flight(server) == 0, 10, "the server seeing its requests dropped")
    kept = sweep.result_so_far()
    assert [level.level.concurrency for level in kept.levels] == [2]  # the finished level, with its server
    assert kept.levels[0].metrics["completed"] == 4 and kept.server.model == "schedule-test-model"


async def test_an_agent_that_hears_nothing_stops_by_itself(schedule_server: Callable[..., ScheduleServer]) -> None:
    """A link that died without anyone closing it: no heartbeat, so the agent stops the load and ends."""
    server = schedule_server(ttft_ms=20, interval_ms=50, tokens_per_chunk=1)
    config = SweepConfig(WorkloadSpec(input_len=8, output_len=2000), concurrencies=[3], requests=3, warmup=0)
    sweep = HostSweep(
        local_process, sys.executable, server.url, config, gpu_command=None, heartbeat_s=3600, heartbeat_timeout_s=1.0
    )
    result = await asyncio.wait_for(sweep.run(), 30)
    assert result.stopped is not None and "no word from the console" in result.stopped
    assert result.levels == []  # the only level was cut short
    await _wait_for(lambda: in_flight(server) == 0, 10, "the server seeing its requests dropped")


@pytest.mark.system
async def test_an_agent_that_cannot_reach_the_server_says_why() -> None:
    config = SweepConfig(WorkloadSpec(input_len=8, output_len=8), concurrencies=[1], requests=2, warmup=1)
    sweep = HostSweep(local_process, sys.executable, "http://127.0.0.1:9", config, gpu_command=None)
    result = await sweep.run()
    assert result.stopped is not None and "every warm-up request failed" in result.stopped


@pytest.mark.system
async def test_a_python_that_is_not_there_is_a_clear_error() -> None:
    config = SweepConfig(WorkloadSpec(input_len=8, output_len=8), concurrencies=[1], requests=2, warmup=0)
    sweep = HostSweep(local_process, "/nonexistent/python3", "http://127.0.0.1:9", config, gpu_command=None)
    with pytest.raises((RemoteBenchError, FileNotFoundError)):
        await sweep.run()


def test_the_payload_carries_only_standard_library_code() -> None:
    """Every module the agent gets imports nothing outside the standard library and the modules sent along."""
    import ast

    root = Path(__file__).resolve().parents[2]
    sent = {name.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for name in AGENT_FILES}
    for name in AGENT_FILES:
        if not name.endswith(".py"):
            continue
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for module in modules:
                top = module.split(".")[0]
                in_stdlib = top in sys.stdlib_module_names or top == "__future__"
                in_guard = isinstance(node, ast.Import) and module == "aiohttp"  # only for http_client="aiohttp"
                assert in_stdlib or module in sent or in_guard, f"{name} imports {module}"
    assert payload().split("\n", 1)[0].isdigit()


def test_python_candidates_from_execstart() -> None:
    assert python_candidates(["/opt/sgl/bin/python3.12", "-m", "sglang.launch_server"]) == [
        "/opt/sgl/bin/python3.12",
        "python3",
    ]
    assert python_candidates(["/opt/sgl/bin/sglang", "serve"]) == [
        "/opt/sgl/bin/python3",
        "/opt/sgl/bin/python",
        "python3",
    ]
    assert python_candidates(["/usr/bin/env", "FOO=1", "python3", "-m", "sglang.launch_server"]) == ["python3"]
    assert python_candidates(["/usr/local/bin/start-sglang.sh"]) == ["python3"]
    assert python_candidates(None) == ["python3"]
    assert parse_probe("/usr/bin/python3\n3.11.2\n") == ("/usr/bin/python3", "3.11.2")
    assert parse_probe("") is None
