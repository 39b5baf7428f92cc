"""Production snapshots: the data, the workspace's store of them, diff and drift, the production document,
and freeze / restore.

    model.py        a snapshot as data (pure): its TOML form, which one is a host's production one
    store.py        profiles/snapshots/NAME.toml read, listed and written
    drift.py        how the running setup differs from the production snapshot (pure)
    diff.py         how two snapshots differ (pure)
    doc.py          the production document a freeze writes on the host (pure)
    freeze_plan.py  the pure half of freeze and restore: the capture's checks, the snapshot, the restore edits
    freeze.py       plan_freeze / plan_restore: read the host, carry the plan out
    sets.py         a group freeze's snapshot set: NAME.HOST per host, its index profiles/snapshot-sets/NAME.toml
    deployment.py   a deployment's freeze: every member as NAME.MEMBER, the set, one document for the deployment

What the rest of console/ uses is imported from here; the modules are this package's own."""

from console.core.snapshot.deployment import (
    DeploymentFreezeResult,
    PendingDeploymentFreeze,
    deployment_document,
    deployment_snapshots,
    left_after,
    member_restore,
    plan_deployment_freeze,
)
from console.core.snapshot.diff import (
    diff_snapshots,
)
from console.core.snapshot.doc import (
    render_document,
)
from console.core.snapshot.drift import (
    ProductionStatus,
)
from console.core.snapshot.freeze import (
    FreezeEvent,
    FreezeResult,
    FreezeStep,
    PendingFreeze,
    plan_freeze,
    plan_restore,
)
from console.core.snapshot.freeze_plan import (
    FreezePlan,
    FreezeRequest,
)
from console.core.snapshot.model import (
    Snapshot,
    SnapshotError,
    best_throughput,
    next_name,
    production_names,
    production_of,
    setup_text,
)
from console.core.snapshot.sets import (
    SnapshotSet,
    load_snapshot_set,
    member_names,
    save_snapshot_set,
    set_path,
    snapshot_set_of,
)
from console.core.snapshot.store import (
    load_snapshot,
    load_snapshots,
    production_of_host,
    save_snapshot,
    snapshot_path,
    snapshots_dir,
)

__all__ = [
    "DeploymentFreezeResult",
    "FreezeEvent",
    "FreezePlan",
    "FreezeRequest",
    "FreezeResult",
    "FreezeStep",
    "PendingDeploymentFreeze",
    "PendingFreeze",
    "ProductionStatus",
    "Snapshot",
    "SnapshotError",
    "SnapshotSet",
    "best_throughput",
    "deployment_document",
    "deployment_snapshots",
    "diff_snapshots",
    "left_after",
    "load_snapshot",
    "load_snapshot_set",
    "load_snapshots",
    "member_names",
    "member_restore",
    "next_name",
    "plan_deployment_freeze",
    "plan_freeze",
    "plan_restore",
    "production_names",
    "production_of",
    "production_of_host",
    "render_document",
    "save_snapshot",
    "save_snapshot_set",
    "set_path",
    "setup_text",
    "snapshot_path",
    "snapshot_set_of",
    "snapshots_dir",
]
