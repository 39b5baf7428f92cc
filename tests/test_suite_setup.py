"""tests/suite_setup.py, what `make test` builds before pytest's clock starts, run as `make test` runs it, against a
cache of its own: it finds exactly the entries the testbed fixtures use and says so with its time, and a build that
fails stops the suite with the reason and leaves no half-built entry. (Its cold build is measured by hand: minutes of
debootstrap, docs/measured.md.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import sglang_wheels
from tests.support.sglang_bench import SGLANG_VERSION
from tests.testbed import cache

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[1]
UNREACHABLE = "http://127.0.0.1:9/debian"  # nothing listens on port 9: a build fails at once instead of running


def setup(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0:
        pytest.fail("the setup builds the testbed, which needs root: run the tests as root")
    environ = {**os.environ, "OPSCONSOLE_TESTBED_CACHE": str(tmp_path / "testbed"),
               "OPSCONSOLE_CACHE": str(tmp_path / "cache"), **env}  # fmt: skip
    environ.pop("SGLANG_BENCH_SERVING", None)
    return subprocess.run(
        [sys.executable, "-m", "tests.suite_setup"], cwd=REPO, env=environ, capture_output=True, text=True, timeout=120
    )


def test_a_ready_cache_is_found_and_each_step_says_its_time(tmp_path: Path) -> None:
    root = tmp_path / "testbed"
    for entry in (cache.tree_path(root, UNREACHABLE), cache.site_path(root)):
        entry.mkdir(parents=True)
        (entry / cache.COMPLETE_MARKER).write_text("ready\n")
    script = tmp_path / "cache" / f"sglang-{SGLANG_VERSION}" / "bench_serving.py"
    script.parent.mkdir(parents=True)
    script.write_text("# bench_serving\n")
    for version in sglang_wheels.WHEEL_OF.values():  # the wire-format tests' source files
        for member in sglang_wheels.members_of(version):
            kept = tmp_path / "cache" / f"sglang-{version}" / member
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text("# source\n")
    done = setup(tmp_path, OPSCONSOLE_TESTBED_MIRROR=UNREACHABLE)
    assert done.returncode == 0, done.stdout + done.stderr
    line = done.stdout.strip()
    assert line.startswith("setup: ") and line.endswith(" s in all"), line
    for step in ("testbed tree", "site", "bench_serving", "sglang wheels"):
        assert re.search(rf"\b{step} \d+\.\d s \(cached\)", line), line
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == sorted(
        [cache.tree_path(root, UNREACHABLE).name, cache.site_path(root).name]
    ), "the setup built something beside the ready entries: it looked for others than the fixtures use"


def test_a_build_that_fails_stops_with_the_reason_and_leaves_no_half_built_tree(tmp_path: Path) -> None:
    done = setup(tmp_path, OPSCONSOLE_TESTBED_MIRROR=UNREACHABLE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "testbed tree FAILED after" in done.stdout, done.stdout
    assert "setup failed: debootstrap of the testbed tree" in done.stderr, done.stderr
    assert "127.0.0.1:9" in done.stderr
    assert [p.name for p in (tmp_path / "testbed").iterdir() if p.name != ".lock"] == []
