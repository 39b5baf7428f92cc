"""A lean HTTP/1.1 client for streamed responses: asyncio Protocol, keep-alive pool, chunked decoding.

Why not aiohttp for the hot path: at high concurrency the load client's own CPU decides how many streamed
events per second it can follow. aiohttp spends several Python calls per HTTP chunk (protocol → stream
reader → iterator wake-up); here `data_received` decodes the chunk framing of whatever the socket gave and
hands the body bytes straight to the SSE parser with the arrival time: one call per socket read.
benchmarks/bench_client_events.py measures both. Only what a benchmark needs: POST with a JSON body (and the
small GET/POST control calls), status line + headers, chunked or Content-Length or read-until-close bodies,
keep-alive reuse, TLS. Standard library only: the load generator also runs on GPU hosts (console.bench.agent).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from urllib.parse import urlsplit

BodySink = Callable[[bytes, float], None]
_MAX_HEADER_BYTES = 64 * 1024


class HttpError(Exception):
    """The server's answer was not HTTP/1.x as expected, or the connection ended mid-response."""


class _Response(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.sink: BodySink | None = None
        self.done: asyncio.Future[None] | None = None
        self.status = 0
        self.error_body = bytearray()  # body of a non-200 answer, for the error message
        self.keep_alive = True
        self.closed = False
        self._reset()

    def _reset(self) -> None:
        self._head = b""
        self._in_body = False
        self._chunked = False
        self._remaining = -1  # bytes left: of the body (Content-Length) or of the current chunk
        self._framing = b""  # an incomplete chunk-size line, or the CRLF after a chunk

    def start(self, sink: BodySink, done: asyncio.Future[None]) -> None:
        self.sink = sink
        self.done = done
        self.status = 0
        self.error_body = bytearray()
        self._reset()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done is not None and not self.done.done():
            if self._in_body and not self._chunked and self._remaining < 0:
                self.done.set_result(None)  # body delimited by the connection's end
            else:
                self.done.set_exception(HttpError(f"connection closed mid-response ({exc or 'by the server'})"))

    def _finish(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)

    def _fail(self, message: str) -> None:
        self.keep_alive = False
        if self.done is not None and not self.done.done():
            self.done.set_exception(HttpError(message))
        if self.transport is not None:
            self.transport.close()

    def _deliver(self, data: bytes, now: float) -> None:
        if not data:
            return
        if self.status == 200:
            assert self.sink is not None
            try:
                self.sink(data, now)
            except Exception as exc:
                # A body the parser cannot read fails this request with the parser's reason. Left to escape,
                # it reaches asyncio as a protocol failure: a traceback on stderr per request and a
                # misleading "connection closed mid-response".
                self._fail(f"response body not understood: {type(exc).__name__}: {exc}"[:300])
        elif len(self.error_body) < 4096:
            self.error_body += data

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if self.done is None or self.done.done():
            return  # nothing asked for: stray bytes after a response
        if not self._in_body:
            head = self._head + data
            end = head.find(b"\r\n\r\n")
            if end < 0:
                if len(head) > _MAX_HEADER_BYTES:
                    self._fail("response headers too large")
                self._head = head
                return
            if not self._parse_head(head[:end]):
                return
            data = head[end + 4 :]
            self._in_body = True
            if not self._chunked and self._remaining == 0:
                self._finish()
                return
        if self._chunked:
            self._chunked_body(data, now)
        elif self._remaining >= 0:
            take = data[: self._remaining]
            self._remaining -= len(take)
            self._deliver(take, now)
            if self._remaining == 0:
                self._finish()
        else:
            self._deliver(data, now)

    def _parse_head(self, head: bytes) -> bool:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            self._fail(f"not an HTTP/1.x response: {lines[0][:80]!r}")
            return False
        self.status = int(parts[1])
        self.keep_alive = parts[0] != b"HTTP/1.0"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip().lower()
            if name == b"transfer-encoding" and b"chunked" in value:
                self._chunked = True
            elif name == b"content-length":
                self._remaining = int(value)
            elif name == b"connection":
                self.keep_alive = value == b"keep-alive" or (self.keep_alive and value != b"close")
        if self._chunked:
            self._remaining = 0
        elif self._remaining < 0:
            self.keep_alive = False  # read until close
        return True

    def _chunked_body(self, data: bytes, now: float) -> None:
        if self._framing:
            data = self._framing + data
            self._framing = b""
        pos = 0
        size = len(data)
        pieces = []
        while pos < size:
            if self._remaining > 0:  # inside a chunk's data
                end = min(size, pos + self._remaining)
                pieces.append(data[pos:end])
                self._remaining -= end - pos
                pos = end
                if self._remaining == 0:
                    self._remaining = -2  # the CRLF after the data comes next
                continue
            if self._remaining == -2:
                if size - pos < 2:
                    self._framing = data[pos:]
                    break
                pos += 2
                self._remaining = 0
                continue
            line_end = data.find(b"\r\n", pos)
            if line_end < 0:
                self._framing = data[pos:]
                break
            try:
                chunk = int(data[pos:line_end].split(b";", 1)[0], 16)
            except ValueError:
                self._fail(f"bad chunk size {data[pos:line_end][:20]!r}")
                return
            pos = line_end + 2
            if chunk == 0:  # last chunk; trailers are not used by the servers we talk to
                self._deliver(b"".join(pieces), now)
                self._finish()
                return
            self._remaining = chunk
        self._deliver(b"".join(pieces) if len(pieces) != 1 else pieces[0], now)


class RawHttpPool:
    """Keep-alive connections to one origin; `post_stream` sends a POST and feeds the body to a sink."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        host_header = parts.netloc.rsplit("@", 1)[-1]
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() not in ("host", "content-length"))
        self._head_template = "{method} {path} HTTP/1.1\r\nHost: " + host_header + "\r\n" + extra
        self._idle: list[_Response] = []

    async def _connection(self) -> tuple[_Response, bool]:
        """An idle kept-alive connection (reused=True) or a new one."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn, True
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(_Response, self.host, self.port, ssl=self.ssl)
        return protocol, False

    async def post_stream(self, path: str, body: bytes, sink: BodySink, method: str = "POST") -> tuple[int, bytes]:
        """POST; body bytes of a 200 go to sink(data, arrival time). Returns (status, body of a non-200).

        A kept-alive connection that the server closed while idle fails before any answer arrives; that
        request is sent again, once, on a new connection (nothing of it reached the server's handler)."""
        conn, reused = await self._connection()
        try:
            return await self._exchange(conn, method, path, body, sink)
        except HttpError:
            if not reused or conn.status:
                raise
        conn, _ = await self._connection()
        return await self._exchange(conn, method, path, body, sink)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        """A small request whose whole answer is wanted (/server_info, /flush_cache): (status, body)."""
        received = bytearray()
        status, error_body = await self.post_stream(path, body, lambda data, _at: received.extend(data), method)
        return status, bytes(received) if status == 200 else error_body

    async def _exchange(
        self, conn: _Response, method: str, path: str, body: bytes, sink: BodySink
    ) -> tuple[int, bytes]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        conn.start(sink, done)
        assert conn.transport is not None
        head = self._head_template.format(method=method, path=self.prefix + path)
        head += f"Content-Length: {len(body)}\r\n\r\n"
        conn.transport.write(head.encode() + body)
        try:
            await done
        except BaseException:
            conn.keep_alive = False
            if conn.transport is not None:
                conn.transport.close()
            raise
        if conn.keep_alive and not conn.closed:
            self._idle.append(conn)
        elif conn.transport is not None:
            conn.transport.close()
        return conn.status, bytes(conn.error_body)

    def close(self) -> None:
        for conn in self._idle:
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
