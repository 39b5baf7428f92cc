"""Host keys end to end: an unknown or changed key stops every verb; `trust` records it only after "yes"."""

from __future__ import annotations

import asyncssh
import pytest

from tests.e2e.cli import opsconsole
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed


def test_an_unknown_host_key_is_refused_with_its_fingerprint(unknown_gpu_host: GpuHost) -> None:
    host = unknown_gpu_host
    for verb in (["status", host.name, "--json"], ["logs", host.name, "-n", "5"]):
        done = opsconsole(host, *verb, timeout=60)
        assert done.returncode == 1, (verb, done.stdout, done.stderr)
        assert host.host_key_fingerprint in done.stderr, done.stderr
        assert f"opsconsole trust {host.name}" in done.stderr
    assert host.known_hosts.read_text() == ""


def test_a_changed_host_key_is_refused(unknown_gpu_host: GpuHost) -> None:
    host = unknown_gpu_host
    impostor = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    host.known_hosts.write_text(f"{host.address} {impostor}\n")
    done = opsconsole(host, "status", host.name, "--json", timeout=60)
    assert done.returncode == 1
    assert "CHANGED" in done.stderr and host.host_key_fingerprint in done.stderr
    assert host.known_hosts.read_text() == f"{host.address} {impostor}\n"


def test_trust_records_the_key_only_after_yes(unknown_gpu_host: GpuHost) -> None:
    host = unknown_gpu_host
    declined = opsconsole(host, "trust", host.name, input="no\n", timeout=60)
    assert declined.returncode == 1
    assert host.host_key_fingerprint in declined.stdout + declined.stderr
    assert host.known_hosts.read_text() == ""

    accepted = opsconsole(host, "trust", host.name, input="yes\n", timeout=60)
    assert accepted.returncode == 0, accepted.stderr
    key_body = host.known_hosts_line.split()[2]
    assert key_body in host.known_hosts.read_text()
    done = opsconsole(host, "logs", host.name, "-n", "5", timeout=60)
    assert done.returncode == 0, done.stderr
