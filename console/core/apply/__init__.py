"""Applying an edit to a host's unit: plan, execute (verified, rolled back on failure), and the editor's model.

    run.py      plan_apply / plan_restart -> PendingApply: the unit's lock, the restart, verification, rollback
    edit.py     the parameter editor's model (pure): fields, values, the edit they make, what the server will run
    history.py  the setups applied from this console (logs/applied.jsonl), offered again by the editor
    restarts.py what each start cost (logs/restarts.jsonl), and what a restart of a host costs before one

The plan's vocabulary (edits, plans, verification, the apply's states) is console.core.change and the phases of a
restart console.core.phases: the session and the events use them too, so they stay below this package.

What the rest of console/ uses is imported from here; the modules are this package's own."""

from console.core.apply.edit import (
    GATE_HINT,
    NONE_CHOICE,
    EditorForm,
    FieldSpec,
    Preview,
    editor_form,
    running_values,
    shorter_start_offers,
)
from console.core.apply.history import (
    applied_setups,
    record_applied,
)
from console.core.apply.restarts import (
    RestartCost,
    RestartRecord,
    cost_text,
    duration_text,
    host_restart_cost,
    read_restarts,
    restart_cost,
)
from console.core.apply.run import (
    DEFAULT_TIMEOUT_S,
    ApplyResult,
    PendingApply,
    default_owner,
    edits_by_version,
    flag_kinds,
    known_restart_cost,
    lock_owner,
    plan_apply,
    plan_restart,
    take_unit_lock,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "GATE_HINT",
    "NONE_CHOICE",
    "ApplyResult",
    "EditorForm",
    "FieldSpec",
    "PendingApply",
    "Preview",
    "RestartCost",
    "RestartRecord",
    "applied_setups",
    "cost_text",
    "default_owner",
    "duration_text",
    "editor_form",
    "edits_by_version",
    "flag_kinds",
    "host_restart_cost",
    "known_restart_cost",
    "lock_owner",
    "plan_apply",
    "plan_restart",
    "read_restarts",
    "record_applied",
    "restart_cost",
    "running_values",
    "shorter_start_offers",
    "take_unit_lock",
]
