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

Ctrl-C while the new unit starts rolls back (a second Ctrl-C abandons the rollback and leaves at once).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from console.cli.common import is_tty, run_verb, workspace_of
from console.core.apply import ApplyResult, PendingApply, flag_kinds, plan_apply
from console.core.events import ApplyEvent, LogLine, Notice, PhaseChanged, Reconnecting, StepChanged
from console.core.rollout import ApplyState, Plan, parse_edits
from console.core.session import open_session
from console.errors import ExitCode, UsageError
from console.host.base import HostError, UnitLocked


class HumanProgress:
    """Prints the apply's events as lines a terminal (or a log) can follow."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._last_percent: dict[str, int] = {}

    def __call__(self, event: ApplyEvent) -> None:
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        if isinstance(event, StepChanged):
            detail = f": {event.detail}" if event.detail else ""
            self._print(f"[{stamp}] {event.state.value.replace('_', ' ')}{detail}")
        elif isinstance(event, PhaseChanged):
            self._phase(stamp, event)
        elif isinstance(event, Reconnecting):
            self._print(f"[{stamp}] connection lost during {event.operation}; reconnecting ({event.error})")
        elif isinstance(event, Notice):
            self._print(f"[{stamp}] {event.level}: {event.message}")
        elif isinstance(event, LogLine):
            pass  # the phases say where the start is; failure lines are printed as they come

    def _phase(self, stamp: str, event: PhaseChanged) -> None:
        overall = round(100 * event.progress)
        current = event.current
        if event.kind == "started":
            self._print(f"[{stamp}]   {current.label if current else event.phase} ... ({overall}% of startup)")
        elif event.kind == "progress" and current is not None:
            step = int(current.progress * 4) * 25  # every 25 %: enough to see it move
            if step != self._last_percent.get(current.name):
                self._last_percent[current.name] = step
                self._print(f"[{stamp}]   {current.label} {step}%")
        elif event.kind == "ready":
            self._print(f"[{stamp}]   ready: {event.line.strip()}")
        elif event.kind == "failure":
            self._print(f"[{stamp}]   ! {event.line.rstrip()}")

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def render_plan(plan: Plan, out: TextIO) -> None:
    """The diff and the rule report, for a person."""
    report = plan.report
    source = {"server": "the running server", "profile": "the profile", "newest": "the newest supported"}
    print(f"SGLang {plan.sglang_version} (version from {source[plan.version_source]})", file=out)
    if plan.diff:
        print(plan.diff, end="", file=out)
    else:
        print("(the unit already has these settings)", file=out)
    for error in report.errors:
        print(f"error [{error.code}]: {error.message}", file=out)
    for warning in report.warnings:
        print(f"warning [{warning.code}]: {warning.message}", file=out)
    for adjustment in report.adjustments:
        print(
            f"adjusted by SGLang: {adjustment.flag} {adjustment.from_value!r} -> {adjustment.to_value!r} "
            f"({adjustment.reason})",
            file=out,
        )


def render_result(result: ApplyResult, out: TextIO) -> None:
    state = result.rollout.state
    if result.verification is not None:
        for value in result.verification.values:
            note = f" (adjusted by SGLang: {value.reason})" if value.status == "adjusted" and value.reason else ""
            if value.status == "secret":
                note = f" ({value.reason})"
            print(f"  {value.dest} = {value.actual!r} [{value.status.replace('_', ' ')}]{note}", file=out)
    if result.ok:
        print(f"{result.target}: {state.value.replace('_', ' ')}", file=out)
        return
    print(f"{result.target}: apply failed ({state.value.replace('_', ' ')}): {result.error}", file=out)
    if result.rollout.rolled_back:
        outcome = "healthy on the old unit" if state is ApplyState.HEALTHY_ON_OLD else "NOT healthy"
        print(f"rolled back to the previous unit; the service is {outcome}", file=out)
    for title, excerpt in (
        ("journal lines that explain it:", result.journal_excerpt()),
        ("why the old unit did not come back:", result.journal_excerpt(rollback=True)),
    ):
        if excerpt:
            print(title, file=out)
            for line in excerpt:
                print(f"  {line}", file=out)


def _confirm(stdin: TextIO, stderr: TextIO, question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=stderr, flush=True)
    answer = stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


def _check_args(args: argparse.Namespace) -> None:
    parse_edits(args.set, args.unset, args.env, args.unset_env)  # syntax only; the flags' kinds come later
    if not (args.set or args.unset or args.env or args.unset_env):
        raise UsageError("nothing to apply; give --set FLAG=VALUE, --unset FLAG, --env K=V or --unset-env K")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}")


async def _execute_interruptibly(pending: PendingApply, on_event: Any) -> ApplyResult:
    """Run the apply; the first Ctrl-C asks it to roll back (an intent it cannot miss), the second abandons."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(pending.execute(on_event=on_event))
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            pending.request_abort()
        else:
            task.cancel()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        return await task
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def confirm_and_execute(
    pending: PendingApply, verb: str, args: argparse.Namespace, *, stdin: TextIO, stderr: TextIO, human: TextIO
) -> ApplyResult:
    """Ask (unless --yes; never without a terminal), then execute with progress (none with --json) and Ctrl-C
    rolling back; a refusal ends the pending apply with the reason. For apply and the verbs built on it."""
    if pending.needs_confirmation and not args.yes:
        question = f"Write this unit to {pending.session.label} and restart {pending.session.service.unit}?"
        if not is_tty(stdin):
            await pending.abort(f"stdin is not a terminal, so {verb} cannot ask for confirmation; re-run with --yes")
        elif not _confirm(stdin, stderr, question):
            await pending.abort("not confirmed; nothing was changed")
    if pending.result.rollout.finished:
        return pending.result
    progress = None if args.json else HumanProgress(human)
    return await _execute_interruptibly(pending, progress or (lambda _event: None))


