"""`opsconsole logs` end to end: the service journal over SSH."""

from __future__ import annotations

import difflib
import json
import subprocess
import threading

import pytest

from tests.e2e.cli import OPSCONSOLE, opsconsole
from tests.testbed.host import GpuHost
from tests.testbed.system import poll_until

pytestmark = pytest.mark.testbed


def test_logs_shows_the_service_journal(gpu_host: GpuHost) -> None:
    # Enough lines to reach back to the server's last start: its access log adds a line per request.
    done = opsconsole(gpu_host, "logs", gpu_host.name, "-n", "5000", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "The server is fired up and ready to roll!" in done.stdout


def test_logs_explains_when_sudo_wants_a_password(gpu_host: GpuHost) -> None:
    """The user `nosudo` may not read the journal itself and its sudo asks for a password."""
    profile = gpu_host.workspace / "profiles" / "gpu1-nosudo.toml"
    profile.write_text(f'[host]\nssh = "nosudo@{gpu_host.name}"\nunit = "{gpu_host.unit}"\nsudo = true\n')
    try:
        done = opsconsole(gpu_host, "logs", "gpu1-nosudo", "-n", "5", timeout=60)
    finally:
        profile.unlink()
    assert done.returncode == 1
    assert "password" in done.stderr.lower() and "sudo" in done.stderr.lower(), done.stderr


def test_logs_follow_survives_a_dropped_link_without_gaps_or_duplicates(pristine_gpu_host: GpuHost) -> None:
    """`logs -f` across a restart seen live, one while the link is down, and one while the host has just closed
    the connection: it resumes from its cursor, so what it printed is exactly the journal, in order, each once."""
    host = pristine_gpu_host
    first = json.loads(host.root_run(["journalctl", "-u", host.unit, "-n", "1", "-o", "json", "--all"]).stdout)
    follow = subprocess.Popen(
        [str(OPSCONSOLE), "--workspace", str(host.workspace), "logs", host.name, "-f", "-n", "1"],
        env=host.client_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    printed: list[str] = []
    reader = threading.Thread(target=_read_lines, args=(follow, printed), daemon=True)
    reader.start()
    try:
        poll_until(lambda: len(printed) >= 1, timeout=30, what="logs -f to print the last entry")
        host.root_run(f"systemctl restart {host.unit}")
        poll_until(lambda: _count(printed, READY) == 1, timeout=60, what="the live restart in logs -f")
        host.link_down()
        try:
            host.root_run(f"systemctl restart {host.unit}")
            host.wait_healthy()
        finally:
            host.link_up()
        poll_until(lambda: _count(printed, READY) == 2, timeout=90, what="logs -f to catch up after the link returned")
        # Now a real drop: the host closes the console's SSH connection, and restarts while it reconnects.
        sessions = host.root_run(["pgrep", "-u", host.user, "-x", "sshd"]).stdout.split()
        assert sessions, "no SSH session of the console on the host"
        host.root_run(["kill", *sessions])
        host.root_run(f"systemctl restart {host.unit}")
        poll_until(lambda: _count(printed, READY) == 3, timeout=90, what="logs -f to resume after the drop")
    finally:
        follow.terminate()
        follow.wait(timeout=10)
        reader.join(timeout=10)
    journal = host.root_run(
        ["journalctl", "-u", host.unit, "--after-cursor", first["__CURSOR"], "-o", "json", "--all"]
    ).stdout
    expected = [_message(first)] + [_message(json.loads(line)) for line in journal.splitlines()]
    shown = [_strip_prefix(line) for line in printed]
    assert shown == expected[: len(shown)], "\n".join(difflib.unified_diff(expected, shown, lineterm=""))


READY = "The server is fired up and ready to roll!"


def _read_lines(process: subprocess.Popen[str], into: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        into.append(line.rstrip("\n"))


def _count(lines: list[str], text: str) -> int:
    return sum(text in line for line in list(lines))


def _message(entry: dict[str, object]) -> str:
    message = entry.get("MESSAGE")
    return bytes(message).decode(errors="replace") if isinstance(message, list) else str(message)


def _strip_prefix(line: str) -> str:
    """`2026-11-30 04:39:48 [70] message` -> `message` (the pid is absent for some entries)."""
    _date, _time, rest = line.split(" ", 2)
    if rest.startswith("[") and "] " in rest:
        rest = rest.split("] ", 1)[1]
    return rest
