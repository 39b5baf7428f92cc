"""The profiles reproduce the operators' measurements (docs/demo.md's calibration table) within 10 %, on the virtual
clock.

Each figure runs a closed loop (bench_serving --max-concurrency C, random 1024-token prompts, 1024 forced
output tokens, temperature 0, ignore_eos) through the real Engine, so prefill stalls, queueing past the
running-request limit and the drain at the end count as they would in a benchmark.
"""

from __future__ import annotations

from typing import Any

import pytest

from console.sim.engine import ClosedLoopResult, simulate_closed_loop
from console.sim.perf import PerfModel
from console.sim.profiles import get_profile

QWEN = get_profile("qwen3.5-122b-fp8-4x-rtxpro6000")
KIMI = get_profile("kimi-k2.5-int4-8x-rtxpro6000-pcie")
TOLERANCE = 0.10


def spec(
    algorithm: str, steps: int, topk: int = 1, draft_tokens: int | None = None, overlap: bool = True
) -> dict[str, Any]:
    return {
        "speculative_algorithm": algorithm,
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": draft_tokens if draft_tokens is not None else steps + 1,
        "disable_overlap_schedule": not overlap,
        "max_running_requests": None,
    }


NO_SPEC: dict[str, Any] = {"speculative_algorithm": None, "disable_overlap_schedule": False}


def run(profile: Any, resolved: dict[str, Any], concurrency: int, waves: int = 8) -> ClosedLoopResult:
    return simulate_closed_loop(profile, resolved, concurrency, 1024, 1024, max(3, waves * concurrency))


def assert_close(measured: float, expected: float, what: str) -> None:
    assert abs(measured / expected - 1) <= TOLERANCE, f"{what}: {measured:.3g}, expected {expected:.3g} ± 10 %"


@pytest.mark.parametrize(("steps", "expected"), [(1, 123.0), (2, 186.0), (3, 234.0)])
def test_qwen_single_stream_grows_with_steps(steps: int, expected: float) -> None:
    result = run(QWEN, spec("EAGLE", steps), concurrency=1)
    assert_close(result.output_throughput, expected, f"qwen steps {steps} C=1 tok/s")


def test_qwen_max_running_requests_fall_from_26_to_21() -> None:
    assert PerfModel(QWEN, spec("EAGLE", 1)).max_running_requests == 26
    assert PerfModel(QWEN, spec("EAGLE", 2)).max_running_requests == 21


@pytest.mark.parametrize(("concurrency", "gain"), [(32, 1.56), (64, 1.50)])
def test_qwen_steps_two_gain_holds_at_high_concurrency(concurrency: int, gain: float) -> None:
    one = run(QWEN, spec("EAGLE", 1), concurrency, waves=16)
    two = run(QWEN, spec("EAGLE", 2), concurrency, waves=16)
    assert one.peak_running == 26 and two.peak_running == 21  # both are capped: the rest queue
    assert_close(two.output_throughput / one.output_throughput, gain, f"qwen steps 1->2 gain at C={concurrency}")


def test_kimi_single_stream_speculation_trails_the_baseline() -> None:
    baseline = run(KIMI, NO_SPEC, concurrency=1)
    eagle3 = run(KIMI, spec("EAGLE3", 2), concurrency=1)
    assert_close(baseline.output_throughput, 92.7, "kimi no-spec C=1")
    assert_close(eagle3.output_throughput, 86.8, "kimi EAGLE3 1/2 spec v2 C=1")
    assert eagle3.output_throughput < baseline.output_throughput


def test_kimi_speculation_pulls_ahead_from_about_30_concurrent() -> None:
    def ratio(concurrency: int) -> float:
        return (
            run(KIMI, spec("EAGLE3", 2), concurrency).output_throughput
            / run(KIMI, NO_SPEC, concurrency).output_throughput
        )

    assert ratio(24) < 1.0 < ratio(40)
    assert abs(ratio(30) - 1.0) <= 0.05  # the crossover sits at C ≈ 30


def test_kimi_speculation_peaks_near_775_and_tree_without_overlap_near_353() -> None:
    eagle3 = run(KIMI, spec("EAGLE3", 2), concurrency=64)
    assert_close(eagle3.output_throughput, 775.0, "kimi EAGLE3 1/2 spec v2 aggregate at high C")
    tree_64 = run(KIMI, spec("EAGLE3", 2, topk=4, draft_tokens=8, overlap=False), concurrency=64)
    tree_128 = run(KIMI, spec("EAGLE3", 2, topk=4, draft_tokens=8, overlap=False), concurrency=128, waves=4)
    assert_close(tree_64.output_throughput, 353.0, "kimi topk 4 non-overlap aggregate")
    assert tree_128.output_throughput <= tree_64.output_throughput * 1.05  # it tops out
