"""The demo's unit (console.sim.demo.unit_text), pure: each simulator profile brings the unit its operators ran,
and the default one is unchanged. tests/sim/test_demo.py runs the demo itself; tests/tune/test_tune_demo.py tunes
the Kimi one."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.tune import SpaceRequest, build_space
from console.sglang.argv import parse_argv
from console.sglang.flags import flag_table
from console.sglang.unit import UnitFile
from console.sim.demo import UNIT, unit_text
from console.sim.plugin import register
from console.sim.profiles import DEFAULT_PROFILE, PROFILES, get_profile

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


def test_the_ports_a_demo_deployment_takes_are_all_different() -> None:
    """Chosen one at a time, the kernel handed a decode's HTTP port out again as its prefill's bootstrap port, and the
    decode's start failed with 'address already in use'; chosen together, no two are the same."""
    from console.sim.demo import free_ports

    for _ in range(20):
        ports = free_ports(8)
        assert len(set(ports)) == 8
