"""A library's warnings go to the workspace's log (logs/warnings.log), never to the operator's terminal.

The CLI and the console are the operator's words only: a deprecation that a dependency's new release announces at
import (cryptography 51's "DSA is deprecated", printed six times by asyncssh's import) or a library's logged warning
would otherwise open every command's output, and the console's screen. `route()` is the CLI's first step:

- Python warnings raised from outside console.* are shown once per place (the `default` action) and never turned into
  errors, whatever -W or PYTHONWARNINGS say: an operator's strict setting must not make a library's notice fatal.
  Warnings attributed to console.* keep the interpreter's filters, so `-W error::DeprecationWarning` still catches
  the project's own use of a deprecated API (tests/test_cli_stderr.py runs every verb that way);
- every warning shown, and every log record of WARNING and above from a library's logger, is written to the
  workspace's logs/warnings.log with the time and process. Until the workspace is known (`log_to`, once the
  arguments are read) they wait in memory; at exit they go to the workspace the environment names.

A log that cannot be written (a read-only workspace) loses the warnings, never the command.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
import warnings
from pathlib import Path
from typing import TextIO

LOG_NAME = "warnings.log"
# Modules whose warnings are a library's: anything that is not this package.
LIBRARY_MODULES = r"(?!console(\.|$))"


class _Sink:
    """The warnings shown so far and where they go."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.path: Path | None = None

    def add(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        self.pending.append(f"{stamp} pid {os.getpid()}: {text.rstrip()}\n")
        if self.path is not None:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        path = self.path or _default_path()
        lines, self.pending = self.pending, []
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as log:
                log.writelines(lines)
        except OSError:
            pass  # a read-only workspace: the warnings are lost, the command is not


def _default_path() -> Path:
    from console.workspace import Workspace

    return Workspace.resolve().logs / LOG_NAME


_sink = _Sink()


class _LogHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            _sink.add(f"{record.levelname} {record.name}: {record.getMessage()}")
        except Exception:
            self.handleError(record)


def _show(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    _sink.add(warnings.formatwarning(message, category, filename, lineno, line))


def route() -> None:
    """Send every warning shown from now on, and libraries' logged warnings, to the workspace's log."""
    warnings.filterwarnings("default", module=LIBRARY_MODULES)
    warnings.showwarning = _show
    root = logging.getLogger()
    if not any(isinstance(h, _LogHandler) for h in root.handlers):
        root.addHandler(_LogHandler(logging.WARNING))
    atexit.register(_sink.flush)


def log_to(logs: Path) -> None:
    """The workspace's logs/ folder is known: what waited goes there now, and what comes later at once."""
    _sink.path = logs / LOG_NAME
    _sink.flush()
