"""The machine-level pieces of one testbed host, and how to remove them again.

A host owns: a network namespace NAME with a veth pair (10.200.SLOT.1 outside, 10.200.SLOT.2 inside),
a cgroup NAME in each hierarchy its launcher runs in, the systemd-nspawn process and a temp dir.
Every host is recorded in a state file under /run/opsconsole-testbed/ *before* any of that is created, so
that a later session can tell a leftover of a crashed run (owner process gone) from a host another test
run is using right now, and remove only the former. Everything is named with PREFIX.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.testbed.system import TestbedError, run

log = logging.getLogger(__name__)

PREFIX = "opstb"
STATE_DIR = Path("/run/opsconsole-testbed")
CGROUP_ROOT = Path("/sys/fs/cgroup")
MAX_SLOT = 250


@dataclass
class HostResources:
    name: str  # machine name, netns name, cgroup name (at most 12 characters for nspawn)
    slot: int  # 10.200.SLOT.0/24
    owner_pid: int  # the test process that made it; a leftover when this process is gone
    nspawn_pid: int | None = None
    temp_dir: str | None = None
    cgroups: list[str] = field(default_factory=list)
    # (No more fields: a parallel test run of an older checkout reads these files and removes what it cannot read.)

    @property
    def overlay(self) -> Path | None:
        """A persistent host's root: an overlay mount (the tree below, its own disk above) in its temp dir."""
        return Path(self.temp_dir) / "disk" / "root" if self.temp_dir else None

    @property
    def outside_address(self) -> str:
        return f"10.200.{self.slot}.1"

    @property
    def inside_address(self) -> str:
        return f"10.200.{self.slot}.2"

    @property
    def outside_link(self) -> str:
        return f"tb-{self.name}"  # at most 15 characters (interface name limit)

    @property
    def state_file(self) -> Path:
        return STATE_DIR / f"{self.name}.json"

    def save(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(self.state_file)


@contextlib.contextmanager
def _state_lock() -> Iterator[None]:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(STATE_DIR / ".lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def reserve_host() -> HostResources:
    """Pick a free slot and record it (nothing is created yet)."""
    with _state_lock():
        used_subnets = _subnets_in_use()
        existing_netns = set(list_netns())
        for slot in range(1, MAX_SLOT + 1):
            name = f"{PREFIX}{slot}"
            if (STATE_DIR / f"{name}.json").exists() or name in existing_netns or f"10.200.{slot}" in used_subnets:
                continue
            host = HostResources(name=name, slot=slot, owner_pid=os.getpid())
            host.save()
            return host
    raise TestbedError(f"no free testbed slot: {MAX_SLOT} hosts in use; look in {STATE_DIR} for leftovers")


def create_network(host: HostResources) -> None:
    """netns NAME, veth pair, addresses, links up (inside: eth0 and lo)."""
    run(["ip", "netns", "add", host.name], what="creating the testbed network namespace")
    run(["ip", "link", "add", host.outside_link, "type", "veth", "peer", "name", "eth0", "netns", host.name])
    run(["ip", "addr", "add", f"{host.outside_address}/24", "dev", host.outside_link])
    run(["ip", "link", "set", host.outside_link, "up"])
    run(["ip", "-n", host.name, "addr", "add", f"{host.inside_address}/24", "dev", "eth0"])
    run(["ip", "-n", host.name, "link", "set", "eth0", "up"])
    run(["ip", "-n", host.name, "link", "set", "lo", "up"])


def set_inside_link(host: HostResources, up: bool) -> None:
    run(["ip", "-n", host.name, "link", "set", "eth0", "up" if up else "down"], what="switching the host's link")


def launcher_cgroups(name: str) -> list[Path]:
    """Where the container's launcher goes so that each container gets a cgroup tree of its own.

    Hybrid (this project's machines): the name=systemd v1 hierarchy and the unified one. Pure v2: one.
    """
    if (CGROUP_ROOT / "systemd").is_dir():
        dirs = [CGROUP_ROOT / "systemd" / name]
        if (CGROUP_ROOT / "unified").is_dir():
            dirs.append(CGROUP_ROOT / "unified" / name)
        return dirs
    return [CGROUP_ROOT / name]


def create_cgroups(host: HostResources) -> list[Path]:
    dirs = launcher_cgroups(host.name)
    for d in dirs:
        d.mkdir(exist_ok=True)
    host.cgroups = [str(d) for d in dirs]
    host.save()
    return dirs


def destroy(host: HostResources, *, stop_timeout: float = 20.0) -> None:
    """Halt the container, remove the netns and cgroups, forget the host. Safe to call on a partial host."""
    halt(host, stop_timeout=stop_timeout)
    if host.overlay is not None:
        unmount_overlay(host.overlay)
    if host.name in list_netns():
        run(["ip", "netns", "del", host.name], what="removing the testbed network namespace", check=False)
    # `ip netns del` takes the veth pair with it; a pair whose netns vanished some other way may remain.
    if Path(f"/sys/class/net/{host.outside_link}").exists():
        run(["ip", "link", "del", host.outside_link], check=False)
    for cgroup in host.cgroups or [str(d) for d in launcher_cgroups(host.name)]:
        remove_cgroup_tree(Path(cgroup))
    if host.temp_dir:
        run(["rm", "-rf", "--one-file-system", host.temp_dir], check=False)
    host.state_file.unlink(missing_ok=True)


def halt(host: HostResources, *, stop_timeout: float = 20.0) -> None:
    """Halt the container (SIGTERM to nspawn: systemd shuts down cleanly), keeping everything around it."""
    if host.nspawn_pid is not None and _is_nspawn_of(host.nspawn_pid, host.name):
        _stop_process(host.nspawn_pid, stop_timeout)


def mount_overlay(tree: Path, host: HostResources) -> Path:
    """The tree below, the host's disk/upper above: what the host writes stays on its own disk, the tree stays
    untouched (other hosts boot from it at the same time). Returns the merged root (HostResources.overlay)."""
    root = host.overlay
    assert root is not None, "reserve the host's temp dir first"
    disk = root.parent
    upper, work = disk / "upper", disk / "work"
    for d in (upper, work, root):
        d.mkdir(parents=True, exist_ok=True)
    run(
        ["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={tree},upperdir={upper},workdir={work}", str(root)],
        what="mounting a persistent host's overlay",
    )
    return root


def unmount_overlay(root: Path) -> None:
    if not _is_mounted(root):
        return
    if run(["umount", str(root)], check=False).returncode != 0:
        run(["umount", "--lazy", str(root)], check=False, what="unmounting a persistent host's overlay")


def _is_mounted(path: Path) -> bool:
    target = str(path)
    return any(line.split()[1] == target for line in Path("/proc/mounts").read_text().splitlines() if line.strip())


def remove_cgroup_tree(top: Path, timeout: float = 10.0) -> None:
    """rmdir every directory of a cgroup tree, deepest first; processes still inside are killed first."""
    if not top.is_dir():
        return
    deadline = time.monotonic() + timeout
    while True:
        pids = _pids_in_cgroup_tree(top)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for dirpath, _dirnames, _files in sorted(os.walk(top), key=lambda entry: -entry[0].count("/")):
            with contextlib.suppress(FileNotFoundError, OSError):
                os.rmdir(dirpath)
        if not top.exists():
            return
        if time.monotonic() >= deadline:
            raise TestbedError(f"could not remove cgroup {top}: processes {sorted(_pids_in_cgroup_tree(top))} remain")
        time.sleep(0.05)


def _pids_in_cgroup_tree(top: Path) -> set[int]:
    pids: set[int] = set()
    for dirpath, _dirnames, _files in os.walk(top):
        with contextlib.suppress(FileNotFoundError, OSError):
            pids.update(int(p) for p in Path(dirpath, "cgroup.procs").read_text().split())
    return pids


def cleanup_leftovers() -> list[str]:
    """Remove the hosts of test runs that died without cleaning up; returns their names.

    Only PREFIX-named resources are touched, and only those whose owner process is gone.
    """
    removed: list[str] = []
    with _state_lock():
        recorded: set[str] = set()
        for state_file in STATE_DIR.glob(f"{PREFIX}*.json"):
            try:
                host = HostResources(**json.loads(state_file.read_text()))
            except (ValueError, TypeError):
                log.warning("unreadable testbed state %s: removing it", state_file)
                state_file.unlink(missing_ok=True)
                continue
            recorded.add(host.name)
            if is_alive(host.owner_pid):
                continue
            destroy(host)
            removed.append(host.name)
        # A namespace or cgroup with our prefix but no state file can only be a leftover: reservation
        # writes the state file (under this lock) before anything is created.
        for netns in list_netns():
            if netns.startswith(PREFIX) and netns not in recorded:
                _kill_netns_processes(netns)
                run(["ip", "netns", "del", netns], check=False)
                removed.append(netns)
        for hierarchy in {d.parent for d in launcher_cgroups(PREFIX)}:
            for cgroup in hierarchy.glob(f"{PREFIX}*"):
                if cgroup.is_dir() and cgroup.name not in recorded:
                    remove_cgroup_tree(cgroup)
                    removed.append(str(cgroup))
    return sorted(set(removed))


def list_netns() -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_netns_processes(netns: str) -> None:
    out = run(["ip", "netns", "pids", netns], check=False).stdout
    for pid in out.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def _subnets_in_use() -> set[str]:
    out = run(["ip", "-o", "-4", "addr", "show"], check=False).stdout
    subnets = set()
    for line in out.split("\n"):
        words = line.split()
        if "inet" in words:
            address = words[words.index("inet") + 1]
            subnets.add(".".join(address.split(".")[:3]))
    return subnets


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _is_nspawn_of(pid: int, name: str) -> bool:
    """Guard against PID reuse: only signal a process that is the nspawn of this machine."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return False
    return any(a.endswith(b"systemd-nspawn") for a in argv) and f"--machine={name}".encode() in argv


def _stop_process(pid: int, timeout: float) -> None:
    """SIGTERM (nspawn halts the container cleanly), then SIGKILL if it outstays timeout."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = False
    while is_alive(pid):
        _reap(pid)
        if time.monotonic() >= deadline:
            if killed:
                raise TestbedError(f"systemd-nspawn {pid} survived SIGKILL for 5 s")
            log.warning("nspawn %d ignored SIGTERM for %.0f s: killing it", pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed, deadline = True, time.monotonic() + 5
        time.sleep(0.02)
    _reap(pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
