"""Rolling changes behind SGLang's real router: `opsconsole apply @trio --rolling` over three testbed hosts (real
systemd + sshd, the stand-in as sglang.service listening on the host's address) with the `sglang-router` wheel's
router in front of them, while a load generator sends requests through the router the whole time.

The router runs with its retries off (`--disable-retries`). With them on (its default) it sends a request that
failed on one worker to another, and three plain `systemctl restart`s of one worker lost 0 of 266 requests: zero
failed requests would then hold for any roll, router-aware or not. So first the control: plain restarts of a worker
under the same load, the router left alone, lose requests; then the rolls must lose none.

- A speculative change rolls over the three: zero failed requests, each host verified (its own /server_info), the
  router's worker list whole at the end.
- A second roll whose second host fails to start (its draft model is missing on that host only): that host rolled
  back (healthy on its old unit), the third never touched (same unit bytes, same MainPID), the router still has all
  three, zero failed requests.
- The rolling apply's wall time is printed next to the sum of single applies of the same kind (docs/fleet.md, "Rolling
  changes").
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import OPSCONSOLE, json_output, server_info
from tests.support.cli_run import run_cli
from tests.support.simproc import free_port
from tests.testbed import recipe
from tests.testbed.host import GpuHost
from tests.testbed.system import poll_until

pytestmark = pytest.mark.testbed

ALIASES = ("roll1", "roll2", "roll3")
DRAFT_DIR = "/var/lib/sglang/draft"  # exists on roll1 and roll3 only: a draft model there starts, on roll2 it fails
STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
# The stand-in listens on the host's address (as a worker behind a router must), not only on its loopback.
WORKER_FLAGS = tuple(
    ("--host", "0.0.0.0") if flag == "--host" else (flag, value) for flag, value in recipe.SIM_LAUNCH_FLAGS
)
WORKER_UNIT = recipe.sglang_unit(recipe.render_exec_start(("/usr/bin/python3", "-m", "console.sim"), WORKER_FLAGS))
LOAD_CONCURRENCY = 4
LOAD_MAX_REQUESTS = 20_000  # a bound on the load generator, far above what a roll takes
LOAD_MAX_S = 300.0


@dataclass
class Fleet:
    hosts: list[GpuHost]
    home: Path
    workspace: Path
    router_url: str
    router: subprocess.Popen[str]
    router_log: Path

    def env(self) -> dict[str, str]:
        env = self.hosts[0].client_env()
        env["HOME"] = str(self.home)
        env["OPSCONSOLE_WORKSPACE"] = str(self.workspace)
        return env

    def opsconsole(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        argv = [str(OPSCONSOLE), "--workspace", str(self.workspace), *args]
        return run_cli(argv, timeout=timeout, env=self.env(), cwd=self.home)

    def workers(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.router_url}/workers", timeout=5) as answer:
            listed = json.loads(answer.read())["workers"]
        assert isinstance(listed, list)
        return listed

    def all_healthy(self) -> bool:
        """The router lists every host's worker healthy (and it still runs)."""
        if self.router.poll() is not None:
            raise AssertionError(
                f"the router exited ({self.router.returncode}):\n{self.router_log.read_text()[-3000:]}"
            )
        try:
            listed = self.workers()
        except (OSError, ValueError):
            return False
        return sorted(w["url"] for w in listed if w["is_healthy"]) == sorted(worker_url(h) for h in self.hosts)


def worker_url(host: GpuHost) -> str:
    return f"http://{host.address}:{host.sglang_port}"


