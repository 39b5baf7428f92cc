"""No secret reaches the screen or the workspace: an API key configured on the host and in the console's environment."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from console.core.session import UNIT_KEY_NOTICE
from tests.e2e.cli import OPSCONSOLE, json_output, opsconsole
from tests.support.cli_run import run_cli
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

SECRET = "tb-api-key-7f3a9c1e5d"
KEY_ENV = "OPSCONSOLE_TESTBED_API_KEY"
STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
STEPS_1 = ("--set", "speculative-num-steps=1", "--set", "speculative-num-draft-tokens=2")


def test_the_api_key_is_used_but_never_printed_or_logged(
    pristine_gpu_host: GpuHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = pristine_gpu_host
    # The key sits right next to the flags apply changes, so the unit diff shows its line as context.
    flag = "    --speculative-num-draft-tokens 3 \\\n"
    host.install_unit(host.unit_text.replace(flag, f"{flag}    --api-key {SECRET} \\\n"))
    profile = host.workspace / "profiles" / "gpu1-key.toml"
    profile.write_text(
        f'[host]\nssh = "{host.name}"\n\n[sglang]\nport = {host.sglang_port}\napi_key_env = "{KEY_ENV}"\n'
    )
    monkeypatch.setenv(KEY_ENV, SECRET)  # client_env() copies os.environ
    try:
        runs = {
            "status": opsconsole(host, "status", "gpu1-key", timeout=60),
            "status --json": opsconsole(host, "status", "gpu1-key", "--json", timeout=60),
            "apply": opsconsole(host, "apply", "gpu1-key", *STEPS_3, "--yes", "--timeout", "120"),
            "apply --json": opsconsole(host, "apply", "gpu1-key", *STEPS_1, "--yes", "--json", "--timeout", "120"),
        }
    finally:
        profile.unlink()
    for name, done in runs.items():
        assert done.returncode == 0, (name, done.stderr)
    # The key was really used: with --api-key the server answers /server_info only to requests that carry it.
    status = json_output(runs["status --json"])
    assert status["sglang"]["healthy"] is True and status["sglang"]["version"], status["sglang"]
    leaks = [name for name, done in runs.items() if SECRET in done.stdout + done.stderr]
    leaks += [str(p) for p in host.workspace.rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
    assert leaks == [], f"the API key appears in: {leaks}"


def test_an_alias_target_uses_the_units_key_says_so_once_and_never_prints_it(
    pristine_gpu_host: GpuHost, tmp_path: Path
) -> None:
    """Issue 22, item 5: the key is only in the unit and the target is the ssh_config alias (no profile, so no
    api_key_env): status and freeze read the server with the unit's key, say so once, and never show it."""
    host = pristine_gpu_host
    flag = "    --speculative-num-draft-tokens 3 \\\n"
    host.install_unit(host.unit_text.replace(flag, f"{flag}    --api-key {SECRET} \\\n"))
    probe = (
        "import urllib.request, urllib.error\n"
        "try:\n"
        f"    urllib.request.urlopen('http://127.0.0.1:{host.sglang_port}/server_info', timeout=5); print(200)\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code)\n"
    )
    assert host.root_run(["python3", "-c", probe]).stdout.strip() == "401"  # the server really wants the key
    workspace = tmp_path / "ws"  # no profiles/: the TARGET is the alias of the client's ~/.ssh/config
    env = {**host.client_env(), "OPSCONSOLE_WORKSPACE": str(workspace)}
    env.pop(KEY_ENV, None)
    document = "/home/ops/production_keyed-alias.md"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(OPSCONSOLE), "--workspace", str(workspace), *args]
        return run_cli(argv, timeout=240, env=env, cwd=host.home)

    try:
        runs = {
            "status": cli("status", host.name),
            "status --json": cli("status", host.name, "--json"),
            "freeze": cli("freeze", host.name, "--name", "keyed-alias", "--yes"),
        }
        docs = host.root_run(["cat", document], check=False).stdout
    finally:
        host.root_run(["rm", "-f", document], check=False)
    for name, done in runs.items():
        assert done.returncode == 0, (name, done.stdout[-2000:], done.stderr[-2000:])
    status = json_output(runs["status --json"])
    assert status["sglang"]["version"] and "error" not in status["sglang"], status["sglang"]
    assert status["notices"] == [UNIT_KEY_NOTICE]
    assert runs["status"].stdout.count(UNIT_KEY_NOTICE) == 1
    assert "frozen as keyed-alias" in runs["freeze"].stdout and "--api-key ***" in docs
    leaks = [name for name, done in runs.items() if SECRET in done.stdout + done.stderr]
    leaks += ["document"] if SECRET in docs else []
    leaks += [str(p) for p in workspace.rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
    assert leaks == [], f"the API key appears in: {leaks}"
