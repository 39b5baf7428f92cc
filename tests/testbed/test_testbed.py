"""The testbed itself: real systemd boots, real sshd verifies keys, sglang.service runs, cleanup is complete."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import asyncssh
import pytest

from tests.testbed import cache, recipe, resources
from tests.testbed.host import TRIVIAL_EXEC_START, GpuHost
from tests.testbed.system import poll_until

pytestmark = pytest.mark.testbed

TRIVIAL_UNIT = recipe.sglang_unit(TRIVIAL_EXEC_START, description="trivial")


def test_systemd_is_pid_1_and_the_system_is_running(gpu_host: GpuHost) -> None:
    assert gpu_host.root_run("cat /proc/1/comm").stdout.strip() == "systemd"
    assert gpu_host.root_run("systemctl is-system-running", check=False).stdout.strip() in {"running", "degraded"}
    assert gpu_host.root_run("hostname").stdout.strip() == gpu_host.machine


def test_sshd_is_reachable_with_host_key_verification_on(gpu_host: GpuHost) -> None:
    done = gpu_host.ssh("id -un; hostname; sudo -n id -u")
    assert done.stdout.split() == [recipe.SUDO_USER, gpu_host.machine, "0"]
    assert gpu_host.known_hosts.read_text() == gpu_host.known_hosts_line + "\n"


async def test_asyncssh_connects_with_known_hosts_and_refuses_a_wrong_key(gpu_host: GpuHost, tmp_path: Path) -> None:
    async with asyncssh.connect(
        gpu_host.address,
        username=gpu_host.user,
        client_keys=[str(gpu_host.client_key)],
        known_hosts=str(gpu_host.known_hosts),
        config=[],
    ) as conn:
        assert (await conn.run("hostname", check=True)).stdout == f"{gpu_host.machine}\n"
    other_key = asyncssh.generate_private_key("ssh-ed25519")
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{gpu_host.address} {other_key.export_public_key().decode().strip()}\n")
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        await asyncssh.connect(
            gpu_host.address,
            username=gpu_host.user,
            client_keys=[str(gpu_host.client_key)],
            known_hosts=str(wrong),
            config=[],
        )


def test_the_sudo_user_reads_the_journal_and_the_other_user_needs_a_password(gpu_host: GpuHost) -> None:
    journal = gpu_host.ssh(f"journalctl -u {gpu_host.unit} -n 50 --no-pager -o cat").stdout
    assert "Started sglang.service" in journal
    refused = run_ssh_as(gpu_host, recipe.PASSWORD_SUDO_USER, "sudo -n true")
    assert refused.returncode == 1
    assert "password is required" in refused.stderr


def test_sglang_service_is_enabled_active_and_healthy(gpu_host: GpuHost) -> None:
    props = gpu_host.service_properties("ActiveState", "SubState", "UnitFileState", "FragmentPath", "MainPID")
    assert props["ActiveState"] == "active" and props["SubState"] == "running"
    assert props["UnitFileState"] == "enabled"
    assert props["FragmentPath"] == recipe.SERVICE_PATH
    assert int(props["MainPID"]) > 1
    gpu_host.wait_healthy(timeout=5)
    # It listens on the host's loopback only, as SGLang is usually deployed: not reachable from outside.
    with pytest.raises(OSError), socket.create_connection((gpu_host.address, gpu_host.sglang_port), timeout=1):
        pass


def test_nvidia_smi_stand_in_answers_in_the_real_format(gpu_host: GpuHost) -> None:
    out = gpu_host.ssh("nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits").stdout
    rows = [line.split(", ") for line in out.splitlines()]
    assert rows, "nvidia-smi printed nothing"
    assert [row[0] for row in rows] == [str(i) for i in range(len(rows))]
    assert all(len(row) == 3 and int(row[2]) > 0 for row in rows)


def test_link_down_cuts_the_host_off_and_link_up_brings_it_back(gpu_host: GpuHost) -> None:
    try:
        gpu_host.link_down()
        with pytest.raises(OSError):
            socket.create_connection((gpu_host.address, 22), timeout=0.5).close()
        # root_run does not depend on the network: the host itself is still fine.
        assert gpu_host.root_run("systemctl is-active sshd").stdout.strip() == "active"
    finally:
        gpu_host.link_up()
    poll_until(lambda: _tcp_open(gpu_host.address, 22), timeout=10, what="sshd reachable after link up")
    assert gpu_host.ssh("true").returncode == 0


def test_restore_puts_the_original_unit_back_and_restarts(gpu_host: GpuHost) -> None:
    before = gpu_host.service_properties("MainPID")["MainPID"]
    gpu_host.root_run(f"echo '# changed by a test' >> {gpu_host.unit_path} && systemctl daemon-reload")
    gpu_host.root_run(f"systemctl stop {gpu_host.unit}")
    assert not gpu_host.is_pristine()
    gpu_host.restore()
    assert gpu_host.is_pristine()
    assert gpu_host.unit_file_text() == gpu_host.unit_text
    assert gpu_host.service_properties("MainPID")["MainPID"] != before


def test_an_unknown_host_key_is_refused_by_openssh(unknown_gpu_host: GpuHost) -> None:
    refused = unknown_gpu_host.ssh("true", check=False)
    assert refused.returncode == 255
    assert "Host key verification failed" in refused.stderr
    assert unknown_gpu_host.known_hosts.read_text() == ""


def test_two_hosts_run_side_by_side_with_their_own_systemd(gpu_host: GpuHost, unknown_gpu_host: GpuHost) -> None:
    assert gpu_host.address != unknown_gpu_host.address
    for host in (gpu_host, unknown_gpu_host):
        status = host.root_run(f"systemctl status --no-pager {host.unit}", check=False)
        assert status.returncode == 0, status.stdout + status.stderr
        assert "Input/output error" not in status.stdout + status.stderr
    assert gpu_host.host_key_fingerprint != unknown_gpu_host.host_key_fingerprint


def test_teardown_leaves_no_namespace_process_cgroup_or_file(testbed_ready: None) -> None:
    host = GpuHost.boot("gpu9", unit_text=TRIVIAL_UNIT, wait_healthy=False)
    traces = _traces(host)
    assert all(traces.values()), traces
    container_pids = [host.leader_pid(), *_pids_of_cgroups(host)]
    assert len(container_pids) > 3  # systemd, journald, sshd, ... all seen from outside
    seconds = host.teardown()
    assert _traces(host) == dict.fromkeys(traces, False)
    assert [pid for pid in container_pids if resources.is_alive(pid)] == []
    assert seconds < 20


def test_leftovers_of_a_crashed_run_are_removed(testbed_ready: None, tmp_path: Path) -> None:
    """A test process killed with SIGKILL leaves its host running; the next session removes it."""
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from tests.testbed.host import GpuHost
        host = GpuHost.boot("gpu8", unit_text={TRIVIAL_UNIT!r}, wait_healthy=False)
        print(json.dumps({{"state": str(host.res.state_file)}}), flush=True)
        time.sleep(600)
        """
    )
    crashed = subprocess.Popen(
        [sys.executable, "-c", script], cwd=cache.REPO_ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert crashed.stdout is not None
        state_file = Path(json.loads(crashed.stdout.readline())["state"])
    finally:
        os.kill(crashed.pid, signal.SIGKILL)
        crashed.wait(timeout=10)
    leftover = resources.HostResources(**json.loads(state_file.read_text()))
    host_view = GpuHost("gpu8", leftover, Path(str(leftover.temp_dir)), TRIVIAL_UNIT)
    assert all(_traces(host_view).values())
    assert leftover.name in resources.cleanup_leftovers()
    assert _traces(host_view) == dict.fromkeys(_traces(host_view), False)


def _traces(host: GpuHost) -> dict[str, bool]:
    """Everything a host leaves on the machine, present or not."""
    assert host.res.nspawn_pid is not None
    return {
        "netns": host.machine in resources.list_netns(),
        "veth": Path(f"/sys/class/net/{host.res.outside_link}").exists(),
        "nspawn": resources.is_alive(host.res.nspawn_pid),
        "cgroups": any(Path(c).exists() for c in resources.launcher_cgroups(host.machine)),
        "state": host.res.state_file.exists(),
        "temp_dir": host.temp_dir.exists(),
    }


def _pids_of_cgroups(host: GpuHost) -> list[int]:
    pids: list[int] = []
    for top in resources.launcher_cgroups(host.machine):
        for procs in top.rglob("cgroup.procs"):
            pids += [int(p) for p in procs.read_text().split()]
    return pids


def _tcp_open(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=0.5).close()
        return True
    except OSError:
        return False


def run_ssh_as(host: GpuHost, user: str, command: str) -> subprocess.CompletedProcess[str]:
    argv = ["ssh", "-F", str(host.ssh_config), "-o", "BatchMode=yes", "-l", user, host.alias, command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)
