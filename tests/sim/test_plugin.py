"""The simulator registers what the rest of the console needs from it: the stand-in as an SGLang launcher
and the demo transport. Whoever parses a stand-in's unit (check-args, apply, status) has that done."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.host.registry import service_provider
from console.sglang.flags import NEWEST_VERSION
from console.sglang.launchers import launcher_for_module
from console.sglang.unit import UnitFile
from console.sim.demo import unit_text
from console.sim.plugin import NVIDIA_SMI, STAND_IN, demo_service, register
from tests.testbed.recipe import sglang_unit

ROOT = Path(__file__).resolve().parents[2]


def test_register_makes_the_stand_in_an_sglang_launcher_with_options_of_its_own() -> None:
    register()
    register()  # idempotent: every verb calls it
    assert launcher_for_module("console.sim") == STAND_IN
    text = "[Service]\nExecStart=python -m console.sim --sim-time-scale 0.01 --model-path m --sim-profile p --tp 2\n"
    unit = UnitFile.parse(text)
    assert unit.flags() == ["--model-path", "m", "--tp", "2"]
    assert unit.launch.own_options == ("--sim-time-scale", "0.01", "--sim-profile", "p")
    unit.set_flag("--sim-time-scale", "0.5")
    unit.set_flag("--tp-size", "4")
    assert unit.render() == text.replace("0.01", "0.5").replace("--tp 2", "--tp 4")
    assert UnitFile.parse(text.replace("--tp 2", "--tp 2 --sim-sglang-version 0.5.6")).launch.sglang_version == "0.5.6"


def test_register_provides_the_demo_transport_and_its_gpus() -> None:
    register()
    provider = service_provider("demo")
    assert provider is not None and provider.factory is demo_service and provider.gpu_command == NVIDIA_SMI


def check_args(unit: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`opsconsole check-args --unit UNIT --json` as a process; also which heavy packages it imported."""
    probe = (
        "import sys, io, contextlib\n"
        "from console.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    rc = main(sys.argv[1:])\n"
        "heavy = ('textual', 'asyncssh', 'httpx', 'pydantic', 'rich', 'aiohttp', 'console.sim.supervisor')\n"
        "print(json.dumps({'rc': rc, 'out': out.getvalue(), 'heavy': [m for m in heavy if m in sys.modules]}))\n"
    )
    argv = [sys.executable, "-c", "import json\n" + probe, "check-args", "--unit", str(unit), "--json", *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    return subprocess.CompletedProcess(argv, result["rc"], result["out"], done.stderr), result["heavy"]


@pytest.mark.system
@pytest.mark.parametrize("which", ["demo", "testbed"])
def test_check_args_reads_the_demo_and_testbed_units_and_stays_light(tmp_path: Path, which: str) -> None:
    path = tmp_path / "sglang.service"
    if which == "demo":
        text = unit_text(
            python=sys.executable, port=30000, profile="tiny-test", time_scale=0.02, state_dir=tmp_path, workdir=ROOT
        )
    else:
        text = sglang_unit()
    path.write_text(text)
    result, heavy = check_args(path)
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["ok"] is True, result.stdout + result.stderr
    # The demo's unit says which SGLang its stand-in behaves as; the testbed's does not (the newest).
    assert report["sglang_version"] == ("0.5.9" if which == "demo" else NEWEST_VERSION)
    assert not any(key.startswith("sim_") for key in report["resolved"])  # its own options are not SGLang's
    assert heavy == []
