"""A real OpenSSH sshd on loopback, shared by the host-layer tests and benchmarks/status_refresh.py.

Throwaway host and client keys, a dedicated non-root user with a clean shell (/bin/sh, no rc files:
root's .bashrc costs ~100 ms per command), a private sshd_config, and `sshd -D -e` on an ephemeral port.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.procs import alive, children_of, processes_with

# A user per process that runs labs (a pytest worker, a benchmark): a lab's teardown ends every process of its user,
# which must not reach the sessions of another worker's lab (nor its `ps -u` checks), nor those of another pytest
# session on the same machine (two checkouts, CI beside a developer), whose workers have the same names gw0, gw1...
# So the name holds this process's PID, unique among live processes; one whose PID is gone is a crashed run's
# leftover, removed by the next lab (_remove_stale_users). The worker's name is only there for a reader of `ps`.
# At most 32 characters (useradd): "opsct-test-" 11, "gw127" 5, "-" and a PID of at most 7 digits (pid_max 2^22).
USER_PREFIX = "opsct-test-"
TEST_USER = f"{USER_PREFIX}{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}"
_STALE_CANDIDATE = re.compile(re.escape(USER_PREFIX) + r"[a-z0-9]+-(\d+)")
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    found = []
    for child in children_of(pid):
        found.append(child)
        found.extend(_descendants(child))
    return found


def _wait_gone(pid: int, deadline_s: float = 5.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and alive(pid):
        time.sleep(0.01)


@dataclass
class Sshd:
    """One sshd on 127.0.0.1:port; stop() kills the listener and every session it forked."""

    root: Path
    port: int
    host_key: Path
    client_key: Path
    process: subprocess.Popen[bytes] | None = None
    _log: Any = None

    @property
    def host_public_key(self) -> str:
        return (self.root / "host_key.pub").read_text().strip()

    def start(self) -> None:
        self._log = (self.root / "sshd.log").open("ab")
        self.process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # listening = a TCP connect succeeds
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"sshd exited with {self.process.returncode}: {(self.root / 'sshd.log').read_text()}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.01)
        raise RuntimeError("sshd did not start listening within 10 s")

    def stop(self) -> None:
        if self.process is None:
            return
        sessions = _descendants(self.process.pid)
        self.process.kill()
        self.process.wait()
        for pid in sessions:  # per-connection sshd processes outlive the listener unless killed
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            _wait_gone(pid)
        self._log.close()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _end_test_user_processes(user: str = TEST_USER) -> None:
    """Kill (by PID) whatever the tests left running as the dedicated test user, so userdel can work."""
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:
        return
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                owner = entry.stat().st_uid
            except OSError:
                continue
            if owner == uid:
                try:
                    os.kill(int(entry.name), 9)
                except ProcessLookupError:
                    pass


def _remove_stale_users() -> list[str]:
    """The test users of processes that ended without their labs' teardown (a crashed or killed run): their
    processes killed, the users and their homes removed. Users of the old per-worker names (no PID) are left alone:
    they may be a live session's of an older checkout."""
    removed = []
    for entry in pwd.getpwall():
        found = _STALE_CANDIDATE.fullmatch(entry.pw_name)
        if found is None or int(found.group(1)) == os.getpid() or alive(int(found.group(1))):
            continue
        _end_test_user_processes(entry.pw_name)
        _end_listeners_of(entry.pw_name)
        subprocess.run(["userdel", "-r", entry.pw_name], check=False, capture_output=True)
        removed.append(entry.pw_name)
    return removed


def _end_listeners_of(user: str) -> None:
    """The sshd listeners (root's) of a dead process's labs, found by their sshd_config, and their directories."""
    for pid in processes_with("opsct-sshd-"):
        try:  # sshd retitles itself: "sshd: /usr/sbin/sshd -D -e -f ROOT/sshd_config [listener] ...", one string
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode().replace("\0", " ")
        except OSError:
            continue
        found = re.search(r" -f (\S*/opsct-sshd-[^/\s]+)/sshd_config", cmdline)
        if found is None:
            continue
        root = Path(found.group(1))
        try:
            ours = f"AllowUsers {user}\n" in (root / "sshd_config").read_text()
        except OSError:
            continue
        if ours:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            shutil.rmtree(root, ignore_errors=True)


# Labs open in this process: the outermost creates the user and removes it (a test's own lab may open inside the
# session's).
_open_labs = 0


def _ensure_user() -> None:
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", TEST_USER], check=True)
        subprocess.run(["usermod", "-p", "*", TEST_USER], check=True)  # unlocked, but no password login


@dataclass
class ClientSide:
    """The operator's side: an ssh_config (`Host lab`) and a known_hosts file, both private to one test."""

    dir: Path
    config: Path
    known_hosts: Path
    alias: str = "lab"


def write_client(directory: Path, server: Sshd, *, trusted: bool = True) -> ClientSide:
    known_hosts = directory / "known_hosts"
    config = directory / "ssh_config"
    config.write_text(
        f"Host lab\n  Hostname 127.0.0.1\n  Port {server.port}\n  User {TEST_USER}\n"
        f"  IdentityFile {server.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known_hosts}\n"
    )
    known_hosts.write_text(f"[127.0.0.1]:{server.port} {server.host_public_key}\n" if trusted else "")
    return ClientSide(dir=directory, config=config, known_hosts=known_hosts)


