"""Rolling changes behind SGLang's real routers: `opsconsole apply @trio --rolling` over three testbed hosts (real
systemd + sshd, the stand-in as sglang.service listening on the host's address) with the `sglang-router` 0.3 wheel's
router in front of them, and `@trio-smg`, the same hosts behind smg 1.13 (the Shepherd Model Gateway, the router of
record), while a load generator sends requests through the router the whole time.

The routers run with their retries off (`--disable-retries`). With them on (their default) they send a request that
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
- Behind smg: the control (plain restarts fail requests through smg too), then a roll with zero failed requests, each
  worker back under a new id and `ready`, smg's drain settle taken out (its log: 0 s), the router whole. The roll's
  time beside the same roll behind sglang-router: benchmarks/roll_behind_routers.py.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli import OPSCONSOLE, json_output, server_info
from tests.support.cli_run import run_cli
from tests.support.routers import KINDS, Load, RouterKind, RouterProcess, start_router
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
GROUPS: dict[RouterKind, str] = {"sglang-router": "trio", "smg": "trio-smg"}  # the same three hosts, one per router


@dataclass
class Fleet:
    hosts: list[GpuHost]
    home: Path
    workspace: Path
    routers: dict[RouterKind, RouterProcess]  # both in front of the three hosts, each its own group

    @property
    def router_url(self) -> str:
        return self.routers["sglang-router"].url

    def env(self) -> dict[str, str]:
        env = self.hosts[0].client_env()
        env["HOME"] = str(self.home)
        env["OPSCONSOLE_WORKSPACE"] = str(self.workspace)
        return env

    def opsconsole(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        argv = [str(OPSCONSOLE), "--workspace", str(self.workspace), *args]
        return run_cli(argv, timeout=timeout, env=self.env(), cwd=self.home)

    def workers(self, kind: RouterKind = "sglang-router") -> list[dict[str, Any]]:
        return self.routers[kind].workers()

    def all_healthy(self, kind: RouterKind = "sglang-router") -> bool:
        """The router routes to every host's worker (and it still runs)."""
        return self.routers[kind].routable() == sorted(worker_url(h) for h in self.hosts)


def worker_url(host: GpuHost) -> str:
    return f"http://{host.address}:{host.sglang_port}"


@pytest.fixture(scope="module")
def fleet(testbed_ready: None) -> Iterator[Fleet]:
    hosts: list[GpuHost] = []
    routers: dict[RouterKind, RouterProcess] = {}
    temp = Path(tempfile.mkdtemp(prefix="opsconsole-rolling-"))
    try:
        for alias in ALIASES:
            hosts.append(GpuHost.boot(alias, unit_text=WORKER_UNIT))
        for host in (hosts[0], hosts[2]):
            host.root_run(["mkdir", "-p", DRAFT_DIR])
        # One client side for the three: their ssh_config entries (each names its own key and known_hosts) and
        # profiles in one workspace, with the groups and their routers.
        home, workspace = temp / "home", temp / "workspace"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        (home / ".ssh" / "config").write_text("".join(h.ssh_config.read_text() for h in hosts))
        (workspace / "profiles").mkdir(parents=True)
        (workspace / "logs").mkdir()
        for host in hosts:
            (workspace / "profiles" / f"{host.alias}.toml").write_text((host.workspace / "profiles" /
                                                                         f"{host.alias}.toml").read_text())  # fmt: skip
        urls = [worker_url(h) for h in hosts]
        # Both routers' retries off (tests/support/routers.py): a request sent to a restarting worker fails, as it
        # would without a router.
        for kind in KINDS:  # smg's info log says how long each removal drained
            routers[kind] = start_router(kind, urls, log_dir=temp, log_level="info" if kind == "smg" else "warn")
        members = json.dumps(list(ALIASES))
        groups = [f'[{GROUPS[kind]}]\nmembers = {members}\nrouter = "{routers[kind].url}"\n' for kind in KINDS]
        (workspace / "profiles" / "groups.toml").write_text("".join(groups))
        fleet = Fleet(hosts, home, workspace, routers)
        for kind in KINDS:
            poll_until(lambda kind=kind: fleet.all_healthy(kind), timeout=60,  # type: ignore[misc]
                       what=f"{kind} to route to the three workers", interval=0.2)  # fmt: skip
        yield fleet
    finally:
        for router in routers.values():
            router.stop()
        for host in hosts:
            host.teardown()


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {h["host"]: h["outcome"] for h in report["hosts"]}