async def apply_main(args: argparse.Namespace, *, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    human = stderr if args.json else stdout
    try:
        async with open_session(args.target, workspace_of(args), ssh_config=args.ssh_config) as session:
            version, _source = await session.sglang_version()
            edits = parse_edits(args.set, args.unset, args.env, args.unset_env, flag_kind=flag_kinds(version))
            async with await plan_apply(session, edits, timeout_s=args.timeout) as pending:
                if not args.json:
                    render_plan(pending.plan, human)
                result = await confirm_and_execute(pending, "apply", args, stdin=stdin, stderr=stderr, human=human)
    except UnitLocked as exc:
        return _early_failure(args, stdout, stderr, str(exc), state="locked")
    except UsageError:
        raise
    except (HostError, ValueError) as exc:  # ValueError: UnitError (the unit is not an SGLang unit)
        suffix = "" if isinstance(exc, HostError) else "; the unit was not touched"
        return _early_failure(args, stdout, stderr, f"{exc}{suffix}")
    if args.json:
        print(json.dumps(result.to_json(), default=str), file=stdout)
    else:
        render_result(result, human)
    return result.rollout.exit_code


def _early_failure(
    args: argparse.Namespace, stdout: TextIO, stderr: TextIO, message: str, *, state: str = "error"
) -> int:
    """Nothing was changed: say why (with --json, still as the one JSON object)."""
    print(f"opsconsole apply: {message}", file=stderr)
    if args.json:
        doc = {"ok": False, "target": args.target, "state": state, "rolled_back": False, "error": message}
        print(json.dumps(doc), file=stdout)
    return ExitCode.FAILED


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """`opsconsole apply`: exit 0 applied and verified (or nothing to change), 1 refused/failed, 2 usage."""
    streams = {"stdin": stdin or sys.stdin, "stdout": stdout or sys.stdout, "stderr": sys.stderr}
    try:
        _check_args(args)
    except UsageError as exc:
        print(f"opsconsole apply: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    return run_verb("apply", lambda: apply_main(args, **streams))
