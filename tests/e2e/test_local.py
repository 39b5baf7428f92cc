"""The console on the GPU host itself (TARGET `local`, no SSH): the same verbs through the local transport,
run by the sudo user on the testbed host's real systemd."""

from __future__ import annotations

import pytest

from tests.e2e.cli import json_output, opsconsole_on_host, server_info
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")


def test_status_local_on_the_host(gpu_host: GpuHost) -> None:
    done = opsconsole_on_host(gpu_host, "status", "local", "--json")
    status = json_output(done)
    assert done.returncode == 0, done.stderr
    assert status["connection"]["transport"] == "local"
    assert status["service"]["main_pid"] == int(gpu_host.service_properties("MainPID")["MainPID"])
    assert status["sglang"]["healthy"] is True
    assert len(status["gpus"]) == 4


def test_apply_local_on_the_host_uses_sudo_and_verifies(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    done = opsconsole_on_host(host, "apply", "local", *STEPS_3, "--yes", "--json", "--timeout", "30", timeout=60)
    result = json_output(done)
    assert done.returncode == 0, done.stderr
    assert result["state"] == "verified"
    assert "--speculative-num-steps 3 \\\n" in host.unit_file_text()
    assert server_info(host)["speculative_num_steps"] == 3


def test_logs_local_explains_when_sudo_wants_a_password(gpu_host: GpuHost) -> None:
    """On the host itself, the user `nosudo` gets the same explanation as over SSH, not an empty journal."""
    done = opsconsole_on_host(gpu_host, "logs", "local", "-n", "5", user="nosudo", timeout=60)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "password" in done.stderr.lower() and "NOPASSWD" in done.stderr, done.stderr
