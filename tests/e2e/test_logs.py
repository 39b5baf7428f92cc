"""`opsconsole logs` end to end: the service journal over SSH."""

from __future__ import annotations

import pytest

from tests.e2e.cli import opsconsole
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed


def test_logs_shows_the_service_journal(gpu_host: GpuHost) -> None:
    done = opsconsole(gpu_host, "logs", gpu_host.name, "-n", "200", timeout=60)
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
