"""Fixtures of the host-layer tests: the loopback sshd (tests/host/sshd_lab.py) and a client side per test.

Each test gets an ssh_config + known_hosts of its own in a temp dir and a temp HOME, so the
operator's ~/.ssh is never read or written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.host.sshd_lab import ClientSide, Sshd, sshd_lab, write_client

__all__ = ["ClientSide", "Sshd"]


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    with sshd_lab() as server:
        yield server


def _private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # only the test's own key
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def client(tmp_path: Path, sshd: Sshd, monkeypatch: pytest.MonkeyPatch) -> ClientSide:
    _private_home(tmp_path, monkeypatch)
    return write_client(tmp_path, sshd)


@pytest.fixture
def narrow_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], ClientSide]]:
    """The client side of an sshd of its own that allows a connection `max_sessions` sessions (MaxSessions):
    `narrow_client(n)`, once per test."""
    _private_home(tmp_path, monkeypatch)
    with contextlib.ExitStack() as servers:
        yield lambda max_sessions: write_client(tmp_path, servers.enter_context(sshd_lab(max_sessions=max_sessions)))
