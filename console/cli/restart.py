"""`opsconsole restart TARGET [--yes] [--timeout S] [--json]`: restart the service as it is, watch its start and
verify what the server resolves (console.core.apply.plan_restart); nothing is written, so a failed start is
reported, not rolled back. `opsconsole restart @GROUP --rolling ...` does it host by host (console/cli/rolling.py),
behind the group's router when it names one. `--json` prints apply's object (or the roll's).
Exit 0 restarted and verified, 1 failed / locked / not confirmed, 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from console import hints
from console.cli.apply_lines import confirm_and_execute, render_result
from console.cli.common import HostVerb, said, workspace_of
from console.cli.rolling import PlanFor, run_on_host_or_group
from console.errors import UsageError


async def restart_main(verb: HostVerb) -> int:
    from console.core.apply import plan_restart
    from console.core.session import open_session

    args = verb.args
    async with (
        open_session(args.target, workspace_of(args), ssh_config=args.ssh_config) as session,
        await plan_restart(session, timeout_s=args.timeout) as pending,
    ):
        result = await confirm_and_execute(pending, verb)
    verb.report(result.to_json, lambda out: render_result(result, out))
    return result.rollout.exit_code


def _plan_restarts(verb: HostVerb) -> PlanFor:
    from console.core.apply import default_owner
    from console.core.roll import restart_planner

    args = verb.args
    return restart_planner(timeout_s=args.timeout, owner=default_owner(hints.RESTART_ROLLING.line(GROUP=args.target)))


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    def check() -> None:
        if not args.timeout > 0:
            raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}")

    verb = HostVerb(
        "restart",
        args,
        {"ok": False, "target": args.target},
        lambda exc: f"{said(exc)}; the service was not restarted",
        stdin=stdin or sys.stdin,
        stdout=stdout or sys.stdout,
    )
    return run_on_host_or_group(verb, restart_main, _plan_restarts, check=check, deployment_main=_restart_deployment)


async def _restart_deployment(verb: HostVerb) -> int:
    """Every member restarted as it is, in the deployment's order (the ranks together), verified as one."""
    from console.cli.deployment import change_deployment

    return await change_deployment(verb, None)
