"""A rolling change of a group's hosts (apply, restart, restore, freeze), canary first, behind the group's router.

    plan.py       the roll's pure half: the spec (canary, waves, failures allowed), the batches, the router's rule,
                  each host's outcome and when the roll stops (RollLedger), the gate's verdict
    gate_plan.py  the gate's pure half: the canary's baseline among the workspace's records, the benchmark to run
    run.py        plan_roll -> PendingRoll: every host planned first, then batch by batch behind the router
    gate.py       `--gate bench` carried out: the canary's benchmark after its change, its rollback on a regression
    group.py      plan_group_roll -> GroupRoll: the group's lock, a session per host, the router, a snapshot set;
                  what the CLI's rolling verbs and the console's overview both drive
    deployment.py plan_deployment_change -> DeploymentChange: a deployment (console.core.deployment) changed or
                  restarted as one, in its restart order; together.py the ranks of one model restarted together,
                  pd.py prefill and decode servers one at a time behind smg

The vocabulary of a change the roll builds on (edits, plans, the apply's states) is console.core.change.

What the rest of console/ uses is imported from here; the modules are this package's own. The pure half (plan.py)
comes with the package; the others when one of their names is first asked for, because they bring asyncssh and
httpx with them and the CLI's parser reads the roll's options (console/cli/rolling_options.py) on every run, the
fast path of check-args and --help included (tests/sglang/test_check_args_cli.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.core.roll.plan import (
    DEFAULT_GATE_PCT,
    Batch,
    GateSpec,
    GateVerdict,
    HostEnded,
    HostOutcome,
    RollError,
    RollLedger,
    RollSpec,
    WaveSize,
    batches,
    gate_from_fields,
    gate_verdict,
    may_start,
    outcome_of_apply,
    parse_percent,
    parse_wave,
    spec_from_fields,
)

if TYPE_CHECKING:
    from console.core.roll.deployment import (
        DeploymentChange,
        DeploymentEvent,
        DeploymentResult,
        deployment_version,
        plan_deployment_change,
        plan_deployment_restore,
    )
    from console.core.roll.gate import BenchGate
    from console.core.roll.gate_plan import GateBaseline, gate_baseline, gate_label, gate_sweep, plan_gate
    from console.core.roll.group import (
        GroupRoll,
        OpenHost,
        RollRequest,
        apply_planner,
        free_set_name,
        freeze_planner,
        plan_group_roll,
        restart_planner,
    )
    from console.core.roll.members import MemberChange, MemberEvent, StepEvent
    from console.core.roll.run import (
        ApplyChange,
        BatchStarted,
        FreezeChange,
        GateJudged,
        GateStarted,
        GroupLocked,
        HostChange,
        HostEvent,
        HostFinished,
        HostProgress,
        HostStarted,
        PendingRoll,
        PlanHost,
        RollEvent,
        RollHost,
        RollReport,
        RollStopped,
        RouterStep,
        group_lock,
    )


def __getattr__(name: str) -> object:
    """A name of the modules not imported with the package (PEP 562): they are imported now, on the first."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import console.core.roll.deployment as deployment
    import console.core.roll.gate as gate
    import console.core.roll.gate_plan as gate_plan
    import console.core.roll.group as group
    import console.core.roll.members as members
    import console.core.roll.run as run

    for module in (run, group, gate, gate_plan, deployment, members):
        if name in vars(module):
            return vars(module)[name]
    raise AttributeError(f"module {__name__!r} lists {name!r} but none of its modules has it")


__all__ = [
    "DEFAULT_GATE_PCT",
    "ApplyChange",
    "Batch",
    "BatchStarted",
    "BenchGate",
    "DeploymentChange",
    "DeploymentEvent",
    "DeploymentResult",
    "FreezeChange",
    "GateBaseline",
    "GateJudged",
    "GateSpec",
    "GateStarted",
    "GateVerdict",
    "GroupLocked",
    "GroupRoll",
    "HostChange",
    "HostEnded",
    "HostEvent",
    "HostFinished",
    "HostOutcome",
    "HostProgress",
    "HostStarted",
    "MemberChange",
    "MemberEvent",
    "OpenHost",
    "PendingRoll",
    "PlanHost",
    "RollError",
    "RollEvent",
    "RollHost",
    "RollLedger",
    "RollReport",
    "RollRequest",
    "RollSpec",
    "RollStopped",
    "RouterStep",
    "StepEvent",
    "WaveSize",
    "apply_planner",
    "batches",
    "deployment_version",
    "free_set_name",
    "freeze_planner",
    "gate_baseline",
    "gate_from_fields",
    "gate_label",
    "gate_sweep",
    "gate_verdict",
    "group_lock",
    "may_start",
    "outcome_of_apply",
    "parse_percent",
    "parse_wave",
    "plan_deployment_change",
    "plan_deployment_restore",
    "plan_gate",
    "plan_group_roll",
    "restart_planner",
    "spec_from_fields",
]
