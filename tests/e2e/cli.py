"""Running the real `opsconsole` CLI as a subprocess against testbed hosts, and reading hosts independently."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.budget import describe, inner_timeout
from tests.support.cli_run import run_cli
from tests.testbed import recipe
from tests.testbed.host import GpuHost
from tests.testbed.system import CommandTimedOut

OPSCONSOLE = Path(sys.executable).with_name("opsconsole")


def opsconsole(
    host: GpuHost, *args: str, input: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """`opsconsole --workspace WS ARGS` with the host's client HOME (its ssh_config, known_hosts, key); past `timeout`
    (or the test's own time), what it was doing (tests/support/cli_run.py)."""
    argv = [str(OPSCONSOLE), "--workspace", str(host.workspace), *args]
    return run_cli(argv, input=input, timeout=timeout, env=host.client_env(), cwd=host.home)


def opsconsole_on_host(
    host: GpuHost, *args: str, user: str = recipe.SUDO_USER, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """The console run on the GPU host itself (TARGET `local`): the host's python3, the bound-in repo."""
    home = f"/home/{user}" if user != "root" else "/root"
    env = [f"HOME={home}", f"PYTHONPATH={recipe.PYTHONPATH}", "PYTHONDONTWRITEBYTECODE=1"]
    console = ["python3", "-m", "console", "--workspace", f"{home}/workspace", *args]
    wait_s = inner_timeout(timeout)
    try:
        return host.root_run(["runuser", "-u", user, "--", "env", *env, *console], timeout=wait_s, check=False)
    except CommandTimedOut as exc:
        raise AssertionError(
            f"`opsconsole {shlex.join(args)}` on the host ran past {wait_s:.0f} s ({describe()}):\n{exc.stdout}\n"
            f"{exc.stderr}"
        ) from exc


def json_output(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object a --json verb prints on stdout (fails with the CLI's stderr if there is none)."""
    try:
        parsed = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not one JSON object on stdout ({exc}):\n{done.stdout}\nstderr:\n{done.stderr}") from exc
    assert isinstance(parsed, dict), parsed
    return parsed


def server_info(host: GpuHost) -> dict[str, Any]:
    """/server_info as the server itself answers it on the host's loopback (independent of the console)."""
    probe = (
        "import urllib.request, sys; "
        f"sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:{host.sglang_port}/server_info', timeout=5)"
        ".read().decode())"
    )
    info = json.loads(host.root_run(["python3", "-c", probe]).stdout)
    assert isinstance(info, dict)
    return info


def unit_dir_listing(host: GpuHost) -> list[str]:
    """Files next to the unit on the host: a half-written temp file would show up here."""
    return sorted(host.root_run(["ls", "-A", str(Path(host.unit_path).parent)]).stdout.split())
