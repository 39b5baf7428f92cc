"""The stand-in's dcgm-exporter /metrics: the exporter's default counters with its labels, read back with
prometheus_client's own text-format parser, on a port of its own beside the SGLang stand-in."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.sim.dcgm import render_dcgm
from console.sim.gpus import idle_gpus
from console.sim.profiles import get_profile
from tests.support.simproc import FAST, free_port, running_sim

FAMILIES = {
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
}  # fmt: skip


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {f.name: [(s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def test_every_gpu_has_the_exporters_counters_and_labels() -> None:
    profile = get_profile("tiny-test")
    gpus = idle_gpus(profile.gpu, 2, profile.name)
    families = _families(render_dcgm(gpus, "gpu-a"))
    assert set(families) == FAMILIES
    labels, value = families["DCGM_FI_DEV_POWER_USAGE"][1]
    assert value == gpus[1].power_draw_w
    assert labels == {
        "gpu": "1",
        "UUID": gpus[1].uuid,
        "pci_bus_id": gpus[1].bus_id,
        "device": "nvidia1",
        "modelName": profile.gpu.name,
        "Hostname": "gpu-a",
        "DCGM_FI_DRIVER_VERSION": "580.159.04",
    }
    assert [v for _, v in families["DCGM_FI_DEV_FB_FREE"]] == [g.memory_free_mib for g in gpus]


@pytest.mark.system
def test_the_stand_in_serves_them_on_a_port_of_its_own() -> None:
    port = free_port()
    with running_sim([*FAST, "--sim-gpus", "2", "--sim-dcgm-port", str(port)]) as sim:
        assert port != sim.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            families = _families(answer.read().decode())
    assert set(families) == FAMILIES
    assert [labels["gpu"] for labels, _ in families["DCGM_FI_DEV_GPU_UTIL"]] == ["0", "1"]
    assert {labels["Hostname"] for labels, _ in families["DCGM_FI_DEV_GPU_UTIL"]} == {socket.gethostname()}
    assert all(used > 0 for _, used in families["DCGM_FI_DEV_FB_USED"])  # the model is loaded
