"""A local port forward over the SSH transport that survives reconnects and counts its round trips.

    forward = PortForward(get_connection, "127.0.0.1", 30000, meter)
    port = await forward.start()      # http://127.0.0.1:PORT reaches the host's 127.0.0.1:30000
    forward.close()

The listener lives on this machine independently of the SSH connection: each accepted local connection opens a
direct-tcpip channel on whatever connection is current, so a client that holds the URL keeps working after a
reconnect without the listener being rebuilt. Bytes are passed through as they come, with flow control both
ways (a slow reader pauses the other side). For the round-trip count (console.host.linkmeter) every channel
opened is one exchange, and so is each request on a connection: bytes going out while nothing is awaited begin
one, the first bytes coming back end it (an HTTP/1.1 request and its answer, or the start of a streamed one).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import asyncssh

from console.host.linkmeter import CHANNEL_OPEN, HTTP, Exchange, LinkMeter

ConnectionGetter = Callable[[], Awaitable[asyncssh.SSHClientConnection]]


class _Remote(asyncssh.SSHTCPSession[bytes]):
    """The channel's side: what the host's server sends goes to the local socket."""

    def __init__(self, local: _Local) -> None:
        self._local = local

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        self._local.from_remote(data)

    def eof_received(self) -> bool:
        self._local.remote_eof()
        return True  # half-close: the local side may still send

    def connection_lost(self, exc: Exception | None) -> None:
        self._local.remote_closed()

    def pause_writing(self) -> None:
        self._local.pause_reading()

    def resume_writing(self) -> None:
        self._local.resume_reading()


class _Local(asyncio.Protocol):
    """One accepted local connection, bridged to one direct-tcpip channel."""

    def __init__(self, forward: PortForward) -> None:
        self._forward = forward
        self._transport: asyncio.Transport | None = None
        self._chan: asyncssh.SSHTCPChannel[bytes] | None = None
        self._pending = b""  # what the local client sent before the channel was open
        self._pending_eof = False
        self._awaited: Exchange | None = None  # a request sent, its answer not yet begun
        self._closed = False

    # local socket
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._forward.track(asyncio.get_running_loop().create_task(self._open()))

    async def _open(self) -> None:
        forward = self._forward
        opening = forward.meter.begin(CHANNEL_OPEN)
        try:
            conn = await forward.get_connection()
            host, port = forward.remote_host, forward.remote_port
            chan, _session = await conn.create_connection(lambda: _Remote(self), host, port)
        except Exception:  # refused on the host, no connection, anything: the local client sees its socket close
            forward.meter.end(opening)
            if self._transport is not None:
                self._transport.close()
            return
        forward.meter.end(opening)
        if self._closed:
            chan.close()
            return
        self._chan = chan
        if self._pending:
            self._send(self._pending)
            self._pending = b""
        if self._pending_eof:
            chan.write_eof()

    def data_received(self, data: bytes) -> None:
        if self._chan is None:
            self._pending += data
            return
        self._send(data)

    def _send(self, data: bytes) -> None:
        if self._awaited is None:
            self._awaited = self._forward.meter.begin(HTTP)
        assert self._chan is not None
        self._chan.write(data)

    def eof_received(self) -> bool:
        if self._chan is None:
            self._pending_eof = True
        else:
            with contextlib.suppress(OSError, asyncssh.Error):
                self._chan.write_eof()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._forward.meter.end(self._awaited)
        self._awaited = None
        if self._chan is not None:
            self._chan.close()

    def pause_writing(self) -> None:
        if self._chan is not None:
            self._chan.pause_reading()

    def resume_writing(self) -> None:
        if self._chan is not None:
            self._chan.resume_reading()

    # the channel
    def from_remote(self, data: bytes) -> None:
        if self._awaited is not None:
            self._forward.meter.end(self._awaited)
            self._awaited = None
        if self._transport is not None:
            self._transport.write(data)

    def remote_eof(self) -> None:
        if self._transport is not None and self._transport.can_write_eof():
            self._transport.write_eof()

    def remote_closed(self) -> None:
        self._forward.meter.end(self._awaited)
        self._awaited = None
        if self._transport is not None:
            self._transport.close()

    def pause_reading(self) -> None:
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if self._transport is not None:
            self._transport.resume_reading()


class PortForward:
    """127.0.0.1:PORT on this machine -> remote_host:remote_port as seen from the host."""

    def __init__(self, get_connection: ConnectionGetter, remote_host: str, remote_port: int, meter: LinkMeter) -> None:
        self.get_connection = get_connection
        self.remote_host = remote_host
        self.remote_port = remote_port
        self.meter = meter
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    def track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self, local_port: int = 0) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Local(self), "127.0.0.1", local_port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
