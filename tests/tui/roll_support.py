"""Scripted rolls for the console's rolling-change snapshots and Pilot tests that need no hosts: the core's own
PendingRoll (its order, its stops, its ledger) over scripted hosts' changes, each playing a fixed apply's steps and
ending as scripted, inside the core's GroupRoll; the roll's clock steps from NOW, so every time on screen is fixed.
The rolls over real hosts (demo hosts: the stand-in under the demo's service manager) are
tests/tui/test_rolling_overview.py's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from console.core.change import ApplyState
from console.core.events import EventSink, StepChanged
from console.core.roll import GroupRoll, HostEnded, HostOutcome, OpenHost, PendingRoll, PlanHost, RollHost, RollRequest
from console.tui.runners import RollPlanner
from console.workspace import Workspace
from tests.tui.support import NOW

FAILED_START = (
    "the service failed (result: exit-code): OSError: ./draft does not appear to have a file named config.json"
)
DONE_STEPS = (ApplyState.BACKED_UP, ApplyState.WRITTEN, ApplyState.DAEMON_RELOADED, ApplyState.RESTARTING,
              ApplyState.STARTING, ApplyState.HEALTHY, ApplyState.VERIFIED)  # fmt: skip
ROLLED_BACK_STEPS = (ApplyState.BACKED_UP, ApplyState.WRITTEN, ApplyState.DAEMON_RELOADED, ApplyState.RESTARTING,
                     ApplyState.STARTING, ApplyState.FAILED, ApplyState.ROLLING_BACK, ApplyState.RESTORED,
                     ApplyState.HEALTHY_ON_OLD)  # fmt: skip
RESTARTED_STEPS = (ApplyState.RESTARTING, ApplyState.STARTING, ApplyState.HEALTHY, ApplyState.VERIFIED)
RESTART_FAILED_STEPS = (ApplyState.RESTARTING, ApplyState.STARTING, ApplyState.RESTART_FAILED)


class SteppingClock:
    """NOW, then `step_s` later at every call: the roll's events get fixed, distinct times."""

    def __init__(self, step_s: float = 1.5) -> None:
        self.now = NOW
        self.step = timedelta(seconds=step_s)

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


@dataclass
class ScriptedChange:
    """One host's change in a roll: plays an apply's steps (a restart's when `restart_only`; times from `clock`) and
    ends as `outcome` (done, rolled back; a restart that fails is failed: it wrote nothing to roll back)."""

    label: str
    clock: Callable[[], datetime]
    outcome: HostOutcome = HostOutcome.DONE
    refusal: str | None = None
    restart_only: bool = False
    hold: asyncio.Event | None = None  # awaited once the host has started, like a start in progress
    ran: bool = False
    aborted: str | None = None
    abort_requested: bool = False

    @property
    def restarts(self) -> bool:
        return True

    async def run(self, on_event: EventSink[Any]) -> HostEnded:
        self.ran = True
        if self.hold is not None:
            await self.hold.wait()
        if self.abort_requested:  # Ctrl-C during the host: it rolls back, as a single apply does
            on_event(StepChanged(ApplyState.ROLLING_BACK, "", self.clock()))
            return HostEnded(HostOutcome.ROLLED_BACK, "interrupted: rolled back to the previous unit", {})
        done = self.outcome is HostOutcome.DONE
        if self.restart_only:
            steps = RESTARTED_STEPS if done else RESTART_FAILED_STEPS
        else:
            steps = DONE_STEPS if done else ROLLED_BACK_STEPS
        for state in steps:
            failed = state in (ApplyState.FAILED, ApplyState.RESTART_FAILED)
            on_event(StepChanged(state, FAILED_START if failed else "", self.clock()))
        if done:
            return HostEnded(self.outcome, "verified", {})
        if self.restart_only:
            return HostEnded(HostOutcome.FAILED, f"restart failed: {FAILED_START}", {})
        return HostEnded(self.outcome, f"healthy on old: {FAILED_START}", {})

    def request_abort(self) -> None:
        self.abort_requested = True

    async def abort(self, why: str) -> None:
        self.aborted = why


@dataclass
class ScriptedRolls:
    """A RollPlanner (console.tui.runners) whose rolls are scripted: `outcomes` and `refusals` by host; every roll
    it planned is kept (its request and changes) for the test to read."""

    outcomes: dict[str, HostOutcome] = field(default_factory=dict)
    refusals: dict[str, str] = field(default_factory=dict)
    holds: dict[str, asyncio.Event] = field(default_factory=dict)
    planned: list[tuple[RollRequest, list[ScriptedChange]]] = field(default_factory=list)

    async def __call__(
        self, workspace: Workspace, request: RollRequest, plan_host: PlanHost, open_host: OpenHost
    ) -> GroupRoll:
        request.checked()
        clock = SteppingClock()
        restart_only = request.operation == "restart"
        changes = [ScriptedChange(h, clock, self.outcomes.get(h, HostOutcome.DONE), self.refusals.get(h), restart_only,
                                  self.holds.get(h)) for h in request.hosts]  # fmt: skip
        self.planned.append((request, changes))
        hosts = [RollHost(c.label, None, c) for c in changes]  # type: ignore[arg-type]  # no session: no router
        refusals = [f"{c.label}: {c.refusal}" for c in changes if c.refusal]
        plan = PendingRoll(request.group.name, request.operation, hosts, request.spec, router=None, router_before=[],
                           refusals=refusals, drain_timeout_s=request.drain_timeout_s, clock=clock)  # fmt: skip
        return GroupRoll(plan, AsyncExitStack(), workspace, request)

    @property
    def planner(self) -> RollPlanner:
        return self


def trio_workspace(root: Path, router: str | None = None) -> Workspace:
    """A workspace whose group @trio holds gpu-a, gpu-b, gpu-c (profiles that reach nothing: the hosts are
    scripted), with its router when given."""
    (root / "profiles").mkdir(parents=True, exist_ok=True)
    for host in ("gpu-a", "gpu-b", "gpu-c"):
        (root / "profiles" / f"{host}.toml").write_text('[host]\nssh = "ops@127.0.0.1:9"\n')
    members = '["gpu-a", "gpu-b", "gpu-c"]'
    table = f'[trio]\nmembers = {members}\nrouter = "{router}"\n' if router else f"trio = {members}\n"
    (root / "profiles" / "groups.toml").write_text(table)
    return Workspace(root)
