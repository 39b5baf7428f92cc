"""The testbed cache's bookkeeping (no debootstrap here: that is exercised by every testbed session)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.testbed import cache


def _entry(root: Path, name: str, age_s: float) -> Path:
    entry = root / name
    entry.mkdir()
    marker = entry / cache.COMPLETE_MARKER
    marker.write_text("done\n")
    then = time.time() - age_s
    os.utime(marker, (then, then))
    return entry


@pytest.mark.system
def test_entries_unused_for_a_week_are_pruned_and_recent_ones_kept(tmp_path: Path) -> None:
    old = _entry(tmp_path, "tree-0000000000000001", cache.PRUNE_AFTER_S + 60)
    recent = _entry(tmp_path, "tree-0000000000000002", 60)
    other_kind = _entry(tmp_path, "site-0000000000000003", cache.PRUNE_AFTER_S + 60)
    cache._prune_unused(tmp_path, kind="tree")
    assert (old.exists(), recent.exists(), other_kind.exists()) == (False, True, True)


def test_a_complete_entry_is_found_without_building_and_marked_as_used(tmp_path: Path) -> None:
    entry = _entry(tmp_path, "tree-0000000000000004", 3600)

    def must_not_build(_tmp: Path) -> None:
        raise AssertionError("a complete entry was rebuilt")

    report = cache._ensure(entry, tmp_path, must_not_build)
    assert (report.path, report.built) == (entry, False)
    assert time.time() - (entry / cache.COMPLETE_MARKER).stat().st_mtime < 60


@pytest.mark.system
def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    def failing_build(tmp: Path) -> None:
        (tmp / "half-written").write_text("x")
        raise RuntimeError("mirror unreachable")

    with pytest.raises(RuntimeError, match="mirror unreachable"):
        cache._ensure(tmp_path / "tree-0000000000000005", tmp_path, failing_build)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock"]
