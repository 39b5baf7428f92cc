"""A rolling change of a group's hosts as one planned operation: the group's lock, a session per host, the group's
router and every host's plan, held from planning until the roll is executed or aborted. The CLI's rolling verbs
(`apply|restart|restore @GROUP --rolling`, `freeze @GROUP`) and the console's overview (select hosts, then
e / r / F) both drive it; run.py is the roll itself.

    request = RollRequest(group, ("gpu-a", "gpu-b"), "restart", RollSpec(), owner=default_owner(...))
    roll = await plan_group_roll(workspace, request, restart_planner(timeout_s=900), open_host)
    show(roll.plan)                                  # batches, router, per-host plans, refusals: nothing changed
    report = await roll.execute(on_event=show)       # or: await roll.abort("not confirmed")

What is checked before any host is contacted (a UsageError, nothing held): the hosts are members of the group, the
spec fits them, `--gate bench` finds every canary's baseline in the workspace's logs, a group freeze's set name
and its members' snapshot names are free. Then the group's lock (GroupLocked naming its holder), the sessions,
the router client and the plans (run.py: plan_roll). A GroupRoll is a console.core.pending.Pending
and an Interruptible: request_abort() stops it between hosts, as Ctrl-C does in the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from console.core.apply import DEFAULT_TIMEOUT_S
from console.core.events import EventSink, ignore
from console.core.roll.plan import HostOutcome, RollSpec, batches
from console.core.roll.run import (
    DRAIN_TIMEOUT_S,
    ApplyChange,
    FreezeChange,
    PendingRoll,
    PlanHost,
    RollEvent,
    RollReport,
    group_lock,
    plan_roll,
)
from console.core.session import Session
from console.errors import UsageError
from console.fleet.groups import Group
from console.workspace import Workspace

Operation = Literal["apply", "restart", "restore", "freeze"]
# A session on a host of the group, opened for the roll and closed after it (console.core.session.open_session).
OpenHost = Callable[[str], AbstractAsyncContextManager[Session]]


@dataclass(frozen=True)
class RollRequest:
    """What to roll: over which hosts of which group (all of them, or the console's selection, in the group's
    order), the operation, its spec, who holds the locks; a group freeze's set name."""

    group: Group
    hosts: tuple[str, ...]
    operation: Operation
    spec: RollSpec
    owner: str
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    set_name: str | None = None  # freeze: the snapshot set (each host frozen as NAME.HOST)

    def checked(self) -> RollRequest:
        """UsageError for hosts outside the group, a host twice, a spec that does not fit, a freeze without a name."""
        if not self.hosts:
            raise UsageError(f"@{self.group.name}: no host to roll; select at least one")
        strangers = [h for h in self.hosts if h not in self.group.members]
        if strangers:
            raise UsageError(
                f"{', '.join(strangers)}: not in @{self.group.name} ({', '.join(self.group.members)}); "
                "a rolling change runs over the hosts of one group"
            )
        if len(set(self.hosts)) != len(self.hosts):
            raise UsageError("each host once in a roll")
        self.spec.check(len(self.hosts))
        if self.operation == "freeze" and not self.set_name:
            raise UsageError("a group freeze needs the snapshot set's name")
        if not self.drain_timeout_s > 0:
            raise UsageError(f"the drain timeout must be a positive number of seconds, not {self.drain_timeout_s:g}")
        return self

    @property
    def router(self) -> str | None:
        """The group's router, which a change that restarts goes through (a freeze restarts nothing: none)."""
        return self.group.router if self.operation != "freeze" else None

    @property
    def canaries(self) -> list[str]:
        return [h for b in batches(self.hosts, self.spec) if b.kind == "canary" for h in b.hosts]


class GroupRoll:
    """A planned roll and what it holds (the group's lock, the sessions, the router's client): let go of once it
    is executed or aborted. `plan` is the core's PendingRoll (batches, hosts with their plans, refusals)."""

    def __init__(self, plan: PendingRoll, stack: AsyncExitStack, workspace: Workspace, request: RollRequest) -> None:
        self.plan = plan
        self.workspace = workspace
        self.request = request
        self._stack = stack
        self._closed = False

    @property
    def report(self) -> RollReport:
        return self.plan.report

    @property
    def refused(self) -> bool:
        return self.plan.refused

    def request_abort(self, why: str = "interrupted") -> None:
        """No new host starts; a host being changed rolls back as a single apply does."""
        self.plan.request_abort(why)

    async def execute(self, on_event: EventSink[RollEvent] = ignore) -> RollReport:
        try:
            report = await self.plan.execute(on_event)
            self._keep_set()
        finally:
            await self._close()
        return report

    async def abort(self, why: str = "not confirmed; nothing was changed") -> RollReport:
        """Nothing is changed on any host; every lock is let go of."""
        try:
            report = await self.plan.abort(why)
            self._keep_set()
        finally:
            await self._close()
        return report

    def _keep_set(self) -> None:
        if self.request.operation == "freeze" and self.request.set_name:
            self.report.snapshot_set = keep_set(self.workspace, self.request.set_name, self.request.group.name,
                                                self.report)  # fmt: skip

    async def _close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._stack.aclose()


