"""What a host is doing, read: one refresh, the dashboard's live picture, the fleet through Prometheus, a group.

    host.py     read_status: one full refresh of a host as a typed HostStatus (`opsconsole status --json`)
    monitor.py  the dashboard's picture of one host (Monitor: pure, HostView out) and HostWatcher, which keeps
                its session and refreshes it for as long as the console runs
    fleet.py    the fleet's figures from one Prometheus query a refresh (FleetWatcher), for the console's overview
    group.py    `status @GROUP`: every member, from Prometheus where it knows the member, over SSH for the rest
    deployment.py  `status DEPLOYMENT`: every member side by side, the deployment judged as one

What the rest of console/ uses is imported from here; the modules are this package's own."""

from console.core.status.deployment import (
    DeploymentStatus,
    RouterStatus,
    failure_since,
    listing_for,
    member_reading,
    open_members,
    read_deployment,
    read_deployment_status,
    read_router,
    read_sides,
)
from console.core.status.fleet import (
    FleetWatcher,
    fleet_view_once,
    host_names,
)
from console.core.status.group import (
    GroupStatus,
    MemberStatus,
    read_group_status,
)
from console.core.status.host import (
    ConnectionStatus,
    HostStatus,
    ServiceStatus,
    SglangStatus,
    read_status,
)
from console.core.status.monitor import (
    HostView,
    HostWatcher,
    Monitor,
    SetupValue,
    UnitAsk,
    alerts_for,
    setup_label,
    setup_values,
    unit_ask,
)

__all__ = [
    "ConnectionStatus",
    "DeploymentStatus",
    "FleetWatcher",
    "GroupStatus",
    "HostStatus",
    "HostView",
    "HostWatcher",
    "MemberStatus",
    "Monitor",
    "RouterStatus",
    "ServiceStatus",
    "SetupValue",
    "SglangStatus",
    "UnitAsk",
    "alerts_for",
    "failure_since",
    "fleet_view_once",
    "host_names",
    "listing_for",
    "member_reading",
    "open_members",
    "read_deployment",
    "read_deployment_status",
    "read_group_status",
    "read_router",
    "read_sides",
    "read_status",
    "setup_label",
    "setup_values",
    "unit_ask",
]
