"""The suite's tiers, chosen by marker (pyproject.toml [tool.pytest.ini_options] markers):

- `unit`: pure code and the console's screens on scripted hosts, in this process only: `make unit`, about 1 min
  on 2 cores, the tier to run before each commit. Every test that is neither of the two below is marked `unit` here.
- `system`: real processes — the SGLang stand-in, the demo host, a loopback sshd, the CLI as a subprocess, tmux.
- `testbed`: real systemd + sshd in systemd-nspawn containers (tests/testbed/).

And across them, `alone`: the tests that hold a measured time or rate to a known truth within a few percent (the
known-schedule server, bench_serving beside ours, the stand-in's calibration). `make test` runs the rest in
parallel workers, then these one at a time, so that the figures carry no other test's CPU (they still hold with a
core kept busy).

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
