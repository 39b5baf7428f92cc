"""The load generator on the GPU host: the console's own engine, driven over the SSH channel that started it.

The console (console.bench.remote) starts `PYTHON -I -c LOADER opsconsole-bench-agent` on the host with a Python
the host already has (SGLang's own interpreter, else python3), sends this package's modules over stdin (they
are imported from memory: nothing is written to the host's disk), then one JSON line: the protocol version, the
sweep's config, the server's URL as the host sees it, the API key if the server needs one, the nvidia-smi to
sample the GPUs with, and how often the console will say it is still there.

Out (stdout), one JSON object a line: `hello` (protocol, Python version, pid), `server` (what the server said
about itself), `event` (each console.bench.events object, console.bench.wire's shape), `level` (each finished
level), and at the end `done` (the sweep's summary) or `error` (why it could not run).
In (stdin): `hb` lines (the console is there), `stop` (Ctrl-C, cancel). The load stops, in-flight requests are
dropped (the server aborts them) and the process exits when the console says stop, when stdin ends (the console
closed the channel or died, sshd closed the session), when stdout can no longer be written, or when no `hb`
came for the agreed time (a link that died without anyone closing it). Nothing is left running.

Standard library only, Python 3.10+: a host with nothing but SGLang's environment (or none) can run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import sys
import time
from typing import Any

from console.bench import telemetry
from console.bench.client import WAIT_TIMEOUTS, BenchClient
from console.bench.engine import BenchEngine, SweepRefused, SweepResult
from console.bench.events import BenchEvent, SweepStarted
from console.bench.wire import (
    PROTOCOL,
    WireError,
    config_from_json,
    event_to_json,
    level_to_json,
    server_to_json,
    sweep_summary_to_json,
)

NAME = "opsconsole-bench-agent"  # its argv[1] on the host: what `ps` shows
REQUEST_TIMEOUT_S = 60.0  # for the request line after the modules
_NO_REQUEST: tuple[type[BaseException], ...] = (*WAIT_TIMEOUTS, ValueError, KeyError, TypeError)


class _Output(asyncio.Protocol):
    """stdout as a non-blocking pipe: a stalled link never blocks the loop (the watchdog must keep running)."""

    def __init__(self, lost: asyncio.Event) -> None:
        self._lost = lost
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost.set()

    def send(self, message: dict[str, Any]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write((json.dumps(message, separators=(",", ":")) + "\n").encode())


class _Input(asyncio.Protocol):
    """stdin as lines, without ever blocking the loop."""

    def __init__(self) -> None:
        self._buffer = b""
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (end := self._buffer.find(b"\n")) >= 0:
            line, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
            self.lines.put_nowait(line.decode("utf-8", "replace"))

    def eof_received(self) -> bool:
        self.lines.put_nowait(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lines.put_nowait(None)


async def _run() -> int:
    loop = asyncio.get_running_loop()
    lost = asyncio.Event()
    _, out = await loop.connect_write_pipe(lambda: _Output(lost), os.fdopen(1, "wb", buffering=0, closefd=False))
    _, inp = await loop.connect_read_pipe(_Input, os.fdopen(0, "rb", buffering=0, closefd=False))
    out.send({"t": "hello", "protocol": PROTOCOL, "python": platform.python_version(), "pid": os.getpid()})
    try:
        line = await asyncio.wait_for(inp.lines.get(), REQUEST_TIMEOUT_S)
        request = json.loads(line or "")
        if request.get("protocol") != PROTOCOL:
            raise WireError(f"the console speaks protocol {request.get('protocol')}, this load generator {PROTOCOL}")
        config = config_from_json(request["config"])
    except _NO_REQUEST as exc:
        out.send({"t": "error", "message": f"no valid request from the console: {type(exc).__name__}: {exc}"})
        return 2

    def on_event(event: BenchEvent) -> None:
        if isinstance(event, SweepStarted):
            out.send({"t": "server", "server": server_to_json(engine.server)})
        out.send({"t": "event", "event": event_to_json(event)})

    gpu_command = request.get("gpu_command")
    sampler = telemetry.nvidia_smi_sampler(gpu_command) if gpu_command else None
    stop_reason: list[str] = []
    stop = asyncio.Event()

    def stop_because(why: str) -> None:
        if not stop_reason:
            stop_reason.append(why)
        stop.set()

    async def listen() -> None:
        """The console's lines; also the watchdog: silence longer than the agreed time is a dead link."""
        timeout = float(request.get("heartbeat_timeout_s") or 15.0)
        while True:
            try:
                line = await asyncio.wait_for(inp.lines.get(), timeout)
            except WAIT_TIMEOUTS:
                stop_because(f"no word from the console for {timeout:g} s: the link is gone")
                return
            if line is None:
                stop_because("the console closed the channel")
                return
            if line.strip() == "stop":
                stop_because("stopped by the console")
                return

    async with BenchClient(request["base_url"], api_key=request.get("api_key")) as client:
        engine = BenchEngine(
            client,
            config,
            on_event=on_event,
            gpu_sampler=sampler,
            on_level=lambda level: out.send({"t": "level", "level": level_to_json(level)}),
        )
        sweep = asyncio.ensure_future(engine.run())
        listener = asyncio.ensure_future(listen())
        output_lost = asyncio.ensure_future(lost.wait())
        try:
            await asyncio.wait({sweep, listener, output_lost}, return_when=asyncio.FIRST_COMPLETED)
            if output_lost.done():
                stop_because("the console stopped reading")
            result: SweepResult
            if sweep.done():
                result = sweep.result()  # raises what the engine raised: reported below
            else:
                sweep.cancel()  # in-flight requests are dropped: their connections close, the server aborts them
                with contextlib.suppress(asyncio.CancelledError):
                    await sweep
                result = engine.result_so_far(stop_reason[0] if stop_reason else "stopped")
        except SweepRefused as exc:  # refused before anything was sent (the console says it as a usage error)
            out.send({"t": "error", "message": str(exc)[:2000], "refused": True})
            return 1
        except Exception as exc:  # a bug or a server that cannot be benchmarked: say why, then end
            out.send({"t": "error", "message": f"{type(exc).__name__}: {exc}"[:2000]})
            return 1
        finally:
            for task in (listener, output_lost):
                task.cancel()
    out.send({"t": "done", "sweep": sweep_summary_to_json(result)})
    await _drained(out)
    return 0


async def _drained(out: _Output, limit_s: float = 5.0) -> None:
    """Let the last lines leave before the process ends (bounded: a console that went away reads nothing)."""
    transport = out.transport
    deadline = time.monotonic() + limit_s
    while transport is not None and transport.get_write_buffer_size() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def main() -> int:
    try:
        return asyncio.run(_run())
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
