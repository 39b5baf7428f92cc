"""The order a deployment is restarted in: written once, here; apply and restart, the CLI and the console, a change
and its rollback all run it (console.core.roll's deployment change carries the steps out).

    order = restart_order(deployment, members=["rank0", "rank1"], gated=True)
    for step in order.steps: ...            # Step(kind, members, why)

Ranks of one model go **together** (SGLang 0.5.23, shared/research/wave5-facts.md §4): a rank cannot rejoin a running
process group, ranks >= 1 ignore SIGTERM and stopping rank 0 stops them all. So: every unit written first (nothing
restarts on a failed write), rank 0 stopped (its drain and shutdown broadcast end the others), every rank confirmed
down, every rank started at once, the gate opened once every rank has joined (where the units carry
--gated-launch-port), then rank 0 waited on for health while every rank is watched, and all verified as one.

Prefill and decode servers behind smg go **one at a time** (§5), each with its traffic out of smg first: out of the
router, drained (its own queues at 0), restarted as a single apply (verified, or rolled back), back into the router
and listed ready; prefill servers before decode servers, so that a decode only ever receives KV from a prefill that is
already on the setup it gets. A prefill is stopped first and starts again only once every decode server's heartbeat
has dropped it: a decode that did not notice the restart keeps the old process's KV sender and stalls every room it
sends there. A role with one server cannot keep serving while it restarts: `downtime` says so.

A single host: its apply, as it has always been.

A rollback runs the same order over the members that were changed, in reverse for one-at-a-time (the last changed
goes back first), with their previous units.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from console.core.deployment.model import Deployment, Member

StepKind = Literal[
    "write",  # back up and write the units, daemon-reload (nothing restarts)
    "stop",  # systemctl stop
    "wait_down",  # every unit inactive or failed (a straggler stopped through systemd after the deployment's bound)
    "start",  # systemctl start, side by side
    "open_gate",  # rank 0's gate answers once every rank has joined: open it
    "wait_ready",  # rank 0 healthy and ready, every rank's unit running its new process
    "verify",  # what the servers resolved, against what the rules predicted
    "router_out",  # out of smg: it routes nothing new there
    "drain",  # the server's own running + queued requests (and PD queues) at 0
    "wait_dropped",  # a stopped prefill server: every decode server's heartbeat has dropped it
    "apply",  # the member's own apply: write, restart, watch, verify, or roll back (console.core.apply)
    "router_in",  # back into smg, listed ready
]
Mode = Literal["together", "one_at_a_time", "single"]
APPLY_WHY = "its own apply: restarted, verified, or rolled back"
DROPPED_WHY = (
    "every decode server's heartbeat has dropped it: a decode that missed the restart keeps its old KV sender and "
    "stalls the rooms it sends there (SGLang 0.5.23, #34289)"
)


@dataclass(frozen=True)
class Step:
    kind: StepKind
    members: tuple[str, ...]
    why: str

    def to_json(self) -> dict[str, object]:
        return {"step": self.kind, "members": list(self.members), "why": self.why}

    def describe(self) -> str:
        return f"{self.kind.replace('_', ' ')} {', '.join(self.members)}: {self.why}"


@dataclass(frozen=True)
class RestartOrder:
    mode: Mode
    steps: tuple[Step, ...]
    downtime: bool  # whether the deployment stops serving while the order runs
    notes: tuple[str, ...] = ()

    def to_json(self) -> list[dict[str, object]]:
        return [s.to_json() for s in self.steps]


def restart_order(
    deployment: Deployment,
    members: Sequence[str] | None = None,
    *,
    write: bool = True,
    gated: bool = False,
    rollback: bool = False,
) -> RestartOrder:
    """The steps that restart `members` (default: all) of the deployment, in the order it needs.

    write: the units change (an apply, a restore, a rollback); False for a restart as they are.
    gated: the ranks' units carry --gated-launch-port (the console opens the gate once every rank has joined).
    rollback: the order of going back (previous units; one-at-a-time in reverse)."""
    chosen = _chosen(deployment, members)
    if deployment.kind == "single":
        member = deployment.members[0].name
        return RestartOrder("single", (Step("apply", (member,), "the host's own apply"),), downtime=True)
    if deployment.kind == "multinode":
        return _together(deployment, write=write, gated=gated, rollback=rollback)
    return _one_at_a_time(deployment, chosen, rollback=rollback)


def _chosen(deployment: Deployment, members: Sequence[str] | None) -> list[Member]:
    if members is None:
        return list(deployment.members)
    wanted = set(members)
    for name in wanted:
        deployment.member(name)  # DeploymentError for a name that is not a member
    return [m for m in deployment.members if m.name in wanted]


def _together(deployment: Deployment, *, write: bool, gated: bool, rollback: bool) -> RestartOrder:
    """Every rank, whatever changed: a rank cannot rejoin a running group, so a change of one is a restart of all."""
    ranks = tuple(m.name for m in deployment.ranks)
    rank0 = (ranks[0],)
    others = ranks[1:]
    units = "the previous units" if rollback else "the new units"
    steps: list[Step] = []
    if write:
        steps.append(Step("write", ranks, f"{units} on every rank before anything stops: a failed write restarts "
                          "nothing"))  # fmt: skip
    steps += [
        Step(
            "stop", rank0, "rank 0 first: its drain and shutdown broadcast end every rank (ranks >= 1 ignore SIGTERM)"
        ),
        Step(
            "wait_down",
            ranks,
            "every rank down before any starts: a new group cannot form beside the old one "
            f"(a rank still up after {deployment.stop_timeout_s:g} s is stopped through systemd)",
        ),
        Step("start", ranks, "every rank at once: they rendezvous at --dist-init-addr"),
    ]
    if gated:
        steps.append(Step("open_gate", rank0, "every rank has joined (rank 0's gate answers): let them load weights"))
    steps += [
        Step(
            "wait_ready",
            ranks,
            "rank 0's /health and /ready, every rank's unit on its new process (a rank >= 1's "
            "own /health is a dummy 200)",
        ),
        Step("verify", ranks, "rank 0's /server_info against what the rules predicted, every rank still running"),
    ]
    notes = (f"{len(others) + 1} ranks restart together: the model does not serve from the stop to rank 0 ready",)
    return RestartOrder("together", tuple(steps), downtime=True, notes=notes)


def _one_at_a_time(deployment: Deployment, chosen: list[Member], *, rollback: bool) -> RestartOrder:
    ordered = [m for m in chosen if m.role == "prefill"] + [m for m in chosen if m.role == "decode"]
    if rollback:
        ordered.reverse()
    steps: list[Step] = []
    for member in ordered:
        name = (member.name,)
        steps.append(Step("router_out", name, "out of smg: it routes nothing new to this server"))
        steps.append(Step("drain", name, "its running and queued requests (and PD queues) finish"))
        if member.role == "prefill":
            steps.append(Step("stop", name, "down before it starts again, so that every decode server notices"))
            steps.append(Step("wait_dropped", name, DROPPED_WHY))
        steps.append(Step("apply", name, "back on its previous unit" if rollback else APPLY_WHY))
        steps.append(Step("router_in", name, "back into smg, listed ready"))
    alone = [role for role, group in (("prefill", deployment.prefill), ("decode", deployment.decode))
             if len(group) == 1 and any(m in chosen for m in group)]  # fmt: skip
    notes: tuple[str, ...] = ()
    if alone:
        notes = (
            f"the deployment has one {' and one '.join(alone)} server: while it restarts smg has no {alone[0]} to "
            "route to, so requests fail (add a second to change it without downtime)",
        )
    return RestartOrder("one_at_a_time", tuple(steps), downtime=bool(alone), notes=notes)
