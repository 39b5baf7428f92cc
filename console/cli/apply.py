"""`opsconsole apply TARGET --set FLAG=VALUE ...`: the core's plan / execute (console.core.apply), rendered.

`--json` prints exactly one object (exit 0 = verified or nothing to change, 1 = refused / failed / rolled back):

    ok               true when the new unit runs and /server_info shows what the rules predicted
    target, unit     the host as named on the command line, and the unit that was edited
    state            final state: verified | unchanged | refused | aborted | write_failed | mismatch |
                     healthy_on_old (rolled back, old unit healthy) | rollback_failed | error (host unreachable) |
                     locked (another apply holds the unit's lock; nothing was read or changed)
    changed          whether the edit changes the unit text at all
    sglang_version   the version the rules checked against; version_source: server | profile | newest
    diff             unified diff of the unit (old -> new), secrets masked
    report           the rules' report for the new unit, in `check-args --json` shape (secrets masked)
    backup           path of the unit backup on the host (null when nothing was written)
    history          [{state, at, detail}] every step with its UTC time
    phases           [{name, label, state, started_at, ended_at, duration_s, progress}] of the new unit's start:
                     load_weights, kv_cache, cuda_graph, draft_cuda_graph, draft_extend_cuda_graph, warmup
    verified         {ok, values: {DEST: {requested, expected, actual, status, reason}}} with status
                     as_requested | adjusted (SGLang changed it silently, as predicted) | mismatch |
                     not_reported | secret (a key: the server does not show it, so it is not compared)
    rolled_back      whether the old unit was put back; rollback_phases: the old unit's start
    error            why it failed (with the exception line from the journal), else null
    journal_excerpt  the journal lines that explain a failure (traceback, exception, systemd exit lines)
    rollback_journal_excerpt  the same for the old unit's start, when the rollback did not come up
    restart_cost     what a restart of this host was said to cost before this one (its recent restarts: median,
                     dominant phase), else null; restart / rollback_restart: the starts this apply made, as kept in
                     logs/restarts.jsonl (docs/cli.md)

Ctrl-C while the new unit starts rolls back (a second Ctrl-C abandons the rollback and leaves at once).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from console import hints
from console.cli.apply_lines import confirm_and_execute, render_plan, render_result
from console.cli.common import HostVerb, said, workspace_of
from console.cli.rolling import PlanFor, run_on_host_or_group
from console.core.apply import default_owner, edits_by_version, plan_apply
from console.core.change import parse_edits
from console.core.session import open_session
from console.errors import UsageError
from console.host.base import HostError


def _check_args(args: argparse.Namespace) -> None:
    parse_edits(args.set, args.unset, args.env, args.unset_env)  # syntax only; the flags' kinds come later
    if not (args.set or args.unset or args.env or args.unset_env):
        raise UsageError("nothing to apply; give --set FLAG=VALUE, --unset FLAG, --env K=V or --unset-env K")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}")


async def apply_main(verb: HostVerb) -> int:
    args = verb.args
    if args.only:
        raise UsageError(f"--only is for a deployment's members; {args.target} is one host")
    async with open_session(args.target, workspace_of(args), ssh_config=args.ssh_config) as session:
        edits = edits_by_version(args.set, args.unset, args.env, args.unset_env)  # the version is read with the lock
        async with await plan_apply(session, edits, timeout_s=args.timeout) as pending:
            if not verb.json:
                render_plan(pending.plan, verb.human)
            result = await confirm_and_execute(pending, verb)
    verb.report(result.to_json, lambda out: render_result(result, out))
    return result.rollout.exit_code


def _nothing_done(exc: Exception) -> str:
    return said(exc) if isinstance(exc, HostError) else f"{said(exc)}; the unit was not touched"


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """`opsconsole apply`: exit 0 applied and verified (or nothing to change), 1 refused/failed, 2 usage."""
    verb = HostVerb("apply", args, {"ok": False, "target": args.target, "rolled_back": False}, _nothing_done,
                    stdin=stdin or sys.stdin, stdout=stdout or sys.stdout)  # fmt: skip
    return run_on_host_or_group(verb, apply_main, _plan_edits, check=lambda: _check_args(args),
                                deployment_main=_apply_deployment)  # fmt: skip


async def _apply_deployment(verb: HostVerb) -> int:
    """The deployment's every member that must carry the edit, checked across them, restarted in its order."""
    from console.cli.deployment import change_deployment

    args = verb.args
    return await change_deployment(verb, edits_by_version(args.set, args.unset, args.env, args.unset_env))


def _plan_edits(verb: HostVerb) -> PlanFor:
    """Each host's apply of the same edits, checked with that host's SGLang version."""
    from console.core.roll import apply_planner

    args = verb.args
    owner = default_owner(hints.APPLY_ROLLING.line(GROUP=args.target))
    return apply_planner(args.set, args.unset, args.env, args.unset_env, timeout_s=args.timeout, owner=owner)
