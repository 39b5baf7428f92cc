"""`opsconsole status` end to end, checked against what the host itself says (systemctl, /server_info, nvidia-smi)."""

from __future__ import annotations

import pytest

from tests.e2e.cli import json_output, opsconsole, server_info
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

SPECULATIVE = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)


def test_status_reports_service_server_and_gpus_as_the_host_sees_them(gpu_host: GpuHost) -> None:
    host = gpu_host
    done = opsconsole(host, "status", host.name, "--json", timeout=60)
    status = json_output(done)
    assert done.returncode == 0, done.stderr
    assert status["target"] == host.name
    assert status["connection"]["state"] == "connected"

    props = host.service_properties("MainPID", "NRestarts", "ActiveState", "SubState")
    service = status["service"]
    assert (service["active_state"], service["sub_state"]) == ("active", "running")
    assert service["main_pid"] == int(props["MainPID"])
    assert service["n_restarts"] == int(props["NRestarts"])
    assert service["unit_file_state"] == "enabled"
    assert service["fragment_path"] == host.unit_path

    info = server_info(host)
    sglang = status["sglang"]
    assert sglang["healthy"] is True
    assert sglang["version"] == info["version"]
    assert sglang["model_path"] == "Qwen/Qwen3.5-122B-A10B-FP8"
    assert {k: sglang[k] for k in SPECULATIVE} == {k: info[k] for k in SPECULATIVE}
    assert sglang["max_running_requests"] == info["max_running_requests"]

    smi = host.root_run(
        "nvidia-smi --query-gpu=index,name,memory.total,power.limit --format=csv,noheader,nounits"
    ).stdout.splitlines()
    expected = [(int(i), name, float(mem), float(power)) for i, name, mem, power in (r.split(", ") for r in smi)]
    reported = [(g["index"], g["name"], g["memory_total_mib"], g["power_limit_w"]) for g in status["gpus"]]
    assert reported == expected and len(reported) == 4
    assert status["gpu_error"] is None


def test_status_of_a_stopped_service_says_so(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    host.root_run(f"systemctl stop {host.unit}")
    done = opsconsole(host, "status", host.name, "--json", timeout=60)
    status = json_output(done)
    assert done.returncode == 1
    assert (status["service"]["active_state"], status["service"]["main_pid"]) == ("inactive", None)
    assert status["sglang"]["healthy"] is False
    assert status["connection"]["state"] == "connected"