@pytest.fixture(scope="module")
def fleet(testbed_ready: None) -> Iterator[Fleet]:
    hosts: list[GpuHost] = []
    router: subprocess.Popen[str] | None = None
    temp = Path(tempfile.mkdtemp(prefix="opsconsole-rolling-"))
    try:
        for alias in ALIASES:
            hosts.append(GpuHost.boot(alias, unit_text=WORKER_UNIT))
        for host in (hosts[0], hosts[2]):
            host.root_run(["mkdir", "-p", DRAFT_DIR])
        # One client side for the three: their ssh_config entries (each names its own key and known_hosts) and
        # profiles in one workspace, with the group and its router.
        home, workspace = temp / "home", temp / "workspace"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        (home / ".ssh" / "config").write_text("".join(h.ssh_config.read_text() for h in hosts))
        (workspace / "profiles").mkdir(parents=True)
        (workspace / "logs").mkdir()
        for host in hosts:
            (workspace / "profiles" / f"{host.alias}.toml").write_text((host.workspace / "profiles" /
                                                                         f"{host.alias}.toml").read_text())  # fmt: skip
        port = free_port()
        router_url = f"http://127.0.0.1:{port}"
        (workspace / "profiles" / "groups.toml").write_text(
            f'[trio]\nmembers = {json.dumps(list(ALIASES))}\nrouter = "{router_url}"\n'
        )
        router_log = temp / "router.log"
        with open(router_log, "w") as log:
            router = subprocess.Popen(
                [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
                 "--prometheus-port", str(free_port()), "--policy", "round_robin", "--log-level", "warn",
                 "--disable-retries",  # a request sent to a restarting worker fails, as it would without a router
                 "--worker-urls", *(worker_url(h) for h in hosts)],
                stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            )  # fmt: skip
        fleet = Fleet(hosts, home, workspace, router_url, router, router_log)
        poll_until(fleet.all_healthy, timeout=60, what="the router to list the three workers healthy", interval=0.2)
        yield fleet
    finally:
        if router is not None:
            router.terminate()
            try:
                router.wait(timeout=10)
            except subprocess.TimeoutExpired:
                router.kill()
                router.wait()
        for host in hosts:
            host.teardown()


