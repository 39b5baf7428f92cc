"""The demo host's service manager: one systemd-style unit run as a local process, and its client.

`UnitSupervisor` (runs inside `opsconsole demo`) reads a real systemd unit file — `ExecStart=` (with
backslash continuations), `Environment=`, `WorkingDirectory=`, `TimeoutStopSec=`, `Restart=` — and
behaves like systemd for one `Type=simple` service: start/stop/restart (SIGTERM, SIGKILL after
TimeoutStopSec), the properties `systemctl show` reports, a journal of the process's stdout/stderr lines
with cursors, daemon-reload semantics (edits take effect only after a reload; NeedDaemonReload until
then), enable, unit writes with a timestamped backup and an atomic rename, and the unit's apply lock
(held by one open control connection, released when it closes, as the flock on a real host is).

`serve_control()` exposes it on a unix socket as a small HTTP+JSON API, and `DemoServiceManager` is the
client that implements console.host.base.ServiceManager over that socket, so every other `opsconsole`
process (status, apply, logs, bench) drives the demo host exactly as it drives systemd.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, UnixConnector, web

from console.host.base import HostError, JournalEntry, ServiceState, UnitBackup, UnitLocked

DEFAULT_TIMEOUT_STOP_S = 90.0  # systemd's DefaultTimeoutStopSec
# How often a held lock checks that its holder's connection is still open: a console that finished, or died,
# has its lock released within this.
LOCK_CHECK_S = 0.05


# --- the unit file (pure) --------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    timeout_stop_s: float
    restart: str  # no, on-failure, always
    restart_s: float


def _logical_lines(text: str) -> list[str]:
    """Unit lines with backslash continuations joined, comments and blanks dropped."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith(("#", ";"))):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def _seconds(value: str, default: float) -> float:
    v = value.strip().lower()
    if v in ("infinity", ""):
        return default if v == "" else 10**9
    units = {"ms": 0.001, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0}
    for suffix, factor in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if v.endswith(suffix):
            with contextlib.suppress(ValueError):
                return float(v[: -len(suffix)]) * factor
    try:
        return float(v)
    except ValueError:
        return default


def parse_exec(text: str) -> ExecSpec:
    """What systemd would run for this unit's [Service] section. Raises HostError without ExecStart."""
    section = ""
    argv: list[str] | None = None
    env: dict[str, str] = {}
    cwd = None
    timeout_stop = DEFAULT_TIMEOUT_STOP_S
    restart = "no"
    restart_s = 0.1
    for line in _logical_lines(text):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        if key == "ExecStart":
            command = value.lstrip("-@:+!")
            argv = shlex.split(command) if command else None
        elif key == "Environment":
            for assignment in shlex.split(value):
                name, sep, val = assignment.partition("=")
                if sep:
                    env[name] = val
        elif key == "WorkingDirectory":
            cwd = value.lstrip("-") or None
        elif key in ("TimeoutStopSec", "TimeoutSec"):
            timeout_stop = _seconds(value, DEFAULT_TIMEOUT_STOP_S)
        elif key == "Restart":
            restart = value
        elif key == "RestartSec":
            restart_s = _seconds(value, 0.1)
    if not argv:
        raise HostError("the unit has no ExecStart= in [Service]; add the command that starts SGLang")
    return ExecSpec(argv, env, cwd, timeout_stop, restart, restart_s)


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
        self._system(f"Started {self.unit} - SGLang server.")
        self.exit_status = None
        try:
            self.process = await asyncio.create_subprocess_exec(
                *spec.argv,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **spec.env, "PYTHONUNBUFFERED": "1"},
                cwd=spec.cwd,
                start_new_session=True,  # its own process group: stop() signals the whole group, like a cgroup
            )
        except OSError as e:
            self._append(f"{self.unit}: Failed to execute {spec.argv[0]}: {e.strerror}", 3, 1)
            self._system(f"{self.unit}: Main process exited, code=exited, status=203/EXEC")
            self.exit_status, self.main_exit_us = 203, int(time.monotonic() * 1e6)
            self._set("failed", "failed", "exit-code")
            return
        self.started_at = time.time()
        self.exit_status = None
        self._stopping = False
        self._set("active", "running", "success")
        proc = self.process
        readers = [
            asyncio.create_task(self._pump(proc.stdout, proc.pid, 6)),
            asyncio.create_task(self._pump(proc.stderr, proc.pid, 6)),
        ]
        self._watch = asyncio.create_task(self._watch_exit(proc, readers, spec))

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
        self, proc: asyncio.subprocess.Process, readers: list[asyncio.Task[None]], spec: ExecSpec
    ) -> None:
        code = await proc.wait()
        self.main_exit_us = int(time.monotonic() * 1e6)
        await asyncio.gather(*readers, return_exceptions=True)
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
        timeout = parse_exec(self.loaded_text or self.read_unit()).timeout_stop_s
        self._set("deactivating", "stop-sigterm")
        self._system(f"Stopping {self.unit} - SGLang server...")
        await self._notify()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            self._stop_timed_out = True  # systemd: Result=timeout, whatever the signal's own verdict
            self._system(f"{self.unit}: State 'stop-sigterm' timed out. Killing.")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        if self._watch is not None:
            await asyncio.gather(self._watch, return_exceptions=True)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of its group, as KillMode=control-group
        self._system(f"Stopped {self.unit} - SGLang server.")

    async def restart(self) -> None:
        async with self._lock:
            await self._stop_locked()
            await self._start_locked()
        await self._notify()

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
                f"the demo host is not running (no control socket at {self.control}); start it with `opsconsole demo`"
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
                f"the demo host at {self.control} did not answer ({e}); is `opsconsole demo` running?"
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
                    f"the demo host at {self.control} did not answer ({e}); is `opsconsole demo` running?"
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