@contextmanager
def sshd_lab(*, max_sessions: int = 10) -> Iterator[Sshd]:
    """A running sshd for the test user; everything it created is removed afterwards."""
    global _open_labs
    Path("/run/sshd").mkdir(exist_ok=True)
    _remove_stale_users()
    if _open_labs == 0:
        # One of this name that exists now is a dead process's that had this PID: no lab of this one is open.
        _end_test_user_processes()
    _ensure_user()
    root = Path(tempfile.mkdtemp(prefix="opsct-sshd-"))
    _open_labs += 1
    try:
        os.chmod(root, 0o755)  # sshd reads authorized_keys as the test user
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / name)], check=True)
        shutil.copy(root / "client_key.pub", root / "authorized_keys")
        os.chmod(root / "authorized_keys", 0o644)
        port = _free_port()
        (root / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\nPidFile none\n"
            f"AuthorizedKeysFile {root / 'authorized_keys'}\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            f"MaxSessions {max_sessions}\n"
            f"AllowUsers {TEST_USER}\nAllowTcpForwarding yes\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
            # stand-ins (journalctl) in ROOT/bin come first on the test user's PATH
            f"SetEnv PATH={root / 'bin'}:/usr/local/bin:/usr/bin:/bin\n"
        )
        subprocess.run([SSHD, "-t", "-f", str(root / "sshd_config")], check=True)
        (root / "bin").mkdir(mode=0o755)
        server = Sshd(root=root, port=port, host_key=root / "host_key", client_key=root / "client_key")
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
        _end_test_user_processes()
        _open_labs -= 1
        if _open_labs == 0:
            subprocess.run(["userdel", "-r", TEST_USER], check=False, capture_output=True)


# The busy H200 capture (tests/fixtures/gpu/h200-live/busy-*), in the field order console.host.gpu asks for.
GPU_STUB = """#!/bin/sh
case "$*" in
  *--query-gpu=*) echo "0, GPU-bc85baf0-ecd5-5da4-fbbb-2762b72465a0, NVIDIA H200, P0, 100, 25, 143771, 24029, \
60, 692.56, 700.00, 1485, 3201, 0x0000000000000004" ;;
  *--query-compute-apps=*) echo "GPU-bc85baf0-ecd5-5da4-fbbb-2762b72465a0, 538, /opt/torch/.venv/bin/python3, 24020" ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
"""


def install_gpu_stub(server: Sshd) -> Path:
    """An nvidia-smi stand-in the test user can run (the project's venv is not readable by that user)."""
    stub = server.root / "bin" / "nvidia-smi"
    stub.write_text(GPU_STUB)
    os.chmod(stub, 0o755)
    return stub


@contextmanager
def simulator() -> Iterator[int]:
    """The project's SGLang stand-in on 127.0.0.1:PORT (EAGLE, steps 2, topk 1, metrics on), healthy."""
    import httpx

    port = _free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "console.sim", "--model-path", "Qwen/Qwen3-8B", "--host", "127.0.0.1"),
            *("--port", str(port), "--sim-profile", "tiny-test", "--sim-time-scale", "0.001", "--enable-metrics"),
            *("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None:
                raise RuntimeError("the simulator exited")
            if time.monotonic() > deadline:
                raise RuntimeError("the simulator did not become healthy in 30 s")
            time.sleep(0.05)
        yield port
    finally:
        process.kill()
        process.wait()


JOURNALCTL_STUB = r"""#!/bin/sh
# journalctl stand-in: the entries of $0.jsonl (one `journalctl -o json` object per line, cursors cN).
# Honours -n N, --after-cursor=C and -f (new lines appended to the file are printed as they come).
entries="$0.jsonl"; n=10; after=""; follow=0
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="$2"; shift ;;
    --after-cursor=*) after="${1#--after-cursor=}" ;;
    -f) follow=1 ;;
  esac
  shift
done
total=$(wc -l < "$entries")
if [ -n "$after" ]; then
  start=$(grep -n "\"__CURSOR\": \"$after\"" "$entries" | cut -d: -f1)
  start=$(( ${start:-0} + 1 ))
else
  start=$(( total - n + 1 )); [ "$start" -lt 1 ] && start=1
fi
[ "$start" -le "$total" ] && sed -n "${start},${total}p" "$entries"
printed=$total
parent=$PPID
while [ "$follow" = 1 ] && kill -0 "$parent" 2>/dev/null; do  # ends with its SSH session, like journalctl -f
  total=$(wc -l < "$entries")
  if [ "$total" -gt "$printed" ]; then sed -n "$((printed + 1)),${total}p" "$entries"; printed=$total; fi
  sleep 0.05
done
"""


def install_journal_stub(server: Sshd) -> Path:
    """A journalctl on the test user's PATH; append entries to the returned .jsonl file."""
    stub = server.root / "bin" / "journalctl"
    stub.write_text(JOURNALCTL_STUB)
    os.chmod(stub, 0o755)
    entries = stub.with_name("journalctl.jsonl")
    entries.write_text("")
    os.chmod(entries, 0o644)
    return entries