@dataclass
class Load:
    """Requests through the router from LOAD_CONCURRENCY threads until stopped (bounded in count and time)."""

    url: str
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Load:
        started = time.monotonic()
        for _ in range(LOAD_CONCURRENCY):
            thread = threading.Thread(target=self._loop, args=(started,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _loop(self, started: float) -> None:
        body = json.dumps({"text": "roll me", "sampling_params": {"max_new_tokens": 32}}).encode()
        while not self._stop.is_set() and time.monotonic() - started < LOAD_MAX_S:
            with self._lock:
                if self.ok + len(self.failed) >= LOAD_MAX_REQUESTS:
                    return
            request = urllib.request.Request(
                f"{self.url}/generate", data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    done = answer.status == 200 and "text" in json.loads(answer.read())
                    error = "" if done else f"HTTP {answer.status}"
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code}: {exc.read()[:200]!r}"
            except (OSError, ValueError) as exc:
                error = repr(exc)
            with self._lock:
                if error:
                    self.failed.append(error)
                else:
                    self.ok += 1

    def wait_for(self, requests: int) -> None:
        poll_until(lambda: self.ok >= requests, timeout=30, what=f"{requests} requests through the router")


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {h["host"]: h["outcome"] for h in report["hosts"]}


def plain_restarts_until_a_request_fails(fleet: Fleet, host: GpuHost, load: Load, at_most: int) -> int:
    """`systemctl restart` of the host's unit, the router left alone, until a request through the router has failed
    (or `at_most` restarts); each waits for the worker to be healthy in the router again. Returns the restarts."""
    for restarts in range(1, at_most + 1):
        before = load.ok
        host.root_run(["systemctl", "restart", host.unit])
        host.wait_healthy()
        poll_until(fleet.all_healthy, timeout=60, what="the router to list the restarted worker healthy again")
        load.wait_for(before + 10)  # the load reached the restarted worker's turn again
        if load.failed:
            return restarts
    return at_most


@pytest.mark.long(90)  # its measured seconds, the hosts' boot with it (busy core: 125): started first (tests/tiers.py)
def test_rolling_changes_behind_the_router_drop_no_request(fleet: Fleet) -> None:
    hosts = fleet.hosts

    # 0. The control: plain restarts of one worker under the same load, the router not told, do fail requests (the
    # router's retries are off). So the zeros below are the rolling apply's doing.
    with Load(fleet.router_url) as load:
        load.wait_for(20)
        restarts = plain_restarts_until_a_request_fails(fleet, hosts[0], load, at_most=5)
    print(f"\ncontrol: {restarts} plain restarts of {hosts[0].alias} behind the router (retries off) failed "
          f"{len(load.failed)} of {load.ok + len(load.failed)} requests; first: {load.failed[:1]}")  # fmt: skip
    assert load.failed, f"{restarts} plain restarts behind the router failed no request of {load.ok}"
    poll_until(fleet.all_healthy, timeout=60, what="the router to list the three workers healthy", interval=0.2)
    pids = {h.alias: h.service_properties("MainPID")["MainPID"] for h in hosts}

    # 1. A speculative change over the three, under load.
    with Load(fleet.router_url) as load:
        load.wait_for(20)
        started = time.monotonic()
        done = fleet.opsconsole("apply", "@trio", "--rolling", *STEPS_3, "--yes", "--json", "--timeout", "120")
        rolling_s = time.monotonic() - started
        during = load.ok
        load.wait_for(during + 20)  # the router still serves once the roll is over
    report = json_output(done)
    assert done.returncode == 0, done.stderr
    print(f"rolling apply behind the router (retries off): {len(load.failed)} of {load.ok} requests failed")
    assert load.failed == [], load.failed[:5]
    assert during > 20
    assert outcomes(report) == dict.fromkeys(ALIASES, "done"), report
    assert [h["batch"] for h in report["hosts"]] == ["canary 1", "wave 1", "wave 2"]
    for host in hosts:
        info = server_info(host)
        assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (3, 4), host.alias
        assert host.service_properties("MainPID")["MainPID"] != pids[host.alias]
        record = next(h for h in report["hosts"] if h["host"] == host.alias)
        assert record["worker_url"] == worker_url(host)
        assert record["router"][0].startswith("removed") and record["router"][-1].startswith("added"), record
        assert record["result"]["verified"]["ok"] is True
    assert report["router_whole"] is True
    assert sorted(w["url"] for w in fleet.workers() if w["is_healthy"]) == sorted(worker_url(h) for h in hosts)

    # 2. A change whose second host fails to start (its draft model is missing there, only there).
    third_sha, third_pid = hosts[2].unit_sha256(), hosts[2].service_properties("MainPID")["MainPID"]
    second_sha = hosts[1].unit_sha256()
    with Load(fleet.router_url) as load:
        load.wait_for(20)
        done = fleet.opsconsole(
            "apply", "@trio", "--rolling", "--set", f"speculative-draft-model-path={DRAFT_DIR}", "--yes", "--json",
            "--timeout", "120",
        )  # fmt: skip
        load.wait_for(load.ok + 20)
    report = json_output(done)
    assert done.returncode == 1, done.stderr
    assert load.failed == [], load.failed[:5]
    assert outcomes(report) == {"roll1": "done", "roll2": "rolled_back", "roll3": "not_started"}, report
    assert "roll2" in report["stopped"]
    assert f"speculative-draft-model-path {DRAFT_DIR}" in hosts[0].unit_file_text()
    assert hosts[1].unit_sha256() == second_sha  # rolled back: the unit it had
    hosts[1].wait_healthy()
    assert (hosts[2].unit_sha256(), hosts[2].service_properties("MainPID")["MainPID"]) == (third_sha, third_pid)
    assert report["router_whole"] is True
    assert sorted(w["url"] for w in fleet.workers() if w["is_healthy"]) == sorted(worker_url(h) for h in hosts)

    # 3. Wall time: the same kind of change as single applies, one host after the other (no router steps, no load).
    singles = []
    for host in hosts:
        started = time.monotonic()
        steps_2 = ("--set", "speculative-num-steps=2", "--set", "speculative-num-draft-tokens=3")
        single = fleet.opsconsole("apply", host.alias, *steps_2, "--yes", "--json", "--timeout", "120")
        singles.append(time.monotonic() - started)
        assert single.returncode == 0, single.stderr
    print(
        f"\nrolling apply over 3 hosts behind the router: {rolling_s:.1f} s; "
        f"single applies one after the other: {' + '.join(f'{s:.1f}' for s in singles)} = {sum(singles):.1f} s"
    )
