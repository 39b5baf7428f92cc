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

from console.core.tune_space import SpaceRequest, build_space
from console.sglang.argv import parse_argv
from console.sglang.flags import flag_table
from console.sglang.unit import UnitFile
from console.sim.demo import UNIT, unit_text
from console.sim.plugin import register
from console.sim.profiles import DEFAULT_PROFILE, PROFILES, get_profile
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


# --- the unit each profile brings -------------------------------------------------------------------------

# The default demo's unit, byte for byte: the README's screenshots and the snapshot tests show it.
QWEN_DEMO_UNIT = """\
# opsconsole demo host: the SGLang stand-in run like an SGLang systemd service
[Unit]
Description=SGLang server (opsconsole demo, simulated GPUs)
After=network-online.target

[Service]
Type=simple
WorkingDirectory=/w
Environment="SGLANG_ENABLE_SPEC_V2=False"
ExecStart=/usr/bin/python3 -m console.sim \\
    --model-path Qwen/Qwen3.5-122B-A10B-FP8 \\
    --served-model-name qwen3.5-122b \\
    --host 127.0.0.1 \\
    --port 31000 \\
    --tp-size 4 \\
    --speculative-algorithm NEXTN \\
    --speculative-num-steps 1 \\
    --speculative-eagle-topk 1 \\
    --speculative-num-draft-tokens 2 \\
    --enable-metrics \\
    --sim-profile qwen3.5-122b-fp8-4x-rtxpro6000 \\
    --sim-sglang-version 0.5.9 \\
    --sim-time-scale 0.02 \\
    --sim-state-dir /s
Restart=no
TimeoutStartSec=900
TimeoutStopSec=30
KillMode=control-group

[Install]
WantedBy=multi-user.target
"""


def demo_unit(profile: str) -> str:
    register()  # the stand-in as an SGLang launcher, as every verb does before it parses a unit
    return unit_text(
        python="/usr/bin/python3",
        port=31000,
        profile=profile,
        time_scale=0.02,
        state_dir=Path("/s"),
        workdir=Path("/w"),
    )


def test_the_default_demo_unit_is_the_qwen_operators_and_unchanged() -> None:
    assert DEFAULT_PROFILE == "qwen3.5-122b-fp8-4x-rtxpro6000"
    assert demo_unit(DEFAULT_PROFILE) == QWEN_DEMO_UNIT


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_profile_brings_the_unit_its_operators_ran(name: str) -> None:
    """Not only the simulated hardware: the model, tensor parallelism and speculative setup follow the profile."""
    profile = get_profile(name)
    unit = UnitFile.parse(demo_unit(name), profile.unit.sglang_version)
    written = parse_argv(unit.flags(), flag_table(profile.unit.sglang_version)).values
    assert written["model_path"] == profile.served_model
    assert written["tp_size"] == profile.tp_size == profile.gpu_count
    assert written["speculative_algorithm"] == profile.unit.speculative_algorithm
    assert written["speculative_draft_model_path"] == profile.unit.draft_model_path
    assert unit.environment()["SGLANG_ENABLE_SPEC_V2"] == str(profile.unit.spec_v2)
    argv = unit.exec_argv()
    assert argv[argv.index("--sim-profile") + 1] == name


def test_the_kimi_demo_unit_runs_eagle3_with_its_draft_and_a_tune_of_eagle3_prunes_none_for_want_of_one() -> None:
    kimi = get_profile("kimi-k2.5-int4-8x-rtxpro6000-pcie")
    text = demo_unit(kimi.name)
    written = parse_argv(UnitFile.parse(text, "0.5.9").flags(), flag_table("0.5.9")).values
    assert (written["model_path"], written["tp_size"]) == ("moonshotai/Kimi-K2.5", 8)
    assert (written["speculative_algorithm"], written["speculative_draft_model_path"]) == (
        "EAGLE3",
        "sim/kimi-k2.5-eagle3",
    )
    request = SpaceRequest(algorithms=("EAGLE3",), steps=(1, 2), topks=(1, 2, 4), spec_v2=(True, False))
    space = build_space(request, text, unit_name=UNIT, version="0.5.9", architecture=kimi.architecture)
    assert [p.setting.describe() for p in space.pruned if p.code == "draft-model-missing"] == []
    assert len(space.candidates) >= 6  # every topk 1 chain (spec v2 on and off) and the trees without it


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