async def plan_group_roll(
    workspace: Workspace,
    request: RollRequest,
    plan_host: PlanHost,
    open_host: OpenHost,
    *,
    clock: Callable[[], datetime] | None = None,
) -> GroupRoll:
    """Check the request (before anything is contacted), take the group's lock, open a session per host and the
    router's client, plan every host. Raises UsageError (the request), GroupLocked, HostError (a host that cannot be
    reached or planned: the plans already made are aborted), with everything let go of."""
    from console.sglang.router import RouterClient

    request.checked()
    gate = gate_for(workspace, request)
    if request.operation == "freeze" and request.set_name:
        check_set_is_new(workspace, request.set_name, request.hosts)
    stack = AsyncExitStack()
    try:
        await stack.enter_async_context(group_lock(workspace, request.group.name, request.owner))
        sessions = [await stack.enter_async_context(open_host(host)) for host in request.hosts]
        router = await stack.enter_async_context(RouterClient(request.router)) if request.router else None
        timing = {"clock": clock} if clock is not None else {}
        plan = await plan_roll(request.group.name, request.operation, sessions, plan_host, spec=request.spec,
                               router=router, drain_timeout_s=request.drain_timeout_s, gate=gate,
                               **timing)  # fmt: skip
    except BaseException:
        await stack.aclose()
        raise
    return GroupRoll(plan, stack, workspace, request)


# --- each host's change ----------------------------------------------------------------------------------------


def apply_planner(
    sets: Sequence[str],
    unsets: Sequence[str] = (),
    envs: Sequence[str] = (),
    unset_envs: Sequence[str] = (),
    *,
    owner: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> PlanHost:
    """Each host's apply of the same edits, parsed and checked with that host's own SGLang version (a value one
    version refuses is that host's refusal, and the roll changes nothing)."""
    from console.core.apply import edits_by_version, plan_apply

    async def plan(session: Session) -> ApplyChange:
        edits = edits_by_version(sets, unsets, envs, unset_envs)  # parsed with the version read beside the lock
        return ApplyChange(await plan_apply(session, edits, timeout_s=timeout_s, owner=owner))

    return plan


def restart_planner(*, owner: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> PlanHost:
    """Each host restarted as it is (nothing written), its start watched and verified."""
    from console.core.apply import plan_restart

    async def plan(session: Session) -> ApplyChange:
        return ApplyChange(await plan_restart(session, timeout_s=timeout_s, owner=owner))

    return plan


def freeze_planner(
    name: str, *, note: str = "", document: str | None = None, force: str | None = None, owner: str
) -> PlanHost:
    """Each host frozen as NAME.HOST, with the same note, document template and --force reason."""
    from console.core.snapshot import FreezeRequest, member_names, plan_freeze

    async def plan(session: Session) -> FreezeChange:
        snapshot = member_names(name, [session.label])[session.label]
        freeze = FreezeRequest(snapshot, note, document, force)
        return FreezeChange(await plan_freeze(session, freeze, owner=owner))

    return plan


# --- what is checked and kept in the workspace ----------------------------------------------------------------


def gate_for(workspace: Workspace, request: RollRequest) -> Any:
    """--gate bench: every canary's baseline from the workspace's logs (UsageError naming the bench command to run
    first when one has none); None without a gate."""
    spec = request.spec
    if spec.gate is None:
        return None
    from console.core.roll.gate import BenchGate
    from console.core.roll.gate_plan import plan_gate

    return BenchGate(request.group.name, plan_gate(bench_records(workspace), request.canaries, spec.gate), spec.gate)


def bench_records(workspace: Workspace) -> list[Any]:
    from console.bench.runs import read_lenient

    records: list[Any] = []
    for path in sorted(workspace.logs.glob("bench-*.jsonl")):
        found, _problems = read_lenient(path)  # a damaged line is not the gate's business; the rest counts
        records.extend(found)
    return records


def check_set_is_new(workspace: Workspace, name: str, members: Sequence[str]) -> None:
    """A group freeze's names are free (the set's and every NAME.HOST), before anything is contacted."""
    from console.core.snapshot import member_names, set_path, snapshot_path

    if set_path(workspace, name).exists():
        raise UsageError(f"snapshot set {name!r} exists ({set_path(workspace, name)}); choose another name")
    for snapshot in member_names(name, list(members)).values():
        if snapshot_path(workspace, snapshot).exists():
            where = snapshot_path(workspace, snapshot)
            raise UsageError(f"snapshot {snapshot!r} exists ({where}); choose another set name")


def free_set_name(workspace: Workspace, hosts: Sequence[str], prefix: str = "v") -> str:
    """The first of v1, v2, ... that no set and none of its member snapshots is named yet (the form's suggestion)."""
    for n in range(1, 10_000):
        name = f"{prefix}{n}"
        try:
            check_set_is_new(workspace, name, hosts)
        except UsageError:
            continue
        return name
    return f"{prefix}{datetime.now(UTC):%Y%m%d%H%M}"


def keep_set(workspace: Workspace, name: str, group: str, report: RollReport) -> dict[str, Any] | None:
    """The set's index, when at least one host was frozen (each host's outcome in it)."""
    from console.core.snapshot import save_snapshot_set, snapshot_set_of

    records = [report.ledger.records[h] for h in report.ledger.hosts]
    if not any(r.outcome is HostOutcome.DONE for r in records):
        return None
    outcomes = {r.label: (r.outcome is HostOutcome.DONE, r.detail or r.outcome.value) for r in records}
    kept = snapshot_set_of(name, group, datetime.now(UTC), outcomes)
    path = save_snapshot_set(workspace, kept)
    return {**kept.to_json(), "path": str(path)}
