"""The suite's tiers, chosen by marker (pyproject.toml [tool.pytest.ini_options] markers):

- `unit`: pure code and the console's screens on scripted hosts, in this process only: `make unit`, about 1 min
  on 2 cores, the tier to run before each commit. Every test that is neither of the two below is marked `unit` here.
- `system`: real processes — the SGLang stand-in, the demo host, a loopback sshd, the CLI as a subprocess, tmux.
- `testbed`: real systemd + sshd in systemd-nspawn containers (tests/testbed/).

And across them, `alone`: the tests that hold a measured time or rate to a known truth within a few percent (the
known-schedule server, bench_serving beside ours, the stand-in's calibration). `make test` runs the rest in
parallel workers and these one at a time beside them at the top CPU weight (scripts/run-suite.sh), so that the
figures carry no other test's CPU (they still hold with a core kept busy).

And `long(seconds)`: a test that waits on real time for half a minute or more (a tune, a benchmark crossing), mostly
idle. Under xdist every worker starts with its share of them (`start_long_tests_first`), so that they wait while the
others use the CPU instead of making the run's tail. Its pytest timeout comes from its seconds (`long_timeout_s`).

A test is `system` when its file says so (`pytestmark = pytest.mark.system`) or when it asks for a fixture that
starts a real part (REAL_FIXTURES). So that the fast tier cannot quietly grow slow, a `unit` test that starts a
process fails with what to do (`forbid_processes`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

# Fixtures that start a real part (a process, a container, a server socket of another program).
REAL_FIXTURES = frozenset(
    {
        "testbed_ready", "gpu_host", "pristine_gpu_host", "unknown_gpu_host",  # nspawn hosts
        "demo", "shared_demo", "untouched_demo",  # the demo host: supervisor + stand-in
        "sshd", "client", "narrow_client",  # the loopback OpenSSH sshd
        "schedule_server", "sim", "slow_sim", "models", "traffic", "manager", "sim_port",  # stand-in processes
    }
)  # fmt: skip
SLOW_TIERS = ("system", "testbed")


def classify(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(tier) for tier in SLOW_TIERS):
            continue
        if REAL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.system)
        else:
            item.add_marker(pytest.mark.unit)


class ProcessInUnitTest(AssertionError):
    pass


@pytest.fixture(autouse=True)
def forbid_processes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A `unit` test runs no child process: one that does belongs to the `system` tier (and says so)."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    where = request.node.nodeid

    def refuse(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        raise ProcessInUnitTest(
            f"{where} is in the unit tier but starts a process ({args!r}): "
            "add `pytestmark = pytest.mark.system` to its file (or use a REAL_FIXTURES fixture)"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    yield


def start_long_tests_first(items: list[pytest.Item], workers: int) -> None:
    """Reorder `items` so that each of `workers` xdist workers starts with its share of the `long` tests.

    Worksteal gives worker k the k-th of `workers` contiguous slices of the collection to start with, and later
    moves tests only from the end of a queue to a worker that ran out (xdist's WorkStealingScheduling). So long tests
    that sit together run one after the other on one worker: the tune tests did, 400 s of waiting in a row that
    decided when the run ended, with a third of the CPU idle. Here they are dealt longest first, each to the slice
    with the least long-test time so far, and lead their slices; every other test keeps its order (and its module's
    fixtures their grouping)."""
    long = [item for item in items if item.get_closest_marker("long")]
    if workers < 2 or not long:
        return
    rest = [item for item in items if not item.get_closest_marker("long")]
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    waited = [0.0] * workers
    for item in sorted(long, key=_long_seconds, reverse=True):
        lightest = waited.index(min(waited))
        shares[lightest].append(item)
        waited[lightest] += _long_seconds(item)
    reordered: list[pytest.Item] = []
    for share, size in zip(shares, first_slice_sizes(len(items), workers), strict=True):
        fill = max(0, size - len(share))
        reordered += share + rest[:fill]
        del rest[:fill]
    items[:] = reordered + rest


def first_slice_sizes(count: int, workers: int) -> list[int]:
    """The sizes of the contiguous slices worksteal hands its workers at the start: what is left, split evenly
    among the workers not served yet (xdist's WorkStealingScheduling.check_schedule)."""
    sizes = []
    for k in range(workers):
        sizes.append((count - sum(sizes)) // (workers - k))
    return sizes


# A long test's timeout. N in long(N) is its time measured on this project's 2-core VM; the suite runs it beside four
# other workers and, in CI, other work on the machine. Measured there: a core kept busy made the whole run 1.2x as
# long (663 and 784 s, README.md), and one request beside two hosts' teardowns was 25 % slow (issue 36). So
# LONG_SLOWDOWN x N leaves a slow machine more than twice the worst seen, and what reaches it is a hang.
# LONG_SETUP_S is for what a test may be the first of its worker to need: a session's testbed host booting (10-20 s
# each; rolling's three boot in its N already) and the removal of a crashed run's leftovers. What a session builds
# (the testbed's tree, 214 s on a new machine) is built before the clock starts (tests/suite_setup.py).
# The default timeout (300 s, pyproject.toml) stays the floor: a long test gets no less than any other.
LONG_SLOWDOWN = 3.0
LONG_SETUP_S = 60.0


def long_timeout_s(seconds: float, default_s: float) -> float:
    """pytest's timeout for a test marked long(seconds), with `default_s` the timeout of every other test."""
    return max(default_s, LONG_SLOWDOWN * seconds + LONG_SETUP_S)


def timeouts_from_long_marks(items: list[pytest.Item], default_s: float | None) -> None:
    """A `timeout` mark (pytest-timeout honours it per test) on each long test that has none of its own. Nothing
    where timeouts are off (default_s None or 0: `--timeout 0`, a debugger's run)."""
    if not default_s:
        return
    for item in items:
        if item.get_closest_marker("long") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(long_timeout_s(_long_seconds(item), default_s)))


def _long_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("long")
    assert marker is not None and marker.args, f"{item.nodeid}: write its measured time as `long(seconds)`"
    return float(marker.args[0])
