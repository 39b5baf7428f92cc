"""A group freeze's snapshot set: NAME.HOST per host, its index in profiles/snapshot-sets/ (written once, read back,
a host not frozen named with why), and each host's drift from its part of the set among the overview's alerts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.core.snapshot import (
    ProductionStatus,
    SnapshotError,
    load_snapshot_set,
    member_names,
    save_snapshot_set,
    snapshot_set_of,
)
from console.core.status import HostView, alerts_for
from console.errors import UsageError
from console.host.ssh import ConnectionState
from console.workspace import Workspace
from tests.tui.support import status as host_status

AT = datetime(2026, 12, 1, 12, tzinfo=UTC)


def test_each_host_gets_name_dot_host_and_a_name_too_long_is_a_usage_error() -> None:
    assert member_names("v2", ["gpu-a", "gpu-b"]) == {"gpu-a": "v2.gpu-a", "gpu-b": "v2.gpu-b"}
    with pytest.raises(UsageError, match="choose a shorter set name"):
        member_names("v" * 60, ["gpu-a"])
    with pytest.raises(UsageError, match="snapshot name"):
        member_names("bad name", ["gpu-a"])


def test_the_set_index_reads_back_and_is_never_overwritten(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    whole = snapshot_set_of("v2", "prod", AT, {"gpu-a": (True, "frozen"), "gpu-b": (True, "frozen")})
    assert whole.complete and whole.members == {"gpu-a": "v2.gpu-a", "gpu-b": "v2.gpu-b"}
    path = save_snapshot_set(workspace, whole)
    assert path == tmp_path / "profiles" / "snapshot-sets" / "v2.toml"
    assert load_snapshot_set(workspace, "v2") == whole
    assert load_snapshot_set(workspace, "v3") is None
    with pytest.raises(FileExistsError):
        save_snapshot_set(workspace, whole)
    part = snapshot_set_of("v3", "prod", AT, {"gpu-a": (True, "frozen"), "gpu-b": (False, "refused: unhealthy")})
    assert not part.complete and part.not_frozen == {"gpu-b": "refused: unhealthy"}
    save_snapshot_set(workspace, part)
    assert load_snapshot_set(workspace, "v3") == part
    (tmp_path / "profiles" / "snapshot-sets" / "bad.toml").write_text("[members]\ngpu-a = 1\n")
    with pytest.raises(SnapshotError, match=r"bad\.toml: not a snapshot set"):
        load_snapshot_set(workspace, "bad")


def test_a_host_drifting_from_its_production_snapshot_is_an_overview_alert() -> None:
    drifting = ProductionStatus(snapshot="v2.gpu-a", frozen_at=AT, in_sync=False,
                                drift=[{"text": "steps 3, production v2.gpu-a has 2"}])  # fmt: skip
    in_sync = ProductionStatus(snapshot="v2.gpu-b", frozen_at=AT, in_sync=True)
    unknown = ProductionStatus(snapshot="v2.gpu-c", frozen_at=AT, in_sync=None)

    def alerts(production: ProductionStatus | None) -> tuple[str, ...]:
        status = host_status().model_copy(update={"production": production})
        return alerts_for(HostView("gpu-a", AT, ConnectionState("connected"), status=status))

    assert "drift from v2.gpu-a" in alerts(drifting)
    assert not any(a.startswith("drift") for a in (*alerts(in_sync), *alerts(unknown), *alerts(None)))
