"""tests/support/cli_run.py on the real CLI and the demo host: a --json run prints its timestamped progress on stderr
where OPSCONSOLE_PROGRESS asks for it (and none without: the control), and a wait that runs out kills the CLI and says
what it was doing: its progress lines, its other stderr, the workspace's audit log, the test's own timeout."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli.common import PROGRESS_ENV
from tests.support.cli_run import CliRanPast, finish_cli, run_cli, start_cli
from tests.support.demo import APPLY_TIMEOUT, OPSCONSOLE, Demo, poll, running_demo

pytestmark = pytest.mark.system

STAMPED = re.compile(r"^\[\d\d:\d\d:\d\d\] ", re.MULTILINE)
STEPS = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        yield running


def apply_argv(demo: Demo, *edits: str) -> list[str]:
    return [str(OPSCONSOLE), "--workspace", str(demo.workspace), "apply", "demo", *edits, "--yes", "--json",
            "--timeout", APPLY_TIMEOUT]  # fmt: skip


def test_a_json_run_prints_its_progress_on_stderr_only_where_asked(demo: Demo) -> None:
    plain_env = {k: v for k, v in os.environ.items() if k != PROGRESS_ENV}
    plain = subprocess.run(apply_argv(demo, *STEPS), capture_output=True, text=True, timeout=120, env=plain_env)
    assert plain.returncode == 0, plain.stderr
    assert STAMPED.findall(plain.stderr) == [], "a --json run without OPSCONSOLE_PROGRESS printed progress"

    asked = run_cli(apply_argv(demo, "--set", "speculative-num-steps=2", "--set", "speculative-num-draft-tokens=3"),
                    env=plain_env, timeout=120)  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["state"] == "verified"  # stdout is still the one JSON object
    lines = [line for line in asked.stderr.splitlines() if STAMPED.match(line)]
    assert len(lines) >= 3 and any("verified" in line for line in lines), asked.stderr


def test_a_wait_that_runs_out_kills_the_cli_and_says_what_it_was_doing(demo: Demo) -> None:
    # A start 50 times slower than the demo's: it runs for seconds after it wrote the unit, past a wait of one.
    unit_before = demo.host().unit()
    proc = start_cli(apply_argv(demo, *STEPS, "--set", "sim-time-scale=0.05"), env=dict(os.environ))
    try:
        poll(lambda: demo.host().unit() != unit_before or proc.poll() is not None, 60, "the apply to write the unit")
        assert proc.poll() is None, "the apply ended before the wait began: the test proves nothing"
        with pytest.raises(CliRanPast) as failed:
            finish_cli(proc, timeout=1.0)
        assert proc.poll() is not None, "the CLI was left running"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = str(failed.value)
    assert said.startswith("`opsconsole --workspace ") and "did not end within 1 s" in said, said
    assert "the test's pytest timeout 300 s" in said, said
    progress = said.split("its progress (", 1)[1].split("the rest of its stderr", 1)[0].splitlines()[1:]
    assert progress and all(STAMPED.match(line.strip()) for line in progress), said
    assert any("written" in line for line in progress), said  # as far as it got: the unit was written
    assert f"the audit log {demo.workspace / 'logs' / 'audit.jsonl'}" in said, said
