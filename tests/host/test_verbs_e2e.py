"""`status` and `trust` end to end: the CLI, the loopback sshd, the SGLang simulator behind a port forward,
and an nvidia-smi stub on the host printing a real H200 busy capture.

(No systemd runs on this machine, so `status` reports the service part as an error here; the nspawn
testbed covers systemd itself.)
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import main
from tests.host.sshd_lab import ClientSide, Sshd, install_gpu_stub, simulator


@pytest.fixture(scope="module")
def sim_port() -> Iterator[int]:
    with simulator() as port:
        yield port


@pytest.fixture
def workspace(tmp_path: Path, client: ClientSide, sshd: Sshd, sim_port: int) -> Path:
    stub = install_gpu_stub(sshd)
    (tmp_path / "ws" / "profiles").mkdir(parents=True)
    (tmp_path / "ws" / "profiles" / "labgpu.toml").write_text(
        f'[host]\nssh = "lab"\nunit = "sglang.service"\ngpu_command = ["{stub}"]\n'
        f'[sglang]\nport = {sim_port}\napi_key_env = "OPSCT_TEST_KEY"\n'
    )
    return tmp_path / "ws"


def test_status_json_over_ssh(workspace: Path, client: ClientSide, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--workspace", str(workspace), "status", "labgpu", "--ssh-config", str(client.config), "--json"])
    status = json.loads(capsys.readouterr().out)
    assert status["connection"] == {"transport": "ssh", "state": "connected", "detail": "connected"}
    sg = status["sglang"]
    assert sg["healthy"] is True and sg["version"] == "0.5.23" and sg["model_path"] == "Qwen/Qwen3-8B"
    assert (sg["speculative_algorithm"], sg["speculative_num_steps"], sg["speculative_eagle_topk"]) == ("EAGLE", 2, 1)
    assert sg["speculative_num_draft_tokens"] == 3  # resolved by the server: steps + 1 when topk == 1
    assert sg["max_running_requests"] == 48 and sg["num_running_reqs"] == 0 and sg["num_queue_reqs"] == 0
    (gpu,) = status["gpus"]
    assert (gpu["name"], gpu["utilization_gpu"], gpu["memory_used_mib"], gpu["power_draw_w"]) == (
        "NVIDIA H200",
        100,
        24029,
        692.56,
    )
    assert gpu["clocks_sm_mhz"] == 1485 and gpu["throttle_reasons"] == ["sw_power_cap"]
    assert status["gpu_processes"][0]["pid"] == 538 and status["gpu_error"] is None
    assert "error" in status["service"]  # no systemd on this machine (the nspawn testbed has one)
    assert code == 1
    audit = (workspace / "logs" / "audit.jsonl").read_text()
    assert "systemctl" in audit and "--query-gpu" in audit


def test_status_text(workspace: Path, client: ClientSide, capsys: pytest.CaptureFixture[str]) -> None:
    main(["--workspace", str(workspace), "status", "labgpu", "--ssh-config", str(client.config)])
    out = capsys.readouterr().out
    assert "labgpu  [connected]" in out and "EAGLE steps 2 topk 1 draft tokens 3" in out
    assert "NVIDIA H200 util 100%" in out


def _trust(client: ClientSide, answer: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(answer))
    return main(["--workspace", str(client.dir), "trust", "lab", "--ssh-config", str(client.config)])


def test_trust_records_the_key_only_after_yes(
    client: ClientSide, sshd: Sshd, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client.known_hosts.write_text("")
    assert _trust(client, "no\n", monkeypatch) == 1
    shown = capsys.readouterr().out
    assert "SHA256:" in shown and "Not recorded" in shown
    assert client.known_hosts.read_text() == ""
    assert _trust(client, "yes\n", monkeypatch) == 0
    assert f"[127.0.0.1]:{sshd.port} {sshd.host_public_key.split()[0]} {sshd.host_public_key.split()[1]}" in (
        client.known_hosts.read_text()
    )
    assert _trust(client, "", monkeypatch) == 0
    assert "already trusted" in capsys.readouterr().out
    code = main(["--workspace", str(client.dir), "status", "lab", "--ssh-config", str(client.config), "--json"])
    assert json.loads(capsys.readouterr().out)["connection"]["state"] == "connected"
    assert code == 1  # no systemd and no SGLang behind `lab`, but the connection itself was accepted


def test_trust_replaces_a_changed_key_after_yes(
    client: ClientSide, sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "old")], check=True)
    client.known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {(tmp_path / 'old.pub').read_text()}")
    code = main(["--workspace", str(client.dir), "status", "lab", "--ssh-config", str(client.config)])
    assert code == 1 and "CHANGED" in capsys.readouterr().err
    assert _trust(client, "yes\n", monkeypatch) == 0
    assert "NOT the key recorded" in capsys.readouterr().out
    lines = client.known_hosts.read_text().splitlines()
    assert len(lines) == 1 and sshd.host_public_key.split()[1] in lines[0]


def test_unknown_key_refused_by_the_cli(client: ClientSide, capsys: pytest.CaptureFixture[str]) -> None:
    client.known_hosts.write_text("")
    code = main(["--workspace", str(client.dir), "status", "lab", "--ssh-config", str(client.config)])
    err = capsys.readouterr().err
    assert code == 1 and "SHA256:" in err and "opsconsole trust lab" in err
