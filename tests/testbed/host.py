"""One booted testbed GPU host: real systemd in systemd-nspawn, real sshd, sglang.service, seen from outside.

    host = GpuHost.boot("gpu1")            # ~2-4 s from the cached tree
    host.root_run("systemctl is-active sglang.service")
    subprocess.run(["ssh", "-F", host.ssh_config, "gpu1", "hostname"], env=host.client_env())
    host.teardown()

The client side (key, known_hosts, ssh_config, a workspace with profiles/<alias>.toml) lives in a temp
dir that is also the HOME the CLI under test runs with, so `opsconsole status gpu1` finds it all.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.testbed import cache, recipe, resources
from tests.testbed.system import CommandTimedOut, TestbedError, poll_until, run

log = logging.getLogger(__name__)

CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A stand-in service that answers GET /health with 200 (for tests of the testbed that do not need SGLang).
TRIVIAL_EXEC_START = (
    f"ExecStart=/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory {recipe.REPO_MOUNT}/tests/testbed/trivial "
    f"{recipe.SGLANG_PORT}"
)
BOOT_TIMEOUT = 60.0
HEALTH_TIMEOUT = 60.0


@dataclass(frozen=True)
class BootTimings:
    network_s: float  # netns + veth
    to_ssh_s: float  # nspawn start -> sshd answers with its banner
    to_system_running_s: float  # nspawn start -> systemctl is-system-running says running/degraded
    to_service_healthy_s: float  # nspawn start -> sglang.service answers /health 200 (0 when not waited for)


@dataclass
class GpuHost:
    alias: str  # what the operator types: ssh_config Host, profile name
    res: resources.HostResources
    temp_dir: Path
    unit_text: str  # the sglang.service it booted with; restore() puts it back
    process: subprocess.Popen[bytes] | None = None
    host_key_fingerprint: str = ""
    timings: BootTimings | None = None
    trusted: bool = True  # False: known_hosts starts empty (the unknown-host-key case)
    persistent: bool = False  # True: its disk (an overlay over the tree) survives a halt; reboot() keeps it
    _leader_pid: int | None = field(default=None, repr=False)
    _root: Path | None = field(default=None, repr=False)  # the directory nspawn boots
    _site: Path | None = field(default=None, repr=False)

    # ---- what tests read -------------------------------------------------------------------------------
    ssh_port = 22
    user = recipe.SUDO_USER
    unit = recipe.SERVICE_NAME
    unit_path = recipe.SERVICE_PATH
    sglang_port = recipe.SGLANG_PORT

    @property
    def name(self) -> str:
        return self.alias

    @property
    def machine(self) -> str:
        return self.res.name

    @property
    def address(self) -> str:
        return self.res.inside_address

    @property
    def home(self) -> Path:
        return self.temp_dir / "home"

    @property
    def ssh_dir(self) -> Path:
        return self.home / ".ssh"

    @property
    def ssh_config(self) -> Path:
        return self.ssh_dir / "config"

    @property
    def known_hosts(self) -> Path:
        return self.ssh_dir / "known_hosts"

    @property
    def client_key(self) -> Path:
        return self.ssh_dir / "id_ed25519"

    @property
    def workspace(self) -> Path:
        return self.temp_dir / "workspace"

    @property
    def boot_dir(self) -> Path:
        return self.temp_dir / "boot"  # bound read-only into the container at recipe.BOOT_MOUNT

    @property
    def console_log(self) -> Path:
        return self.temp_dir / "nspawn.log"

    @property
    def known_hosts_line(self) -> str:
        key_type, key = (self.boot_dir / "ssh_host_ed25519_key.pub").read_text().split()[:2]
        return f"{self.address} {key_type} {key}"

    # ---- boot and teardown -------------------------------------------------------------------------------
    @classmethod
    def boot(
        cls,
        alias: str = "gpu1",
        *,
        unit_text: str | None = None,
        trusted: bool = True,
        wait_healthy: bool = True,
        persistent: bool = False,
    ) -> GpuHost:
        """Boot a host from the cached tree (building it first if needed); tear down whatever fails.

        The default host is volatile (its writes live in memory and are gone at halt). A persistent one gets a disk
        of its own, an overlay over the tree in its temp dir, that survives reboot() and goes with teardown()."""
        tree = cache.ensure_tree().path
        site = cache.ensure_site().path
        res = resources.reserve_host()
        host: GpuHost | None = None
        try:
            temp_dir = Path(tempfile.mkdtemp(prefix=f"opsconsole-testbed-{res.name}-"))
            res.temp_dir = str(temp_dir)
            res.save()
            host = cls(alias, res, temp_dir, unit_text or recipe.sglang_unit(), trusted=trusted, persistent=persistent)
            host._start(tree, site, wait_healthy=wait_healthy)
            return host
        except BaseException:
            if host is not None:
                log.error("testbed host %s failed to boot; console log:\n%s", res.name, host.console_tail())
                host.teardown()
            else:
                resources.destroy(res)
            raise

    @property
    def disk(self) -> Path:
        """A persistent host's disk: upper (what it wrote), work, root (the merged tree it boots)."""
        overlay = self.res.overlay
        assert overlay is not None
        return overlay.parent

    def _start(self, tree: Path, site: Path, *, wait_healthy: bool) -> None:
        t0 = time.monotonic()
        self._write_keys_and_client_files()
        resources.create_network(self.res)
        network_s = time.monotonic() - t0
        self._site = site
        self._root = tree
        if self.persistent:
            self._root = resources.mount_overlay(tree, self.res)
        to_ssh, to_running, started = self._boot_container()
        self._install_service()
        to_healthy = 0.0
        if wait_healthy:
            self.wait_healthy()
            to_healthy = time.monotonic() - started
        self.timings = BootTimings(network_s, to_ssh, to_running, to_healthy)
        log.info("testbed host %s (%s) up: %s", self.alias, self.machine, self.timings)

    def _boot_container(self) -> tuple[float, float, float]:
        """Launch nspawn in fresh cgroups; wait for sshd and for systemd to finish booting. (to ssh, to running,
        the monotonic time it started)."""
        assert self._root is not None and self._site is not None
        cgroups = resources.create_cgroups(self.res)
        self.process = self._launch(self._root, self._site, cgroups)
        started = time.monotonic()
        poll_until(self._ssh_banner, timeout=BOOT_TIMEOUT, what=f"sshd on {self.address}:22", explain=self.console_tail)
        to_ssh = time.monotonic() - started
        poll_until(
            self._system_running, timeout=BOOT_TIMEOUT, what="systemd to finish booting", explain=self._boot_failures
        )
        return to_ssh, time.monotonic() - started, started

    def reboot(self) -> BootTimings:
        """Halt the host cleanly (systemd stops every service) and boot it again from its own disk: the network,
        keys and client files stay, and so does everything the host wrote. Nothing is installed again: the units
        that are enabled start by themselves. Only for a persistent host (a volatile one would lose it all)."""
        if not self.persistent:
            raise TestbedError(f"{self.alias} is volatile: its disk goes with a halt; boot it with persistent=True")
        halted = time.monotonic()
        resources.halt(self.res)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        self._leader_pid = None
        for cgroup in self.res.cgroups:
            resources.remove_cgroup_tree(Path(cgroup))
        to_ssh, to_running, _started = self._boot_container()
        log.info("testbed host %s rebooted (halt + boot %.1f s)", self.alias, time.monotonic() - halted)
        return BootTimings(0.0, to_ssh, to_running, 0.0)

    def _launch(self, root: Path, site: Path, cgroups: list[Path]) -> subprocess.Popen[bytes]:
        # A volatile host boots the shared tree under a throwaway overlay; a persistent one its own overlay mount.
        volatile = [] if self.persistent else ["--volatile=overlay"]
        nspawn = [
            "systemd-nspawn",
            "--quiet",
            f"--directory={root}",
            f"--machine={self.machine}",
            f"--hostname={self.machine}",
            "--register=no",
            "--keep-unit",
            "--console=passive",
            *volatile,
            f"--network-namespace-path=/run/netns/{self.machine}",
            f"--bind-ro={cache.REPO_ROOT}:{recipe.REPO_MOUNT}",
            f"--bind-ro={site}:{recipe.SITE_MOUNT}",
            f"--bind-ro={self.boot_dir}:{recipe.BOOT_MOUNT}",
            "--boot",
        ]
        # The launcher moves itself into its own cgroups before exec, so nspawn and everything the
        # container runs live in a tree of their own (two containers sharing one break `systemctl`).
        enter_cgroups = " && ".join(f"echo $$ > {shlex.quote(str(c / 'cgroup.procs'))}" for c in cgroups)
        with open(self.console_log, "ab") as console:  # a reboot appends its boot to the first one
            process = subprocess.Popen(
                ["/bin/sh", "-c", f'{enter_cgroups} && exec "$@"', "sh", *nspawn],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a ^C in the test run must not halt the host under a test's feet
            )
        self.res.nspawn_pid = process.pid
        self.res.save()
        return process

    def teardown(self) -> float:
        """Halt the container and remove everything it used; returns the seconds it took."""
        started = time.monotonic()
        resources.destroy(self.res)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        return time.monotonic() - started

    # ---- acting on the host ------------------------------------------------------------------------------
    def root_run(
        self,
        cmd: str | Sequence[str],
        *,
        input: str | None = None,
        timeout: float = 60,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command as root inside the host (nsenter; independent of sshd and of the link state).

        A string runs through /bin/sh -c; a list is an argv. Past timeout the command and everything it started
        are killed and CommandTimedOut carries what they printed.
        """
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        return self._nsenter(argv, input=input, timeout=timeout, check=check)

    def _nsenter(
        self, argv: list[str], *, input: str | None = None, timeout: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        leader = self.leader_pid()
        env = {"PATH": CONTAINER_PATH, "LANG": "C.UTF-8", "HOME": "/root", "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0"}
        full = ["nsenter", f"--target={leader}", "--mount", "--uts", "--ipc", "--net", "--pid", "--", *argv]
        with subprocess.Popen(
            full, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        ) as process:
            try:
                stdout, stderr = process.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                # nsenter forks the command into the host's PID namespace: killing nsenter alone would leave it
                # running inside the host (and slow the host's halt), so kill the whole subtree.
                for pid in [*reversed(_descendants(process.pid)), process.pid]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                stdout, stderr = process.communicate()  # what it printed before it was killed
                raise CommandTimedOut(
                    f"on {self.machine}: {shlex.join(argv)} ran past {timeout:.0f} s", stdout, stderr
                ) from exc
        done = subprocess.CompletedProcess(full, process.returncode, stdout, stderr)
        if check and done.returncode != 0:
            raise TestbedError(
                f"on {self.machine}: {shlex.join(argv)} exited {done.returncode}\n{done.stderr.strip()[-2000:]}"
            )
        return done

    def leader_pid(self) -> int:
        """The host PID of the container's PID 1 (systemd), found by its place in our cgroup tree."""
        if self._leader_pid is not None and _pid_exists(self._leader_pid):
            return self._leader_pid
        if self.process is None or self.process.poll() is not None:
            raise TestbedError(f"testbed host {self.machine} is not running\n{self.console_tail()}")
        self._leader_pid = poll_until(self._find_leader, timeout=10, what=f"{self.machine}'s PID 1")
        return self._leader_pid

    def _find_leader(self) -> int | None:
        assert self.process is not None
        for pid in _descendants(self.process.pid):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except FileNotFoundError:
                continue
            nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
            if len(nspid) >= 2 and nspid[-1] == "1":
                return pid
        return None

    def link_down(self) -> None:
        """Cut the host's network (its eth0 down): open SSH connections stall, new ones time out."""
        resources.set_inside_link(self.res, up=False)

    def link_up(self) -> None:
        resources.set_inside_link(self.res, up=True)

    def service_properties(self, *names: str) -> dict[str, str]:
        props = names or ("ActiveState", "SubState", "MainPID", "NRestarts", "ExecMainStartTimestampMonotonic")
        out = self.root_run(["systemctl", "show", self.unit, "-p", ",".join(props)]).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def unit_file_text(self) -> str:
        return self.root_run(["cat", self.unit_path]).stdout

    def unit_sha256(self) -> str:
        return hashlib.sha256(self.unit_file_text().encode()).hexdigest()

    def journal(self, lines: int = 200) -> str:
        return self.root_run(["journalctl", "-u", self.unit, "-n", str(lines), "--no-pager", "-o", "cat"]).stdout

    def wait_healthy(self, timeout: float = HEALTH_TIMEOUT) -> None:
        """Until sglang.service answers GET /health with 200 on the host's loopback (polled inside the host)."""
        probe = _HEALTH_PROBE.format(port=self.sglang_port, timeout=timeout)
        done = self.root_run(["python3", "-c", probe], timeout=timeout + 10, check=False)
        if done.returncode != 0:
            raise TestbedError(
                f"{self.unit} on {self.machine} not healthy after {timeout:.0f} s: {done.stdout.strip()}\n"
                f"{self.service_properties()}\njournal:\n{self.journal(40)}"
            )

    def restore(self, *, wait_healthy: bool = True) -> None:
        """Put sglang.service back to the unit it booted with and restart it (after tests that change it)."""
        self.link_up()
        self.root_run(["rm", "-rf", f"{self.unit_path}.d"])
        self.install_unit(self.unit_text, wait_healthy=wait_healthy)

    def install_unit(self, text: str, *, wait_healthy: bool = True) -> None:
        """Replace sglang.service behind the console's back (atomically), daemon-reload and restart it."""
        self.root_run(
            f"cat > {self.unit_path}.testbed && mv {self.unit_path}.testbed {self.unit_path} && "
            f"systemctl daemon-reload && systemctl reset-failed {self.unit} ; "
            f"systemctl enable --quiet {self.unit} && systemctl restart {self.unit}",
            input=text,
        )
        if wait_healthy:
            self.wait_healthy()

    def is_pristine(self) -> bool:
        """The unit is the one it booted with, the service runs, and no drop-ins were added."""
        if self.unit_file_text() != self.unit_text:
            return False
        if self.root_run(["test", "-e", f"{self.unit_path}.d"], check=False).returncode == 0:
            return False
        return self.service_properties("ActiveState")["ActiveState"] == "active"

    # ---- the client side -----------------------------------------------------------------------------------
    def client_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a client (the CLI, ssh) of this host: HOME with its ssh files, no agent."""
        env = dict(os.environ if base is None else base)
        env.pop("SSH_AUTH_SOCK", None)
        env["HOME"] = str(self.home)
        env["OPSCONSOLE_WORKSPACE"] = str(self.workspace)
        return env

    def ssh(self, command: str, *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command over real OpenSSH as the sudo user, host key verification on (BatchMode)."""
        argv = ["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", self.alias, command]
        return run(argv, timeout=timeout, check=check, what=f"ssh {self.alias}")

    def trust(self) -> None:
        """Record the host key in known_hosts (what `opsconsole trust` does after the operator says yes)."""
        self.known_hosts.write_text(self.known_hosts_line + "\n")

    def forget(self) -> None:
        self.known_hosts.write_text("")

    def _write_keys_and_client_files(self) -> None:
        self.boot_dir.mkdir(mode=0o755)
        self.boot_dir.chmod(0o755)  # the sudo user's sshd reads authorized_keys from here
        self.ssh_dir.mkdir(parents=True, mode=0o700)
        self.workspace.joinpath("profiles").mkdir(parents=True)
        self.workspace.joinpath("logs").mkdir()
        host_key = self.boot_dir / "ssh_host_ed25519_key"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{self.machine}-host", "-f", str(host_key)])
        run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "opsconsole-testbed-client",
                "-f",
                str(self.client_key),
            ]
        )
        authorized = self.boot_dir / "authorized_keys"
        authorized.write_text(self.client_key.with_suffix(".pub").read_text())
        authorized.chmod(0o644)
        fingerprint = run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{host_key}.pub"]).stdout.split()
        self.host_key_fingerprint = fingerprint[1]
        if self.trusted:
            self.trust()
        else:
            self.forget()
        self.ssh_config.write_text(
            f"Host {self.alias}\n"
            f"    HostName {self.address}\n"
            f"    Port {self.ssh_port}\n"
            f"    User {self.user}\n"
            f"    IdentityFile {self.client_key}\n"
            f"    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts}\n"
            f"    StrictHostKeyChecking yes\n"
            f"    ConnectTimeout 5\n"
        )
        self.ssh_config.chmod(0o600)
        (self.workspace / "profiles" / f"{self.alias}.toml").write_text(
            f"# testbed host {self.machine} ({self.address}), reached through the ssh_config alias\n"
            f"[host]\n"
            f'ssh = "{self.alias}"\n'
            f'unit = "{self.unit}"\n'
            f"sudo = true\n"
            f"\n"
            f"[sglang]\n"
            f"port = {self.sglang_port}\n"
        )

    def _install_service(self) -> None:
        self.root_run(
            f"cat > {self.unit_path} && systemctl daemon-reload && systemctl enable --quiet --now {self.unit}",
            input=self.unit_text,
        )

    # ---- waiting and diagnostics -------------------------------------------------------------------------------
    def _ssh_banner(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise TestbedError(
                f"systemd-nspawn for {self.machine} exited ({self.process.returncode})\n{self.console_tail()}"
            )
        try:
            with socket.create_connection((self.address, self.ssh_port), timeout=0.5) as sock:
                sock.settimeout(2)
                return sock.recv(64).startswith(b"SSH-2.0-")
        except OSError:
            return False

    def _system_running(self) -> bool:
        state = self.root_run(["systemctl", "is-system-running"], check=False).stdout.strip()
        return state in {"running", "degraded"}

    def _boot_failures(self) -> str:
        done = self.root_run(["systemctl", "list-jobs", "--no-pager"], check=False)
        failed = self.root_run(["systemctl", "--failed", "--no-pager"], check=False)
        return f"jobs:\n{done.stdout}\nfailed:\n{failed.stdout}"

    def console_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.console_log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no console log)"


_HEALTH_PROBE = """
import sys, time, urllib.request, urllib.error
deadline = time.monotonic() + {timeout}
last = "no answer"
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen("http://127.0.0.1:{port}/health", timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
            last = f"HTTP {{r.status}}"
    except urllib.error.HTTPError as e:
        last = f"HTTP {{e.code}}"
    except OSError as e:
        last = repr(e)
    time.sleep(0.05)
print("last answer:", last)
sys.exit(1)
"""


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    queue = [pid]
    while queue:
        current = queue.pop(0)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except FileNotFoundError:
            continue
        for child in map(int, children):
            found.append(child)
            queue.append(child)
    return found


def _pid_exists(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()
