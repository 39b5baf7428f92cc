"""The operators' aggregate figures (the calibration table in docs/demo.md), measured through the HTTP API of the real
simulator process.

tests/sim/test_perf_calibration.py checks the same figures on the virtual clock (1024 in / 1024 out, many
waves). Here the simulator runs as `python -m console.sim` and the project's own bench engine drives it in
closed loop over real sockets, so what is checked is what a user's benchmark would see: the server's
real-time step pacing, SSE chunking and queueing past the running-request cap.

Keeping it short on a loaded 2-core CI machine:
* `--sim-speedup X` divides every prefill/decode step's duration (console/sim/server.py `drive`:
  `deadline += step.duration_s / speedup`), so wall-clock throughput is X × the modelled figure; we divide
  by X. X is chosen per case so that the server streams about 4k SSE chunks per wall second (a quarter of
  what one core sustains, docs/measured.md "simulator streamed tokens/s"), leaving room for the bench client and for
  whatever else the machine is doing.
* Short runs (2 waves of requests, or one of 128 past the running cap; ≤ 256 output tokens), three of each, of
  which the median is held. At these lengths the modelled figures are not the 1024 / 1024 ones the operators
  measured, so every figure is compared, within 10 %, with the model's own virtual-clock prediction for the very
  same run (`simulate_closed_loop` with the server's resolved args from /server_info, the same lengths,
  concurrency and request count): that is the check that the server behaves like its model. Where the model at
  these lengths is itself within reach of the operators' number, the measurement is also held to the operators'
  number; each assert says which.
* Ratios (steps 1 → 2, speculation ÷ none) are measured side by side in the same test, on the same machine
  load, so that a slow machine shifts both sides alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig
from console.bench.workloads import WorkloadSpec
from console.sim.engine import simulate_closed_loop
from console.sim.perf import PerfModel
from console.sim.profiles import get_profile
from tests.support.simproc import SimProcess, start_sim

pytestmark = [pytest.mark.system, pytest.mark.alone]  # measures time against a known truth: runs alone (tests/tiers.py)

TOLERANCE = 0.10
QWEN_PROFILE = "qwen3.5-122b-fp8-4x-rtxpro6000"
KIMI_PROFILE = "kimi-k2.5-int4-8x-rtxpro6000-pcie"
# Startup phases are minutes on real hardware: scaled down to a fraction of a second.
FAST_START = ["--sim-time-scale", "0.001"]


def qwen_mtp(steps: int) -> list[str]:
    return [
        "--sim-profile", QWEN_PROFILE, "--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(steps),
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(steps + 1),
    ]  # fmt: skip


KIMI_NO_SPEC = ["--sim-profile", KIMI_PROFILE]


def kimi_eagle3(topk: int, draft_tokens: int, overlap: bool) -> list[str]:
    args = [
        "--sim-profile", KIMI_PROFILE, "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "sim/kimi-k2.5-eagle3", "--speculative-num-steps", "2",
        "--speculative-eagle-topk", str(topk), "--speculative-num-draft-tokens", str(draft_tokens),
    ]  # fmt: skip
    return args if overlap else [*args, "--disable-overlap-schedule"]


@dataclass
class Server:
    """A running simulator with the speedup it was started with and what it says about itself."""

    sim: SimProcess
    profile: str
    speedup: float
    info: dict[str, Any]

    @property
    def max_running(self) -> int:
        return int(self.info["internal_states"][0]["effective_max_running_requests_per_dp"])


@contextlib.contextmanager
def servers(*configs: tuple[Sequence[str], float]) -> Iterator[list[Server]]:
    """Start every (args, speedup) simulator at once (their startups overlap), yield them when healthy."""
    procs: list[SimProcess] = []
    try:
        for args, speedup in configs:
            procs.append(start_sim([*args, *FAST_START, "--sim-speedup", str(speedup)]))
        running = []
        for proc, (args, speedup) in zip(procs, configs, strict=True):
            proc.wait_healthy()
            info = httpx.get(proc.url + "/server_info", timeout=10).json()
            profile = list(args)[list(args).index("--sim-profile") + 1]
            running.append(Server(proc, profile, speedup, info))
        yield running
    finally:
        for proc in procs:
            proc.stop()


@dataclass(frozen=True)
class Figures:
    measured: float  # tok/s through HTTP, divided by the speedup: the modelled hardware's figure
    predicted: float  # the model's virtual-clock figure for the same run


def closed_loop(
    server: Server, concurrency: int, input_len: int, output_len: int, waves: int = 2, repeats: int = 3
) -> Figures:
    """`waves` × concurrency requests in closed loop (bench_serving --max-concurrency), temperature 0, ignore_eos,
    `repeats` times from an idle server: the median of their tok/s. One run is a few seconds, so a stall of the
    machine under it (a neighbour's burst of process starts) takes a fifth off a single sample (575 against 729 once,
    in a fresh-clone run); the median of three carries one such run without moving."""
    requests = waves * concurrency
    workload = WorkloadSpec(name="random", api="generate", input_len=input_len, output_len=output_len)
    config = SweepConfig(
        workload=workload,
        concurrencies=[concurrency],
        requests=requests,
        warmup=0,  # the virtual-clock prediction starts on an idle server too
        request_timeout=60.0,
        time_cap=60.0,
    )

    async def sweep() -> dict[str, Any]:
        async with BenchClient(server.sim.url) as client:
            result = await BenchEngine(client, config).run()
        assert result.stopped is None, result.stopped
        return result.levels[0].metrics

    throughputs = []
    for _ in range(repeats):
        metrics = asyncio.run(sweep())
        assert metrics["failed"] == 0 and metrics["completed"] == requests, metrics["errors"]
        assert metrics["total_output_tokens"] == requests * output_len
        throughputs.append(metrics["output_throughput"])
    # The server's own resolved args (as /server_info reports them) configure the prediction.
    resolved = {k: v for k, v in server.info.items() if k != "internal_states"}
    profile = get_profile(server.profile)
    assert PerfModel(profile, resolved).max_running_requests == server.max_running, "prediction misconfigured"
    model = simulate_closed_loop(profile, resolved, concurrency, input_len, output_len, requests)
    return Figures(statistics.median(throughputs) / server.speedup, model.output_throughput)


def assert_close(measured: float, expected: float, what: str) -> None:
    assert abs(measured / expected - 1) <= TOLERANCE, f"{what}: {measured:.4g}, expected {expected:.4g} ± 10 %"


def test_qwen_steps_two_gains_at_32_and_64_concurrent_despite_fewer_running_requests() -> None:
    with servers((qwen_mtp(1), 8.0), (qwen_mtp(2), 8.0)) as (one, two):
        assert (one.max_running, two.max_running) == (26, 21)  # the operators' 26 -> 21
        for concurrency in (32, 64):
            a = closed_loop(one, concurrency, 256, 128)
            b = closed_loop(two, concurrency, 256, 128)
            assert_close(a.measured, a.predicted, f"qwen steps 1 C={concurrency} tok/s vs its model")
            assert_close(b.measured, b.predicted, f"qwen steps 2 C={concurrency} tok/s vs its model")
            # Against the model, not the operators: with 128-token outputs the prefill share is larger and
            # the model's own gain is +31 % / +37 % (its 1024/1024 gain, +45 % / +46 %, is what
            # test_perf_calibration holds to the operators' +56 % / +50 %).
            assert_close(b.measured / a.measured, b.predicted / a.predicted, f"qwen steps 1->2 gain at C={concurrency}")
            assert b.measured / a.measured > 1.2, f"steps 2 must clearly beat steps 1 at C={concurrency}"


def test_kimi_eagle3_peaks_near_775_and_the_topk4_tree_without_overlap_tops_out_near_353() -> None:
    with servers((kimi_eagle3(1, 3, overlap=True), 8.0), (kimi_eagle3(4, 8, overlap=False), 20.0)) as (chain, tree):
        assert chain.info["disable_overlap_schedule"] is False and tree.info["disable_overlap_schedule"] is True
        peak = closed_loop(chain, 64, 256, 128)
        assert_close(peak.measured, peak.predicted, "kimi EAGLE3 1/2 spec v2 C=64 tok/s vs its model")
        # The model comes within 10 % of the operators' figure at these lengths too (741 tok/s): hold it to 775.
        assert_close(peak.measured, 775.0, "kimi EAGLE3 1/2 spec v2 aggregate at high C vs the operators")
        tree_64 = closed_loop(tree, 64, 256, 128)
        tree_128 = closed_loop(tree, 128, 256, 128, waves=1)
        assert_close(tree_64.measured, tree_64.predicted, "kimi topk 4 non-overlap C=64 tok/s vs its model")
        assert_close(tree_128.measured, tree_128.predicted, "kimi topk 4 non-overlap C=128 tok/s vs its model")
        # The model gives 347 tok/s at these lengths: hold the measurement to the operators' 353 as well.
        assert_close(tree_64.measured, 353.0, "kimi topk 4 non-overlap aggregate vs the operators")
        assert tree_128.measured <= tree_64.measured * 1.05, "it tops out: doubling the clients adds nothing"


def test_kimi_eagle3_pulls_ahead_of_no_speculation_between_24_and_40_concurrent() -> None:
    with servers((kimi_eagle3(1, 3, overlap=True), 8.0), (KIMI_NO_SPEC, 6.0)) as (eagle3, baseline):
        ratios: dict[int, tuple[float, float]] = {}
        for concurrency in (24, 40):
            spec = closed_loop(eagle3, concurrency, 1024, 256)
            plain = closed_loop(baseline, concurrency, 1024, 256)
            assert_close(spec.measured, spec.predicted, f"kimi EAGLE3 C={concurrency} tok/s vs its model")
            assert_close(plain.measured, plain.predicted, f"kimi no-spec C={concurrency} tok/s vs its model")
            ratios[concurrency] = (spec.measured / plain.measured, spec.predicted / plain.predicted)
        # Against the model, not the operators' "ahead from C ≈ 30": that crossover is for 1024-token outputs
        # (test_perf_calibration); with 256-token outputs the model crosses near C = 40 (0.92 at 24, 1.005 at
        # 40), too close to 1 to assert a side at C = 40. What is held: each ratio to the model's, and the
        # rise with concurrency that makes speculation pay off under load.
        for concurrency, (measured, predicted) in ratios.items():
            assert_close(measured, predicted, f"kimi EAGLE3 ÷ no speculation at C={concurrency}")
        assert ratios[24][0] < 0.97, f"speculation must still trail at C=24: {ratios[24][0]:.3f}"
        assert ratios[40][0] > ratios[24][0] + 0.04, f"speculation must gain on no speculation: {ratios}"
