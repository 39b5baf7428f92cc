"""Deployments on testbed hosts: each member its own host (real systemd + sshd, the stand-in as its sglang.service),
the hosts routed to each other (ranks rendezvous at rank 0's address, decode servers reach their prefill's bootstrap
server), one client workspace with every host's profile and the deployment's (profiles/deployments/NAME.toml).

    with deployment_bed("duo", [rank_unit(0), rank_unit(1)], roles=[("rank", 0), ("rank", 1)]) as bed:
        bed.opsconsole("status", "duo", "--json")

The hosts reach each other through this machine: each host's network namespace gets a route to the testbed's
10.200.0.0/16 through its own veth, and forwarding is switched on for those veths only (not for the machine).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.cli import OPSCONSOLE
from tests.support.cli_run import run_cli
from tests.testbed import recipe
from tests.testbed.host import GpuHost
from tests.testbed.system import poll_until, run

DIST_PORT = 5000
GATE_PORT = 30100
SIM = ("/usr/bin/python3", "-m", "console.sim")
# The operators' Qwen setup (recipe.SIM_LAUNCH_FLAGS) on every member, listening on the host's address.
BASE_FLAGS: tuple[tuple[str, str | None], ...] = tuple(
    ("--host", "0.0.0.0") if flag == "--host" else (flag, value) for flag, value in recipe.SIM_LAUNCH_FLAGS
)
PLACEHOLDER_UNIT = recipe.sglang_unit("ExecStart=/bin/sleep infinity", description="placeholder until the member's")


def flags_unit(flags: Sequence[tuple[str, str | None]]) -> str:
    return recipe.sglang_unit(recipe.render_exec_start(SIM, flags), description="SGLang (stand-in), a member")


def rank_flags(rank: int, nnodes: int, rank0_address: str, *, gated: bool = True) -> list[tuple[str, str | None]]:
    flags = list(BASE_FLAGS)
    flags += [("--nnodes", str(nnodes)), ("--node-rank", str(rank))]
    flags.append(("--dist-init-addr", f"{rank0_address}:{DIST_PORT}"))
    if gated:
        flags.append(("--gated-launch-port", str(GATE_PORT)))
    return flags


@dataclass
class Bed:
    name: str
    hosts: list[GpuHost]
    home: Path
    workspace: Path

    def env(self) -> dict[str, str]:
        env = self.hosts[0].client_env()
        env["HOME"] = str(self.home)
        env["OPSCONSOLE_WORKSPACE"] = str(self.workspace)
        return env

    def opsconsole(
        self, *args: str, timeout: float = 240, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(OPSCONSOLE), "--workspace", str(self.workspace), *args]
        return run_cli(argv, timeout=timeout, env=self.env(), cwd=self.home, input=input)

    def status(self) -> dict[str, Any]:
        done = self.opsconsole("status", self.name, "--json", timeout=60)
        try:
            parsed: dict[str, Any] = json.loads(done.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"status --json: {exc}\n{done.stdout}\n{done.stderr}") from exc
        return parsed

    def main_pids(self) -> list[str]:
        return [h.service_properties("MainPID")["MainPID"] for h in self.hosts]

    def install(self, units: Sequence[str]) -> None:
        """Every member's unit replaced behind the console's back and started, side by side (ranks must all start
        within their rendezvous timeout); what restore() puts back from now on."""
        for host, unit in zip(self.hosts, units, strict=True):
            host.unit_text = unit
            host.install_unit(unit, wait_healthy=False)


def route_hosts(hosts: Sequence[GpuHost]) -> None:
    """Each host reaches the others' 10.200.N.2 through this machine (forwarding on their veths only)."""
    for host in hosts:
        run(["ip", "-n", host.res.name, "route", "replace", "10.200.0.0/16", "via", host.res.outside_address])
        run(["sysctl", "-qw", f"net.ipv4.conf.{host.res.outside_link}.forwarding=1"])


