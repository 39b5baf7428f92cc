"""tests/core: the application API (console.core) in-process, against a real demo host (`opsconsole demo
--no-ui`: the unit supervisor and the SGLang stand-in, real processes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.demo import Demo, running_demo


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """A fresh demo host for a test that changes it."""
    with running_demo(tmp_path / "ws") as running:
        yield running


@pytest.fixture(scope="module")
def shared_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """One demo host for the tests of a module that only read it."""
    with running_demo(tmp_path_factory.mktemp("shared") / "ws") as running:
        yield running


@pytest.fixture
def restarting_demo(tmp_path: Path) -> Iterator[Demo]:
    """A demo host whose restart takes a few seconds (the dashboard refreshes many times meanwhile)."""
    with running_demo(tmp_path / "ws", time_scale="0.02") as running:
        yield running
