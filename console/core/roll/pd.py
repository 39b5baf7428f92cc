"""Prefill and decode servers changed one at a time behind smg, as console.core.deployment.order says: each member
out of smg, drained, its own apply (verified, or rolled back), back into smg and listed ready; then the next. A member
that fails stops the change, and every member changed before it goes back to its previous unit the same way, last
changed first.

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
from typing import Any, Protocol

import httpx

from console.core.apply import ApplyResult
from console.core.deployment import DEFAULT_BOOTSTRAP_PORT, Deployment, RestartOrder, Step
from console.core.events import EventSink, Notice
from console.core.roll.members import DeploymentResult, MemberChange, StepEvent
from console.host.base import HostError
from console.sglang.client import SglangError, parse_metrics_text, summarize
from console.sglang.router import RouterClient, RouterError, normalize_url

POLL_S = 0.2
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

    async def run(self) -> None:
        change, result = self.change, self.change.result
        steps = list(change.order.steps)
        for index in range(0, len(steps), 4):
            group = steps[index : index + 4]
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
        """One member's four steps; False when it did not end on the unit it was to run (its own apply rolled it back,
        or it failed), with member.detail saying why."""
        out, drain, apply, back = steps
        url = member.member.worker_url(member.session.host.peer_address())
        try:
            self._step(out, "begun", out.why, rollback)
            await self._router_out(url)
            self._step(out, "done", f"{url} left smg's worker list", rollback)
            self._step(drain, "begun", drain.why, rollback)
            self._step(drain, "done", await self._drain(member), rollback)
        except (RouterError, HostError) as exc:
            member.outcome, member.detail = "failed", f"taking it out of smg failed: {exc}"
            self._step(out, "failed", member.detail, rollback)
            return False
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
        steps = list(order.steps)
        all_back = True
        for index in range(0, len(steps), 4):
            group = steps[index : index + 4]
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
        async with RouterClient(self.router_url, change_timeout_s=ROUTER_TIMEOUT_S * 3) as router:
            await router.remove(url)

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
        """POST /workers with its worker_type (and a prefill's bootstrap port), then until smg lists it ready."""
        spec: dict[str, Any] = {"url": url, "worker_type": member.member.worker_type}
        if member.member.role == "prefill":
            spec["bootstrap_port"] = _bootstrap_port(member)
        async with httpx.AsyncClient(base_url=self.router_url, timeout=ROUTER_TIMEOUT_S) as http:
            try:
                answer = await http.post("/workers", json=spec)
            except httpx.HTTPError as exc:
                raise RouterError(f"smg {self.router_url}: POST /workers: {exc}") from None
            if answer.status_code not in (200, 201, 202, 409):
                raise RouterError(
                    f"smg {self.router_url}: POST /workers {spec}: HTTP {answer.status_code} {answer.text[:200]}"
                )
            deadline = time.monotonic() + READY_TIMEOUT_S
            while True:
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    listed = (await http.get("/workers")).json().get("workers", [])
                    for worker in listed:
                        ours = normalize_url(str(worker.get("url", ""))) == normalize_url(url)
                        if ours and worker.get("status", "ready") == "ready" and worker.get("is_healthy") is not False:
                            return
                if time.monotonic() >= deadline:
                    raise RouterError(f"smg {self.router_url}: {url} not listed ready within {READY_TIMEOUT_S:g} s")
                await asyncio.sleep(POLL_S)  # smg's registration is a job: poll its list


def _bootstrap_port(member: MemberChange) -> int:
    if member.member.bootstrap_port is not None:
        return member.member.bootstrap_port
    port = member.plan.report.resolved.get("disaggregation_bootstrap_port")
    return int(port) if port else DEFAULT_BOOTSTRAP_PORT


async def _in_flight(member: MemberChange) -> int | None:
    """The server's running + queued requests and its PD queues; None when it says none of them."""
    try:
        client = await member.session.sglang()
        answer = await client.http.get("/metrics")
    except (HostError, SglangError, httpx.HTTPError, OSError):
        return None
    if answer.status_code != 200:
        return None
    try:
        values, _ = parse_metrics_text(answer.text, None, ())
    except ValueError:
        return None
    figures = summarize(None, metrics=values)
    counted = [figures.get("num_running_reqs"), figures.get("num_queue_reqs"), *(values.get(q) for q in PD_QUEUES)]
    known = [int(v) for v in counted if v is not None]
    return sum(known) if known else None
