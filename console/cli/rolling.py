"""`opsconsole apply|restart|restore @GROUP ... --rolling [--canary N] [--wave N|P%] [--max-failures N]`: the
core's rolling change (console.core.rolling), rendered.

The group comes from profiles/groups.toml (console.fleet.groups); its `router`, when it names one, makes the roll
router-aware. Every host is planned first (nothing changes if any host is refused); one question for the whole
roll (--yes skips it); then the canary, then the waves. Ctrl-C between hosts stops cleanly; during a host it rolls
that host back as a single apply does (a second Ctrl-C leaves at once).

`--json` prints one object: ok, group, operation, canary, wave, max_failures, stopped (why the roll stopped, or
null), refusals, hosts [{host, outcome (done | unchanged | rolled_back | failed | not_started), detail, batch,
started, finished, seconds, worker_url, router (what was done there, in order), result (that host's apply --json
object)}], router, router_before / router_after ([{url, id, healthy}]), router_whole, started, finished, seconds.
Exit 0 every host done, 1 a host failed / the roll stopped / refused / locked, 2 usage.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TextIO

from console.cli.apply import ApplyProgress, render_plan
from console.cli.common import Answer, HostVerb, HumanProgress, interruptibly, workspace_of
from console.core.events import Notice
from console.core.rolling import (
    BatchStarted,
    HostChange,
    HostFinished,
    HostProgress,
    HostStarted,
    PendingRoll,
    RollEvent,
    RollReport,
    RollStopped,
    RouterStep,
)
from console.core.rolling_plan import RollSpec
from console.core.session import Session

OPERATIONS = ("apply", "restart", "restore")


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
            progress = self._hosts.get(event.host)
            if progress is None:
                progress = self._hosts[event.host] = _HostProgress(self.out, event.host)
            progress(event.event)
        elif isinstance(event, RouterStep):
            self.say(f"{event.host}: router: {event.action.replace('_', ' ')}: {event.detail}")
        elif isinstance(event, HostFinished):
            detail = f" ({event.detail})" if event.detail else ""
            self.say(f"{event.host}: {event.outcome.value.replace('_', ' ')}{detail}")
        elif isinstance(event, RollStopped):
            self.say(f"roll stopped: {event.reason}")
        elif isinstance(event, Notice):
            self.say(f"{event.level}: {event.message}")


def render_roll_plan(roll: PendingRoll, operation: str, out: TextIO) -> None:
    from console.core.rolling import ApplyChange

    report = roll.report
    print(f"Rolling {operation} over @{report.group} ({len(roll.hosts)} hosts)", file=out)
    for batch in roll.batches:
        print(f"  {batch.kind} {batch.index}: {', '.join(batch.hosts)}", file=out)
    if report.router:
        urls = ", ".join(h.worker_url or "?" for h in roll.hosts)
        print(f"  router {report.router}: each worker out before its restart, back after ({urls})", file=out)
    shown: set[str] = set()
    for host in roll.hosts:
        change = host.change
        if isinstance(change, ApplyChange) and not change.pending.restart_only:
            key = change.pending.plan.diff
            if key in shown:
                print(f"{host.label}: the same change", file=out)
                continue
            shown.add(key)
            print(f"{host.label}:", file=out)
            render_plan(change.pending.plan, out)
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
    reason = report.ledger.stop_reason()
    took = f" in {report.seconds:.1f} s" if report.seconds is not None else ""
    if report.ok:
        print(f"@{report.group}: rolling {report.operation} done{took}", file=out)
    else:
        print(f"@{report.group}: rolling {report.operation} stopped{took}: {reason or 'see the hosts above'}", file=out)


PlanFor = Callable[[Session], Awaitable[HostChange]]


async def rolling_main(verb: HostVerb, operation: str, plan_for: Callable[[HostVerb], PlanFor], spec: RollSpec) -> int:
    from console.core.apply import default_owner
    from console.core.rolling import group_lock, plan_roll
    from console.core.session import open_session
    from console.fleet.groups import resolve_group_targets
    from console.sglang.router import RouterClient

    args = verb.args
    workspace = workspace_of(args)
    members, groups = resolve_group_targets([args.target], workspace.profiles)
    group = groups[args.target[1:]]
    owner = default_owner(f"opsconsole {operation} --rolling @{group.name}")
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(group_lock(workspace, group.name, owner))
        sessions = [
            await stack.enter_async_context(open_session(m, workspace, ssh_config=args.ssh_config)) for m in members
        ]
        router = await stack.enter_async_context(RouterClient(group.router)) if group.router else None
        roll = await plan_roll(
            group.name,
            operation,
            sessions,
            plan_for(verb),
            spec=spec,
            router=router,
            drain_timeout_s=args.drain_timeout,
        )
        if not verb.json:
            render_roll_plan(roll, operation, verb.human)
        report: RollReport
        if roll.refused:
            report = await roll.abort("refused: " + "; ".join(roll.report.refusals))
        else:
            answer = verb.ask(f"Roll this {operation} over the {len(sessions)} hosts of @{group.name}?")
            if answer is Answer.NO_TERMINAL:
                report = await roll.abort(verb.cannot_ask)
            elif answer is Answer.NO:
                report = await roll.abort("not confirmed; nothing was changed")
            else:
                progress = (lambda _e: None) if verb.json else RollProgress(verb.human)
                report, _interrupted = await interruptibly(roll.execute(on_event=progress), roll.request_abort)
    verb.report(report.to_json, lambda out: render_report(report, out))
    return report.exit_code


def failure_json(args: argparse.Namespace, operation: str) -> Callable[[str, str], dict[str, Any]]:
    def make(state: str, message: str) -> dict[str, Any]:
        return {"ok": False, "group": args.target.lstrip("@"), "operation": operation, "state": state,
                "error": message, "hosts": []}  # fmt: skip

    return make
