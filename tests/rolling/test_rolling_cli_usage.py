"""`--gate bench` and `freeze @GROUP` as a user runs them, where no host is needed: the usage errors that come before
any host is contacted (exit 2, no lock taken, no remote command run, nothing written)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from console.bench.records import BenchRecord, append_records
from console.core.snapshot import save_snapshot_set, snapshot_set_of
from console.workspace import Workspace
from tests.rolling.test_rolling_gate import AT, record

pytestmark = pytest.mark.system  # real processes (tests/tiers.py)

REPO_ROOT = Path(__file__).resolve().parents[2]
# Hosts nobody can reach: any attempt to contact one would fail with another message than the one expected.
PROFILE = '[ssh]\nhost = "{name}.invalid"\n'


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for name in ("gpu-a", "gpu-b"):
        (profiles / f"{name}.toml").write_text(PROFILE.format(name=name))
    (profiles / "groups.toml").write_text('prod = ["gpu-a", "gpu-b"]\n')
    return tmp_path


def opsconsole(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "console.cli", "--workspace", str(workspace), *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def nothing_contacted(workspace: Path) -> bool:
    return not (workspace / "logs" / "audit.jsonl").exists() and not (workspace / "logs" / "locks").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gate", "bench"), "no benchmark record of gpu-a at any concurrency in the workspace's logs/"),
        (("--gate", "bench", "--gate-concurrency", "8"), "run `opsconsole bench gpu-a --concurrency 8 --repeat 3`"),
        (("--gate", "bench", "--canary", "0"), "--gate bench judges the canary: give --canary 1 or more"),
        (("--gate-max-regression", "5%"), "--gate-concurrency and --gate-max-regression go with --gate bench"),
        (("--gate", "bench", "--gate-max-regression", "lots"), "--gate-max-regression 'lots': give a percentage"),
        (("--gate", "bench", "--gate-concurrency", "0"), "--gate-concurrency 0: give a whole number of at least 1"),
    ],
)
def test_gate_usage_errors_come_before_any_host_is_contacted(
    workspace: Path, args: tuple[str, ...], message: str
) -> None:
    done = opsconsole(workspace, "apply", "@prod", "--rolling", "--set", "speculative-num-steps=3", *args, "--yes")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and ".invalid" not in done.stderr
    assert nothing_contacted(workspace)


def test_the_gate_needs_a_rolling_change_and_a_record_at_its_level(workspace: Path) -> None:
    alone = opsconsole(workspace, "restore", "gpu-a", "v2", "--gate", "bench", "--yes")
    assert alone.returncode == 2 and "add --rolling" in alone.stderr
    # A record of the canary at C=32 only: the gate at C=8 has nothing to compare with, and says so.
    records: list[BenchRecord] = [record("r", host="gpu-a", c=32)]
    append_records(Workspace(workspace).logs, records)
    done = opsconsole(workspace, "restore", "@prod", "v2", "--rolling", "--gate", "bench", "--gate-concurrency", "8",
                      "--yes")  # fmt: skip
    assert done.returncode == 2 and "no benchmark record of gpu-a at C=8" in done.stderr
    assert not (Workspace(workspace).logs / "locks").exists()


def test_a_group_freeze_refuses_a_taken_name_before_any_host_is_contacted(workspace: Path) -> None:
    save_snapshot_set(Workspace(workspace), snapshot_set_of("v2", "prod", AT, {"gpu-a": (True, "")}))
    done = opsconsole(workspace, "freeze", "@prod", "--name", "v2", "--yes")
    assert done.returncode == 2 and "snapshot set 'v2' exists" in done.stderr
    (workspace / "profiles" / "snapshots").mkdir()
    (workspace / "profiles" / "snapshots" / "v3.gpu-b.toml").write_text("")
    taken = opsconsole(workspace, "freeze", "@prod", "--name", "v3", "--yes")
    assert taken.returncode == 2 and "snapshot 'v3.gpu-b' exists" in taken.stderr
    long = opsconsole(workspace, "freeze", "@prod", "--name", "v" * 60, "--yes")
    assert long.returncode == 2 and "choose a shorter set name" in long.stderr
    single = opsconsole(workspace, "freeze", "gpu-a", "--name", "v4", "--rolling", "--yes")
    assert single.returncode == 2 and "--rolling changes a group" in single.stderr
    assert nothing_contacted(workspace)
