"""What every verb's renderer shares: running its coroutine, and turning errors into messages and exit codes."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

from console.errors import ExitCode, UsageError
from console.host.base import HostError


def run_verb(verb: str, main: Callable[[], Coroutine[Any, Any, int]], *, stderr: TextIO | None = None) -> int:
    """asyncio.run(main()): a UsageError is exit 2 and a HostError exit 1, each with its message."""
    err = stderr or sys.stderr
    try:
        return int(asyncio.run(main()))
    except UsageError as exc:
        print(f"opsconsole {verb}: {exc}", file=err)
        return ExitCode.USAGE
    except HostError as exc:
        print(f"opsconsole {verb}: {exc}", file=err)
        return ExitCode.FAILED


def workspace_of(args: argparse.Namespace) -> Any:
    """The workspace the command line names (--workspace, else $OPSCONSOLE_WORKSPACE, else here)."""
    from console.workspace import Workspace

    return Workspace.resolve(getattr(args, "workspace", None))


def is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
