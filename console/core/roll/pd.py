"""Prefill and decode servers changed one at a time behind smg, as console.core.deployment.order says: each member
out of smg, drained, its own apply (verified, or rolled back), back into smg and listed ready; then the next. A prefill
is stopped before its apply and waited on until every decode server's heartbeat has dropped it (each decode's journal
says "Lost connection with prefill instance (bootstrap_addr: HOST:PORT)"): a decode that missed the restart keeps the
old process's KV sender and stalls the rooms it sends to it. A member that fails stops the change, and every member
changed before it goes back to its previous unit the same way, last changed first.

smg (1.13, shared/research/wave5-facts.md §3, §5): `DELETE /workers/{id}` marks the worker draining and removes it
after its settle time (console.sglang.router.RouterClient.remove waits until the list no longer names it); smg does not
wait for the requests it already sent, so the server's own running + queued requests and its PD queues are waited on
(read twice at 0); `POST /workers {"url", "worker_type", "bootstrap_port"}` adds it back as a prefill or decode worker
(a job: its status goes pending -> ready, polled).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from console.core.apply import ApplyResult
from console.core.deployment import DEFAULT_BOOTSTRAP_PORT, Deployment, RestartOrder, Step
from console.core.events import EventSink, Notice
from console.core.roll.members import DeploymentResult, MemberChange, StepEvent
from console.host.base import HostError, JournalEntry
from console.sglang.client import SglangClient, SglangError, parse_metrics_text, pd_queued, summarize
from console.sglang.router import RouterClient, RouterError

POLL_S = 0.2
DROPPED = "Lost connection with prefill instance"  # a decode server's line when its heartbeat drops a prefill
ROUTER_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 120.0
# The PD queues a server keeps besides its running and waiting requests (SGLang 0.5.23 metrics_collector.py).
PD_QUEUES = (
    "sglang:num_prefill_bootstrap_queue_reqs",
    "sglang:num_prefill_inflight_queue_reqs",
    "sglang:num_decode_prealloc_queue_reqs",
    "sglang:num_decode_transfer_queue_reqs",
)


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


class Changing(Protocol):
    """What the one-at-a-time order needs of the deployment's change (console.core.roll.deployment)."""

    deployment: Deployment
    order: RestartOrder
    by_name: dict[str, MemberChange]
    members: list[MemberChange]
    result: DeploymentResult

    @property
    def abort_reason(self) -> str | None: ...

    async def apply_member(self, member: MemberChange, *, replacement: str | None = None) -> ApplyResult: ...


