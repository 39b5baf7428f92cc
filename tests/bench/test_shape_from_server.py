"""`bench --shape-from-server` against the stand-in (`python -m console.sim`, a real HTTP server): known load goes to
it while the console watches its /metrics; the shape must give back the load's rate, length percentiles and cache
hit share; the workload drawn from a shape must make the server see that shape again; a server without the series
is refused with nothing sent."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.shape import ShapeSpec, shaped_requests
from console.bench.workloads import WorkloadSpec
from console.sglang.histograms import Histogram
from console.sglang.traffic_shape import parse_scrape, window_shape
from tests.bench.test_traffic import OPSCONSOLE, bench_cli, prompt_tokens_sent
from tests.support.cli_run import finish_cli, start_cli
from tests.support.known_load import SHARED, KnownLoad
from tests.support.simproc import FAST, SimProcess, running_sim

pytestmark = pytest.mark.system


@pytest.fixture
def sim() -> Iterator[SimProcess]:
    with running_sim([*FAST, "--enable-metrics"]) as server:
        yield server


def quantile(values: list[int], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def test_the_shape_seen_on_the_server_is_the_load_that_was_sent(sim: SimProcess, tmp_path: Path) -> None:
    with KnownLoad(sim.url) as load:
        load.wait_for(20)  # running before the window opens
        cli = start_cli(
            [str(OPSCONSOLE), "--workspace", str(tmp_path / "ws"), "bench", "--url", sim.url, "--shape-from-server",
             "6s", "--rate-scale", "1,1.5", "--requests", "12", "--warmup", "0", "--json"],
            env=dict(os.environ),
        )  # fmt: skip
        assert cli.stderr is not None
        lines = []
        opened = closed = 0.0
        for line in cli.stderr:  # the window: from the line said after the first scrape to the shape's line
            lines.append(line)
            if line.startswith("watching the server's /metrics"):
                opened = time.monotonic()
            if line.startswith("shape: "):
                closed = time.monotonic()
                break
        assert opened and closed, "".join(lines) + cli.stderr.read()
    out, err = finish_cli(cli, timeout=240)
    assert cli.returncode == 0, "".join(lines) + err
    in_window = [d for d in load.done if opened <= d[0] <= closed]
    records = json.loads(out)
    shape = records[0]["workload"]["shape"]
    assert shape["requests"] == pytest.approx(len(in_window), rel=0.10)
    assert shape["rate"] == pytest.approx(len(in_window) / (closed - opened), rel=0.10)
    prompts, outputs = [d[1] for d in in_window], [d[2] for d in in_window]
    for name, sent in (("prompt", prompts), ("output", outputs)):
        seen = Histogram(tuple((float(le), c) for le, c in shape[f"{name}_buckets"]))
        for q in (0.5, 0.95):
            assert seen.quantile(q) == pytest.approx(quantile(sent, q), rel=0.10), (name, q)
    cached = sum(d[3] for d in in_window) / sum(prompts)
    assert shape["cache_hit"] == pytest.approx(cached, abs=0.03) and 0.4 < cached < 0.55
    said = "".join(lines)
    assert f"last 6 s: {shape['rate']:,.2f} req/s" in said and "cache hit" in said
    assert [r["request_rate"] for r in records] == [float(f"{shape['rate'] * x:.4g}") for x in (1, 1.5)]
    assert all(r["completed"] == 12 and r["failed"] == 0 for r in records)
    assert '"input_ids":' not in out and str(SHARED[0]) not in out  # no prompt in the record


def test_a_workload_drawn_from_a_shape_makes_the_server_see_that_shape(sim: SimProcess) -> None:
    spec = ShapeSpec(
        prompt_buckets=((100.0, 0.0), (300.0, 100.0), (1000.0, 300.0), (3000.0, 400.0), (float("inf"), 400.0)),
        output_buckets=((100.0, 0.0), (300.0, 200.0), (500.0, 400.0), (float("inf"), 400.0)),
        cache_hit=0.35,
        rate=40.0,
    )
    config = SweepConfig(
        workload=WorkloadSpec(name="shape", shape=spec, seed=3), request_rates=[40.0], requests=150, warmup=0
    )
    then = parse_scrape(_metrics(sim))

    async def run() -> None:
        async with BenchClient(sim.url) as client:
            await BenchEngine(client, config).run()

    asyncio.run(run())
    seen = window_shape(then, parse_scrape(_metrics(sim)), seconds=1.0)
    assert seen.requests == 150
    _, reachable = shaped_requests(spec, seed=3, count=150, offset=0)
    assert reachable == pytest.approx(0.35, abs=0.01)
    assert seen.cache_hit == pytest.approx(reachable, abs=0.02)  # the shared prefixes, served by the prefix cache
    asked = {"prompt": Histogram(spec.prompt_buckets), "output": Histogram(spec.output_buckets)}
    for name, hist in (("prompt", seen.prompt), ("output", seen.output)):
        for q in (0.5, 0.95):
            assert hist.quantile(q) == pytest.approx(asked[name].quantile(q), rel=0.10), (name, q)


def _metrics(sim: SimProcess) -> str:
    with urllib.request.urlopen(sim.url + "/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def test_a_version_that_records_no_token_histograms_is_refused_with_nothing_sent(tmp_path: Path) -> None:
    with running_sim([*FAST, "--sim-sglang-version", "0.5.6", "--enable-metrics"]) as old:
        before = prompt_tokens_sent(old)
        refused = bench_cli(tmp_path / "ws", "--url", old.url, "--shape-from-server", "1h")  # refused at once
        assert refused.returncode == 2, refused.stderr
        said = " ".join(refused.stderr.split())
        assert "sglang:prompt_tokens_histogram and sglang:generation_tokens_histogram" in said
        assert "only with --collect-tokens-histogram" in said and "nothing was sent" in said
        assert prompt_tokens_sent(old) == before
        assert not list((tmp_path / "ws" / "logs").glob("bench-*.jsonl"))
    flagged = [*FAST, "--sim-sglang-version", "0.5.6", "--enable-metrics", "--collect-tokens-histogram"]
    with running_sim(flagged) as old, KnownLoad(old.url, workers=2) as load:
        load.wait_for(2)
        done = bench_cli(tmp_path / "ws", "--url", old.url, "--shape-from-server", "2s", "--requests", "2")
        assert done.returncode == 0, done.stderr  # with the flag, the same version gives its shape
        assert "shape: last 2 s:" in done.stderr
