"""`opsconsole apply|restart DEPLOYMENT ...`: a deployment changed or restarted as one (console.core.roll's
deployment change), rendered: one diff per member, what must match across them, the restart order, one question,
then the order's steps as they run (each member's phases prefixed with its name) and the outcome.

`--json` prints one object (docs/deployments.md): ok, deployment, kind, operation, state (verified | unchanged |
refused | aborted | write_failed | healthy_on_old | rollback_failed | failed), sglang_version, version_source, order
[{step, members, why}], downtime (whether the order stops the deployment serving), notes, checks [{level, code,
message, members}], members {name: {name, host, unit, role, rank?, outcome, detail, changed, diff, report, backup,
starts, main_pid_before, main_pid_after, phases, journal_excerpt, verified, apply?}}, failed_member, rolled_back,
downtime_s, error, started, finished. Exit 0 verified (or nothing to change), 1 otherwise, 2 usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from console.cli.apply_lines import ApplyProgress, render_plan
from console.cli.common import Answer, HostVerb, HumanProgress, ignore, interruptibly, workspace_of
from console.core.events import Notice
from console.errors import UsageError
from console.host.base import HostError

if TYPE_CHECKING:
    from console.core.roll import DeploymentChange, DeploymentEvent, DeploymentResult


class _MemberProgress(ApplyProgress):
    def __init__(self, out: TextIO, member: str) -> None:
        super().__init__(out)
        self.member = member

    def say(self, text: str) -> None:
        super().say(f"{self.member}: {text}")


class DeploymentProgress(HumanProgress["DeploymentEvent"]):
    """The order's steps as they begin and end, each member's start (its phases, its failure lines) under its name."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(out)
        self._members: dict[str, _MemberProgress] = {}

    def show(self, event: DeploymentEvent) -> None:
        from console.core.roll import MemberEvent, StepEvent

        if isinstance(event, StepEvent):
            back = "rollback: " if event.rollback else ""
            members = ", ".join(event.step.members)
            step = event.step.kind.replace("_", " ")
            if event.state == "begun":
                self.say(f"{back}{step} {members} ...")
            else:
                self.say(f"{back}{step} {members}: {'' if event.state == 'done' else 'FAILED: '}{event.detail}")
        elif isinstance(event, MemberEvent):
            progress = self._members.setdefault(event.member, _MemberProgress(self.out, event.member))
            progress._stamp = self._stamp
            progress.show(event.event)
        elif isinstance(event, Notice):
            self.say(f"{event.level}: {event.message}")


def render_deployment_plan(change: DeploymentChange, out: TextIO) -> None:
    d = change.deployment
    print(f"{d.name}: {d.kind}, {len(d.members)} members, SGLang {change.result.sglang_version}", file=out)
    for member in change.members:
        m = member.member
        role = f"rank {m.rank}" if m.rank is not None else m.role
        print(f"== {m.name} ({m.host}, {role}, {m.unit})", file=out)
        render_plan(member.plan, out)
    for check in change.result.checks:
        print(f"{check.level} [{check.code}]: {check.message}", file=out)
    for note in change.result.notes:
        print(f"note: {note}", file=out)
    if change.needs_confirmation:
        print("restart order:", file=out)
        for step in change.order.steps:
            print(f"  {step.describe()}", file=out)


def render_deployment_result(result: DeploymentResult, out: TextIO) -> None:
    for member in result.members:
        line = f"  {member.name}: {member.outcome.replace('_', ' ')}"
        if member.pid_before is not None or member.pid_after is not None:
            line += f" (pid {member.pid_before} -> {member.pid_after}, started {member.starts}x)"
        print(line, file=out)
        if member.verification is not None:
            for value in member.verification.values:
                print(f"    {value.dest} = {value.actual!r} [{value.status.replace('_', ' ')}]", file=out)
    if result.downtime_s is not None:
        print(f"  down {result.downtime_s:g} s (rank 0 stopped -> rank 0 ready)", file=out)
    state = result.state.replace("_", " ")
    print(f"{result.deployment.name}: {state}" + (f": {result.error}" if result.error else ""), file=out)


