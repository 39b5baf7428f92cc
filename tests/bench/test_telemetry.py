"""GPU telemetry aggregation over a level (pure), fed with the host layer's own GpuSample model."""

from __future__ import annotations

import pytest

from console.bench.telemetry import aggregate, describe_gpus
from console.host.gpu import GpuSample


def _gpu(index: int, power: float, util: float, sm: float, mem: float) -> GpuSample:
    return GpuSample(
        index=index, name="NVIDIA H200", power_draw_w=power, utilization_gpu=util, clocks_sm_mhz=sm,
        memory_used_mib=mem, memory_total_mib=143771.0,
    )  # fmt: skip


def test_power_and_memory_sum_over_gpus_util_and_clocks_average() -> None:
    polls = [
        [_gpu(0, 300, 90, 1980, 1000), _gpu(1, 500, 70, 1800, 3000)],
        [_gpu(0, 400, 100, 1900, 1000), _gpu(1, 500, 80, 1700, 3000)],
    ]
    out = aggregate(polls, output_tokens=9000, duration=10.0)
    assert out["gpu_samples"] == 2
    assert out["mean_power_w"] == 850 and out["max_power_w"] == 900
    assert out["mean_util_pct"] == pytest.approx(85) and out["max_util_pct"] == 90
    assert out["mean_sm_clock_mhz"] == pytest.approx(1845) and out["mean_memory_used_mib"] == 4000
    assert out["energy_j"] == 8500 and out["tokens_per_joule"] == pytest.approx(9000 / 8500)
    gpus, driver = describe_gpus(polls[0])
    assert [g["index"] for g in gpus] == [0, 1] and gpus[0]["name"] == "NVIDIA H200" and driver is None


def test_missing_readings_and_no_samples() -> None:
    assert aggregate([], 100, 1.0) == {}
    out = aggregate([[{"index": 0, "power_draw_w": "[N/A]", "utilization_gpu": 50}]], 100, 1.0)
    assert "mean_power_w" not in out and "tokens_per_joule" not in out and out["mean_util_pct"] == 50
