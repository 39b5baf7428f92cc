"""scripts/run-suite.sh, `make test`'s pytest part, run with a stand-in pytest that reports where it ran: the timed
tests in a cgroup of the top CPU weight, the bulk beside them where the script was started, both at once, Ctrl-C able
to reach both, the cgroup gone after, and a failure of either failing the whole. And with a stand-in python for the
setup (tests/suite_setup.py): it ends before either pytest starts, and a failed setup runs no test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cgroups import CPU_HIERARCHY, own_cpu_cgroup

pytestmark = pytest.mark.system

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "run-suite.sh"

# Reports its run's cgroup, that cgroup's CPU weight and whether SIGINT is ignored; waits until the other run has
# started (so the two can only pass side by side), then exits with the code in <run>.rc, if any.
FAKE_PYTEST = r"""#!/usr/bin/env bash
out=$(dirname "$0")
case "$*" in *"not alone"*) run=bulk other=timed ;; *) run=timed other=bulk ;; esac
touch "$out/$run.started"
[ -e "$out/setup.done" ] || echo "$run: started before the setup was done"
cg=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' /proc/self/cgroup)
shares=$(cat "/sys/fs/cgroup/cpu$cg/cpu.shares")
sigign=$(awk '/^SigIgn/ {print $2}' /proc/self/status)
printf '%s\n%s\n%s\n' "$cg" "$shares" "$sigign" >"$out/$run.report"
for _ in $(seq 600); do [ -e "$out/$other.started" ] && break; sleep 0.05; done
[ -e "$out/$other.started" ] || { echo "$run: the $other run never started beside me"; exit 3; }
echo "$run output"
exit "$(cat "$out/$run.rc" 2>/dev/null || echo 0)"
"""

# The setup: takes a moment (a pytest started beside it would be seen), then exits with the code in setup.rc.
FAKE_PYTHON = r"""#!/usr/bin/env bash
out=$(dirname "$0")
[ "$*" = "-m tests.suite_setup" ] || { echo "python: unexpected arguments: $*"; exit 9; }
sleep 0.3
ls "$out"/*.started >/dev/null 2>&1 && echo "setup: a pytest started before the setup ended"
rc=$(cat "$out/setup.rc")
[ "$rc" = 0 ] && touch "$out/setup.done"
echo "setup: stand-in"
exit "$rc"
"""


def run_suite(
    tmp_path: Path, bulk_rc: int = 0, timed_rc: int = 0, setup_rc: int = 0
) -> tuple[subprocess.CompletedProcess[str], dict]:
    for name, text in (("pytest", FAKE_PYTEST), ("python", FAKE_PYTHON)):
        fake = tmp_path / name
        fake.write_text(text)
        fake.chmod(0o755)
    (tmp_path / "bulk.rc").write_text(str(bulk_rc))
    (tmp_path / "timed.rc").write_text(str(timed_rc))
    (tmp_path / "setup.rc").write_text(str(setup_rc))
    result = subprocess.run(
        ["bash", str(SCRIPT), "5"],
        env={**os.environ, "BIN": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    reports = {}
    for run in ("bulk", "timed"):
        report = tmp_path / f"{run}.report"
        if report.exists():
            cgroup, shares, sigign = report.read_text().split()
            reports[run] = {"cgroup": cgroup, "shares": shares, "sigint_ignored": bool(int(sigign, 16) & (1 << 1))}
    return result, reports


def test_the_timed_tests_run_at_the_top_cpu_weight_beside_the_bulk(tmp_path: Path) -> None:
    if not (CPU_HIERARCHY / "cpu.shares").exists() or os.geteuid() != 0:
        pytest.fail("needs root and cgroup v1's cpu hierarchy, as on this project's machines")
    result, reports = run_suite(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    bulk, timed = reports["bulk"], reports["timed"]
    own = own_cpu_cgroup()  # where the script was started
    assert timed["cgroup"].startswith(f"{own.rstrip('/')}/opsconsole-timed-") and timed["shares"] == "262144", timed
    assert bulk["cgroup"] == own, bulk
    assert not bulk["sigint_ignored"] and not timed["sigint_ignored"], reports
    # the timed run's output comes after the bulk's, not mixed into it
    assert result.stdout.index("bulk output") < result.stdout.index("timed output"), result.stdout
    assert not (CPU_HIERARCHY / timed["cgroup"].lstrip("/")).exists(), "the timed run's cgroup is left behind"


@pytest.mark.parametrize(("bulk_rc", "timed_rc"), [(1, 0), (0, 1)])
def test_a_failure_in_either_run_fails_the_suite(tmp_path: Path, bulk_rc: int, timed_rc: int) -> None:
    result, reports = run_suite(tmp_path, bulk_rc, timed_rc)
    assert result.returncode != 0, result.stdout + result.stderr
    assert set(reports) == {"bulk", "timed"}, "both ran to the end"


def test_the_setup_runs_before_either_pytest(tmp_path: Path) -> None:
    result, reports = run_suite(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(reports) == {"bulk", "timed"}
    assert "before" not in result.stdout, result.stdout
    assert result.stdout.index("setup: stand-in") < result.stdout.index("bulk output"), result.stdout


def test_a_failed_setup_runs_no_test_and_fails_the_suite(tmp_path: Path) -> None:
    result, reports = run_suite(tmp_path, setup_rc=1)
    assert result.returncode != 0, result.stdout + result.stderr
    assert reports == {} and not list(tmp_path.glob("*.started")), "a pytest started"
    assert "the setup failed" in result.stderr