async def change_deployment(verb: HostVerb, edits: Any) -> int:
    """apply (edits, or a function of the version) or restart (None) of the deployment verb.args.target."""
    from console.core.apply import default_owner
    from console.core.roll import plan_deployment_change

    args = verb.args

    async def plan(deployment: Any, sessions: Any) -> tuple[DeploymentChange, list[str]]:
        change = await plan_deployment_change(deployment, sessions, edits, owner=default_owner(),
                                              only=getattr(args, "only", ()) or (), timeout_s=args.timeout)  # fmt: skip
        return change, []

    return await _run_change(verb, plan)


async def restore_deployment(verb: HostVerb) -> int:
    """`restore DEPLOYMENT NAME`: every member back to its snapshot of the set NAME, through the deployment's change
    (checked across members first, restarted in its order, rolled back as one)."""
    from console import hints
    from console.core.apply import default_owner
    from console.core.roll import plan_deployment_restore

    args = verb.args
    workspace = workspace_of(args)

    owner = default_owner(hints.verb("restore"))

    async def plan(deployment: Any, sessions: Any) -> tuple[DeploymentChange, list[str]]:
        return await plan_deployment_restore(deployment, sessions, args.snapshot, workspace, owner=owner,
                                             timeout_s=args.timeout)  # fmt: skip

    return await _run_change(verb, plan, snapshot=args.snapshot)


async def _run_change(verb: HostVerb, plan: Any, *, snapshot: str | None = None) -> int:
    from console.core.deployment import load_deployment
    from console.core.status import open_members

    args = verb.args
    workspace = workspace_of(args)
    deployment = load_deployment(args.target, workspace.profiles, ssh_config=args.ssh_config)
    verb.failure = {"ok": False, "deployment": deployment.name, "kind": deployment.kind, "operation": verb.name}
    if snapshot is not None:
        verb.failure["snapshot"] = snapshot
    async with open_members(deployment, workspace, ssh_config=args.ssh_config) as sessions:
        unreachable = [
            f"{deployment.member(n).describe()}: {e}" for n, e in sessions.items() if isinstance(e, HostError)
        ]
        if unreachable:
            raise HostError(f"{deployment.name}: {'; '.join(unreachable)}; nothing was changed on any member")
        opened = {n: s for n, s in sessions.items() if not isinstance(s, HostError)}
        change, notes = await plan(deployment, opened)
        async with change:
            if not verb.json:
                if snapshot is not None:
                    print(f"Restore snapshot set {snapshot} on {deployment.name}: every member back to its snapshot",
                          file=verb.human)  # fmt: skip
                for note in notes:
                    print(f"  note: {note}", file=verb.human)
                render_deployment_plan(change, verb.human)
            result = await _confirm_and_execute(change, verb)
    extra = {"snapshot": snapshot, "restore_notes": notes} if snapshot is not None else {}
    verb.report(lambda: {**result.to_json(), **extra}, lambda out: render_deployment_result(result, out))
    return result.exit_code


async def _confirm_and_execute(change: DeploymentChange, verb: HostVerb) -> DeploymentResult:
    if change.needs_confirmation:
        members = ", ".join(m.name for m in change.members if m.restart_only or m.plan.changed)
        what = {"restart": "restart", "restore": "restore these units and restart"}.get(
            change.operation, "write these units and restart"
        )
        answer = verb.ask(f"{what.capitalize()} {change.deployment.name} ({members}) in this order?")
        if answer is Answer.NO_TERMINAL:
            return await change.abort(verb.cannot_ask)
        if answer is Answer.NO:
            return await change.abort("not confirmed; nothing was changed")
    progress = DeploymentProgress(verb.human) if verb.shows_progress else ignore
    result, _interrupted = await interruptibly(change.execute(on_event=progress), change.request_abort)
    return result


def front_door_of(args: Any) -> Any:
    """TARGET for a verb that reads one server and changes nothing (predict): a host as it is, a multi-node deployment
    its rank 0 (the front door, whose records a benchmark of the deployment keeps). A PD deployment has no one server
    at its front door: predict reads its records through smg itself (console/cli/predict.py)."""
    from console.core.deployment import is_deployment, load_deployment

    profiles = workspace_of(args).profiles
    if not args.target or not is_deployment(args.target, profiles):
        return args.target
    deployment = load_deployment(args.target, profiles, ssh_config=args.ssh_config)
    front = deployment.front_door
    if front is None:
        raise UsageError(f"{deployment.name} has no one server at its front door: name it to predict, not a member")
    return front.target
