"""`opsconsole restore TARGET SNAPSHOT [--yes] [--timeout S] [--json]`: bring a snapshot's flags and environment
back through the validated apply (console.core.freeze.plan_restore -> console.core.apply): the rules check the
restored unit first, a start that fails is rolled back, and what the server resolves is verified.

A secret the snapshot holds masked (an API key) stays as it is on the host. Restoring does not change which
snapshot is production (the host's latest freeze): status then reports the difference as drift until the next
freeze. `--json` prints apply's object plus `snapshot` (the name) and `notes` (what was kept and why).
Exit codes as apply's: 0 verified (or already that setup), 1 refused / failed / rolled back / locked, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from console.cli.apply import confirm_and_execute, render_plan, render_result
from console.cli.common import run_verb, workspace_of
from console.errors import ExitCode, UsageError


async def restore_main(args: argparse.Namespace, *, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from console.core.freeze import plan_restore
    from console.core.session import open_session
    from console.core.snapshot import SnapshotError
    from console.core.snapshot_store import load_snapshot
    from console.host.base import HostError, UnitLocked

    human = stderr if args.json else stdout
    workspace = workspace_of(args)
    try:
        snapshot = load_snapshot(workspace, args.snapshot)
    except (LookupError, SnapshotError) as exc:
        return _early_failure(args, stdout, stderr, str(exc))
    try:
        async with open_session(args.target, workspace, ssh_config=args.ssh_config) as session:
            pending, notes = await plan_restore(session, snapshot, timeout_s=args.timeout)
            async with pending:
                if not args.json:
                    print(f"Restore snapshot {snapshot.name} ({snapshot.frozen_at:%Y-%m-%d %H:%M} UTC) on "
                          f"{session.label}", file=human)  # fmt: skip
                    for note in notes:
                        print(f"  note: {note}", file=human)
                    render_plan(pending.plan, human)
                result = await confirm_and_execute(pending, "restore", args, stdin=stdin, stderr=stderr, human=human)
    except UnitLocked as exc:
        return _early_failure(args, stdout, stderr, str(exc), state="locked")
    except UsageError:
        raise
    except (HostError, ValueError) as exc:
        return _early_failure(args, stdout, stderr, f"{exc}; the unit was not touched")
    if args.json:
        print(json.dumps({**result.to_json(), "snapshot": snapshot.name, "notes": notes}, default=str), file=stdout)
    else:
        render_result(result, human)
    return result.rollout.exit_code


def _early_failure(
    args: argparse.Namespace, stdout: TextIO, stderr: TextIO, message: str, *, state: str = "error"
) -> int:
    print(f"opsconsole restore: {message}", file=stderr)
    if args.json:
        doc = {"ok": False, "target": args.target, "snapshot": args.snapshot, "state": state, "error": message}
        print(json.dumps(doc), file=stdout)
    return ExitCode.FAILED


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    if not args.timeout > 0:
        why = f"--timeout must be a positive number of seconds, not {args.timeout}"
        print(f"opsconsole restore: {why}", file=sys.stderr)
        return ExitCode.USAGE
    streams = {"stdin": stdin or sys.stdin, "stdout": stdout or sys.stdout, "stderr": sys.stderr}
    return run_verb("restore", lambda: restore_main(args, **streams))
