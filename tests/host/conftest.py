"""Fixtures of the host-layer tests: the loopback sshd (tests/host/sshd_lab.py) and a client side per test.

Each test gets an ssh_config + known_hosts of its own in a temp dir and a temp HOME, so the
operator's ~/.ssh is never read or written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from console.host.ssh import SHELL_POOL
from tests.host.sshd_lab import ClientSide, Sshd, sshd_lab, write_client

__all__ = ["ClientSide", "Sshd"]


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    with sshd_lab() as server:
        yield server


@pytest.fixture
def client(tmp_path: Path, sshd: Sshd, monkeypatch: pytest.MonkeyPatch) -> ClientSide:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # only the test's own key
    monkeypatch.setenv("HOME", str(tmp_path))
    return write_client(tmp_path, sshd)


@pytest.fixture
def narrow_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClientSide]:
    """The client side of an sshd of its own that allows fewer sessions (MaxSessions) than the transport's
    command shells and channel budget together."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with sshd_lab(max_sessions=SHELL_POOL + 2) as narrow:
        yield write_client(tmp_path, narrow)
