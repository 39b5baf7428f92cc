"""Replays live H200 output (tests/host/gpu_live_capture.py, captured 2026-11-30 on one NVIDIA H200,
driver 580.159.04) through the nvidia-smi parser and checks it against NVML read right after each poll.

NVML's v1 memory info counts ~615 MiB the driver reserves, which nvidia-smi leaves out of "used";
power and clocks move between the two reads, so those are compared with a tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.host.gpu import parse_snapshot

CAPTURE = json.loads((Path(__file__).parent / "fixtures" / "h200-live-console.json").read_text())
SAMPLES = [(state, sample) for state in ("idle", "busy") for sample in CAPTURE[state]["samples"]]


@pytest.mark.parametrize(("state", "sample"), SAMPLES, ids=[f"{s}-{i % 3}" for i, (s, _) in enumerate(SAMPLES)])
def test_parser_agrees_with_nvml(state: str, sample: dict[str, Any]) -> None:
    snapshot = parse_snapshot(sample["stdout"], sample["stderr"], sample["exit_status"])
    assert snapshot.error is None
    (gpu,) = snapshot.gpus
    (nvml,) = sample["nvml"]
    assert (gpu.name, gpu.uuid, gpu.memory_total_mib) == (nvml["name"], nvml["uuid"], nvml["mem_total_mib"])
    assert gpu.utilization_gpu == pytest.approx(nvml["util_gpu"], abs=5)
    assert gpu.memory_used_mib is not None and 0 <= nvml["mem_used_mib"] - gpu.memory_used_mib <= 700
    assert gpu.power_draw_w == pytest.approx(nvml["power_w"], abs=15)
    assert gpu.power_limit_w == nvml["power_limit_w"] == 700
    assert gpu.temperature_gpu == pytest.approx(nvml["temperature_c"], abs=2)
    assert gpu.clocks_sm_mhz == pytest.approx(nvml["sm_clock_mhz"], abs=100)
    if state == "busy":
        assert gpu.utilization_gpu == 100 and gpu.throttle_reasons == ["sw_power_cap"]
        assert [p.used_memory_mib for p in snapshot.processes] == [20204]
    else:
        assert gpu.throttle_reasons == ["gpu_idle"] and snapshot.processes == []


def test_console_readers_ran_live_on_the_gpu() -> None:
    for state in ("idle", "busy"):
        live = CAPTURE[state]["console"]
        assert "skipped" not in live
        assert live["parsed"]["gpus"][0]["name"] == live["nvml"]["gpus"][0]["name"] == "NVIDIA H200"
        assert live["nvml"]["source"] == "nvml"
    assert CAPTURE["busy"]["console"]["nvml"]["gpus"][0]["power_draw_w"] > 600
