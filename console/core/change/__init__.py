"""A change to a host's unit, as every operation that makes one speaks of it (apply, restart, restore, tune, a
roll, the editor): pure, and below them all, so that the session and the events use it too.

    edits.py   what to change: parse_edits -> EditRequest (the --set/--unset/--env/--unset-env syntax)
    plan.py    the edit made and checked for a version: Plan (texts, diff, the rules' verdict), plan_for_version
    verify.py  what the restarted server resolves, held to what the rules predicted: verify_resolved
    states.py  where an apply stands: ApplyState, its transitions (Rollout), a start judged from systemd's state

No I/O here: console.core.apply carries a change out on a host.

What the rest of console/ uses is imported from here; the modules are this package's own."""

from console.core.change.edits import (
    EditError,
    EditRequest,
    FlagKind,
    FlagValue,
    parse_edits,
)
from console.core.change.plan import (
    RESTART_CHECKED,
    Plan,
    VersionSource,
    build_plan,
    choose_version,
    mask_plan,
    plan_for_version,
    unified_diff,
)
from console.core.change.states import (
    RESTART_TRANSITIONS,
    TERMINAL,
    TRANSITIONS,
    ApplyState,
    IllegalTransition,
    Rollout,
    is_new_start,
    start_failure,
)
from console.core.change.verify import (
    Expectation,
    Verification,
    server_value,
    values_equal,
    verify_resolved,
)

__all__ = [
    "RESTART_CHECKED",
    "RESTART_TRANSITIONS",
    "TERMINAL",
    "TRANSITIONS",
    "ApplyState",
    "EditError",
    "EditRequest",
    "Expectation",
    "FlagKind",
    "FlagValue",
    "IllegalTransition",
    "Plan",
    "Rollout",
    "Verification",
    "VersionSource",
    "build_plan",
    "choose_version",
    "is_new_start",
    "mask_plan",
    "parse_edits",
    "plan_for_version",
    "server_value",
    "start_failure",
    "unified_diff",
    "values_equal",
    "verify_resolved",
]
