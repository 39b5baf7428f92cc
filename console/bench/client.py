"""The load client's HTTP side: one streamed request → one RequestResult.

Streamed requests go through console.bench.rawhttp (a lean asyncio HTTP/1.1 client: one Python call per
socket read) by default, or through aiohttp (`http_client="aiohttp"`, reading with `iter_any()`); both hand
the body bytes to the parsers in console.bench.sse. benchmarks/bench_client_events.py measures the two.
The small control calls (/server_info, /flush_cache) go through rawhttp too, so that the default client needs
the standard library only: the same engine runs on a GPU host with nothing but the Python it already has
(console.bench.agent). The API key only goes into the Authorization header; it is never part of an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from console.bench.metrics import RequestResult
from console.bench.rawhttp import HttpError, RawHttpPool
from console.bench.sse import ChatStreamParser, GenerateStreamParser, StreamParser

if TYPE_CHECKING:
    import aiohttp

ApiPath = {"generate": "/generate", "chat": "/v1/chat/completions"}


try:
    from asyncio import timeout as _timeout
except ImportError:  # Python 3.10, a GPU host's interpreter: the same contract, from call_later

    @contextlib.asynccontextmanager
    async def _timeout(delay: float | None) -> AsyncIterator[None]:  # type: ignore[misc]
        task = asyncio.current_task()
        assert task is not None
        fired = []

        def fire() -> None:
            fired.append(True)
            task.cancel()

        handle = asyncio.get_running_loop().call_later(delay, fire) if delay is not None else None
        try:
            yield
        except asyncio.CancelledError:
            if fired:
                raise TimeoutError from None
            raise
        finally:
            if handle is not None:
                handle.cancel()


# What asyncio.wait_for raises on a timeout: the built-in TimeoutError from 3.11, its own class on 3.10.
WAIT_TIMEOUTS: tuple[type[BaseException], ...] = (TimeoutError, asyncio.TimeoutError)


class HttpStatusError(Exception):
    """A control call answered with a status other than 200."""


class BenchClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        http_client: Literal["raw", "aiohttp"] = "raw",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.http_client = http_client
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._raw = RawHttpPool(self.base_url, self._headers)
        self._session: aiohttp.ClientSession | None = None
        # What a failed request raises: counted as a failure, never let out of stream().
        self._failures: tuple[type[BaseException], ...] = (HttpError, OSError, ValueError)
        if http_client == "aiohttp":
            import aiohttp

            self._failures += (aiohttp.ClientError,)

            # limit=0: no pool cap; concurrency is bounded by the engine, not by the pool.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, force_close=False),
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=None),
                auto_decompress=False,
            )

    async def close(self) -> None:
        self._raw.close()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> BenchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def stream(
        self, api: Literal["generate", "chat"], body: bytes, prompt_len: int, timeout: float
    ) -> RequestResult:
        """Send one streaming request; every failure becomes a failed RequestResult, never an exception."""
        result = RequestResult(prompt_len=prompt_len)
        start = time.perf_counter()
        result.start = start
        parser: StreamParser = (
            GenerateStreamParser(result, start) if api == "generate" else ChatStreamParser(result, start)
        )
        try:
            async with _timeout(timeout):
                if self._session is None:
                    status, error_body = await self._raw.post_stream(ApiPath[api], body, parser.feed)
                    if status != 200:
                        text = error_body[:200].decode("utf-8", "replace").strip()
                        result.error = f"HTTP {status}: {text}"
                        result.latency = time.perf_counter() - start
                        return result
                else:
                    async with self._session.post(self.base_url + ApiPath[api], data=body) as resp:
                        if resp.status != 200:
                            text = (await resp.read())[:200].decode("utf-8", "replace").strip()
                            result.error = f"HTTP {resp.status}: {text}"
                            result.latency = time.perf_counter() - start
                            return result
                        perf_counter = time.perf_counter
                        feed = parser.feed
                        async for data in resp.content.iter_any():
                            feed(data, perf_counter())
        except TimeoutError:
            result.error = f"timed out after {timeout:g} s"
            result.latency = time.perf_counter() - start
            return result
        except self._failures as exc:
            result.error = f"{type(exc).__name__}: {exc}"[:300]
            result.latency = time.perf_counter() - start
            return result
        return parser.finish()

    async def get_json(self, path: str, timeout: float = 10.0) -> Any:
        """GET path -> its JSON; raises HttpStatusError (not 200), HttpError/OSError, TimeoutError."""
        async with _timeout(timeout):
            status, body = await self._raw.request("GET", path)
        if status != 200:
            raise HttpStatusError(f"GET {path}: HTTP {status}")
        return json.loads(body)

    async def get_text(self, path: str, timeout: float = 10.0) -> tuple[int, str]:
        """GET path -> (status, body as text); raises HttpError/OSError, TimeoutError."""
        async with _timeout(timeout):
            status, body = await self._raw.request("GET", path)
        return status, body.decode("utf-8", "replace")

    async def post_json(self, path: str, payload: Any, timeout: float = 60.0) -> tuple[int, Any]:
        """POST a JSON body -> (status, the answer's JSON, or its text when it is not JSON); raises HttpError/OSError,
        TimeoutError."""
        async with _timeout(timeout):
            status, body = await self._raw.request("POST", path, json.dumps(payload).encode())
        text = body.decode("utf-8", "replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    async def flush_cache(self, timeout: float = 30.0) -> bool:
        """POST /flush_cache; False when the server refused (requests still running) or has no such route."""
        try:
            async with _timeout(timeout):
                status, _body = await self._raw.request("POST", "/flush_cache")
        except (HttpError, OSError, TimeoutError):
            return False
        return status == 200
