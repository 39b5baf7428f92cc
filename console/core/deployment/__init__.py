"""A deployment: every SGLang server that together serves one model, seen, checked, changed and restarted as one
(docs/deployments.md). The ranks of one model over several hosts, prefill and decode servers behind smg, or a single
host (the deployment of one member): one type that the CLI, the console, predict, tune and freeze all take.

    model.py    Deployment, Member, RouterSpec (pure); parse_deployment: the profile's rules
    load.py     resolve_deployment: TARGET -> Deployment (profiles/deployments/NAME.toml, else a host)
    checks.py   what must match across members, on their launches (pure)
    fanout.py   which members carry an edit (pure)
    order.py    the restart order, written once (pure): apply, restart and rollback all run it
    health.py   the deployment's state from its members' readings (pure): rank 0's health, never a dummy 200
    sides.py    a PD benchmark side by side (pure): prefill's TTFT, decode's TPOT, smg's and the servers' counters

Pure apart from load.py (which reads the profiles): the reading (console.core.status) and the change
(console.core.roll) are done where the hosts are reached.

What the rest of console/ uses is imported from here; the modules are this package's own."""

from console.core.deployment.checks import (
    GATE_DEST,
    MemberLaunch,
    Mismatch,
    check_members,
    errors,
    gate_note,
    launch_from_unit,
    no_gate_text,
)
from console.core.deployment.fanout import (
    OWN_FLAGS,
    MemberEdits,
    member_edits,
)
from console.core.deployment.health import (
    DeploymentHealth,
    MemberHealth,
    MemberReading,
    RouterListing,
    RouterReading,
    judge,
    member_health,
)
from console.core.deployment.load import (
    deployment_names,
    deployments_dir,
    is_deployment,
    load_deployment,
    membership,
    refuse_deployment,
    refuse_member_change,
    resolve_deployment,
)
from console.core.deployment.model import (
    DEFAULT_BOOTSTRAP_PORT,
    Deployment,
    DeploymentError,
    Kind,
    Member,
    Role,
    RouterSpec,
    parse_deployment,
)
from console.core.deployment.order import (
    RestartOrder,
    Step,
    restart_order,
)
from console.core.deployment.sides import (
    SideReadings,
    pd_sides,
    sides_lines,
)

__all__ = [
    "DEFAULT_BOOTSTRAP_PORT",
    "GATE_DEST",
    "OWN_FLAGS",
    "Deployment",
    "DeploymentError",
    "DeploymentHealth",
    "Kind",
    "Member",
    "MemberEdits",
    "MemberHealth",
    "MemberLaunch",
    "MemberReading",
    "Mismatch",
    "RestartOrder",
    "Role",
    "RouterListing",
    "RouterReading",
    "RouterSpec",
    "SideReadings",
    "Step",
    "check_members",
    "deployment_names",
    "deployments_dir",
    "errors",
    "gate_note",
    "is_deployment",
    "judge",
    "launch_from_unit",
    "load_deployment",
    "member_edits",
    "member_health",
    "membership",
    "no_gate_text",
    "parse_deployment",
    "pd_sides",
    "refuse_deployment",
    "refuse_member_change",
    "resolve_deployment",
    "restart_order",
    "sides_lines",
]
