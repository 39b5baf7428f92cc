"""`opsconsole demo` end to end: a real demo process, reached through its profile like other verbs do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx
import pytest

from console.sim.supervisor import DemoServiceManager

pytestmark = pytest.mark.system  # real processes (tests/tiers.py)

OPSCONSOLE = [sys.executable, "-m", "console"]


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


async def test_demo_runs_the_stand_in_under_the_supervisor_until_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "demo.out"
    with out.open("w") as sink:
        demo = subprocess.Popen(
            [
                *OPSCONSOLE,
                "--workspace",
                str(tmp_path),
                "demo",
                "--no-ui",
                "--profile",
                "tiny-test",
                "--time-scale",
                "0.05",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "Ctrl-C stops the demo host." in out.read_text(), 60, "the demo to come up")
        profile = tomllib.loads((tmp_path / "profiles" / "demo.toml").read_text())
        assert profile["host"]["transport"] == "demo" and profile["host"]["unit"] == "sglang-demo.service"
        port = profile["sglang"]["port"]
        assert f"http://127.0.0.1:{port}" in out.read_text()
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        second = subprocess.run(
            [*OPSCONSOLE, "--workspace", str(tmp_path), "demo", "--no-ui"], capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 1 and "already running" in second.stderr

        manager = DemoServiceManager(profile["host"]["control"], profile["host"]["unit"])
        state = await manager.state()
        assert (state.active_state, state.sub_state) == ("active", "running")
        sim_pid = state.main_pid
        assert sim_pid
        unit = await manager.read_unit()
        assert "-m console.sim" in unit and "--speculative-num-steps 1" in unit and "Environment=" in unit
        messages = [e.message async for e in manager.journal(lines=500)]
        assert any("The server is fired up and ready to roll!" in m for m in messages)

        # The GPU command the profile names shows the loaded simulated GPUs.
        gpus = subprocess.run(
            [*profile["host"]["gpu_command"], "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert len(gpus) == 1 and int(gpus[0].split(", ")[1]) > 0

        # An edit through the unit file takes effect after reload + restart, like on systemd.
        await manager.write_unit(
            unit.replace("--speculative-num-steps 1", "--speculative-num-steps 2").replace(
                "--speculative-num-draft-tokens 2", "--speculative-num-draft-tokens 3"
            )
        )
        await manager.daemon_reload()
        await manager.restart()
        wait_for(
            lambda: httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200 if _listening(port) else False,
            60,
            "the restarted server",
        )
        info = httpx.get(f"http://127.0.0.1:{port}/server_info").json()
        assert info["speculative_num_steps"] == 2 and info["speculative_num_draft_tokens"] == 3
        new_pid = (await manager.state()).main_pid
        assert new_pid and new_pid != sim_pid

        os.kill(demo.pid, signal.SIGINT)
        assert demo.wait(30) == 0
        assert "Demo host stopped." in out.read_text()
        assert not (tmp_path / "profiles" / "demo.toml").exists()
        assert not Path(profile["host"]["control"]).exists()
        for pid in (sim_pid, new_pid):
            wait_for(lambda pid=pid: not _alive(pid), 10, f"simulator {pid} to exit")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()


def _listening(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
    except httpx.TransportError:
        return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_an_unknown_demo_profile_is_refused_before_anything_starts(tmp_path: Path) -> None:
    done = subprocess.run(
        [*OPSCONSOLE, "--workspace", str(tmp_path / "ws"), "demo", "--no-ui", "--profile", "no-such-profile"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "unknown simulator profile 'no-such-profile'" in done.stderr and "tiny-test" in done.stderr
    assert not (tmp_path / "ws" / "profiles" / "demo.toml").exists()
