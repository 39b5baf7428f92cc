"""What travels to the load generator on a GPU host (console.bench.wire) for the operator's traffic: a dataset's
sample and the SLO come back as they went, and a sweep's capacity search with its summary."""

from __future__ import annotations

import json
from pathlib import Path

from console.bench.datasets import sample_dataset
from console.bench.engine import ServerInfo, SweepConfig, SweepResult
from console.bench.wire import config_from_json, config_to_json, sweep_from_parts, sweep_summary_to_json
from console.bench.workloads import WorkloadSpec, build_requests


def test_a_dataset_sample_and_an_slo_cross_the_wire_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    rows = [{"messages": [{"role": "user", "content": f"q {i} now"}], "max_tokens": 5 + i} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    sample = sample_dataset(path, size=3, seed=2, output_len_cap=7)
    config = SweepConfig(
        WorkloadSpec(name="dataset", api="chat", dataset=sample),
        slo={"ttft_p95": 800.0},
        long_prompts="error",
        find_capacity=True,
    )
    line = json.dumps(config_to_json(config))  # as the request line carries it
    back = config_from_json(json.loads(line))
    assert back == config
    assert build_requests(back.workload, 3) == build_requests(config.workload, 3)


def test_the_capacity_search_summary_comes_back_with_the_sweep() -> None:
    summary = {"capacity_rate": 4.0, "first_miss_rate": 4.3, "bracketed": True, "reason": "bracketed within 10%"}
    sweep = SweepResult(ServerInfo(context_length=4096), [], [], None, None, summary)
    back = sweep_from_parts(json.loads(json.dumps(sweep_summary_to_json(sweep))), None, [])
    assert back.capacity == summary and back.server.context_length == 4096


def test_a_trace_and_its_speeds_cross_the_wire_unchanged(tmp_path: Path) -> None:
    from console.bench.events import Level, LevelStarted
    from console.bench.wire import event_from_json, event_to_json
    from console.sim.datasets import write_trace

    sample = sample_dataset(write_trace(tmp_path / "trace.jsonl", count=12), size=10**9, trace_window=(0.0, 4.0))
    config = SweepConfig(WorkloadSpec(name="dataset", dataset=sample), trace_speeds=[1.0, 2.5], warmup=0)
    back = config_from_json(json.loads(json.dumps(config_to_json(config))))
    assert back == config and back.levels() == [Level(trace_speed=1.0), Level(trace_speed=2.5)]
    assert [r.body for r in build_requests(back.workload, 5)] == [r.body for r in build_requests(config.workload, 5)]
    started = LevelStarted(Level(trace_speed=2.5), 0, 12, None)
    assert event_from_json(json.loads(json.dumps(event_to_json(started)))) == started
