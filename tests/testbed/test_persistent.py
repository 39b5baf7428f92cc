"""A persistent testbed host: its disk (an overlay over the shared tree) survives a clean halt and boot, enabled
units start by themselves on the way up, and teardown removes the disk and its mount with the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.testbed import cache, recipe, resources
from tests.testbed.host import TRIVIAL_EXEC_START, GpuHost
from tests.testbed.system import TestbedError

pytestmark = pytest.mark.testbed

TRIVIAL_UNIT = recipe.sglang_unit(TRIVIAL_EXEC_START, description="trivial")


def _mounted(path: Path) -> bool:
    return any(line.split()[1] == str(path) for line in Path("/proc/mounts").read_text().splitlines())


def test_a_persistent_host_keeps_its_disk_and_starts_only_enabled_units_after_a_reboot(testbed_ready: None) -> None:
    host = GpuHost.boot("gpu7", unit_text=TRIVIAL_UNIT, persistent=True)
    root = host.disk / "root"
    in_the_shared_tree = cache.ensure_tree().path / "var/lib/sglang/written-on-the-host"
    try:
        assert _mounted(root)
        first_pid = host.leader_pid()
        host.root_run("echo kept > /var/lib/sglang/written-on-the-host && systemctl disable --quiet sglang.service")
        host.reboot()
        assert host.leader_pid() != first_pid  # a new systemd, not the old one
        assert host.root_run("cat /var/lib/sglang/written-on-the-host").stdout == "kept\n"
        # disabled before the halt: it stays down
        props = host.service_properties("ActiveState", "UnitFileState")
        assert props == {"ActiveState": "inactive", "UnitFileState": "disabled"}
        host.root_run("systemctl enable --quiet sglang.service")
        host.reboot()
        # enabled: up by itself, nothing installed or started by the testbed
        host.wait_healthy(timeout=30)
        assert host.service_properties("ActiveState", "UnitFileState") == {
            "ActiveState": "active",
            "UnitFileState": "enabled",
        }
        assert host.ssh("cat /var/lib/sglang/written-on-the-host").stdout == "kept\n"  # sshd and its key came back
        # the host wrote to its own disk; the tree every host boots from did not change
        assert (host.disk / "upper/var/lib/sglang/written-on-the-host").is_file()
        assert not in_the_shared_tree.exists()
    finally:
        host.teardown()
    assert not _mounted(root) and not host.temp_dir.exists()
    assert not resources.STATE_DIR.joinpath(f"{host.machine}.json").exists()


def test_a_volatile_host_refuses_to_reboot(gpu_host: GpuHost) -> None:
    with pytest.raises(TestbedError, match="volatile"):
        gpu_host.reboot()