class OneAtATime:
    def __init__(self, change: Changing, emit: EventSink[Any]) -> None:
        self.change = change
        self.emit = emit
        assert change.deployment.router is not None
        self.router_url = change.deployment.router.url
        self.done: list[MemberChange] = []
        self._cursors: dict[str, str | None] = {}  # the decode servers' journals as a prefill stopped
        self._stopped_at = 0.0

    async def run(self) -> None:
        change, result = self.change, self.change.result
        for group in _per_member(change.order.steps):
            member = change.by_name[group[0].members[0]]
            if change.abort_reason is not None:
                result.error = f"{change.abort_reason}: stopped before {member.name}"
                await self._back(result.error)
                return
            ok = await self._member(member, group, rollback=False)
            if not ok:
                result.failed_member = member.name
                result.error = member.detail
                await self._back(f"{member.member.describe()}: {member.detail}")
                return
            self.done.append(member)
        result.state = "verified"

    async def _member(self, member: MemberChange, steps: list[Step], *, rollback: bool) -> bool:
        """One member's steps; False when it did not end on the unit it was to run (its own apply rolled it back,
        or it failed), with member.detail saying why."""
        url = member.member.worker_url(member.session.host.peer_address())
        by_kind = {s.kind: s for s in steps}
        try:
            for kind in ("router_out", "drain", "stop", "wait_dropped"):
                step = by_kind.get(kind)
                if step is None:
                    continue
                self._step(step, "begun", step.why, rollback)
                self._step(step, "done", await self._before_apply(kind, member, url), rollback)
        except (RouterError, HostError) as exc:
            member.outcome, member.detail = "failed", f"{exc}"
            self._step(steps[0], "failed", member.detail, rollback)
            if by_kind.get("stop") is not None:  # a prefill stopped: it starts again on the unit it has
                with contextlib.suppress(HostError):
                    await member.session.service.restart()
            return False
        apply, back = by_kind["apply"], by_kind["router_in"]
        self._step(apply, "begun", apply.why, rollback)
        ended = await self.change.apply_member(member, replacement=member.plan.old_text if rollback else None)
        state = ended.state.value
        good = state in ("verified", "unchanged") if not rollback else state in ("verified", "unchanged", "mismatch")
        member.detail = state.replace("_", " ") + (f": {ended.error}" if ended.error else "")
        serves = state in ("verified", "unchanged", "healthy_on_old", "mismatch")
        self._step(apply, "done" if good else "failed", member.detail, rollback)
        if serves:
            try:
                self._step(back, "begun", back.why, rollback)
                await self._router_in(member, url)
                self._step(back, "done", f"{url} back in smg, ready", rollback)
            except (RouterError, HostError) as exc:
                self._step(back, "failed", f"putting it back into smg failed: {exc}", rollback)
                member.outcome = "failed"
                member.detail = f"{member.detail}; putting it back into smg failed: {exc}"
                return False
        else:
            self.emit(Notice(f"{member.name} is not healthy: it stays out of smg"))
        if rollback:
            member.outcome = "rolled_back" if good else "failed"
        else:
            member.outcome = "done" if good else ("rolled_back" if state == "healthy_on_old" else "failed")
        return good

    async def _before_apply(self, kind: str, member: MemberChange, url: str) -> str:
        if kind == "router_out":
            try:
                await self._router_out(url)
            except RouterError as exc:
                raise RouterError(f"taking it out of smg failed: {exc}") from None
            return f"{url} left smg's worker list"
        if kind == "drain":
            return await self._drain(member)
        if kind == "stop":
            self._cursors = await _decode_cursors(self.change)
            self._stopped_at = time.monotonic()
            await member.session.service.stop()
            return f"{member.name} stopped"
        return await self._wait_dropped(member, url)

    async def _wait_dropped(self, member: MemberChange, url: str) -> str:
        """Until every decode server's journal says it lost this prefill (its heartbeat missed it enough times), bounded
        by the heartbeat's own time (interval x misses, from the decode units' environment) and as long again: a
        decode that never sent a room there has no heartbeat for it and says nothing."""
        addr = f"{urlsplit(url).hostname}:{_bootstrap_port(member)}"
        decodes = [m for m in self.change.members if m.member.role == "decode"]
        # A decode server that is not running holds no sender for anyone: when it starts it bootstraps afresh.
        running = await asyncio.gather(*(_running(m) for m in decodes))
        down = [m.name for m, up in zip(decodes, running, strict=True) if not up]
        decodes = [m for m, up in zip(decodes, running, strict=True) if up]
        if not decodes:
            return f"no decode server runs ({', '.join(down)} down): none holds its KV sender"
        bound = max(_heartbeat_s(m) for m in decodes) * 2 + 5.0
        started = self._stopped_at
        waiting = {m.name for m in decodes}
        cursors = self._cursors
        while waiting:
            for decode in [m for m in decodes if m.name in waiting]:
                async for entry in _journal_after(decode, cursors.get(decode.name)):
                    cursors[decode.name] = entry.cursor
                    if DROPPED in entry.message and addr in entry.message:
                        waiting.discard(decode.name)
            if not waiting or time.monotonic() - started >= bound:
                break
            await asyncio.sleep(POLL_S * 2)  # reading the decode servers' journals: the condition itself
        took = time.monotonic() - started
        said = [m.name for m in decodes if m.name not in waiting]
        if not waiting:
            gone = f" ({', '.join(down)} down: nothing to drop)" if down else ""
            return f"dropped by {', '.join(said)} after {took:.1f} s{gone}"
        quiet = ", ".join(sorted(waiting))
        return f"{quiet} did not say (never sent it a room?): waited {took:.1f} s, past its heartbeat's bound"

    async def _back(self, why: str) -> None:
        """Every member changed before the failure back on its previous unit, last changed first."""
        result = self.change.result
        if not self.done and all(m.outcome in ("not_started", "rolled_back") for m in self.change.members):
            failed = self.change.by_name.get(result.failed_member or "")
            result.state = "healthy_on_old" if failed is not None and failed.outcome == "rolled_back" else "aborted"
            result.rolled_back = failed is not None and failed.outcome == "rolled_back"
            if failed is not None and failed.outcome == "failed":
                result.state = "rollback_failed"
            return
        self.emit(Notice(f"{why}: the members changed before it go back to their previous units, one at a time"))
        from console.core.deployment import restart_order

        order = restart_order(self.change.deployment, [m.name for m in self.done], rollback=True)
        all_back = True
        for group in _per_member(order.steps):
            member = self.change.by_name[group[0].members[0]]
            all_back = await self._member(member, group, rollback=True) and all_back
        failed = self.change.by_name.get(result.failed_member or "")
        if failed is not None and failed.outcome == "failed":
            all_back = False
        result.rolled_back = True
        result.state = "healthy_on_old" if all_back else "rollback_failed"

    def _step(self, step: Step, state: str, detail: str, rollback: bool) -> None:
        self.emit(StepEvent(step, state, detail, _now(), rollback))  # type: ignore[arg-type]

    async def _router_out(self, url: str) -> None:
        """Out of smg at once (no settle: the drain below waits for the server's own requests)."""
        async with RouterClient(self.router_url, change_timeout_s=ROUTER_TIMEOUT_S * 3) as router:
            await router.remove(url, settle_s=0.0)

    async def _drain(self, member: MemberChange) -> str:
        """Until the server's own running + queued requests and its PD queues are 0, read twice in a row (a request
        smg sent just before the removal may still be on its way); bounded by the deployment's drain timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.change.deployment.drain_timeout_s
        zeros = 0
        left: int | None = None
        while True:
            left = await _in_flight(member)
            zeros = zeros + 1 if left == 0 else 0
            if zeros >= 2:
                return "no request running, queued or in a PD queue"
            if left is None:
                return "the server does not say what it runs: restarting after smg's removal"
            if loop.time() >= deadline:
                return f"{left} requests still there after {self.change.deployment.drain_timeout_s:g} s: restarting"
            await asyncio.sleep(POLL_S)  # polling the server's own count: the condition itself

    async def _router_in(self, member: MemberChange, url: str) -> None:
        """Back into smg as the prefill or decode worker it was (a prefill with its bootstrap port), until smg routes
        to it (`ready`; console.sglang.router.RouterClient.add follows smg's job)."""
        role = member.member.worker_type or "regular"
        port = _bootstrap_port(member) if role == "prefill" else None
        async with RouterClient(self.router_url, change_timeout_s=READY_TIMEOUT_S) as router:
            await router.add(url, worker_type=role, bootstrap_port=port)


async def _running(member: MemberChange) -> bool:
    """Whether the member's unit runs now (active); a host that cannot be asked counts as running (waited on)."""
    try:
        state = await member.session.service.state()
    except HostError:
        return True
    return state.active_state in ("active", "activating", "reloading")


def _per_member(steps: Sequence[Step]) -> list[list[Step]]:
    """The order's steps, member by member (each member's run together)."""
    groups: list[list[Step]] = []
    for step in steps:
        if groups and groups[-1][0].members == step.members:
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups


def _heartbeat_s(decode: MemberChange) -> float:
    """How long a decode server takes to drop a prefill that stopped answering: its heartbeat's interval (at least 2 s)
    times the misses it allows (SGLang 0.5.23 environ.py; 5 s x 2 unless its unit says otherwise)."""
    from console.sglang.unit import UnitFile

    env = UnitFile.parse(decode.plan.new_text).environment()
    try:
        interval = max(float(env.get("SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL", 5.0)), 2.0)
        misses = max(int(float(env.get("SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE", 2))), 1)
    except ValueError:
        interval, misses = 5.0, 2
    return interval * misses


async def _decode_cursors(change: Changing) -> dict[str, str | None]:
    """Each decode server's journal position now (what follows is what it says after the prefill's stop)."""
    out: dict[str, str | None] = {}
    for member in change.members:
        if member.member.role != "decode":
            continue
        last: str | None = None
        with contextlib.suppress(HostError):
            async for entry in member.session.service.journal(lines=1):
                last = entry.cursor
        out[member.name] = last
    return out


async def _journal_after(member: MemberChange, cursor: str | None) -> AsyncIterator[JournalEntry]:
    with contextlib.suppress(HostError):
        async for entry in member.session.service.journal(lines=200 if cursor is None else 1000, after_cursor=cursor):
            yield entry


def _bootstrap_port(member: MemberChange) -> int:
    if member.member.bootstrap_port is not None:
        return member.member.bootstrap_port
    port = member.plan.report.resolved.get("disaggregation_bootstrap_port")
    return int(port) if port else DEFAULT_BOOTSTRAP_PORT


async def _in_flight(member: MemberChange) -> int | None:
    try:
        client = await member.session.sglang()
    except (HostError, SglangError, OSError):
        return None
    return await in_flight(client)


async def in_flight(client: SglangClient) -> int | None:
    """What a PD server still holds: its running + waiting requests and its PD queues, all from one read of its load
    endpoint (/v1/loads: live, its "disaggregation" section carrying the queues on 0.5.23, as smg's load poll reads
    it; /metrics' running gauge moves only with its log windows). Where the load endpoint says nothing of them (an
    older version), the running and waiting requests and the PD queues come from /metrics' gauges. None when the
    server says neither."""
    load: Any = None
    with contextlib.suppress(SglangError, httpx.HTTPError, OSError, ValueError):
        load = await client.load()
    figures = summarize(None, load=load)
    running, waiting = figures["num_running_reqs"], figures["num_queue_reqs"]
    queues = pd_queued(load)
    if running is None and waiting is None:
        with contextlib.suppress(SglangError, httpx.HTTPError, OSError):
            figures = summarize(None, metrics=await client.metrics())
        running, waiting = figures["num_running_reqs"], figures["num_queue_reqs"]
    if queues is None:
        queues = await _pd_queues_metrics(client)
    if running is None and waiting is None and queues is None:
        return None
    return int(running or 0) + int(waiting or 0) + (queues or 0)


async def _pd_queues_metrics(client: SglangClient) -> int | None:
    try:
        answer = await client.http.get("/metrics")
    except (httpx.HTTPError, OSError):
        return None
    if answer.status_code != 200:
        return None
    try:
        values, _ = parse_metrics_text(answer.text, PD_QUEUES, ())
    except ValueError:
        return None
    known = [int(values[q]) for q in PD_QUEUES if q in values]
    return sum(known) if known else None
