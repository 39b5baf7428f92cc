"""apply's plan, progress and result as lines, and its confirmation before it runs: shared by the verbs built on
an apply (apply, restart, restore) and by a roll of them (console/cli/rolling.py), which prefixes each host's lines."""

from __future__ import annotations

from typing import TextIO

from console.cli.common import Answer, HostVerb, HumanProgress, ignore, interruptibly
from console.core.apply import ApplyResult, PendingApply, cost_text
from console.core.change import ApplyState, Plan
from console.core.events import ApplyEvent, LogLine, Notice, PhaseChanged, Reconnecting, StepChanged


class ApplyProgress(HumanProgress[ApplyEvent]):
    """The apply's events as lines a terminal (or a log) can follow."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(out)
        self._last_percent: dict[str, int] = {}

    def show(self, event: ApplyEvent) -> None:
        if isinstance(event, StepChanged):
            detail = f": {event.detail}" if event.detail else ""
            self.say(f"{event.state.value.replace('_', ' ')}{detail}")
        elif isinstance(event, PhaseChanged):
            self._phase(event)
        elif isinstance(event, Reconnecting):
            self.say(f"connection lost during {event.operation}; reconnecting ({event.error})")
        elif isinstance(event, Notice):
            self.say(f"{event.level}: {event.message}")
        elif isinstance(event, LogLine):
            pass  # the phases say where the start is; failure lines are printed as they come

    def _phase(self, event: PhaseChanged) -> None:
        overall = round(100 * event.progress)
        current = event.current
        if event.kind == "started":
            self.say(f"  {current.label if current else event.phase} ... ({overall}% of startup)")
        elif event.kind == "progress" and current is not None:
            step = int(current.progress * 4) * 25  # every 25 %: enough to see it move
            if step != self._last_percent.get(current.name):
                self._last_percent[current.name] = step
                self.say(f"  {current.label} {step}%")
        elif event.kind == "ready":
            self.say(f"  ready: {event.line.strip()}")
        elif event.kind == "failure":
            self.say(f"  ! {event.line.rstrip()}")


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


async def confirm_and_execute(pending: PendingApply, verb: HostVerb) -> ApplyResult:
    """Ask (unless --yes; never without a terminal), then execute with progress (none with --json) and Ctrl-C
    rolling back; a refusal ends the pending apply with the reason. For apply and the verbs built on it."""
    if pending.needs_confirmation:
        label, unit = pending.session.label, pending.session.service.unit
        cost = cost_text(pending.restart_cost, label)  # what the restart will cost, said before it starts
        question = (
            f"Restart {unit} on {label}?" if pending.restart_only else f"Write this unit to {label} and restart {unit}?"
        )
        if verb.json:  # the one JSON object carries it (restart_cost); a person asked on the terminal reads it here
            question = f"{cost}\n{question}"
        else:
            print(cost, file=verb.human)
        answer = verb.ask(question)
        if answer is Answer.NO_TERMINAL:
            await pending.abort(verb.cannot_ask)
        elif answer is Answer.NO:
            await pending.abort("not confirmed; nothing was changed")
    if pending.result.rollout.finished:
        return pending.result
    progress = ApplyProgress(verb.human) if verb.shows_progress else ignore
    result, _interrupted = await interruptibly(pending.execute(on_event=progress), pending.request_abort)
    return result
