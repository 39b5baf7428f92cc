"""No secret reaches the screen or the workspace: an API key configured on the host and in the console's environment."""

from __future__ import annotations

import pytest

from tests.e2e.cli import json_output, opsconsole
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
