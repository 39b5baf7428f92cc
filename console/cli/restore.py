"""`opsconsole restore TARGET SNAPSHOT [--yes] [--timeout S] [--json]`: bring a snapshot's flags and environment
back through the validated apply (console.core.snapshot.plan_restore -> console.core.apply): the rules check the
restored unit first, a start that fails is rolled back, and what the server resolves is verified. A deployment
(`restore DEPLOYMENT NAME`) gets every member's snapshot of the set NAME back through the deployment's change
(apply DEPLOYMENT's object plus `snapshot` and `restore_notes`).

A secret the snapshot holds masked (an API key) stays as it is on the host. Restoring does not change which
snapshot is production (the host's latest freeze): status then reports the difference as drift until the next
freeze. `--json` prints apply's object plus `snapshot` (the name) and `notes` (what was kept and why).
Exit codes as apply's: 0 verified (or already that setup), 1 refused / failed / rolled back / locked, 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from console.cli.apply_lines import confirm_and_execute, render_plan, render_result
from console.cli.common import HostVerb, said, workspace_of
from console.cli.rolling import PlanFor, run_on_host_or_group
from console.errors import UsageError


async def restore_main(verb: HostVerb) -> int:
    from console.core.session import open_session
    from console.core.snapshot import SnapshotError, load_snapshot, plan_restore

    args, human = verb.args, verb.human
    workspace = workspace_of(args)
    try:
        snapshot = load_snapshot(workspace, args.snapshot)
    except (LookupError, SnapshotError) as exc:
        return verb.early_failure(str(exc))
    async with open_session(args.target, workspace, ssh_config=args.ssh_config) as session:
        pending, notes = await plan_restore(session, snapshot, timeout_s=args.timeout)
        async with pending:
            if not verb.json:
                print(f"Restore snapshot {snapshot.name} ({snapshot.frozen_at:%Y-%m-%d %H:%M} UTC) on "
                      f"{session.label}", file=human)  # fmt: skip
                for note in notes:
                    print(f"  note: {note}", file=human)
                render_plan(pending.plan, human)
            result = await confirm_and_execute(pending, verb)
    verb.report(
        lambda: {**result.to_json(), "snapshot": snapshot.name, "notes": notes}, lambda out: render_result(result, out)
    )
    return result.rollout.exit_code


def _check_args(args: argparse.Namespace) -> None:
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}")


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    verb = HostVerb(
        "restore",
        args,
        {"ok": False, "target": args.target, "snapshot": args.snapshot},
        lambda exc: f"{said(exc)}; the unit was not touched",
        stdin=stdin or sys.stdin,
        stdout=stdout or sys.stdout,
    )
    return run_on_host_or_group(verb, restore_main, _plan_restores, check=lambda: _check_args(args),
                                deployment_main=_restore_deployment)  # fmt: skip


async def _restore_deployment(verb: HostVerb) -> int:
    """Every member back to its own snapshot of the set SNAPSHOT (`freeze DEPLOYMENT --name SNAPSHOT`), through the
    deployment's change (console/cli/deployment.py)."""
    from console.cli.deployment import restore_deployment

    return await restore_deployment(verb)


def _plan_restores(verb: HostVerb) -> PlanFor:
    """Each host's restore: the set's own snapshot of that host (SNAPSHOT.HOST, as a group freeze names them) when
    there is one, else SNAPSHOT itself on every host."""
    from console.core.roll import ApplyChange
    from console.core.session import Session
    from console.core.snapshot import SnapshotError, load_snapshot, plan_restore

    args = verb.args
    workspace = workspace_of(args)

    async def plan(session: Session) -> ApplyChange:
        try:
            snapshot = load_snapshot(workspace, f"{args.snapshot}.{session.label}")
        except (LookupError, SnapshotError):
            try:
                snapshot = load_snapshot(workspace, args.snapshot)
            except LookupError as exc:
                raise UsageError(str(exc)) from None
        pending, _notes = await plan_restore(session, snapshot, timeout_s=args.timeout)
        return ApplyChange(pending)

    return plan
