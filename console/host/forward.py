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
One channel is kept open ahead of need (a spare), so that a new local connection does not wait for its channel.
A channel that the host does not open within `open_wait_s` is given up (the local client sees its socket close; the
spare is tried again with the next connection) and closed if it opens later.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import asyncssh

from console.host.bounded import opened_by
from console.host.linkmeter import CHANNEL_OPEN, HTTP, Exchange, LinkMeter

OPEN_WAIT_S = 30.0

ConnectionGetter = Callable[[], Awaitable[asyncssh.SSHClientConnection]]


class _Remote(asyncssh.SSHTCPSession[bytes]):
    """The channel's side: what the host's server sends goes to the local socket. A spare channel has no local
    socket yet (see PortForward): if its server closes it meanwhile, it is dropped."""

    def __init__(self, local: _Local | None, forward: PortForward) -> None:
        self.local = local
        self._forward = forward
        self.closed = False

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if self.local is not None:
            self.local.from_remote(data)

    def eof_received(self) -> bool:
        if self.local is None:
            self._forward.spare_lost(self)
            return False
        self.local.remote_eof()
        return True  # half-close: the local side may still send

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.local is None:
            self._forward.spare_lost(self)
        else:
            self.local.remote_closed()

    def pause_writing(self) -> None:
        if self.local is not None:
            self.local.pause_reading()

    def resume_writing(self) -> None:
        if self.local is not None:
            self.local.resume_reading()


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
        chan = forward.take_spare(self)
        if chan is None:
            opening = forward.meter.begin(CHANNEL_OPEN)
            try:
                conn = await forward.get_connection()
                host, port = forward.remote_host, forward.remote_port
                until = asyncio.get_running_loop().time() + forward.open_wait_s
                chan, _ = await opened_by(conn.create_connection(lambda: _Remote(self, forward), host, port), until)
            except Exception:  # refused on the host, no connection, anything: the local client sees its socket close
                forward.meter.end(opening)
                if self._transport is not None:
                    self._transport.close()
                return
            forward.meter.end(opening)
        assert chan is not None
        forward.refill()
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

    def __init__(
        self,
        get_connection: ConnectionGetter,
        remote_host: str,
        remote_port: int,
        meter: LinkMeter,
        *,
        open_wait_s: float = OPEN_WAIT_S,
    ) -> None:
        self.get_connection = get_connection  # bounded by the transport: a connection that does not come raises
        self.open_wait_s = open_wait_s
        self.remote_host = remote_host
        self.remote_port = remote_port
        self.meter = meter
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # One channel opened ahead of need: the next local connection starts sending at once instead of waiting a
        # round trip for its channel (the first status read, a health probe after the server came back).
        self._spare: tuple[asyncssh.SSHTCPChannel[bytes], _Remote] | None = None
        self._opening_spare = False
        self.port = 0

    def track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self, local_port: int = 0) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Local(self), "127.0.0.1", local_port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        self.refill()
        return self.port

    def refill(self) -> None:
        """Open a spare channel in the background, unless there is one (or one on its way)."""
        if self._spare is None and not self._opening_spare and self._server is not None:
            self._opening_spare = True
            self.track(asyncio.get_running_loop().create_task(self._open_spare()))

    async def _open_spare(self) -> None:
        opening = self.meter.begin(CHANNEL_OPEN)
        try:
            conn = await self.get_connection()
            remote = _Remote(None, self)
            until = asyncio.get_running_loop().time() + self.open_wait_s
            channel = conn.create_connection(lambda: remote, self.remote_host, self.remote_port)
            chan, _session = await opened_by(channel, until)
        except Exception:  # the server is down, the connection is gone: the next local connection opens its own
            return
        finally:
            self.meter.end(opening)
            self._opening_spare = False
        if remote.closed or self._server is None:
            chan.close()
            return
        self._spare = (chan, remote)

    def take_spare(self, local: _Local) -> asyncssh.SSHTCPChannel[bytes] | None:
        spare, self._spare = self._spare, None
        if spare is None or spare[1].closed:
            return None
        chan, remote = spare
        remote.local = local
        return chan

    def spare_lost(self, remote: _Remote) -> None:
        """The server closed the spare before it was used (it restarted, or does not keep idle connections)."""
        if self._spare is not None and self._spare[1] is remote:
            chan, _ = self._spare
            self._spare = None
            chan.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._spare is not None:
            self._spare[0].close()
            self._spare = None
        for task in list(self._tasks):
            task.cancel()
