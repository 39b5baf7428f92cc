"""`opsconsole bench HOST --dataset trace.jsonl`, as docs/traffic.md writes it, on the demo host (issue 43, fixed in
issue 46): the warm-up took a slice of the trace's requests, which are made as they are taken (TraceRequests has no
slices), and the command ended in a TypeError. The trace is scripts/make_datasets.py's kind, short (12 requests at
10 a second) so that its own clock ends in about a second; the command runs from the folder that holds it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.sim.datasets import write_trace
from tests.support.cli_run import run_cli
from tests.support.demo import OPSCONSOLE, Demo, running_demo


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        yield running


def test_the_documented_trace_command_runs_on_the_demo(demo: Demo) -> None:
    write_trace(demo.workspace / "trace.jsonl", count=12, seed=1, rate=10.0)
    argv = [str(OPSCONSOLE), "--workspace", str(demo.workspace), "bench", "demo", "--dataset", "trace.jsonl", "--json"]
    done = run_cli(argv, env=dict(os.environ), timeout=120, cwd=demo.workspace, input="")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (record,) = json.loads(done.stdout)
    assert record["trace_speed"] == 1.0 and record["completed"] == 12 and record["failed"] == 0
    # a trace level has no concurrency of its own: its warm-up is the --warmup requests, together
    assert record["warmup_mode"] == "level" and record["warmup_requests"] == 2
