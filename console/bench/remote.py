"""The console's side of a sweep whose load is generated on the GPU host (console.bench.agent).

    sweep = HostSweep(open_process, "/opt/sglang/bin/python3", "http://127.0.0.1:30000", config, on_event=show)
    result = await sweep.run()            # a SweepResult, as BenchEngine.run() gives one
    sweep.result_so_far()                 # after a cancel or a dropped link: the levels that finished

Why: through a port forward on a long link every request of a closed loop waits a round trip more and every
TTFT carries it, so the figures describe the link, not the server. On the host the load generator sees the
server as a local client does.

How: `open_process(argv)` (the SSH transport's `interact`) starts `PYTHON -I -c LOADER opsconsole-bench-agent`
on the host. LOADER (below) reads this package's modules from stdin (a length line, then zlib-compressed JSON
of {path: source}, base64) and imports them from memory: nothing is written to the host's disk, nothing is
installed, `-I` keeps the host's environment variables and user site out. The request line follows, then a
heartbeat every HEARTBEAT_S; events and finished levels come back as JSON lines (console.bench.wire) and are
handed on as the same objects the local engine makes. Cancel (Ctrl-C) sends `stop` and closes the channel;
a dropped link leaves the agent without heartbeats, and it stops by itself after HEARTBEAT_TIMEOUT_S.

Which Python: `python_candidates` reads the unit's ExecStart (SGLang's own interpreter qualifies; a console
script such as `.../bin/sglang` names its venv), then python3. PROBE_SCRIPT picks the first that runs 3.10+.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import posixpath
import zlib
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from console.bench.engine import LevelResult, ServerInfo, SweepConfig, SweepRefused, SweepResult
from console.bench.events import BenchEvent
from console.bench.wire import (
    PROTOCOL,
    WireError,
    config_to_json,
    event_from_json,
    level_from_json,
    server_from_json,
    sweep_from_parts,
)

AGENT_NAME = "opsconsole-bench-agent"
HEARTBEAT_S = 2.0
HEARTBEAT_TIMEOUT_S = 15.0  # the agent's patience: 7 heartbeats missed is a dead link, not a slow one
MIN_PYTHON = (3, 10)
# What the agent needs of this package, and the file the chat workload reads.
AGENT_FILES = (
    "console/__init__.py",
    "console/bench/__init__.py",
    "console/bench/agent.py",
    "console/bench/client.py",
    "console/bench/engine.py",
    "console/bench/events.py",
    "console/bench/metrics.py",
    "console/bench/rawhttp.py",
    "console/bench/shape.py",
    "console/bench/slo.py",
    "console/bench/sse.py",
    "console/bench/telemetry.py",
    "console/bench/traces.py",
    "console/bench/wire.py",
    "console/bench/workloads.py",
    "console/bench/chat_prompts.json",
    "console/sglang/__init__.py",
    "console/sglang/slo.py",
    "console/sglang/spec_meta.py",
)

LOADER = r"""
import base64, importlib.abc, importlib.util, json, os, sys, zlib
def _read(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit("opsconsole: the console went away before sending the load generator")
        data += chunk
    return data
head = b""
while not head.endswith(b"\n"):
    head += _read(1)
FILES = json.loads(zlib.decompress(base64.b64decode(_read(int(head)))))
ROOT = "<opsconsole>/"
class Loader(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        base = name.replace(".", "/")
        for file, package in ((base + "/__init__.py", True), (base + ".py", False)):
            if file in FILES:
                return importlib.util.spec_from_loader(name, self, origin=ROOT + file, is_package=package)
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        module.__file__ = module.__spec__.origin
        exec(compile(FILES[module.__file__[len(ROOT):]], module.__file__, "exec"), module.__dict__)
    def get_data(self, path):
        return FILES[path[len(ROOT):]].encode()
sys.dont_write_bytecode = True
sys.meta_path.insert(0, Loader())
from console.bench.agent import main
sys.exit(main())
"""

# $@: candidate interpreters, best first. Prints the first one that runs Python 3.10+ and its version.
PROBE_SCRIPT = (
    'for p in "$@"; do '
    'v=$("$p" -I -c "import sys; v = sys.version_info; print(\'%d.%d.%d\' % v[:3]); '
    f'sys.exit(v < {MIN_PYTHON!r})" 2>/dev/null) && {{ printf "%s\\n%s\\n" "$p" "$v"; exit 0; }}; '
    "done; exit 1"
)


class RemoteProcess(Protocol):
    """A command running on the host: stdin written by the console, stdout read by lines."""

    def write(self, text: str) -> None: ...

    async def drain(self) -> None: ...

    def write_eof(self) -> None: ...

    async def readline(self) -> str: ...

    async def stderr_tail(self, limit: int = 4000) -> str: ...


OpenProcess = Callable[[Sequence[str]], AbstractAsyncContextManager[RemoteProcess]]


class RemoteBenchError(Exception):
    """The load generator on the host could not run or ended without a result; the message says why."""


def python_candidates(exec_argv: Sequence[str] | None) -> list[str]:
    """Interpreters to try on the host, best first: the unit's own (ExecStart's python, or the python next to
    a console script it runs, or what `env` starts), then python3. Pure."""
    found: list[str] = []
    words = list(exec_argv or [])
    if words and posixpath.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if words:
        program = words[0]
        name = posixpath.basename(program)
        if name.startswith("python"):
            found.append(program)
        elif "/" in program and not name.endswith((".sh", ".bash")):
            directory = posixpath.dirname(program)  # a console script: its venv's python sits beside it
            found += [posixpath.join(directory, "python3"), posixpath.join(directory, "python")]
    if "python3" not in found:
        found.append("python3")
    return found


def parse_probe(stdout: str) -> tuple[str, str] | None:
    """PROBE_SCRIPT's output -> (interpreter, version), None when no candidate qualified. Pure."""
    lines = stdout.strip().splitlines()
    return (lines[0], lines[1]) if len(lines) == 2 else None


@cache
def payload() -> str:
    """The agent's modules as the loader reads them: a length line, then the base64 of zlib(JSON)."""
    root = Path(__file__).resolve().parents[2]
    files = {name: (root / name).read_text(encoding="utf-8") for name in AGENT_FILES}
    blob = base64.b64encode(zlib.compress(json.dumps(files).encode(), 9)).decode("ascii")
    return f"{len(blob)}\n{blob}"


def agent_argv(python: str) -> list[str]:
    return [python, "-I", "-c", LOADER, AGENT_NAME]


class HostSweep:
    """One sweep run by the agent on the host, seen from the console as BenchEngine is seen."""

    def __init__(
        self,
        open_process: OpenProcess,
        python: str,
        base_url: str,
        config: SweepConfig,
        *,
        api_key: str | None = None,
        gpu_command: Sequence[str] | None = ("nvidia-smi",),
        on_event: Callable[[BenchEvent], None] | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S,
    ) -> None:
        config.validate()
        self._open = open_process
        self.python = python
        self.base_url = base_url
        self.config = config
        self._api_key = api_key
        self._gpu_command = list(gpu_command) if gpu_command else None
        self._emit = on_event or (lambda _e: None)
        self._heartbeat_s = heartbeat_s
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self.server: ServerInfo | None = None
        self.levels: list[LevelResult] = []
        self.agent_pid: int | None = None
        self.agent_python: str | None = None

    def _request(self) -> str:
        return json.dumps(
            {
                "protocol": PROTOCOL,
                "config": config_to_json(self.config),
                "base_url": self.base_url,
                "api_key": self._api_key,
                "gpu_command": self._gpu_command,
                "heartbeat_timeout_s": self._heartbeat_timeout_s,
            }
        )

    async def run(self) -> SweepResult:
        summary: dict[str, Any] | None = None
        async with self._open(agent_argv(self.python)) as process:
            process.write(payload() + self._request() + "\n")
            await process.drain()
            heartbeat = asyncio.ensure_future(self._heartbeat(process))
            try:
                summary = await self._read(process)
            except BaseException:
                # Cancelled (Ctrl-C) or the link broke: ask the load to stop; leaving the block closes the channel,
                # which stops it too (the agent sees its stdin end), and a dead link stops it by the heartbeat.
                with contextlib.suppress(Exception):
                    process.write("stop\n")
                    process.write_eof()
                raise
            finally:
                heartbeat.cancel()
            if summary is None:
                why = (await process.stderr_tail()).strip()
                raise RemoteBenchError(
                    "the load generator on the host ended without a result"
                    + (f": {why.splitlines()[-1]}" if why else "")
                )
        return sweep_from_parts(summary, self.server, self.levels)

    async def _read(self, process: RemoteProcess) -> dict[str, Any] | None:
        while True:
            line = await process.readline()
            if not line:
                return None
            try:
                message = json.loads(line)
                kind = message["t"]
                if kind == "hello":
                    if message.get("protocol") != PROTOCOL:
                        raise RemoteBenchError(
                            f"the load generator speaks protocol {message.get('protocol')}, this console {PROTOCOL}"
                        )
                    self.agent_pid, self.agent_python = message.get("pid"), message.get("python")
                elif kind == "server":
                    self.server = server_from_json(message["server"])
                elif kind == "event":
                    self._emit(event_from_json(message["event"]))
                elif kind == "level":
                    self.levels.append(level_from_json(message["level"]))
                elif kind == "done":
                    summary: dict[str, Any] = message["sweep"]
                    return summary
                elif kind == "error":
                    refused = bool(message.get("refused"))
                    error = str(message.get("message"))
            except (ValueError, KeyError, TypeError, WireError) as exc:
                raise RemoteBenchError(f"the load generator on the host said something unexpected ({exc})") from None
            if kind == "error":
                if refused:
                    raise SweepRefused(error)  # before anything was sent: the operator's to change, as locally
                raise RemoteBenchError(f"the load generator on the host failed: {error}")

    async def _heartbeat(self, process: RemoteProcess) -> None:
        with contextlib.suppress(Exception):
            while True:
                await asyncio.sleep(self._heartbeat_s)
                process.write("hb\n")

    def result_so_far(self, stopped: str | None = None) -> SweepResult:
        """The levels that finished (as BenchEngine.result_so_far): what a cancelled sweep keeps."""
        return SweepResult(self.server or ServerInfo(), list(self.levels), [], None, stopped)
