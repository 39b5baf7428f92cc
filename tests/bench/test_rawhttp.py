"""The lean HTTP/1.1 client against real servers on real sockets: chunked bodies cut at every boundary,
Content-Length and read-until-close bodies, error answers, keep-alive reuse, a connection dropped mid-body."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from console.bench.rawhttp import HttpError, RawHttpPool


@contextlib.asynccontextmanager
async def _raw_server(
    handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], object],
) -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP server answering with whatever bytes the test writes; yields its URL and a connection counter."""
    connections: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        await handler(reader, writer)  # type: ignore[misc]

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", connections
    finally:
        server.close()
        await server.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
    return await reader.readexactly(length)


class Collector:
    """A body sink that keeps what it was given."""

    def __init__(self) -> None:
        self.data = bytearray()

    def __call__(self, data: bytes, _arrived: float) -> None:
        self.data += data


def _chunked(body: bytes, size: int) -> bytes:
    out = b""
    for i in range(0, len(body), size):
        part = body[i : i + size]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"


@pytest.mark.parametrize("write_size", [1, 3, 7, 64, 10_000])
async def test_chunked_body_arrives_whole_however_the_bytes_are_cut(write_size: int) -> None:
    payload = b"".join(b'data: {"n": %d}\n\n' % i for i in range(50))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await _read_request(reader)
            except asyncio.IncompleteReadError:
                return
            wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(payload, 5)
            for i in range(0, len(wire), write_size):
                writer.write(wire[i : i + write_size])
                await writer.drain()

    async with _raw_server(handler) as (url, connections):
        pool = RawHttpPool(url, {"Content-Type": "application/json"})
        for _ in range(3):
            got = Collector()
            status, _ = await pool.post_stream("/generate", b"{}", got)
            assert status == 200 and bytes(got.data) == payload
        assert len(connections) == 1  # kept alive and reused
        pool.close()


async def test_content_length_close_delimited_and_error_answers() -> None:
    answers = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy",
        b"HTTP/1.0 200 OK\r\n\r\nuntil close",
    ]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(answers.pop(0))
        await writer.drain()
        writer.close()

    async with _raw_server(handler) as (url, _):
        pool = RawHttpPool(url, {})
        got = Collector()
        assert (await pool.post_stream("/x", b"1", got))[0] == 200 and got.data == b"hello"
        assert await pool.post_stream("/x", b"1", Collector()) == (503, b"busy")
        got = Collector()
        assert (await pool.post_stream("/x", b"1", got))[0] == 200
        assert got.data == b"until close"
        pool.close()


async def test_a_connection_dropped_mid_body_is_an_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel")
        await writer.drain()
        writer.close()

    async with _raw_server(handler) as (url, _):
        pool = RawHttpPool(url, {})
        with pytest.raises(HttpError, match="mid-response"):
            await pool.post_stream("/x", b"1", Collector())
        pool.close()


async def test_against_aiohttp_server_with_headers_and_a_path_prefix() -> None:
    seen: dict[str, str] = {}

    async def echo(request: web.Request) -> web.StreamResponse:
        seen.update(request.headers)
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(await request.read())
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/prefix/generate", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        pool = RawHttpPool(f"http://127.0.0.1:{port}/prefix/", {"Authorization": "Bearer k"})
        got = Collector()
        status, _ = await pool.post_stream("/generate", b'{"a": 1}', got)
        assert status == 200 and got.data == b'{"a": 1}' and seen["Authorization"] == "Bearer k"
        pool.close()
    finally:
        await runner.cleanup()


async def test_a_body_the_sink_cannot_read_fails_the_request_with_the_reason() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(b"data: not-json\n\n", 64))
        await writer.drain()
        writer.close()

    def unreadable(_data: bytes, _arrived: float) -> None:
        raise ValueError("Expecting value")

    loop_errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(context))
    async with _raw_server(handler) as (url, _):
        pool = RawHttpPool(url, {})
        with pytest.raises(HttpError, match="response body not understood: ValueError: Expecting value"):
            await pool.post_stream("/x", b"1", unreadable)
        pool.close()
    assert loop_errors == []  # no "Fatal error: protocol.data_received() call failed" traceback
