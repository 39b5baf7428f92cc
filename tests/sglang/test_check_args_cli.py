"""`opsconsole check-args` run as a real process: exit codes, JSON shape, the README example, imports."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.system  # real processes (tests/tiers.py)

README_EXAMPLE = [
    "--sglang-version",
    "0.5.9",
    "--env",
    "SGLANG_ENABLE_SPEC_V2=1",
    "--json",
    "--",
    "--model-path",
    "Qwen/Qwen3-8B",
    "--speculative-algorithm",
    "EAGLE",
    "--speculative-draft-model-path",
    "d",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "2",
    "--speculative-num-draft-tokens",
    "6",
]


def opsconsole(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "check-args", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def test_readme_example_refuses_spec_v2_with_topk_2() -> None:
    result = opsconsole(*README_EXAMPLE)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)  # exactly one JSON object
    assert list(data) == ["ok", "sglang_version", "errors", "warnings", "adjustments", "resolved"]
    assert data["ok"] is False and data["sglang_version"] == "0.5.9"
    assert [e["code"] for e in data["errors"]] == ["spec-v2-topk"]
    assert data["errors"][0]["flags"] == ["--speculative-eagle-topk", "SGLANG_ENABLE_SPEC_V2"]
    assert data["resolved"]["max_running_requests"] == 48
    assert data["resolved"]["disable_overlap_schedule"] is False
    assert {"flag": "max_running_requests", "from": None, "to": 48}.items() <= data["adjustments"][0].items()


def test_valid_flags_exit_0_with_a_human_report() -> None:
    result = opsconsole(
        "--",
        "--model-path",
        "m",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "5",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("SGLang 0.5.23 would start with these flags.")
    assert "speculative_num_draft_tokens: 5 -> 3" in result.stdout


def test_unknown_flag_exits_1() -> None:
    result = opsconsole("--json", "--", "--model-path", "m", "--speculative-algo", "EAGLE", "--frobnicate")
    assert result.returncode == 1
    assert json.loads(result.stdout)["errors"][0]["code"] == "unknown-flag"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--sglang-version", "0.4.0", "--", "--model-path", "m"], "older than the oldest supported"),
        (["--sglang-version", "latest", "--", "--model-path", "m"], "is not an SGLang version"),
        (["--env", "NOEQUALS", "--", "--model-path", "m"], "--env expects KEY=VALUE"),
        ([], "no flags to check"),
        (["--unit", "/nonexistent/sglang.service"], "cannot read the unit file"),
    ],
)
def test_usage_errors_exit_2(args: list[str], says: str) -> None:
    result = opsconsole(*args)
    assert result.returncode == 2
    assert says in result.stderr and result.stdout == ""


def test_unit_file(tmp_path: Path) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_text(
        "[Service]\n"
        'Environment="SGLANG_ENABLE_SPEC_V2=1"\n'
        "ExecStart=/opt/v/bin/python -m console.sim --sim-sglang-version 0.5.9 \\\n"
        "    --model-path m --speculative-algorithm EAGLE \\\n"
        "    --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8\n"
    )
    result = opsconsole("--unit", str(unit), "--json")
    data = json.loads(result.stdout)
    assert result.returncode == 1 and data["sglang_version"] == "0.5.9"  # taken from --sim-sglang-version
    assert [e["code"] for e in data["errors"]] == ["spec-v2-topk"]
    fixed = opsconsole("--unit", str(unit), "--json", "--env", "SGLANG_ENABLE_SPEC_V2=0")
    assert fixed.returncode == 0 and json.loads(fixed.stdout)["resolved"]["disable_overlap_schedule"] is True
    not_sglang = tmp_path / "nginx.service"
    not_sglang.write_text("[Service]\nExecStart=/usr/sbin/nginx\n")
    other = opsconsole("--unit", str(not_sglang))
    assert other.returncode == 1 and "not SGLang" in other.stderr


def test_unit_with_a_broken_environment_line_is_explained(tmp_path: Path) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_text(
        '[Service]\nEnvironment="HF_TOKEN=hf-hidden-3 A=1\nExecStart=python -m sglang.launch_server --model-path m\n'
    )
    result = opsconsole("--unit", str(unit))
    assert result.returncode == 1 and result.stdout == ""
    assert "unbalanced" in result.stderr and "Traceback" not in result.stderr
    assert "hf-hidden-3" not in result.stderr


def test_secrets_are_never_printed() -> None:
    secret = "sk-live-5f3a9c"
    for extra in ([], ["--json"]):
        result = opsconsole(
            *extra, "--env", f"HF_TOKEN={secret}x", "--", "--model-path", "m", "--api-key", secret, "--bogus", secret
        )
        assert secret not in result.stdout + result.stderr
        assert "***" in result.stdout


HEAVY = {"textual", "asyncssh", "httpx", "pydantic", "rich"}


def test_check_args_does_not_import_heavy_packages() -> None:
    probe = (
        "import sys, io, contextlib\n"
        "from console.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = main(sys.argv[1:])\n"
        f"print(rc, sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules))\n"
    )
    argv = ["check-args", "--json", "--", "--model-path", "m", "--speculative-algorithm", "EAGLE"]
    result = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.strip() == "0 []", result.stdout + result.stderr


@pytest.mark.parametrize("argv", [["--help"], ["check-args", "--help"]])
def test_help_does_not_import_heavy_packages(argv: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "console", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and "usage: opsconsole" in result.stdout
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in result.stderr.splitlines()[1:]}
    assert "console" in imported  # the import log is really there
    assert not imported & HEAVY


def test_architecture_drives_the_auto_choice() -> None:
    flags = ["--", "--model-path", "m", "--speculative-algorithm", "EAGLE"]
    llama = json.loads(opsconsole("--json", "--architecture", "LlamaForCausalLM", *flags).stdout)
    generic = json.loads(opsconsole("--json", *flags).stdout)
    assert llama["resolved"]["speculative_eagle_topk"] == 4 and generic["resolved"]["speculative_eagle_topk"] == 1
    assert "auto-choice-architecture-unknown" in [w["code"] for w in generic["warnings"]]