def http_ok(host: GpuHost, path: str = "/health", port: int | None = None) -> bool:
    """GET path on the host's address answers 200 (from this machine: the members listen on their address)."""
    try:
        with urllib.request.urlopen(f"http://{host.address}:{port or host.sglang_port}{path}", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def open_gate_if_waiting(host: GpuHost) -> bool:
    """Opens rank 0's gate once it answers (the test's own hand, for the bed's first start); True once healthy."""
    if http_ok(host):
        return True
    if http_ok(host, "/health", GATE_PORT):
        request = urllib.request.Request(f"http://{host.address}:{GATE_PORT}/gate/activate", data=b"", method="POST")
        with contextlib.suppress(OSError):
            urllib.request.urlopen(request, timeout=5).close()
    return False


@contextlib.contextmanager
def deployment_bed(
    name: str,
    aliases: Sequence[str],
    member_toml: Callable[[list[GpuHost]], str],
    units: Callable[[list[GpuHost]], list[str]],
    *,
    ready: Callable[[list[GpuHost]], bool],
    listen_on_address: bool = False,
) -> Iterator[Bed]:
    """Boot a host per alias, route them, install each member's unit (made from the booted hosts' addresses), wait
    until `ready`, and give the bed; everything torn down afterwards. listen_on_address: the members' SGLang listens
    on the host's address, not its loopback (their profiles say so: the console's forward goes there)."""
    hosts: list[GpuHost] = []
    temp = Path(tempfile.mkdtemp(prefix=f"opsconsole-deployment-{name}-"))
    try:
        for alias in aliases:
            hosts.append(GpuHost.boot(alias, unit_text=PLACEHOLDER_UNIT, wait_healthy=False))
        route_hosts(hosts)
        home, workspace = temp / "home", temp / "workspace"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        (home / ".ssh" / "config").write_text("".join(h.ssh_config.read_text() for h in hosts))
        (workspace / "profiles" / "deployments").mkdir(parents=True)
        (workspace / "logs").mkdir()
        for host in hosts:
            profile = (host.workspace / "profiles" / f"{host.alias}.toml").read_text()
            if listen_on_address:
                profile = profile.replace("[sglang]\n", f'[sglang]\nhost = "{host.address}"\n')
            (workspace / "profiles" / f"{host.alias}.toml").write_text(profile)
        (workspace / "profiles" / "deployments" / f"{name}.toml").write_text(member_toml(hosts))
        bed = Bed(name, hosts, home, workspace)
        bed.install(units(hosts))
        poll_until(lambda: ready(hosts), timeout=120, what=f"deployment {name} to serve", interval=0.2)
        yield bed
    finally:
        for host in hosts:
            host.teardown()
        shutil.rmtree(temp, ignore_errors=True)


def ranks_toml(hosts: Sequence[GpuHost]) -> str:
    return "".join(f'[[member]]\nname = "rank{i}"\nhost = "{h.alias}"\nrole = "rank"\nrank = {i}\n\n'
                   for i, h in enumerate(hosts))  # fmt: skip


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll until the condition holds; the seconds it took."""
    started = time.monotonic()
    poll_until(condition, timeout=timeout, what=what, interval=0.1)
    return time.monotonic() - started


def pd_flags(role: str, address: str, *, page_size: int = 16) -> list[tuple[str, str | None]]:
    """A prefill or decode server listening on its host's address (the stand-in registers its KV sender at its
    --host, as SGLang registers the node's address: the other side connects to it from its own host)."""
    flags = [("--host", address) if flag == "--host" else (flag, value) for flag, value in BASE_FLAGS]
    flags += [("--disaggregation-mode", role), ("--disaggregation-bootstrap-port", str(BOOTSTRAP_PORT)),
              ("--page-size", str(page_size))]  # fmt: skip
    return flags


BOOTSTRAP_PORT = 8998
