"""The demo host's service manager: one systemd-style unit run as a local process, and its client.

`UnitSupervisor` (runs inside `opsconsole demo`) reads a real systemd unit file — `ExecStart=` (with
backslash continuations), `Environment=`, `WorkingDirectory=`, `TimeoutStopSec=`, `Restart=`,
`RestartSec=`, read through console.sglang.unit.UnitFile, the model `apply` edits — and behaves like
systemd for one `Type=simple` service: start/stop/restart (SIGTERM, SIGKILL after TimeoutStopSec), the
properties `systemctl show` reports, a journal of the process's stdout/stderr lines with cursors,
daemon-reload semantics (edits take effect only after a reload; NeedDaemonReload until then), enable,
unit writes with a timestamped backup and an atomic rename, and the unit's apply lock (held by one open
control connection, released when it closes, as the flock on a real host is).

`serve_control()` exposes it on a unix socket as a small HTTP+JSON API, and `DemoServiceManager` is the
client that implements console.host.base.ServiceManager over that socket, so every other `opsconsole`
process (status, apply, logs, bench) drives the demo host exactly as it drives systemd.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, UnixConnector, web

from console import hints
from console.host.base import HostError, JournalEntry, ServiceState, UnitBackup, UnitLocked
from console.sglang.unit import UnitError, UnitFile

DEFAULT_TIMEOUT_STOP_S = 90.0  # systemd's DefaultTimeoutStopSec
DEFAULT_RESTART_S = 0.1  # systemd's RestartSec default (100 ms)
# How often a held lock checks that its holder's connection is still open: a console that finished, or died,
# has its lock released within this.
LOCK_CHECK_S = 0.05
GUARD_EXIT_S = 5.0  # how long close() waits for the guard (it has nothing left to stop by then)
# After the main process exited and its group was killed, how long its output may still drain: a descendant
# that left the group (setsid) could hold the pipes open for ever.
OUTPUT_DRAIN_S = 2.0


# --- the unit file (pure) --------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    timeout_stop_s: float  # math.inf: wait for the process however long it takes (TimeoutStopSec=infinity)
    restart: str  # no, on-failure, always
    restart_s: float


def parse_exec(text: str) -> ExecSpec:
    """What systemd would run for this unit's [Service] section, read with the console's one unit model
    (console.sglang.unit.UnitFile: the same tokenising, continuations, quoting and `Environment=` resets that
    `apply` edits with). Raises HostError when the unit has no ExecStart or cannot be read."""
    try:
        unit = UnitFile.parse(text)
        argv = unit.exec_argv()
        env = unit.environment()
    except UnitError as exc:
        raise HostError(f"the unit cannot be run: {exc}") from None
    cwd = (unit.working_directory or "").lstrip("-") or None  # `-`: a missing directory is not an error
    timeout_stop = unit.timeout_stop_s
    restart_s = unit.restart_sec
    return ExecSpec(
        argv=argv,
        env=env,
        cwd=cwd,
        timeout_stop_s=DEFAULT_TIMEOUT_STOP_S if timeout_stop is None else timeout_stop,
        restart=unit.restart or "no",
        restart_s=DEFAULT_RESTART_S if restart_s is None else restart_s,
    )


class _UnitProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a process with output streams, plus a future set as soon as the process exits
    (Process.wait() also waits until every pipe is closed)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=2**16, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


# prctl(2) from libc, looked up once here: the child must not import or resolve anything between fork and exec.
_PR_SET_PDEATHSIG = 1
_prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None) if sys.platform == "linux" else None


def _end_with_parent(parent: int) -> Callable[[], None]:
    """For the unit's process, between fork and exec: ask the kernel for SIGTERM when the supervisor dies
    (PR_SET_PDEATHSIG, Linux), so that a killed demo host leaves no orphan even if its guard is gone too.
    The kernel sends it when the *thread* that forked exits: the supervisor runs on the demo host's main
    thread (its event loop), which lives as long as the process."""

    def in_child() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the request took effect: do not start at all
            os._exit(1)

    return in_child


def _usec_timestamp(ts: float | None) -> str:
    if ts is None:
        return "n/a"
    return datetime.fromtimestamp(ts).astimezone().strftime("%a %Y-%m-%d %H:%M:%S %Z")


# --- the supervisor (server side) ------------------------------------------------------------------


@dataclass
class _Entry:
    seq: int
    ts: float
    message: str
    priority: int
    pid: int | None

    def to_json(self, boot: str) -> dict[str, Any]:
        return {
            "cursor": f"s={boot};i={self.seq:x}",
            "ts": self.ts,
            "message": self.message,
            "priority": self.priority,
            "pid": self.pid,
        }


@dataclass
class UnitSupervisor:
    unit: str
    unit_path: Path
    backup_dir: Path
    journal_limit: int = 20000
    process: asyncio.subprocess.Process | None = None
    loaded_text: str | None = None
    active_state: str = "inactive"
    sub_state: str = "dead"
    result: str = "success"
    started_at: float | None = None
    n_restarts: int = 0
    exit_status: int | None = None  # as asyncio reports it: the exit status, or -N when killed by signal N
    enabled: bool = False
    # systemd's monotonic timestamps (µs) of the last time the unit left `active`, entered inactive/failed, and
    # of the main process's exit: what tells a stop that ends in SIGKILL (SGLang 0.5.17) from a crash.
    active_exit_us: int = 0
    inactive_enter_us: int = 0
    main_exit_us: int = 0
    _entries: list[_Entry] = field(default_factory=list)
    _seq: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _stopping: bool = False
    _stop_timed_out: bool = False
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _watch: asyncio.Task[None] | None = None
    lock_owner: str | None = None  # who holds the apply lock (see control_app's /lock)
    boot: str = field(default_factory=lambda: os.urandom(8).hex())
    _guard: subprocess.Popen[bytes] | None = None  # see console/sim/guard.py
    _exited: asyncio.Future[None] | None = None  # the main process exited (whatever holds its pipes)

    # journal ------------------------------------------------------------------------------------

    def _append(self, message: str, priority: int = 6, pid: int | None = None) -> None:
        self._seq += 1
        self._entries.append(_Entry(self._seq, time.time(), message, priority, pid))
        if len(self._entries) > self.journal_limit:
            del self._entries[: len(self._entries) - self.journal_limit]

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _system(self, message: str) -> None:
        """A line systemd itself would log (pid 1)."""
        self._append(message, 6, 1)

    @property
    def last_seq(self) -> int:
        return self._seq

    def entries(self, lines: int, after_seq: int | None) -> list[_Entry]:
        if after_seq is not None:
            return [e for e in self._entries if e.seq > after_seq]
        return self._entries[-lines:] if lines > 0 else []

    async def wait_for_entries(self, after_seq: int, timeout: float) -> None:
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(lambda: self._seq > after_seq), timeout)

    # unit file ----------------------------------------------------------------------------------

    def read_unit(self) -> str:
        try:
            return self.unit_path.read_text()
        except FileNotFoundError:
            raise HostError(f"{self.unit}: no unit file at {self.unit_path}") from None

    def write_unit(self, text: str) -> UnitBackup:
        """Back up the current file (timestamped), then replace it atomically (temp file + rename)."""
        self.backup_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%dT%H%M%S.%f")
        backup = self.backup_dir / f"{self.unit}.{stamp}.bak"
        if self.unit_path.exists():
            backup.write_bytes(self.unit_path.read_bytes())
        tmp = self.unit_path.with_name(f".{self.unit_path.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, self.unit_path)
        return UnitBackup(str(backup))

    def backups(self) -> list[UnitBackup]:
        """Its backups, newest first (named by write_unit's timestamp)."""
        found = []
        for path in self.backup_dir.glob(f"{self.unit}.*.bak") if self.backup_dir.is_dir() else ():
            stamp = path.name[len(self.unit) + 1 : -len(".bak")]
            try:
                taken = datetime.strptime(stamp, "%Y%m%dT%H%M%S.%f").astimezone(UTC)
            except ValueError:
                continue
            found.append(UnitBackup(str(path), taken))
        return sorted(found, key=lambda b: b.taken_at or datetime.min.replace(tzinfo=UTC), reverse=True)

    def read_backup(self, backup: UnitBackup) -> str:
        path = Path(backup.path)
        if path.parent.resolve() != self.backup_dir.resolve() or not path.is_file():
            raise HostError(f"{backup.path} is not a backup of {self.unit} (backups live in {self.backup_dir})")
        return path.read_text()

    def restore_unit(self, backup: UnitBackup) -> None:
        path = Path(backup.path)
        if path.parent.resolve() != self.backup_dir.resolve() or not path.is_file():
            raise HostError(f"{backup.path} is not a backup of {self.unit} (backups live in {self.backup_dir})")
        tmp = self.unit_path.with_name(f".{self.unit_path.name}.tmp")
        tmp.write_bytes(path.read_bytes())
        os.replace(tmp, self.unit_path)

    def daemon_reload(self) -> None:
        self.loaded_text = self.read_unit()
        self._system("Reloading.")

    def need_daemon_reload(self) -> bool:
        try:
            return self.loaded_text is not None and self.unit_path.read_text() != self.loaded_text
        except FileNotFoundError:
            return True

    def enable(self) -> None:
        self.enabled = True
        self._system(f"Created symlink /etc/systemd/system/multi-user.target.wants/{self.unit} → {self.unit_path}.")

    # process life -------------------------------------------------------------------------------

    async def start(self) -> None:
        async with self._lock:
            await self._start_locked()
        await self._notify()

    async def _start_locked(self) -> None:
        if self.process is not None and self.process.returncode is None:
            return
        if self.loaded_text is None:
            self.loaded_text = self.read_unit()
        spec = parse_exec(self.loaded_text)
        self._ensure_guard()
        self._system(f"Started {self.unit} - SGLang server.")
        loop = asyncio.get_running_loop()
        self.exit_status = None
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _UnitProtocol(loop),
                *spec.argv,
                stdin=subprocess.DEVNULL,  # systemd's StandardInput=null; never the demo's terminal
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, **spec.env, "PYTHONUNBUFFERED": "1"},
                cwd=spec.cwd,
                start_new_session=True,  # its own process group: stop() signals the whole group, like a cgroup
                preexec_fn=_end_with_parent(os.getpid()),
            )
        except OSError as e:
            self._append(f"{self.unit}: Failed to execute {spec.argv[0]}: {e.strerror}", 3, 1)
            self._system(f"{self.unit}: Main process exited, code=exited, status=203/EXEC")
            self.exit_status, self.main_exit_us = 203, int(time.monotonic() * 1e6)
            self._set("failed", "failed", "exit-code")
            return
        self.process = proc = asyncio.subprocess.Process(transport, protocol, loop)
        self._exited = protocol.exited
        self.started_at = time.time()
        self.exit_status = None
        self._stopping = False
        self._set("active", "running", "success")
        self._tell_guard(f"start {proc.pid} {spec.timeout_stop_s}")
        readers = [
            asyncio.create_task(self._pump(proc.stdout, proc.pid, 6)),
            asyncio.create_task(self._pump(proc.stderr, proc.pid, 6)),
        ]
        self._watch = asyncio.create_task(self._watch_exit(proc, protocol.exited, readers, spec))

    def _set(self, active: str, sub: str, result: str | None = None) -> None:
        was = self.active_state
        now_us = int(time.monotonic() * 1e6)
        if was in ("active", "reloading") and active not in ("active", "reloading"):
            self.active_exit_us = now_us
        if active in ("inactive", "failed") and was not in ("inactive", "failed"):
            self.inactive_enter_us = now_us
        self.active_state, self.sub_state = active, sub
        if result is not None:
            self.result = result

    async def _pump(self, stream: asyncio.StreamReader | None, pid: int, priority: int) -> None:
        if stream is None:
            return
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line longer than the buffer: keep what we have
                line = await stream.read(65536)
            if not line:
                return
            self._append(line.decode("utf-8", "replace").rstrip("\n"), priority, pid)
            await self._notify()

    async def _watch_exit(
        self,
        proc: asyncio.subprocess.Process,
        exited: asyncio.Future[None],
        readers: list[asyncio.Task[None]],
        spec: ExecSpec,
    ) -> None:
        # Not proc.wait(): on Python 3.11 it also waits for the output pipes, which a descendant may hold.
        await exited
        code = proc.returncode
        assert code is not None
        self.main_exit_us = int(time.monotonic() * 1e6)
        # What is left of its group goes with it, as systemd's KillMode=control-group; then its output drains.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        self._tell_guard(f"gone {proc.pid}")  # from here the group's number may be reused: never signal it again
        _done, stuck = await asyncio.wait(readers, timeout=OUTPUT_DRAIN_S)
        for reader in stuck:
            reader.cancel()
        self.exit_status = code
        if code < 0:
            sig = signal.Signals(-code).name[3:]
            self._system(f"{self.unit}: Main process exited, code=killed, status={-code}/{sig}")
            clean = self._stopping and -code in (signal.SIGTERM, signal.SIGINT)
            result = "success" if clean else "timeout" if self._stop_timed_out else "signal"
        else:
            self._system(
                f"{self.unit}: Main process exited, code=exited, status={code}/{'SUCCESS' if code == 0 else 'FAILURE'}"
            )
            result = "success" if code == 0 else "exit-code"
        if result == "success":
            self._set("inactive", "dead", result)
            self._system(f"{self.unit}: Deactivated successfully.")
        elif self._stopping:
            # systemd: a stop whose main process did not exit cleanly (SGLang 0.5.17 SIGKILLs itself) ends `failed`
            # with the result kept until the next start.
            self._system(f"{self.unit}: Failed with result '{result}'.")
            self._set("failed", "failed", result)
        else:
            self._system(f"{self.unit}: Failed with result '{result}'.")
            if spec.restart in ("on-failure", "always", "on-abnormal"):
                # systemd waits RestartSec in activating/auto-restart, then starts it again.
                self._set("activating", "auto-restart", result)
                await self._notify()
                await asyncio.sleep(spec.restart_s)
                async with self._lock:
                    if not self._stopping:  # checked under the lock: a stop in between cancels the restart
                        self.n_restarts += 1
                        self._system(f"{self.unit}: Scheduled restart job, restart counter is at {self.n_restarts}.")
                        await self._start_locked()
            else:
                self._set("failed", "failed", result)
        await self._notify()

    async def stop(self) -> None:
        async with self._lock:
            await self._stop_locked()
        await self._notify()

    async def _stop_locked(self) -> None:
        proc = self.process
        self._stopping = True  # also cancels a pending automatic restart
        self._stop_timed_out = False
        if proc is None or proc.returncode is not None:
            if self.sub_state == "auto-restart":
                self._set("inactive", "dead")
            return  # like systemctl stop on a dead or failed unit: nothing else to do, state kept
        timeout_s = parse_exec(self.loaded_text or self.read_unit()).timeout_stop_s
        timeout = None if math.isinf(timeout_s) else timeout_s
        self._set("deactivating", "stop-sigterm")
        self._system(f"Stopping {self.unit} - SGLang server...")
        await self._notify()
        exited = self._exited
        assert exited is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(exited), timeout)
        except TimeoutError:
            self._stop_timed_out = True  # systemd: Result=timeout, whatever the signal's own verdict
            self._system(f"{self.unit}: State 'stop-sigterm' timed out. Killing.")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await exited
        if self._watch is not None:
            await asyncio.gather(self._watch, return_exceptions=True)  # it also removes the group's leftovers
        self._system(f"Stopped {self.unit} - SGLang server.")

    async def restart(self) -> None:
        async with self._lock:
            await self._stop_locked()
            await self._start_locked()
        await self._notify()

    async def close(self) -> None:
        """Stop the unit and end the guard: what the demo host does on its way out."""
        await self.stop()
        guard, self._guard = self._guard, None
        if guard is None:
            return
        if guard.stdin is not None:
            with contextlib.suppress(OSError):
                guard.stdin.close()  # end of its instructions, with no group left to stop: it exits
        deadline = time.monotonic() + GUARD_EXIT_S
        while guard.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if guard.poll() is None:
            guard.kill()
            guard.wait()

    # the guard: when this process dies without stopping the unit ----------------------------------------

    def _ensure_guard(self) -> None:
        """Start the guard (console/sim/guard.py) unless it runs: it stops the unit's process groups if this
        process ends without doing so, because nothing else would (SIGKILL, OOM). It lives in a session of its
        own, so a closed terminal does not end it, and only this process holds the write end of its stdin."""
        if self._guard is not None and self._guard.poll() is None:
            return
        self._guard = subprocess.Popen(
            [sys.executable, "-m", "console.sim.guard"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=Path(__file__).resolve().parents[2],  # where `console` is importable from, as for the demo unit
            start_new_session=True,
        )

    def _tell_guard(self, line: str) -> None:
        guard = self._guard
        if guard is None or guard.stdin is None:
            return
        try:
            guard.stdin.write(line.encode() + b"\n")
            guard.stdin.flush()
        except OSError:  # the guard is gone (someone killed it); the next start brings a new one
            pgid = line.split()[1]
            self._system(
                f"{self.unit}: the demo host's guard is gone; if the demo host is killed, group {pgid} may stay"
            )

    def state(self) -> dict[str, Any]:
        proc = self.process
        pid = proc.pid if proc is not None and proc.returncode is None else None
        return {
            "unit": self.unit,
            "active_state": self.active_state,
            "sub_state": self.sub_state,
            "main_pid": pid,
            "started_at": self.started_at,  # kept after the process ends, like ExecMainStartTimestamp
            "n_restarts": self.n_restarts,
            "result": self.result,
            "unit_file_state": "enabled" if self.enabled else "disabled",
            "need_daemon_reload": self.need_daemon_reload(),
            "fragment_path": str(self.unit_path),
            "properties": {
                "Type": "simple",
                **self._exit_properties(),
                "ExecMainStartTimestamp": _usec_timestamp(self.started_at),
                "LoadState": "loaded",
            },
        }

    def _exit_properties(self) -> dict[str, str]:
        """ExecMainCode/ExecMainStatus as systemd prints them (1 = exited with status, 2 = killed by signal; 0 while
        the process runs or before the first) and the monotonic timestamps console.core.exits reads."""
        code = self.exit_status
        main_code, main_status = (0, 0) if code is None else (2, -code) if code < 0 else (1, code)
        return {
            "ExecMainCode": str(main_code),
            "ExecMainStatus": str(main_status),
            "ExecMainExitTimestampMonotonic": str(self.main_exit_us if code is not None else 0),
            "ActiveExitTimestampMonotonic": str(self.active_exit_us),
            "InactiveEnterTimestampMonotonic": str(self.inactive_enter_us),
        }


# --- the control socket (server) -----------------------------------------------------------------


def control_app(sup: UnitSupervisor) -> web.Application:
    async def guarded(action: Callable[[], Awaitable[Any]]) -> web.Response:
        try:
            result = await action()
        except HostError as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response(result if result is not None else {"ok": True})

    async def state(request: web.Request) -> web.Response:
        return web.json_response(sup.state())

    async def read_unit(request: web.Request) -> web.Response:
        return await guarded(lambda: _value({"text": sup.read_unit()}))

    async def write_unit(request: web.Request) -> web.Response:
        text = (await request.json())["text"]
        return await guarded(lambda: _value({"backup": sup.write_unit(text).path}))

    async def backups(request: web.Request) -> web.Response:
        listed = [{"path": b.path, "taken_at": b.taken_at.isoformat() if b.taken_at else None} for b in sup.backups()]
        return await guarded(lambda: _value({"backups": listed}))

    async def read_backup(request: web.Request) -> web.Response:
        path = request.query.get("path", "")
        return await guarded(lambda: _value({"text": sup.read_backup(UnitBackup(path))}))

    async def restore(request: web.Request) -> web.Response:
        path = (await request.json())["backup"]

        async def action() -> None:
            sup.restore_unit(UnitBackup(path))

        return await guarded(action)

    def verb(fn: Callable[[], Awaitable[None]]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            return await guarded(fn)

        return handler

    async def reload() -> None:
        sup.daemon_reload()

    async def enable() -> None:
        sup.enable()

    async def journal(request: web.Request) -> web.StreamResponse:
        lines = int(request.query.get("lines", "100"))
        after = request.query.get("after")
        follow = request.query.get("follow") == "1"
        after_seq = _seq_of(after, sup.boot) if after else None
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        try:
            await _send_journal(resp, lines, after_seq, follow)
        except ConnectionResetError:  # the follower went away (Ctrl-C, apply finished)
            return resp
        await resp.write_eof()
        return resp

    async def _send_journal(resp: web.StreamResponse, lines: int, after_seq: int | None, follow: bool) -> None:
        backlog = sup.entries(lines, after_seq)
        for e in backlog:
            await resp.write((json.dumps(e.to_json(sup.boot)) + "\n").encode())
        if follow:
            last = backlog[-1].seq if backlog else (after_seq if after_seq is not None else sup.last_seq)
            while True:
                await sup.wait_for_entries(last, 5.0)
                fresh = sup.entries(0, last)
                for e in fresh:
                    await resp.write((json.dumps(e.to_json(sup.boot)) + "\n").encode())
                    last = e.seq
                if not fresh:
                    await resp.write(b"\n")  # keep-alive; also notices a client that went away

    async def lock(request: web.Request) -> web.StreamResponse:
        owner = str((await request.json()).get("owner", ""))
        if sup.lock_owner is not None:  # checked and taken with no await between: no other handler runs here
            return web.json_response({"holder": sup.lock_owner}, status=409)
        sup.lock_owner = owner
        try:
            resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
            await resp.prepare(request)
            await resp.write(b'{"locked": true}\n')
            # Held until the holder's connection closes: released, finished, or the console died (the kernel
            # closes its socket). aiohttp cancels no handler on a disconnect, so the handler watches for it.
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(LOCK_CHECK_S)
            return resp
        except ConnectionResetError:
            return resp
        finally:
            sup.lock_owner = None

    app = web.Application()
    app.router.add_post("/lock", lock)
    app.router.add_get("/state", state)
    app.router.add_get("/unit", read_unit)
    app.router.add_put("/unit", write_unit)
    app.router.add_post("/restore", restore)
    app.router.add_get("/backups", backups)
    app.router.add_get("/backup", read_backup)
    app.router.add_post("/daemon-reload", verb(reload))
    app.router.add_post("/start", verb(sup.start))
    app.router.add_post("/stop", verb(sup.stop))
    app.router.add_post("/restart", verb(sup.restart))
    app.router.add_post("/enable", verb(enable))
    app.router.add_get("/journal", journal)
    return app


async def _value(value: Any) -> Any:
    return value


def _seq_of(cursor: str, boot: str) -> int:
    fields = dict(part.split("=", 1) for part in cursor.split(";") if "=" in part)
    if fields.get("s") != boot:
        return 0  # a cursor from an earlier demo run: everything is new
    try:
        return int(fields.get("i", "0"), 16)
    except ValueError:
        return 0


async def serve_control(sup: UnitSupervisor, socket_path: Path) -> web.AppRunner:
    runner = web.AppRunner(control_app(sup), access_log=None, handle_signals=False)
    await runner.setup()
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    await web.UnixSite(runner, str(socket_path)).start()
    os.chmod(socket_path, 0o600)  # only the demo's user may drive it
    return runner


# --- the client: ServiceManager over the control socket ----------------------------------------------


class DemoServiceManager:
    """console.host.base.ServiceManager for the demo host, talking to `opsconsole demo`'s control socket."""

    def __init__(self, control: str | os.PathLike[str] | None, unit: str = "sglang-demo.service") -> None:
        if not control:
            raise HostError('the demo profile has no control socket path ([host] control = "...")')
        self.control = str(control)
        self.unit = unit

    @classmethod
    def from_target(cls, target: Any) -> DemoServiceManager:
        return cls(target.control, target.unit)

    @contextlib.asynccontextmanager
    async def _session(self, timeout: float | None = 120.0) -> AsyncIterator[ClientSession]:
        if not Path(self.control).exists():
            raise HostError(
                f"the demo host is not running (no control socket at {self.control}); "
                f"start it with `{hints.DEMO.line()}`"
            )
        async with ClientSession(
            connector=UnixConnector(path=self.control), timeout=ClientTimeout(total=timeout)
        ) as session:
            yield session

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            async with self._session() as s, s.request(method, "http://demo" + path, json=body) as r:
                data = await r.json()
                if r.status != 200:
                    raise HostError(f"{self.unit}: {data.get('error', r.reason)}")
                return data
        except (ClientError, OSError) as e:
            raise HostError(
                f"the demo host at {self.control} did not answer ({e}); is `{hints.DEMO.line()}` running?"
            ) from e

    async def state(self) -> ServiceState:
        d = await self._call("GET", "/state")
        started = d.get("started_at")
        return ServiceState(
            unit=d["unit"],
            active_state=d["active_state"],
            sub_state=d["sub_state"],
            main_pid=d["main_pid"],
            started_at=datetime.fromtimestamp(started, tz=UTC) if started else None,
            n_restarts=d["n_restarts"],
            result=d["result"],
            unit_file_state=d["unit_file_state"],
            need_daemon_reload=d["need_daemon_reload"],
            fragment_path=d["fragment_path"],
            properties=d.get("properties", {}),
        )

    async def read_unit(self) -> str:
        return str((await self._call("GET", "/unit"))["text"])

    async def write_unit(self, text: str) -> UnitBackup:
        return UnitBackup((await self._call("PUT", "/unit", {"text": text}))["backup"])

    async def restore_unit(self, backup: UnitBackup) -> None:
        await self._call("POST", "/restore", {"backup": backup.path})

    async def backups(self) -> list[UnitBackup]:
        listed = (await self._call("GET", "/backups"))["backups"]
        return [
            UnitBackup(b["path"], datetime.fromisoformat(b["taken_at"]) if b.get("taken_at") else None) for b in listed
        ]

    async def read_backup(self, backup: UnitBackup) -> str:
        from urllib.parse import quote

        return str((await self._call("GET", f"/backup?path={quote(backup.path)}"))["text"])

    async def daemon_reload(self) -> None:
        await self._call("POST", "/daemon-reload")

    async def start(self) -> None:
        await self._call("POST", "/start")

    async def restart(self) -> None:
        await self._call("POST", "/restart")

    async def stop(self) -> None:
        await self._call("POST", "/stop")

    async def enable(self) -> None:
        await self._call("POST", "/enable")

    @contextlib.asynccontextmanager
    async def lock(self, owner: str) -> AsyncIterator[None]:
        async with self._session(timeout=None) as s:
            try:
                response = await s.post("http://demo/lock", json={"owner": owner})
            except (ClientError, OSError) as e:
                raise HostError(
                    f"the demo host at {self.control} did not answer ({e}); is `{hints.DEMO.line()}` running?"
                ) from e
            async with response:
                if response.status == 409:
                    raise UnitLocked("the demo host", self.unit, str((await response.json()).get("holder", "")))
                if response.status != 200 or not (await response.content.readline()).strip():
                    raise HostError(f"the demo host at {self.control} did not grant the lock ({response.reason})")
                yield  # held while this connection stays open; leaving the session closes it

    async def journal(
        self, *, lines: int = 100, follow: bool = False, after_cursor: str | None = None
    ) -> AsyncIterator[JournalEntry]:
        query = f"/journal?lines={lines}&follow={1 if follow else 0}"
        if after_cursor:
            query += "&after=" + after_cursor.replace(";", "%3B").replace("=", "%3D")
        try:
            async with self._session(timeout=None) as s, s.get("http://demo" + query) as r:
                async for raw in r.content:
                    line = raw.strip()
                    if not line:
                        continue
                    d = json.loads(line)
                    yield JournalEntry(
                        cursor=d["cursor"],
                        timestamp=datetime.fromtimestamp(d["ts"], tz=UTC),
                        message=d["message"],
                        priority=d["priority"],
                        pid=d["pid"],
                    )
        except (ClientError, OSError) as e:
            raise HostError(f"the demo host's journal at {self.control} closed ({e})") from e
