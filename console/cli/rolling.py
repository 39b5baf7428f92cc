"""`opsconsole apply|restart|restore @GROUP ... --rolling [--canary N] [--wave N|P%] [--max-failures N]
[--gate bench [--gate-concurrency N] [--gate-max-regression PCT]]` and `opsconsole freeze @GROUP --name NAME`: the
core's rolling change (console.core.roll), rendered.

`--gate bench` (apply, restore): the canary's baseline (its newest benchmark record at the level) is found before
anything is contacted (none: a usage error naming the bench command to run first); after the canary is verified it
is benchmarked the same way and judged (console.core.roll.gate_verdict); a regression halts the roll and
rolls the canary back. A group freeze freezes every host as NAME.HOST and keeps the set's index
(console.core.snapshot.sets).

The group comes from profiles/groups.toml (console.fleet.groups); its `router`, when it names one, makes the roll
router-aware. Every host is planned first (nothing changes if any host is refused); one question for the whole
roll (--yes skips it); then the canary, then the waves. Ctrl-C between hosts stops cleanly; during a host it rolls
that host back as a single apply does (a second Ctrl-C leaves at once).

`--json` prints one object: ok, group, operation, canary, wave, max_failures, stopped (why the roll stopped, or
null), refusals, hosts [{host, outcome (done | unchanged | rolled_back | failed | not_started), detail, batch,
started, finished, seconds, worker_url, router (what was done there, in order), result (that host's apply --json
object; a freeze's for a group freeze), gate (a canary with --gate bench: passed, message, level, metric, baseline,
value (medians), delta_pct, within_noise, values (the canary's runs), baseline_run {run_id, label, started_at,
values, requests, repeats, workload}, run_id)}], router, router_api (smg's release, "smg-1.13.0", or "sglang-router
0.3"), router_before / router_after ([{url, id, healthy, worker_type, bootstrap_port, status}]), router_whole, gate
({kind, concurrency, max_regression_pct, baselines} or null), snapshot_set (a group freeze: {name, group,
frozen_at, complete, members {host: snapshot}, not_frozen {host: why}, path} or null), started, finished, seconds.
Exit 0 every host done, 1 a host failed / the roll stopped / refused / locked, 2 usage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from console.cli.apply_lines import ApplyProgress, render_plan
from console.cli.common import Answer, HostVerb, HumanProgress, VerbMain, interruptibly, workspace_of
from console.cli.freeze_lines import render_plan as render_freeze_plan
from console.cli.freeze_lines import step_line as freeze_step_line
from console.cli.rolling_options import check_rolling
from console.core.apply import cost_text
from console.core.events import Notice
from console.core.roll import (
    BatchStarted,
    GateJudged,
    GateStarted,
    HostChange,
    HostEvent,
    HostFinished,
    HostProgress,
    HostStarted,
    PendingRoll,
    RollEvent,
    RollReport,
    RollSpec,
    RollStopped,
    RouterStep,
)
from console.core.session import Session

OPERATIONS = ("apply", "restart", "restore", "freeze")


class _HostProgress(ApplyProgress):
    """One host's apply events, each line prefixed with the host."""

    def __init__(self, out: TextIO, host: str) -> None:
        super().__init__(out)
        self.host = host

    def say(self, text: str) -> None:
        super().say(f"{self.host}: {text}")


