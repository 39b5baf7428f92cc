"""SGLang 0.5.17 ends a stop by SIGKILLing itself (exit status 137): real systemd, the real CLI, the stand-in
emulating 0.5.17 (which does the same, as the real server did on an H200).

Under systemd that leaves the unit `failed` (Result=signal, ExecMainCode=2, ExecMainStatus=9) after
`systemctl stop`. The console must call it a stop, and neither an apply from that state nor an apply that
restarts such a server may take the old process's end for the new start failing.
"""

from __future__ import annotations

import pytest

from tests.e2e.cli import json_output, opsconsole, server_info
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

APPLY_TIMEOUT = "120"
STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
EXIT = ("ActiveState", "SubState", "Result", "ExecMainCode", "ExecMainStatus", "MainPID")


def emulate_0_5_17(host: GpuHost) -> None:
    host.install_unit(
        host.unit_text.replace("--sim-time-scale 0.01", "--sim-time-scale 0.01 --sim-sglang-version 0.5.17")
    )


def test_systemctl_stop_leaves_the_unit_failed_and_status_says_it_was_a_stop(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    emulate_0_5_17(host)
    host.root_run(f"systemctl stop {host.unit}")
    props = host.service_properties(*EXIT)
    assert props == {  # what real systemd does with a main process that dies of SIGKILL on stop
        "ActiveState": "failed",
        "SubState": "failed",
        "Result": "signal",
        "ExecMainCode": "2",
        "ExecMainStatus": "9",
        "MainPID": "0",
    }
    assert "kill_process_tree called" in host.journal(40)
    done = opsconsole(host, "status", host.name, "--json", timeout=60)
    service = json_output(done)["service"]
    assert done.returncode == 1  # not serving: still exit 1
    assert service["summary"] == "stopped (SGLang exits by SIGKILL on stop)"
    assert service["last_exit"] == {"code": "killed", "status": 9}
    text = opsconsole(host, "status", host.name, timeout=60).stdout
    assert "stopped (SGLang exits by SIGKILL on stop)" in text


def test_apply_from_that_failed_state_judges_the_new_process(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    emulate_0_5_17(host)
    host.root_run(f"systemctl stop {host.unit}")
    assert host.service_properties("ActiveState")["ActiveState"] == "failed"
    done = opsconsole(host, "apply", host.name, *STEPS_3, "--yes", "--json", "--timeout", APPLY_TIMEOUT)
    result = json_output(done)
    assert done.returncode == 0, (done.stderr, result.get("error"))
    assert result["state"] == "verified" and result["rolled_back"] is False
    assert server_info(host)["speculative_num_steps"] == 3


def test_restarting_a_server_that_sigkills_itself_is_not_a_failed_start(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    emulate_0_5_17(host)
    done = opsconsole(host, "apply", host.name, *STEPS_3, "--yes", "--timeout", APPLY_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified" in done.stdout
    # The old process's "Main process exited, code=killed, status=9/KILL" is in the journal, not in the apply's
    # account of the new start (it prints failure lines with "!").
    assert "status=9/KILL" in host.journal(200)
    assert not [line for line in done.stdout.splitlines() if line.strip().startswith("!")], done.stdout


def test_a_failed_start_is_explained_by_its_own_error_and_rolled_back(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    emulate_0_5_17(host)
    done = opsconsole(host, "apply", host.name, "--set", "speculative-draft-model-path=/models/missing-draft",
                      "--yes", "--json", "--timeout", APPLY_TIMEOUT)  # fmt: skip
    result = json_output(done)
    assert done.returncode == 1 and result["state"] == "healthy_on_old", result.get("error")
    assert "OSError: Repo id must be in the form" in result["error"]  # 0.5.17's last exception line
    assert not any("status=9/KILL" in line for line in result["journal_excerpt"]), result["journal_excerpt"]
    assert host.service_properties("ActiveState")["ActiveState"] == "active"
    host.wait_healthy(timeout=20)
