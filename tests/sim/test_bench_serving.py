"""SGLang's own bench_serving runs against the stand-in without errors and reports acceptance length."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.sglang_bench import run_bench_serving
from tests.support.simproc import SimProcess, eagle_args, running_sim

SPEC = eagle_args(3)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    # 0.5.6: bench_serving 0.5.6 reads /get_server_info for the accept length.
    args = ["--sim-profile", "tiny-test", "--sim-time-scale", "0.05", "--sim-sglang-version", "0.5.6", *SPEC]
    with running_sim(["--decode-log-interval", "10", *args]) as s:
        yield s


@pytest.mark.parametrize("backend", ["sglang", "sglang-oai-chat"])
def test_bench_serving_runs_clean_and_reports_accept_length(sim: SimProcess, backend: str) -> None:
    result = run_bench_serving(
        sim.url,
        backend=backend,
        num_prompts=24,
        input_len=32,
        output_len=48,
        max_concurrency=8,
        extra_args=["--flush-cache"] if backend == "sglang" else [],
        tokenizer=sim.state_dir / "tokenizer",  # the folder the simulator ships for its clients
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = result.record
    assert record["completed"] == 24, result.stdout[-3000:]
    assert record["total_output_tokens"] == 24 * 48
    assert record["output_throughput"] > 0
    assert result.accept_length is not None and 1.5 < result.accept_length <= 4.0
    assert "Accept length:" in result.stdout
    assert "Serving Benchmark Result" in result.stdout
    assert record["mean_ttft_ms"] > 0 and record["mean_itl_ms"] > 0
