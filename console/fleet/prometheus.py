"""Prometheus's HTTP API (`POST /api/v1/query`, form-encoded): the only I/O of console.fleet.

Every failure is a PrometheusUnavailable whose message says what happened in words an operator can act on
(refused, timed out, an HTTP error with Prometheus's own error text, an answer that is not an instant vector)."""

from __future__ import annotations

import time
from typing import Any

import httpx

from console.fleet.promql import PromAnswerError, Sample, parse_vector

DEFAULT_TIMEOUT_S = 5.0


class PrometheusUnavailable(Exception):
    """Prometheus could not answer the query."""


class PrometheusClient:
    def __init__(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout_s)

    async def query(self, expr: str, *, at: float | None = None) -> tuple[list[Sample], float]:
        """An instant query at `at` (default: now): its samples and the evaluation time."""
        when = time.time() if at is None else at
        try:
            response = await self._http.post("/api/v1/query", data={"query": expr, "time": f"{when:.3f}"})
        except httpx.TimeoutException:
            raise PrometheusUnavailable(f"{self.url} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise PrometheusUnavailable(f"{self.url} cannot be reached ({_reason(exc)})") from None
        document: Any = None
        try:
            document = response.json()
        except ValueError:
            pass
        if response.status_code != 200 and not (isinstance(document, dict) and "error" in document):
            raise PrometheusUnavailable(f"{self.url} answered HTTP {response.status_code}")
        try:
            return parse_vector(document), when
        except PromAnswerError as exc:
            raise PrometheusUnavailable(f"{self.url}: {exc}") from None

    async def aclose(self) -> None:
        await self._http.aclose()


def _reason(exc: httpx.HTTPError) -> str:
    """The cause in words: httpx says "All connection attempts failed" for a refused port."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused: is it running, at that address?"
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__
