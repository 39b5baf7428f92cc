"""console/library_warnings.py: a library's warning, and a library's logged warning, reach the workspace's log and not
stderr, even where the interpreter's filters make that category an error; the project's own warnings keep those
filters. (tests/test_cli_stderr.py holds the real CLI to it.)"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from console import library_warnings


@pytest.fixture
def routed(tmp_path: Path) -> Iterator[Path]:
    root = logging.getLogger()
    handlers = list(root.handlers)
    with warnings.catch_warnings():  # restores the filters and showwarning afterwards
        warnings.simplefilter("error", DeprecationWarning)  # as `-W error::DeprecationWarning` would
        library_warnings.route()
        library_warnings.log_to(tmp_path / "logs")
        yield tmp_path / "logs" / library_warnings.LOG_NAME
    root.handlers[:] = handlers
    library_warnings._sink.path = None


def test_a_library_s_deprecation_is_logged_not_raised_nor_printed(routed: Path, capsys: pytest.CaptureFixture) -> None:
    warnings.warn_explicit("DSA is deprecated", DeprecationWarning, "asyncssh/crypto/misc.py", 32, module="asyncssh")
    logging.getLogger("textual_serve").warning("a worker went away")
    logging.getLogger("textual_serve").info("not a warning: not kept")
    log = routed.read_text()
    assert "DeprecationWarning: DSA is deprecated" in log and "asyncssh/crypto/misc.py:32" in log
    assert "WARNING textual_serve: a worker went away" in log and "not kept" not in log
    assert capsys.readouterr().err == ""


def test_the_project_s_own_deprecation_keeps_the_interpreter_s_filters(routed: Path) -> None:
    with pytest.raises(DeprecationWarning):
        warnings.warn_explicit("old API", DeprecationWarning, "console/x.py", 1, module="console.x")


def test_warnings_before_the_workspace_is_known_wait_for_it(tmp_path: Path) -> None:
    handlers = list(logging.getLogger().handlers)
    try:
        with warnings.catch_warnings():
            library_warnings.route()
            warnings.warn_explicit("early", UserWarning, "lib.py", 3, module="lib")
            assert not (tmp_path / "logs").exists()
            library_warnings.log_to(tmp_path / "logs")
        assert "UserWarning: early" in (tmp_path / "logs" / library_warnings.LOG_NAME).read_text()
    finally:
        logging.getLogger().handlers[:] = handlers
        library_warnings._sink.path = None
