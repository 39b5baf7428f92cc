"""read_status: one refresh as a typed HostStatus, whose JSON is `status --json`'s shape."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from console.core.console_requests import is_loopback, parse_access
from console.core.session import Session, open_session
from console.core.status import HostStatus, read_status
from console.host.targets import Target
from console.workspace import Workspace
from tests.support.demo import Demo

SERVICE_KEYS = {
    "unit", "active_state", "sub_state", "main_pid", "started_at", "uptime_s", "n_restarts", "result",
    "unit_file_state", "need_daemon_reload", "fragment_path", "last_exit", "summary",
}  # fmt: skip
SGLANG_KEYS = {
    "url", "healthy", "no_api", "version", "model_path", "served_model_name", "speculative_algorithm",
    "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
    "disable_overlap_schedule", "speculative_adaptive", "adaptive_num_steps", "adaptive_num_draft_tokens",
    "max_running_requests", "effective_max_running_requests_per_dp",
    "max_total_num_tokens", "avg_spec_accept_length", "last_gen_throughput", "num_running_reqs", "num_queue_reqs",
    "gen_throughput", "spec_accept_length", "spec_accept_rate", "token_usage", "cache_hit_rate",
}  # fmt: skip
GPU_KEYS = {
    "index", "name", "uuid", "utilization_gpu", "utilization_memory", "memory_used_mib", "memory_total_mib",
    "power_draw_w", "power_limit_w", "temperature_gpu", "clocks_sm_mhz", "clocks_mem_mhz", "pstate", "throttle_reasons",
}  # fmt: skip


async def test_a_healthy_demo_host_reads_as_one_typed_status(shared_demo: Demo) -> None:
    async with open_session("demo", Workspace.resolve(shared_demo.workspace)) as session:
        status = await read_status(session)
        again = await read_status(session)  # the second refresh reads every endpoint in one round
    assert isinstance(status, HostStatus) and status.ok and again.ok
    assert status.connection.transport == "demo"
    assert status.service.active_state == "active" and status.service.main_pid
    sg = status.sglang
    assert sg.healthy and sg.version == "0.5.9" and sg.speculative_algorithm in ("NEXTN", "EAGLE")
    assert (sg.speculative_num_steps, sg.speculative_eagle_topk, sg.speculative_num_draft_tokens) == (1, 1, 2)
    assert len(status.gpus) == 4 and status.gpu_error is None

    doc = again.to_json()
    assert set(doc) == {"target", "connection", "service", "sglang", "gpus", "gpu_processes", "gpu_error", "refresh_ms"}
    assert set(doc["connection"]) == {"transport", "state", "detail"}
    assert set(doc["service"]) == SERVICE_KEYS  # no "error" key when there is no error
    assert set(doc["sglang"]) == SGLANG_KEYS
    assert all(set(gpu) == GPU_KEYS for gpu in doc["gpus"])
    assert doc["service"]["started_at"].endswith("+00:00")


async def test_a_stopped_demo_host_reports_each_part_with_its_error(tmp_path: Path) -> None:
    target = Target(label="gone", transport="demo", control=str(tmp_path / "no.sock"))
    async with open_session(target, Workspace(tmp_path)) as session:
        status = await read_status(session)
    assert not status.ok
    doc = status.to_json()
    assert set(doc["service"]) == {"unit", "error"} and "opsconsole demo" in doc["service"]["error"]
    assert doc["sglang"]["healthy"] is False and doc["sglang"]["error"]


async def test_the_light_refresh_takes_the_load_figures_from_metrics_and_asks_the_load_endpoint_no_more(
    shared_demo: Demo,
) -> None:
    async with open_session("demo", Workspace.resolve(shared_demo.workspace)) as session:
        full = await read_status(session)
        client = await session.sglang()
        asked: list[str] = []
        load = client.load

        async def counted_load() -> object:
            asked.append("load")
            return await load()

        client.load = counted_load  # type: ignore[method-assign]
        light = await read_status(session, light=True)
    assert client.metrics_carry_load  # the demo's SGLang runs with --enable-metrics
    assert asked == []  # one request less every second: /metrics has the same gauges
    assert light.sglang.healthy and light.sglang.num_running_reqs == full.sglang.num_running_reqs == 0
    assert light.sglang.num_queue_reqs == 0 and light.sglang.gen_throughput is not None


async def _access_counts(session: Session, since: datetime) -> Counter[str]:
    """The loopback access lines the demo's journal holds from `since` on, per method and path."""
    counts: Counter[str] = Counter()
    async for entry in session.service.journal(lines=5000, follow=False):
        line = parse_access(entry.message)
        if entry.timestamp >= since and line is not None and is_loopback(line.peer):
            counts[f"{line.method} {line.target}"] += 1
    return counts


async def test_light_refreshes_let_the_last_200_from_health_stand_while_metrics_answers(shared_demo: Demo) -> None:
    """SGLang's /health is a one-token generation and a line in its log; a light refresh (every second) asks it
    no more while it last answered 200, /metrics answers and systemd says the service runs. Counted in the
    demo's journal over the refreshes: before, every light refresh wrote a /health line."""
    refreshes = 8
    async with open_session("demo", Workspace.resolve(shared_demo.workspace)) as session:
        full = await read_status(session)  # asks /health: 200
        since = datetime.now(UTC)
        lights = [await read_status(session, light=True) for _ in range(refreshes)]
        counts: Counter[str] = Counter()
        deadline = time.monotonic() + 30
        while counts["GET /metrics"] < refreshes:  # each light refresh's /metrics line has reached the journal
            assert time.monotonic() < deadline, counts
            counts = await _access_counts(session, since)
    assert full.sglang.healthy and all(light.sglang.healthy for light in lights)
    assert counts["GET /health"] == 0, counts
    assert counts["GET /metrics"] == refreshes, counts


async def test_a_light_refresh_asks_health_again_once_the_service_no_longer_runs(demo: Demo) -> None:
    """What the dashboard shows stays what /health says: a stopped service, or /metrics not answering, is asked
    at once (not at the next full read)."""
    async with open_session("demo", Workspace.resolve(demo.workspace)) as session:
        assert (await read_status(session)).sglang.healthy
        await session.service.stop()
        light = await read_status(session, light=True)
        client = await session.sglang()
    assert light.service.active_state != "active" or light.service.sub_state != "running"
    assert not light.sglang.healthy and client.last_healthy is False
