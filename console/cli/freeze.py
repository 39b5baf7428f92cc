"""`opsconsole freeze TARGET --name NAME [--note TEXT] [--doc PATH] [--force REASON] [--yes] [--json]`.

The core's plan / execute (console.core.snapshot.freeze), rendered. `--json` prints exactly one object:

    ok               true when the host is frozen and the snapshot kept
    target, unit     the host as named on the command line, and its unit
    name             the snapshot's name
    state            frozen | refused (the server is not healthy or does not run the unit on disk; nothing
                     written) | aborted (not confirmed) | failed (a step on the host failed; history says which) |
                     locked (an apply or freeze holds the unit's lock) | error (unreachable, unreadable unit, the
                     name is taken)
    refusals         [{code, message}] why it is (or, with --force, would have been) refused; codes: not-active,
                     unhealthy, no-server-info, daemon-reload, process-flags, unit-newer, process-environment,
                     resolved
    forced           the --force reason, or null
    document         the production document's path on the host
    snapshot         the local snapshot file (null unless frozen)
    unit_changed     whether the unit was rewritten (only to add [Install] WantedBy=, which enabling needs)
    diff             that change as a unified diff ("" when none); backup: the old unit's backup on the host
    unit_file_state  is-enabled after the freeze; healthy: /health after the freeze
    sglang_version, resolved   what the server runs (resolved: speculative values, max running requests, model)
    previous         the host's production snapshot before this one, or null
    benchmarks       how many benchmark records of this setup the snapshot keeps (latest run per level)
    comparison       [{level, metric, previous, value, delta_pct, verdict, within_noise}] against `previous`
    history          [{step, at, detail}]: document_written, unit_written, daemon_reloaded, enabled, verified, saved
    error            why it did not freeze, else null

Exit 0 frozen, 1 refused / failed / locked / not confirmed, 2 usage (a bad name or path, nothing contacted).

`opsconsole freeze @GROUP --name NAME [--rolling [--canary N] [--wave N|P%]] [--max-failures N]`: one snapshot set.
Every host is planned first (its unit lock taken, its running truth read; a refusal on any host freezes none), then
each is frozen as NAME.HOST, and the set's index is kept in profiles/snapshot-sets/NAME.toml. A freeze restarts
nothing, so the group needs no --rolling (without it every host is frozen side by side); --json prints the rolling
report (console/cli/rolling.py) with each host's freeze object and `snapshot_set`.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from console import hints
from console.cli.common import Answer, HostVerb, ignore, said, workspace_of
from console.cli.freeze_lines import FreezeProgress, render_plan
from console.cli.rolling import PlanFor, run_on_host_or_group


async def freeze_main(verb: HostVerb) -> int:
    from console.core.session import open_session
    from console.core.snapshot import FreezeRequest, FreezeResult, plan_freeze

    args = verb.args
    request = FreezeRequest(args.name, args.note or "", args.doc, args.force)
    result: FreezeResult
    try:
        async with (
            open_session(args.target, workspace_of(args), ssh_config=args.ssh_config) as session,
            await plan_freeze(session, request) as pending,
        ):
            plan = pending.plan
            if not verb.json:
                render_plan(plan, verb.human)
            sink = FreezeProgress(verb.human) if verb.shows_progress else ignore
            question = (
                f"Write the document to {session.label}:{plan.document_path}, enable {session.service.unit} "
                f"and keep snapshot {plan.snapshot.name}?"
            )
            answer = None if plan.refused else verb.ask(question)
            if answer is Answer.YES:
                result = await pending.execute(sink)
            elif answer is Answer.NO_TERMINAL:
                result = await pending.abort(verb.cannot_ask)
            elif answer is Answer.NO:
                result = await pending.abort("not confirmed; nothing was written")
            else:  # refused: the plan says why
                result = await pending.abort()
    except FileExistsError as exc:  # the name is taken
        return verb.early_failure(str(exc))
    verb.report(result.to_json, lambda out: _render_result(result, out))
    return result.exit_code


def _render_result(result: object, out: TextIO) -> None:
    from console.core.snapshot import FreezeResult

    assert isinstance(result, FreezeResult)
    if result.ok and result.plan is not None:
        print(
            f"{result.target}: frozen as {result.name}: document {result.plan.document_path}, {result.unit} "
            f"{result.unit_file_state}, snapshot {result.snapshot_path}",
            file=out,
        )
        return
    if result.state == "refused" and result.plan is not None:
        print(
            f"{result.target}: not frozen: refused for the {len(result.plan.refusals)} reason(s) above; nothing was "
            "written (--force REASON freezes anyway and records the reason)",
            file=out,
        )
        return
    print(f"{result.target}: not frozen ({result.state}): {result.error}", file=out)


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """`opsconsole freeze`: exit 0 frozen, 1 refused/failed/not confirmed, 2 usage."""
    from console.core.snapshot import FreezeRequest

    verb = HostVerb(
        "freeze",
        args,
        {"ok": False, "target": args.target, "name": args.name},
        lambda exc: f"{said(exc)}; nothing was written",
        stdin=stdin or sys.stdin,
        stdout=stdout or sys.stdout,
    )
    request = FreezeRequest(args.name, args.note or "", args.doc, args.force)
    return run_on_host_or_group(verb, freeze_main, _plan_freezes, check=request.checked, group_needs_rolling=False,
                                deployment_main=_freeze_deployment)  # fmt: skip


async def _freeze_deployment(verb: HostVerb) -> int:
    """Every member frozen as NAME.MEMBER, the set's index and one document for the deployment
    (console.core.snapshot.plan_deployment_freeze); a refusal on any member freezes none."""
    from console.core.deployment import load_deployment
    from console.core.snapshot import FreezeRequest, plan_deployment_freeze
    from console.core.status import open_members
    from console.host.base import HostError

    args = verb.args
    workspace = workspace_of(args)
    deployment = load_deployment(args.target, workspace.profiles, ssh_config=args.ssh_config)
    verb.failure = {"ok": False, "deployment": deployment.name, "name": args.name}
    request = FreezeRequest(args.name, args.note or "", args.doc, args.force).checked()
    async with open_members(deployment, workspace, ssh_config=args.ssh_config) as opened:
        unreachable = [f"{n}: {e}" for n, e in opened.items() if isinstance(e, HostError)]
        if unreachable:
            raise HostError(f"{deployment.name}: {'; '.join(unreachable)}; nothing was written")
        sessions = {n: s for n, s in opened.items() if not isinstance(s, HostError)}
        pending = await plan_deployment_freeze(deployment, sessions, request, workspace)
        if not verb.json:
            for name, member in pending.pendings.items():
                print(f"== {name}", file=verb.human)
                render_plan(member.plan, verb.human)
        if pending.refusals:
            result = await pending.abort()
        else:
            answer = verb.ask(f"Freeze {deployment.name} as {args.name}: each member's document written, its unit "
                              "enabled, its snapshot kept, and the deployment's document?")  # fmt: skip
            if answer is Answer.YES:
                result = await pending.execute(FreezeProgress(verb.human) if verb.shows_progress else ignore)
            else:
                result = await pending.abort(verb.cannot_ask if answer is Answer.NO_TERMINAL else "not confirmed")

    def render(out: TextIO) -> None:
        if result.ok:
            print(f"{deployment.name}: frozen as {args.name}: {', '.join(m.name for m in result.members.values())}; "
                  f"set {result.set_path}, document {result.document_path}", file=out)  # fmt: skip
        else:
            print(f"{deployment.name}: not frozen ({result.state}): {result.error}", file=out)

    verb.report(result.to_json, render)
    return 0 if result.ok else 1


def _plan_freezes(verb: HostVerb) -> PlanFor:
    """Each host's freeze as NAME.HOST, the same note, document template and --force reason."""
    from console.core.apply import default_owner
    from console.core.roll import freeze_planner

    args = verb.args
    owner = default_owner(hints.FREEZE.line(HOST=args.target, NAME=args.name))
    return freeze_planner(args.name, note=args.note or "", document=args.doc, force=args.force, owner=owner)