def plain_restarts_until_a_request_fails(
    fleet: Fleet, host: GpuHost, load: Load, at_most: int, kind: RouterKind = "sglang-router"
) -> int:
    """`systemctl restart` of the host's unit, the router left alone, until a request through the router has failed
    (or `at_most` restarts); each waits for the worker to be routed to again. Returns the restarts."""
    for restarts in range(1, at_most + 1):
        before = load.ok
        host.root_run(["systemctl", "restart", host.unit])
        host.wait_healthy()
        poll_until(lambda: fleet.all_healthy(kind), timeout=60, what=f"{kind} to route to the restarted worker again")
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


@pytest.mark.long(60)  # its measured seconds, with the hosts' boot when it runs alone
def test_rolling_changes_behind_smg_drop_no_request(fleet: Fleet) -> None:
    hosts, smg = fleet.hosts, fleet.routers["smg"]

    # 0. The control behind smg: plain restarts of one worker under load, smg not told, fail requests.
    with Load(smg.url) as load:
        load.wait_for(20)
        restarts = plain_restarts_until_a_request_fails(fleet, hosts[1], load, at_most=5, kind="smg")
    control = (len(load.failed), load.sent)
    print(f"\ncontrol: {restarts} plain restarts of {hosts[1].alias} behind smg (retries off) failed "
          f"{control[0]} of {control[1]} requests; first: {load.failed[:1]}")  # fmt: skip
    assert load.failed, f"{restarts} plain restarts behind smg failed no request of {load.ok}"
    poll_until(lambda: fleet.all_healthy("smg"), timeout=60, what="smg to route to the three workers", interval=0.2)
    ids_before = {w["url"]: w["id"] for w in smg.workers()}

    # 1. A change over the three behind smg, under load.
    with Load(smg.url) as load:
        load.wait_for(20)
        started = time.monotonic()
        done = fleet.opsconsole("apply", "@trio-smg", "--rolling", *STEPS_3, "--yes", "--json", "--timeout", "120")
        rolling_s = time.monotonic() - started
        during = load.sent
        load.wait_for(load.ok + 20)  # smg still serves once the roll is over
    report = json_output(done)
    assert done.returncode == 0, done.stderr
    print(
        f"rolling apply behind smg (retries off): {len(load.failed)} of {load.sent} requests failed "
        f"({during} sent while it ran); control: {control[0]} of {control[1]} failed; roll {rolling_s:.1f} s"
    )
    assert load.failed == [], load.failed[:5]
    assert during > 20
    assert outcomes(report) == dict.fromkeys(ALIASES, "done"), report
    assert (report["router_api"] or "").startswith("smg-1.13"), report["router_api"]
    after = {w["url"]: w for w in smg.workers()}
    for host in hosts:
        url = worker_url(host)
        info = server_info(host)
        assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (3, 4), host.alias
        record = next(h for h in report["hosts"] if h["host"] == host.alias)
        steps = record["router"]
        assert steps[0].startswith("removed") and steps[-1].startswith("added"), steps
        new_id = after[url]["id"]
        assert new_id != ids_before[url] and f"(id {new_id}, ready)" in steps[-1], steps  # a new id, routed to
        assert after[url]["status"] == "ready" and after[url]["is_healthy"] is True
    assert report["router_whole"] is True
    assert all(w["status"] == "ready" for w in report["router_after"])
    # smg's fixed 5 s settle was taken out of each removal (the roll waited for the engine's own requests instead).
    drained = [line for line in smg.log().splitlines() if "before removal" in line]
    assert len(drained) == 3 and all("for 0s before removal" in line for line in drained), drained
