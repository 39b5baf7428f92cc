"""Root fixtures: the GPU-host testbed (real systemd in systemd-nspawn + real OpenSSH sshd, see tests/testbed/).

- `gpu_host` (session): host "gpu1", its key in known_hosts, sglang.service running the simulator.
- `pristine_gpu_host`: the same host, put back to its original unit and a running service after the test
  if the test changed either (for tests that apply changes).
- `unknown_gpu_host`: a second host "gpu2" whose key is NOT in its known_hosts (emptied before each test).

The hosts boot once per session, on first use, and are always torn down at the end (also when tests fail);
hosts left by a crashed earlier run are removed before the first boot.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from console.sim.plugin import register
from tests.support import budget
from tests.testbed import cache, resources
from tests.testbed.host import GpuHost
from tests.tiers import classify, forbid_processes, start_long_tests_first, timeouts_from_long_marks

__all__ = ["forbid_processes"]

# The suite is a composition root, as the CLI's main is: the stand-in as an SGLang launcher and the demo host as a
# transport are registered once here for the tests that open hosts or read units in this process.
register()

log = logging.getLogger(__name__)

# pytest-xdist's workers put COLUMNS=80 and LINES=24 in the environment; Textual (and Rich) take those over a real
# terminal's size, so a console started in tmux by a worker would draw at 80x24. Tests run as in a plain run.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

TESTBED_TOOLS = ("systemd-nspawn", "debootstrap", "ip", "nsenter", "ssh", "ssh-keygen", "chroot")
TOOL_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


@pytest.fixture(scope="session")
def testbed_ready() -> None:
    """Root, the tools, the cached tree; and no leftovers of a crashed run. Fails (never skips) without them.

    `make test` builds the tree before pytest starts (tests/suite_setup.py), so that no test's timeout pays for it;
    here it is built only for a test run by hand on a machine that has none yet."""
    if os.geteuid() != 0:
        pytest.fail("the GPU-host testbed needs root (network namespaces, systemd-nspawn); run the tests as root")
    missing = [tool for tool in TESTBED_TOOLS if shutil.which(tool, path=TOOL_PATH) is None]
    if missing:
        pytest.fail(f"the GPU-host testbed needs {', '.join(missing)}: run `make system-deps` (scripts/system-deps.sh)")
    removed = resources.cleanup_leftovers()
    if removed:
        log.warning("removed testbed leftovers of an earlier run: %s", ", ".join(removed))
    cache.ensure_tree()
    cache.ensure_site()


@pytest.fixture(scope="session")
def gpu_host(testbed_ready: None) -> Iterator[GpuHost]:
    host = GpuHost.boot("gpu1")
    try:
        yield host
    finally:
        host.teardown()


@pytest.fixture
def pristine_gpu_host(gpu_host: GpuHost) -> Iterator[GpuHost]:
    """gpu_host, restored after the test if it left the unit changed or the service down."""
    gpu_host.link_up()
    if not gpu_host.is_pristine():
        gpu_host.restore()
    try:
        yield gpu_host
    finally:
        gpu_host.link_up()
        if not gpu_host.is_pristine():
            gpu_host.restore()


@pytest.fixture(scope="session")
def _unknown_gpu_host_session(testbed_ready: None) -> Iterator[GpuHost]:
    host = GpuHost.boot("gpu2", trusted=False)
    try:
        yield host
    finally:
        host.teardown()


@pytest.fixture
def unknown_gpu_host(_unknown_gpu_host_session: GpuHost) -> GpuHost:
    """A second host whose key the client has never seen (known_hosts emptied for each test)."""
    _unknown_gpu_host_session.forget()
    return _unknown_gpu_host_session


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    classify(items)  # before `-m` deselects: `make unit` chooses by the marker this adds
    # pytest-timeout's resolved default: --timeout, else $PYTEST_TIMEOUT, else pyproject.toml's
    timeouts_from_long_marks(items, getattr(config, "_env_timeout", None))


# The running test's timer, as pytest-timeout starts and stops it, for the waits inside it (tests/support/budget.py).
# Returning None leaves the timer itself to pytest-timeout. (optionalhook: without the plugin, nothing to follow.)
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> None:
    budget.start(settings.timeout)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    budget.stop()


class _LongTestsFirst:
    @pytest.hookimpl(trylast=True)  # after `-m` has deselected: the workers' slices are cut from what runs
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        start_long_tests_first(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_LongTestsFirst(), "opsconsole-long-tests-first")


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (the console, Textual, the test modules) lives as long as the session: out of the
    garbage collector's sight, as `opsconsole connect` does (console/cli/connect.py, settle). And a full collection
    ten times rarer than Python's default: each walks every object still alive, Textual's caches of past apps
    among them, and they took a fifth of a Pilot test's CPU. The young generations, where each test's garbage
    goes, are collected as before."""
    gc.collect()
    gc.freeze()
    young, middle, _full = gc.get_threshold()
    gc.set_threshold(young, middle, 100)
