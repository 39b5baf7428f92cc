"""Every verb's stderr is its own words: its --help writes nothing there, its usage error exactly argparse's text for
it, and its failure on a host that does not exist one message of its own, with the interpreter told to make every
DeprecationWarning an error (`-W error::DeprecationWarning` in the environment). A library's warnings, which the
packages of the day raise at import (cryptography 51's "DSA is deprecated", six lines through asyncssh), go to the
workspace's logs/warnings.log instead (console/library_warnings.py). `make test-latest` runs this file on the newest
release of every dependency, which is where the next such warning shows first (docs/dependencies.md)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import HANDLERS, build_parser
from console.library_warnings import LOG_NAME
from tests.support.cli_run import run_cli

pytestmark = pytest.mark.system

OPSCONSOLE = shutil.which("opsconsole", path=str(Path(sys.executable).parent))
STRICT = {"PYTHONWARNINGS": "error::DeprecationWarning", "COLUMNS": "100"}
VERBS = sorted(HANDLERS)
# The verbs that contact a host: each fails on one that does not exist, after importing its libraries.
HOST_VERBS = ("status", "bench", "restart", "logs", "trust", "tune", "predict")
# What a library's warning looks like on stderr: Python's `file.py:LINE: Category: text`, a logged record, a trace.
NOT_OURS = ("Warning:", "warnings.warn", "site-packages", "Traceback", "WARNING:", "DEBUG:", "INFO:")


def cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    assert OPSCONSOLE, "no opsconsole beside this interpreter: run `make` first"
    env = {**os.environ, **STRICT, "OPSCONSOLE_WORKSPACE": str(tmp_path)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return run_cli([OPSCONSOLE, *argv], env=env, cwd=tmp_path, timeout=60)


def argparse_error(argv: list[str]) -> str:
    """What the CLI's own parser writes to stderr for `argv`, at the test's width."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        old = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = STRICT["COLUMNS"]
        try:
            build_parser().parse_args(argv)
        finally:
            os.environ.pop("COLUMNS") if old is None else os.environ.__setitem__("COLUMNS", old)
    return err.getvalue()


@pytest.mark.parametrize("verb", VERBS)
def test_help_writes_nothing_to_stderr(tmp_path: Path, verb: str) -> None:
    done = cli(tmp_path, verb, "--help")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith(f"usage: opsconsole {verb}")


@pytest.mark.parametrize("verb", VERBS)
def test_a_usage_error_is_argparse_s_text_and_nothing_else(tmp_path: Path, verb: str) -> None:
    argv = [verb, "--no-such-option"]
    done = cli(tmp_path, *argv)
    assert done.returncode == 2
    assert done.stderr == argparse_error(argv)
    assert done.stderr.startswith("usage: opsconsole") and ": error: " in done.stderr


@pytest.mark.parametrize("verb", HOST_VERBS)
def test_a_host_that_does_not_exist_is_one_message_of_the_verb_s_own(tmp_path: Path, verb: str) -> None:
    done = cli(tmp_path, verb, "nosuchhost.invalid")
    assert done.returncode in (1, 2)
    assert "nosuchhost.invalid" in done.stderr
    assert not [word for word in NOT_OURS if word in done.stderr], done.stderr


def test_a_library_s_warning_goes_to_the_workspace_s_log_not_stderr(tmp_path: Path) -> None:
    """The control: the same import the verb makes, in a bare interpreter, does print warnings in this environment
    (cryptography's DSA notice through asyncssh); the verb prints none of them and the workspace's log has each."""
    bare = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import asyncssh"], capture_output=True, text=True, timeout=60
    )
    shown = [line for line in bare.stderr.splitlines() if "Warning:" in line]
    done = cli(tmp_path, "status", "nosuchhost.invalid")
    assert "Warning" not in done.stderr
    log = tmp_path / "logs" / LOG_NAME
    if not shown:
        pytest.fail(
            "importing asyncssh raised no warning in this environment, so this test has nothing to route: "
            "give it another library warning to show (tests/test_library_warnings.py covers the routing itself)"
        )
    logged = log.read_text(encoding="utf-8")
    for line in shown:
        assert line.split(": ", 1)[1] in logged


def test_output_to_a_pipe_its_reader_closed_ends_without_a_traceback(tmp_path: Path) -> None:
    """`opsconsole ... | head`: once head has its lines it closes the pipe, and the verb's next write fails."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the verb writes
    try:
        env = {**os.environ, **STRICT, "OPSCONSOLE_WORKSPACE": str(tmp_path)}
        done = subprocess.run(
            [str(OPSCONSOLE), "check-args", "--", "--model-path", "m", "--speculative-algorithm", "EAGLE"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")
