"""The load client's HTTP side: one streamed request → one RequestResult.

Streamed requests go through console.bench.rawhttp (a lean asyncio HTTP/1.1 client: one Python call per
socket read) by default, or through aiohttp (`http_client="aiohttp"`, reading with `iter_any()`); both hand
the body bytes to the parsers in console.bench.sse. benchmarks/bench_client_events.py measures the two.
The small control calls (/server_info, /flush_cache) use aiohttp. The API key only goes into the
Authorization header; it is never part of an error message.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import aiohttp

from console.bench.metrics import RequestResult
from console.bench.rawhttp import HttpError, RawHttpPool
from console.bench.sse import ChatStreamParser, GenerateStreamParser, StreamParser

ApiPath = {"generate": "/generate", "chat": "/v1/chat/completions"}


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
        # limit=0: no pool cap; concurrency is bounded by the engine, not by the pool.
        self._connector = aiohttp.TCPConnector(limit=0, force_close=False)
        self._session = aiohttp.ClientSession(
            connector=self._connector,
            headers=self._headers,
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
        )
        self._raw = RawHttpPool(self.base_url, self._headers)

    async def close(self) -> None:
        self._raw.close()
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
            async with asyncio.timeout(timeout):
                if self.http_client == "raw":
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
        except (aiohttp.ClientError, HttpError, OSError, ValueError) as exc:
            result.error = f"{type(exc).__name__}: {exc}"[:300]
            result.latency = time.perf_counter() - start
            return result
        return parser.finish()

    async def get_json(self, path: str, timeout: float = 10.0) -> Any:
        async with self._session.get(self.base_url + path, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            resp.raise_for_status()
            return await resp.json(content_type=None)

    async def flush_cache(self, timeout: float = 30.0) -> bool:
        """POST /flush_cache; False when the server refused (requests still running) or has no such route."""
        try:
            async with self._session.post(
                self.base_url + "/flush_cache", timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                await resp.read()
                return resp.status == 200
        except (aiohttp.ClientError, OSError, TimeoutError):
            return False
