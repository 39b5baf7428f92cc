"""`opsconsole freeze / snapshots / diff / restore` as a user runs them, where no host is needed: usage errors
before anything is contacted (exit 2), and the workspace-only verbs on real snapshot files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.core.snapshot import save_snapshot
from console.workspace import Workspace
from tests.support import snapshots as snaps

pytestmark = pytest.mark.system  # real processes (tests/tiers.py)

REPO_ROOT = Path(__file__).resolve().parents[2]


def opsconsole(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "console.cli", "--workspace", str(workspace), *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--name", "v2; rm -rf /"), "snapshot name 'v2; rm -rf /'"),
        (("--name", "v2", "--doc", "production.md"), "give a file as an absolute path"),
        (("--name", "v2", "--force", " "), "--force needs a reason"),
    ],
)
def test_bad_freeze_arguments_are_usage_errors_before_any_host_is_contacted(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = opsconsole(tmp_path, "freeze", "no-such-host.invalid", *args, "--yes")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "no-such-host" not in done.stderr
    assert not (tmp_path / "logs" / "audit.jsonl").exists()  # no remote command was run


def test_snapshots_and_diff_read_the_workspace(tmp_path: Path) -> None:
    empty = opsconsole(tmp_path, "snapshots")
    assert empty.returncode == 0 and "no snapshots yet" in empty.stdout
    workspace = Workspace(tmp_path)
    t1, t2 = snaps.unit_text(steps=1), snaps.unit_text(steps=2)
    save_snapshot(workspace, snaps.snapshot("v1", text=t1, info=snaps.server_info(t1), frozen_at=snaps.AT))
    save_snapshot(workspace, snaps.snapshot("v2", text=t2, note="faster", frozen_at=snaps.AT.replace(hour=13)))
    listing = opsconsole(tmp_path, "snapshots")
    lines = listing.stdout.splitlines()
    assert lines[1].startswith("   v1") and lines[2].startswith("*  v2") and "faster" in lines[2]
    data = json.loads(opsconsole(tmp_path, "snapshots", "gpu1", "--json").stdout)
    assert data["production"] == [{"host": "gpu1", "unit": "sglang.service", "snapshot": "v2"}]
    assert json.loads(opsconsole(tmp_path, "snapshots", "gpu9", "--json").stdout)["snapshots"] == []
    diff = opsconsole(tmp_path, "diff", "v1", "v2")
    assert diff.returncode == 0 and "--speculative-num-steps         1  ->  2" in diff.stdout
    missing = opsconsole(tmp_path, "diff", "v1", "v9")
    assert missing.returncode == 1 and "no snapshot 'v9'" in missing.stderr
    misnamed = opsconsole(tmp_path, "diff", "v1", "v 9")  # a usage error, said (it was a traceback)
    assert misnamed.returncode == 2 and misnamed.stderr.startswith("opsconsole diff: snapshot name 'v 9'")
    (tmp_path / "profiles" / "snapshots" / "broken.toml").write_text("name = ")
    broken = opsconsole(tmp_path, "snapshots", "--json")
    assert broken.returncode == 1 and "broken.toml" in json.loads(broken.stdout)["problems"][0]


def test_restore_of_a_snapshot_that_does_not_exist_touches_nothing(tmp_path: Path) -> None:
    done = opsconsole(tmp_path, "restore", "no-such-host.invalid", "v9", "--yes", "--json")
    assert done.returncode == 1 and json.loads(done.stdout)["state"] == "error"
    assert "no snapshot 'v9'" in done.stderr and not (tmp_path / "logs" / "audit.jsonl").exists()
