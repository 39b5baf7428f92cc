"""The real `opsconsole` CLI as a subprocess, waited on inside the running test's time, and what it was doing when a
wait ran out.

Every test that runs the CLI and waits for its end goes through here (tests/e2e/cli.py, the rolling fleets, the
tune tests, the demo's runs). The wait is `inner_timeout(timeout)` (tests/support/budget.py): the test's pytest
timeout cannot fire first, which would show only stacks. When the wait runs out the CLI is killed and CliRanPast
says:

- its progress: the CLI's timestamped lines (`[HH:MM:SS] ...`, UTC), which a --json run prints on stderr because
  OPSCONSOLE_PROGRESS is set here (console/cli/common.py),
- the rest of its stderr so far,
- the tail of the workspace's audit log (logs/audit.jsonl, console/host/audit.py): the last remote commands that
  ended, their exit and duration (a line is written when its command ends: the one it hung in is not there),
- the time now, to set against the progress lines.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.cli.common import PROGRESS_ENV
from console.host.audit import AUDIT_FILE_NAME
from tests.support.budget import describe, inner_timeout

PROGRESS_LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] ")
STDERR_LINES = 40
AUDIT_LINES = 15


class CliRanPast(AssertionError):
    """A CLI run that did not end within its wait; the message says what it was doing."""


def start_cli(
    argv: Sequence[str], *, env: dict[str, str], cwd: Path | None = None, stdin: Any = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    """`argv` (an opsconsole command line) started with its output captured and its progress on stderr."""
    return subprocess.Popen(
        list(argv),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, PROGRESS_ENV: "1"},
        cwd=cwd,
    )


def finish_cli(
    proc: subprocess.Popen[str], *, timeout: float, workspace: Path | None = None, input: str | None = None
) -> tuple[str, str]:
    """(stdout, stderr) of `proc` once it ends, within `timeout` or the test's own time, whichever ends first;
    past that it is killed and CliRanPast says what it was doing. `workspace`: whose audit log to show; by default
    the one its command line names (--workspace)."""
    wait_s = inner_timeout(timeout)
    try:
        return proc.communicate(input, timeout=wait_s)
    except subprocess.TimeoutExpired as expired:
        proc.kill()
        try:  # what it wrote up to the kill; a child of its own that kept the pipes open must not hold this up
            _out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            err = _text(expired.stderr)
        where = workspace or workspace_in(proc.args)
        raise CliRanPast(ran_past(proc.args, wait_s, err or _text(expired.stderr), where)) from None


def workspace_in(args: Any) -> Path | None:
    """The workspace an opsconsole command line names (--workspace WS), if it does."""
    argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else []
    return Path(argv[argv.index("--workspace") + 1]) if "--workspace" in argv[:-1] else None


def run_cli(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    timeout: float,
    workspace: Path | None = None,
    cwd: Path | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """subprocess.run for the CLI: start_cli, then finish_cli."""
    proc = start_cli(argv, env=env, cwd=cwd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
    stdout, stderr = finish_cli(proc, workspace=workspace, timeout=timeout, input=input)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def ran_past(args: Any, waited_s: float, stderr: str, workspace: Path | None) -> str:
    """The report of a CLI run that did not end in `waited_s`."""
    argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else [str(args)]
    program = next((i for i, arg in enumerate(argv) if Path(arg).name == "opsconsole"), 0)  # after `env ...`, if any
    command = shlex.join(["opsconsole", *argv[program + 1 :]])
    lines = stderr.splitlines()
    progress = [line for line in lines if PROGRESS_LINE.match(line)]
    other = [line for line in lines if not PROGRESS_LINE.match(line)]
    now = datetime.now(UTC).strftime("%H:%M:%S")
    return "\n".join(
        [
            f"`{command}` did not end within {waited_s:.0f} s ({describe()}); killed at {now} UTC.",
            f"its progress ({len(progress)} lines, UTC):",
            *_indented(progress[-STDERR_LINES:]),
            f"the rest of its stderr (last {STDERR_LINES} lines):",
            *_indented(other[-STDERR_LINES:]),
            *audit_tail(workspace),
        ]
    )


def audit_tail(workspace: Path | None, count: int = AUDIT_LINES) -> list[str]:
    """The last `count` remote commands of the workspace's audit log, one line each."""
    if workspace is None:
        return ["no audit log: the command line names no --workspace"]
    path = workspace / "logs" / AUDIT_FILE_NAME
    try:
        entries = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return [f"the audit log {path}: {exc.strerror or exc}"]
    shown = [f"the audit log {path}, last {min(count, len(entries))} of {len(entries)} commands (UTC):"]
    for raw in entries[-count:]:
        try:
            entry = json.loads(raw)
            stamp = str(entry.get("time", "?"))[11:23]
            status = entry.get("exit_status")
            note = f" ({entry['note']})" if entry.get("note") else ""
            command = str(entry.get("command", ""))
            shown.append(
                f"  {stamp} {entry.get('host', '?')} exit {status} in {entry.get('duration_s', '?')} s{note}: "
                + (command if len(command) <= 160 else command[:157] + "...")
            )
        except (ValueError, AttributeError):
            shown.append(f"  {raw[:200]}")
    return shown


def _indented(lines: list[str]) -> list[str]:
    return [f"  {line}" for line in lines] or ["  (none)"]


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
