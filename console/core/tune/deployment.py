"""`tune DEPLOYMENT`: a tune whose every trial is the deployment's change (console.core.roll's
plan_deployment_change, in the order console.core.deployment.order writes once), benchmarked through its front door.

    async with open_members(deployment, workspace) as sessions:
        pending = await plan_deployment_tune(deployment, sessions, request)   # every member's lock, the space
        result = await pending.execute(on_event=show)                          # as a host's tune (run.py)

- The space is built from one member's unit, the reference: rank 0 for the ranks of one model, the first decode
  server for prefill and decode (the one whose rounds the speculative setup changes). A setup's edit goes to every
  member as an apply's does (console.core.deployment.member_edits): each member's trial unit is its own original
  with that edit, so every trial starts from the originals, whatever the last one left.
- A trial is the deployment's change to those units: the ranks written, stopped from rank 0, started together and
  verified at rank 0; prefill and decode servers rolled through smg one at a time. What must match across the
  members is checked first (a setup that would leave them mismatched is refused, nothing written: a failed trial);
  a member that fails puts every changed member back (the change's own rollback).
- Benchmarks go through the front door (console.core.bench.bench_deployment): rank 0's server, or smg with each
  level's figures side by side.
- At the end (and after a failure the change could not undo) every member's original unit goes back through the
  same change, and the deployment must be up.

Every member's unit lock is held from the plan to the end (a change of any member meanwhile is refused). There is no
restore guard: a host cannot restart a deployment in its order by itself (a rank restored alone cannot rejoin its
group), so if this console dies the members stay on the last trial's units, as `status` shows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from console import hints
from console.bench.engine import SweepConfig
from console.bench.records import BenchRecord
from console.core.apply import default_owner, known_restart_cost, take_unit_lock
from console.core.bench import bench_deployment
from console.core.change import ApplyState, EditError, plan_for_version
from console.core.deployment import Deployment, Member, member_edits
from console.core.events import EventSink, Notice, Reconnecting, ignore
from console.core.roll import DeploymentChange, DeploymentResult, deployment_version, plan_deployment_change
from console.core.session import Session
from console.core.status import read_deployment
from console.core.tune.host import (
    HEALTH_WAIT_S,
    PUT_BACK_ATTEMPTS,
    Applied,
    Interrupted,
    not_interrupted,
    poll_healthy,
)
from console.core.tune.run import (
    PendingTune,
    TuneRequest,
    architecture_of,
    checked_request,
    masked_space,
    nothing_to_run,
)
from console.core.tune.space import Candidate, build_space
from console.host.base import HostError
from console.sglang.unit import UnitError

STATES = {state.value: state for state in ApplyState}


def reference_member(deployment: Deployment) -> Member:
    """The member whose unit the space is built from: rank 0 (ranks), the first decode server (PD), the host."""
    if deployment.kind == "pd":
        return deployment.decode[0]
    front = deployment.front_door
    assert front is not None
    return front


class DeploymentTuneHost:
    """A deployment during one tune (console.core.tune.host.TuneTarget): each trial its change, its front door
    benchmarked, its original units put back."""

    guarded = False  # see the module's docstring

    def __init__(
        self,
        deployment: Deployment,
        sessions: Mapping[str, Session],
        originals: Mapping[str, str],
        version: str,
        *,
        timeout_s: float,
        owner: str,
        api_key: str | None = None,
    ) -> None:
        self.deployment = deployment
        self.sessions = dict(sessions)
        self.originals = dict(originals)
        self.version = version
        self.timeout_s = timeout_s
        self.owner = owner
        self.api_key = api_key
        self.label = deployment.name
        self.unit = ", ".join(f"{m.name}: {m.unit}" for m in deployment.members)
        self.interrupted: Interrupted = not_interrupted
        self.on_event: EventSink[Reconnecting | Notice] = ignore
        self._change: DeploymentChange | None = None  # the change under way, for request_abort
        self._units: dict[str, dict[str, str]] = {}  # a candidate's units per member, made once

    def bind(self, interrupted: Interrupted, on_event: EventSink[Reconnecting | Notice]) -> None:
        self.interrupted = interrupted
        self.on_event = on_event

    def mask(self, text: str) -> str:
        for session in self.sessions.values():
            text = session.secrets.text(text)
        return text

    def request_abort(self, why: str) -> None:
        if self._change is not None:
            self._change.request_abort(why)

    def units_of(self, candidate: Candidate | None) -> dict[str, str]:
        """Each member's unit for the candidate: its original with the setup's edit (None: the originals)."""
        if candidate is None:
            return dict(self.originals)
        if candidate.key not in self._units:
            per = member_edits(self.deployment, candidate.edits).per_member
            self._units[candidate.key] = {
                m.name: plan_for_version(self.originals[m.name], per.get(m.name), unit_name=m.unit,
                                         version=self.version).new_text
                for m in self.deployment.members
            }  # fmt: skip
        return self._units[candidate.key]

    async def apply(self, candidate: Candidate, sink: EventSink[Any]) -> Applied:
        return await self._run(self.units_of(candidate), sink)

    async def restart(self, sink: EventSink[Any]) -> Applied:
        """Every member restarted as it is, in the deployment's order (a deployment not up on the units it has)."""
        return await self._run(None, sink)

    async def _run(self, units: Mapping[str, str] | None, sink: EventSink[Any]) -> Applied:
        try:
            change = await plan_deployment_change(self.deployment, self.sessions, None, owner=self.owner,
                                                  timeout_s=self.timeout_s, units=units, locks_held=True)  # fmt: skip
        except (EditError, UnitError) as exc:
            return Applied(ApplyState.REFUSED, self.mask(str(exc)))
        async with change:
            self._change = change
            try:
                why = self.interrupted()
                if why is not None:
                    change.request_abort(why)
                result = await change.execute(on_event=sink)
            finally:
                self._change = None
        return applied_of(result)

    async def healthy(self) -> bool:
        """The deployment up, as status judges it (rank 0 serving with every rank running; smg ready with every
        member up and routed)."""
        try:
            status = await read_deployment(self.deployment, self.sessions, checks=False, journal=False)
        except Exception:  # a forward being rebuilt, a member down: not healthy now
            return False
        return status.ok

    async def wait_healthy(self, limit_s: float = HEALTH_WAIT_S, *, interruptible: bool = True) -> bool:
        return await poll_healthy(self, limit_s, interruptible=interruptible)

    async def put_back(self, candidate: Candidate | None, sink: EventSink[Any]) -> tuple[bool, bool]:
        """Every member on the candidate's unit (None: its original) through the deployment's change; restarted as it
        is where the units are right but the deployment is not up. (whether it runs them, whether that took a
        restart of the deployment)."""
        units = self.units_of(candidate)
        for _attempt in range(PUT_BACK_ATTEMPTS):
            try:
                applied = await self._run(units, sink)
            except HostError as exc:
                self.on_event(Notice(self.mask(f"putting the units back: {exc}; trying again")))
                await self.wait_healthy(interruptible=False)
                continue
            if applied.state is ApplyState.UNCHANGED:
                if await self.healthy():
                    return True, False
                restarted = await self._run(None, sink)
                return restarted.state is ApplyState.VERIFIED, False
            return applied.state is ApplyState.VERIFIED, applied.state is ApplyState.VERIFIED
        return False, False

    async def runs_original(self) -> bool:
        try:
            units = await asyncio.gather(*(self.sessions[m.name].service.read_unit() for m in self.deployment.members))
        except HostError:
            return False
        return all(units[i] == self.originals[m.name] for i, m in enumerate(self.deployment.members))

    async def bench(self, config: SweepConfig, label: str, on_event: Any) -> list[BenchRecord]:
        workspace = next(iter(self.sessions.values())).workspace
        records, _sweep = await bench_deployment(self.deployment, self.sessions, config, label=label,
                                                 workspace=workspace, on_event=on_event,
                                                 api_key=self.api_key)  # fmt: skip
        return records


