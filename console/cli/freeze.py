"""`opsconsole freeze TARGET --name NAME [--note TEXT] [--doc PATH] [--force REASON] [--yes] [--json]`.

The core's plan / execute (console.core.freeze), rendered. `--json` prints exactly one object:

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
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

from console.cli.common import is_tty, run_verb, workspace_of
from console.errors import ExitCode, UsageError


def render_plan(plan: object, out: TextIO) -> None:
    """What the freeze will write, for a person."""
    from console.core.freeze_plan import FreezePlan
    from console.core.snapshot import setup_text

    assert isinstance(plan, FreezePlan)
    snap = plan.snapshot
    host = snap.host
    print(f"Freeze {host.label} ({host.unit}) as production snapshot {snap.name}", file=out)
    print(f"  SGLang {snap.server.version or '?'}, {snap.server.resolved.get('model_path', '?')}", file=out)
    print(f"  {setup_text(snap.server.resolved, snap.server.version)}", file=out)
    levels = sorted({str(e.get("max_concurrency") or e.get("request_rate")) for e in snap.benchmarks})
    bench = f"{len(snap.benchmarks)} records at {len(levels)} levels" if snap.benchmarks else "none in logs/"
    print(f"  benchmarks of this setup: {bench}", file=out)
    if snap.previous:
        print(f"  previous production: {snap.previous} ({len(snap.comparison)} compared figures)", file=out)
    lines = plan.document.count("\n") + 1
    print(f"  document: {host.hostname or host.label}:{plan.document_path} ({lines} lines)", file=out)
    if plan.unit_changed:
        print("  unit: adds [Install] WantedBy= so that it can be enabled:", file=out)
        print(plan.unit_diff, end="", file=out)
    else:
        print("  unit: unchanged (it is the running setup); it will be enabled", file=out)
    for warning in snap.warnings:
        print(f"  note: {warning}", file=out)
    if plan.refusals:
        title = f"FORCED ({plan.request.force}) despite:" if plan.forced else "REFUSED: nothing will be written:"
        print(title, file=out)
        for refusal in plan.refusals:
            print(f"  [{refusal.code}] {refusal.message}", file=out)


def _print_step(out: TextIO) -> Callable[[object], None]:
    def show(event: object) -> None:
        from console.core.events import Notice
        from console.core.freeze import FreezeStep

        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        if isinstance(event, FreezeStep):
            detail = f": {event.detail}" if event.detail else ""
            print(f"[{stamp}] {event.step.replace('_', ' ')}{detail}", file=out, flush=True)
        elif isinstance(event, Notice):
            print(f"[{stamp}] {event.level}: {event.message}", file=out, flush=True)

    return show


def _confirm(stdin: TextIO, stderr: TextIO, question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=stderr, flush=True)
    return stdin.readline().strip().lower() in {"y", "yes"}


async def freeze_main(args: argparse.Namespace, *, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from console.core.freeze import FreezeResult, plan_freeze
    from console.core.freeze_plan import FreezeRequest
    from console.core.session import open_session
    from console.host.base import HostError, UnitLocked

    human = stderr if args.json else stdout
    request = FreezeRequest(args.name, args.note or "", args.doc, args.force)
    result: FreezeResult
    try:
        async with (
            open_session(args.target, workspace_of(args), ssh_config=args.ssh_config) as session,
            await plan_freeze(session, request) as pending,
        ):
            plan = pending.plan
            if not args.json:
                render_plan(plan, human)
            sink = _ignore if args.json else _print_step(human)
            if plan.refused:
                result = await pending.abort()
            elif args.yes:
                result = await pending.execute(sink)
            elif not is_tty(stdin):
                result = await pending.abort(
                    "stdin is not a terminal, so freeze cannot ask for confirmation; re-run with --yes"
                )
            else:
                question = (
                    f"Write the document to {session.label}:{plan.document_path}, enable {session.service.unit} "
                    f"and keep snapshot {plan.snapshot.name}?"
                )
                if _confirm(stdin, stderr, question):
                    result = await pending.execute(sink)
                else:
                    result = await pending.abort("not confirmed; nothing was written")
    except UnitLocked as exc:
        return _early_failure(args, stdout, stderr, str(exc), state="locked")
    except FileExistsError as exc:
        return _early_failure(args, stdout, stderr, str(exc))
    except (HostError, ValueError) as exc:  # ValueError: UnitError (not an SGLang unit)
        if isinstance(exc, UsageError):
            raise
        return _early_failure(args, stdout, stderr, f"{exc}; nothing was written")
    if args.json:
        print(json.dumps(result.to_json(), default=str), file=stdout)
    else:
        _render_result(result, human)
    return result.exit_code


def _ignore(_event: object) -> None:
    pass


def _render_result(result: object, out: TextIO) -> None:
    from console.core.freeze import FreezeResult

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


def _early_failure(
    args: argparse.Namespace, stdout: TextIO, stderr: TextIO, message: str, *, state: str = "error"
) -> int:
    print(f"opsconsole freeze: {message}", file=stderr)
    if args.json:
        doc = {"ok": False, "target": args.target, "name": args.name, "state": state, "error": message}
        print(json.dumps(doc), file=stdout)
    return ExitCode.FAILED


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """`opsconsole freeze`: exit 0 frozen, 1 refused/failed/not confirmed, 2 usage."""
    from console.core.freeze_plan import FreezeRequest

    try:
        FreezeRequest(args.name, args.note or "", args.doc, args.force).checked()
    except UsageError as exc:
        print(f"opsconsole freeze: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    streams = {"stdin": stdin or sys.stdin, "stdout": stdout or sys.stdout, "stderr": sys.stderr}
    return run_verb("freeze", lambda: freeze_main(args, **streams))