class RollProgress(HumanProgress[RollEvent]):
    """The roll's events as lines: batches, each host's steps (prefixed with the host), the router's steps."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(out)
        self._hosts: dict[str, _HostProgress] = {}

    def show(self, event: RollEvent) -> None:
        if isinstance(event, BatchStarted):
            self.say(f"== {event.batch.kind} {event.batch.index}: {', '.join(event.batch.hosts)}")
        elif isinstance(event, HostStarted):
            self.say(f"{event.host}: started")
        elif isinstance(event, HostProgress):
            self._host_event(event.host, event.event)
        elif isinstance(event, RouterStep):
            self.say(f"{event.host}: router: {event.action.replace('_', ' ')}: {event.detail}")
        elif isinstance(event, GateStarted):
            base = event.baseline
            self.say(
                f"{event.host}: gate: benchmarking at {base.level} ({base.requests} requests x{base.repeats}) against "
                f"{base.label} of {base.started_at:%Y-%m-%d %H:%M} UTC"
            )
        elif isinstance(event, GateJudged):
            verdict = "passed" if event.verdict.passed else "FAILED"
            self.say(f"{event.host}: gate {verdict}: {event.verdict.message}")
        elif isinstance(event, HostFinished):
            detail = f" ({event.detail})" if event.detail else ""
            self.say(f"{event.host}: {event.outcome.value.replace('_', ' ')}{detail}")
        elif isinstance(event, RollStopped):
            self.say(f"roll stopped: {event.reason}")
        elif isinstance(event, Notice):
            self.say(f"{event.level}: {event.message}")

    def _host_event(self, host: str, event: HostEvent) -> None:
        """One host's own event: a freeze's step as a line, an apply's through the apply's own renderer."""
        freeze_line = freeze_step_line(event)
        if freeze_line is not None:
            self.say(f"{host}: {freeze_line}")
            return
        progress = self._hosts.get(host)
        if progress is None:
            progress = self._hosts[host] = _HostProgress(self.out, host)
        progress(event)  # type: ignore[arg-type]  # not a FreezeStep: one of the apply's events


def render_roll_plan(roll: PendingRoll, operation: str, out: TextIO) -> None:
    from console.core.roll import ApplyChange, FreezeChange

    report = roll.report
    print(f"Rolling {operation} over @{report.group} ({len(roll.hosts)} hosts)", file=out)
    for batch in roll.batches:
        print(f"  {batch.kind} {batch.index}: {', '.join(batch.hosts)}", file=out)
    if report.router:
        urls = ", ".join(h.worker_url or "?" for h in roll.hosts)
        which = f" ({report.router_api})" if report.router_api else ""
        print(f"  router {report.router}{which}: each worker out before its restart, back after ({urls})", file=out)
    gate = report.gate
    if gate is not None:
        for label, base in gate["baselines"].items():
            values = ", ".join(f"{v:.1f}" for v in base["values"])
            print(f"  gate: {label} benchmarked after its change at {base['level']}, {base['requests']} requests "
                  f"x{base['repeats']}, against {base['label']} ({values} tok/s); a loss beyond "
                  f"{gate['max_regression_pct']:g}% and the noise halts the roll and rolls {label} back",
                  file=out)  # fmt: skip
    shown: set[str] = set()
    for host in roll.hosts:
        change = host.change
        if isinstance(change, FreezeChange):
            render_freeze_plan(change.pending.plan, out)
            continue
        if isinstance(change, ApplyChange) and not change.pending.restart_only:
            key = change.pending.plan.diff
            if key in shown:
                print(f"{host.label}: the same change", file=out)
                continue
            shown.add(key)
            print(f"{host.label}:", file=out)
            render_plan(change.pending.plan, out)
    restarting = [h.change.pending for h in roll.hosts if isinstance(h.change, ApplyChange)]
    for pending in restarting:  # each member's restart, one after the other: what each costs, said before the roll
        print(f"  {cost_text(pending.restart_cost, pending.session.label)}", file=out)
    for refusal in report.refusals:
        print(f"REFUSED: {refusal}", file=out)


def render_report(report: RollReport, out: TextIO) -> None:
    for label in report.ledger.hosts:
        record = report.ledger.records[label]
        took = f" in {record.seconds:.1f} s" if record.seconds is not None else ""
        detail = f": {record.detail}" if record.detail else ""
        print(f"  {label}: {record.outcome.value.replace('_', ' ')}{took}{detail}", file=out)
    if report.router is not None:
        after = report.router_after
        listed = ", ".join(w.url for w in after) if after is not None else "unknown"
        whole = {True: "whole", False: "NOT whole", None: "unknown"}[report.router_whole]
        print(f"router {report.router}: worker list {whole} ({listed})", file=out)
    kept = report.snapshot_set
    if kept is not None:
        members = ", ".join(kept["members"].values()) or "none"
        whole = "complete" if kept["complete"] else f"INCOMPLETE (not frozen: {', '.join(kept['not_frozen'])})"
        print(f"snapshot set {kept['name']}: {whole}; members {members}; index {kept['path']}", file=out)
    reason = report.ledger.stop_reason()
    took = f" in {report.seconds:.1f} s" if report.seconds is not None else ""
    if report.ok:
        print(f"@{report.group}: rolling {report.operation} done{took}", file=out)
    else:
        print(f"@{report.group}: rolling {report.operation} stopped{took}: {reason or 'see the hosts above'}", file=out)


PlanFor = Callable[[Session], Awaitable[HostChange]]
# A verb's planner of one host's change, from its arguments (the same for every host of the group).
Planner = Callable[[HostVerb], PlanFor]


def run_on_host_or_group(
    verb: HostVerb,
    host_main: VerbMain,
    planner: Planner,
    *,
    check: Callable[[], object] = lambda: None,
    group_needs_rolling: bool = True,
    deployment_main: VerbMain | None = None,
) -> int:
    """One run of apply, restart, restore or freeze: check() and the roll's options (usage errors, before anything
    is contacted), then host_main on one host, or the roll of @GROUP with each host's change from planner (its
    --json object, also for a run that did nothing, is the roll's). group_needs_rolling=False: freeze, whose group
    needs no --rolling (console/cli/rolling_options.py). deployment_main: a TARGET that names a deployment
    (profiles/deployments/NAME.toml) is changed as one by it (console/cli/deployment.py)."""
    specs: list[RollSpec | None] = []

    def checked() -> None:
        check()
        specs.append(check_rolling(verb.args, group_needs_rolling=group_needs_rolling))

    async def main(run: HostVerb) -> int:
        spec = specs[0]
        if spec is None:
            if deployment_main is not None:
                from console.core.deployment import is_deployment

                if is_deployment(run.args.target, workspace_of(run.args).profiles):
                    return await deployment_main(run)
            return await host_main(run)
        run.failure = {"ok": False, "group": run.args.target.lstrip("@"), "operation": run.name, "hosts": []}
        return await rolling_main(run, planner, spec)

    return verb.run(main, check=checked)


async def rolling_main(verb: HostVerb, plan_for: Planner, spec: RollSpec) -> int:
    from console.core.apply import default_owner
    from console.core.roll import RollRequest, plan_group_roll
    from console.core.session import open_session
    from console.fleet.groups import resolve_group_targets

    args, operation = verb.args, verb.name
    workspace = workspace_of(args)
    members, groups = resolve_group_targets([args.target], workspace.profiles)
    group = groups[args.target[1:]]
    request = RollRequest(
        group,
        tuple(members),
        operation,  # type: ignore[arg-type]  # one of OPERATIONS
        spec,
        owner=default_owner(f"opsconsole {operation} --rolling @{group.name}"),
        drain_timeout_s=args.drain_timeout,
        set_name=args.name if operation == "freeze" else None,
    )

    def open_host(label: str) -> Any:
        return open_session(label, workspace, ssh_config=args.ssh_config)

    # The gate's baselines and a freeze's names are checked before anything is contacted (a usage error, if any).
    roll = await plan_group_roll(workspace, request, plan_for(verb), open_host)
    if not verb.json:
        render_roll_plan(roll.plan, operation, verb.human)
    report: RollReport
    if roll.refused:
        report = await roll.abort("refused: " + "; ".join(roll.report.refusals))
    else:
        question = f"Roll this {operation} over the {len(members)} hosts of @{group.name}?"
        if operation == "freeze":
            question = f"Freeze the {len(members)} hosts of @{group.name} as snapshot set {args.name}?"
        answer = verb.ask(question)
        if answer is Answer.NO_TERMINAL:
            report = await roll.abort(verb.cannot_ask)
        elif answer is Answer.NO:
            report = await roll.abort("not confirmed; nothing was changed")
        else:
            progress = RollProgress(verb.human) if verb.shows_progress else (lambda _e: None)
            report, _interrupted = await interruptibly(roll.execute(on_event=progress), roll.request_abort)
    verb.report(report.to_json, lambda out: render_report(report, out))
    return report.exit_code