def applied_of(result: DeploymentResult) -> Applied:
    """The deployment's change as the tune judges a trial: its state, error, rollback and the failed member's lines."""
    state = STATES.get(result.state, ApplyState.FAILED)
    journal: list[str] = []
    failed = next((m for m in result.members if m.name == result.failed_member), None)
    if failed is not None:
        if failed.tracker is not None and failed.tracker.failed:
            journal = failed.tracker.explanation()
        elif failed.result is not None:
            journal = list(failed.result.get("journal_excerpt") or [])
        journal = [f"{failed.name}: {line}" for line in journal]
    return Applied(state, result.error, result.rolled_back, tuple(journal))


async def plan_deployment_tune(
    deployment: Deployment,
    sessions: Mapping[str, Session],
    request: TuneRequest,
    *,
    owner: str | None = None,
    api_key: str | None = None,
) -> PendingTune:
    """Hold every member's unit lock (UnitLocked naming the member whose lock another holds), read every unit and the
    deployment's SGLang version, and build the space from the reference member's unit. Asks nothing, changes nothing.
    Raises UnitError, UsageError (nothing left to run) and HostError, every lock let go of."""
    owner = owner or default_owner(hints.verb("tune"))
    reference = reference_member(deployment)
    session = sessions[reference.name]
    request = checked_request(request, session.target.slo)
    version, _source = await deployment_version(deployment, sessions)
    hold = AsyncExitStack()
    try:
        for member in deployment.members:
            lock = await take_unit_lock(sessions[member.name], owner)
            hold.push_async_callback(lock.aclose)
        texts = await asyncio.gather(*(sessions[m.name].service.read_unit() for m in deployment.members))
        originals = {m.name: text for m, text in zip(deployment.members, texts, strict=True)}
        architecture = await architecture_of(session)
        space = build_space(request.space, originals[reference.name], unit_name=reference.unit, version=version,
                            architecture=architecture)  # fmt: skip
        host = DeploymentTuneHost(deployment, sessions, originals, version, timeout_s=request.timeout_s, owner=owner,
                                  api_key=api_key)  # fmt: skip
        space = masked_space(space, host.mask)
        if not space.candidates:
            raise nothing_to_run(space)
    except BaseException:
        with contextlib.suppress(Exception):
            await hold.aclose()
        raise
    pending = PendingTune(host, request, space, originals[reference.name], hold, None, owner)
    # What the estimate counts a trial's restart at: the reference member's recent restarts (the deployment's own
    # order adds its waits around them, which the estimate does not know).
    pending.restart_cost = known_restart_cost(sessions[reference.name])
    return pending
