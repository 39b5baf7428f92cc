"""SGLang's router (`sglang-router`, the SGLang Model Gateway): its worker list, and taking a worker out and back.

    router = RouterClient("http://10.0.0.9:30000")
    workers = await router.workers()                 # [RouterWorker(url, id, healthy), ...]
    await router.remove("http://10.0.0.5:30000")     # returns once the list no longer names it
    await router.add("http://10.0.0.5:30000")        # returns once the list names it, healthy

The worker API differs by release (shared/research/wave3-facts.md §6), so the client asks which one it talks to:
- 0.3.x: `GET /workers` lists `{"workers": [{"id", "url", "is_healthy", ...}]}`; `POST /workers` `{"url"}` and
  `DELETE /workers/{id}` (the UUID, from the list) are background jobs answered 202;
- 0.2.x: the same list without ids; `DELETE /workers/{url}` (the URL, percent-encoded);
- up to 0.1.9: `GET /list_workers` (`{"urls": [...]}`), `POST /add_worker?url=U`, `POST /remove_worker?url=U`.
Because 0.3's add and remove are jobs, both wait until the list shows the change (bounded).

The router does not drain a removed worker: requests it already sent there keep their connection and finish only
if the worker keeps serving. Waiting for them is the caller's business (the worker's own running count).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import httpx

WorkerApi = Literal["workers-by-id", "workers-by-url", "legacy"]
# How long the router gets to show an added or removed worker in its list (0.3's jobs take ~0.5 s to add one:
# it asks the worker's /server_info and /model_info first).
CHANGE_TIMEOUT_S = 30.0
POLL_S = 0.1


class RouterError(Exception):
    """The router did not answer, refused, or did not do what it was asked in time: the message says which."""


@dataclass(frozen=True)
class RouterWorker:
    url: str
    id: str | None = None  # 0.3's UUID (DELETE takes it)
    healthy: bool | None = None  # None where the router's list does not say

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "id": self.id, "healthy": self.healthy}


def normalize_url(url: str) -> str:
    """A worker URL as compared: no trailing slash, scheme and host lower-case."""
    url = url.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    if not sep:
        return f"http://{url.lower()}" if url else url
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}://{host.lower()}{slash}{path}"


def parse_workers(payload: Any) -> tuple[WorkerApi, list[RouterWorker]]:
    """The worker list of any release: `{"workers": [...]}` (ids: 0.3; none: 0.2), `{"urls": [...]}` or a bare list
    (<= 0.1.9). ValueError for anything else."""
    if isinstance(payload, dict) and isinstance(payload.get("workers"), list):
        workers = []
        with_ids = False
        for item in payload["workers"]:
            if isinstance(item, str):
                workers.append(RouterWorker(normalize_url(item)))
                continue
            if not isinstance(item, dict) or not isinstance(item.get("url"), str):
                raise ValueError(f"a worker entry without a url: {item!r}")
            wid = item.get("id") if isinstance(item.get("id"), str) else None
            with_ids = with_ids or wid is not None
            healthy = item.get("is_healthy")
            workers.append(
                RouterWorker(normalize_url(item["url"]), wid, healthy if isinstance(healthy, bool) else None)
            )
        return ("workers-by-id" if with_ids else "workers-by-url"), workers
    urls = payload.get("urls") if isinstance(payload, dict) else payload
    if isinstance(urls, list) and all(isinstance(u, str) for u in urls):
        return "legacy", [RouterWorker(normalize_url(u)) for u in urls]
    raise ValueError(f"not a router worker list: {str(payload)[:200]}")


class RouterClient:
    """One router, over HTTP. Every method raises RouterError with what the router said."""

    def __init__(self, url: str, *, timeout_s: float = 10.0, change_timeout_s: float = CHANGE_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.change_timeout_s = change_timeout_s
        self.api: WorkerApi | None = None
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout_s)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> RouterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise RouterError(f"router {self.url}: {method} {path}: {type(exc).__name__}: {exc}") from None

    async def workers(self) -> list[RouterWorker]:
        """The router's worker list now (and which worker API it speaks, remembered in `api`)."""
        response = await self._call("GET", "/workers")
        if response.status_code == 404:
            response = await self._call("GET", "/list_workers")
        if response.status_code != 200:
            raise RouterError(f"router {self.url}: its worker list answered HTTP {response.status_code}")
        try:
            self.api, workers = parse_workers(response.json())
        except ValueError as exc:
            raise RouterError(f"router {self.url}: {exc}") from None
        return workers

    async def find(self, url: str) -> RouterWorker | None:
        wanted = normalize_url(url)
        return next((w for w in await self.workers() if w.url == wanted), None)

    async def remove(self, url: str) -> None:
        """Take the worker out of the router; returns once the router's list no longer names it."""
        worker = await self.find(url)
        if worker is None:
            return
        if self.api == "legacy":
            response = await self._call("POST", "/remove_worker", params={"url": url})
        elif self.api == "workers-by-id" and worker.id is not None:
            response = await self._call("DELETE", f"/workers/{worker.id}")
        else:
            response = await self._call("DELETE", f"/workers/{quote(url, safe='')}")
        self._accepted(response, f"remove {url}")
        await self._until(url, listed=False, what=f"{url} to leave the worker list")

    async def add(self, url: str) -> None:
        """Put the worker (back) into the router; returns once the list names it and it is not unhealthy."""
        if self.api is None:
            await self.workers()
        if self.api == "legacy":
            response = await self._call("POST", "/add_worker", params={"url": url})
        else:
            response = await self._call("POST", "/workers", json={"url": url})
        self._accepted(response, f"add {url}")
        await self._until(url, listed=True, what=f"{url} to be listed as healthy")

    def _accepted(self, response: httpx.Response, what: str) -> None:
        if response.status_code not in (200, 201, 202, 204):
            body = response.text.strip()[:300]
            raise RouterError(f"router {self.url}: {what}: HTTP {response.status_code} {body}")

    async def _until(self, url: str, *, listed: bool, what: str) -> None:
        """Until the list names the worker (and does not call it unhealthy), or no longer names it."""
        deadline = time.monotonic() + self.change_timeout_s
        while True:
            worker = await self.find(url)
            if (worker is not None and worker.healthy is not False) if listed else worker is None:
                return
            if time.monotonic() >= deadline:
                raise RouterError(f"router {self.url}: waited {self.change_timeout_s:g} s for {what}")
            await asyncio.sleep(POLL_S)  # the router's job runs in the background: poll its list
