"""The router in front of SGLang workers: smg (the Shepherd Model Gateway, 1.x: SGLang's router since it left the
SGLang repository) and the `sglang-router` releases before it. Its worker list, and taking a worker out and back.

    router = RouterClient("http://10.0.0.9:30000")
    workers = await router.workers()                         # [RouterWorker(url, id, healthy, worker_type, ...)]
    gone = await router.remove("http://10.0.0.5:30000")       # returns once the router no longer has it
    back = await router.add("http://10.0.0.5:30000")          # returns once the router routes to it (its new id)
    await router.add("http://10.0.0.6:30000", worker_type="prefill", bootstrap_port=8998)   # PD

The worker API differs by release (shared/research/wave3-facts.md §6, wave5-facts.md §3), so the client asks which
one it talks to (`api`):
- smg (1.x): `GET /workers` lists `{"workers": [{"id", "url", "worker_type", "bootstrap_port"?, "is_healthy",
  "status", ...}], "total", "stats"}`; `POST /workers` (a spec: url, worker_type regular|prefill|decode,
  bootstrap_port) and `DELETE /workers/{id}` are background jobs answered 202 with the worker's id (`Location`);
  `GET /workers/{id}` follows one (404 once removed). A worker added again gets a new id; a POST for a URL the
  router has is 409 (`WORKER_ALREADY_EXISTS`, or `WORKER_CREATE_IN_PROGRESS` while its add runs); errors are
  `{"error", "code"}`. Only `status: "ready"` is routed to. DELETE marks the worker draining and removes it after a
  settle time (`health.drain_settle_secs`, 5 s by default) that waits for nothing: requests already sent there
  finish only if the worker keeps serving. Registration checks a starting worker's /health only every
  `--worker-startup-check-interval` (30 s by default), so a worker is added once it answers.
- sglang-router 0.3.x: the same list without `status`, the same POST/DELETE jobs (no settle: DELETE removes it);
  a duplicate POST is accepted (202);
- 0.2.x: the list without ids; `DELETE /workers/{url}` (the URL, percent-encoded);
- up to 0.1.9: `GET /list_workers` (`{"urls": [...]}`), `POST /add_worker?url=U`, `POST /remove_worker?url=U`.
Because adds and removes are jobs, both wait until the router shows the change (bounded).

No release of the router waits for a removed worker's requests. smg's settle only waits a fixed time; `remove()`
sets it to 0 first (`settle_s`), because the caller waits for what matters, the worker's own running and queued
requests (console.core.roll), and the 5 s per worker were most of a roll's time behind smg (docs/fleet.md).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import httpx

WorkerApi = Literal["smg", "workers-by-id", "workers-by-url", "legacy"]
WORKER_TYPES = ("regular", "prefill", "decode")  # what add() takes (smg also knows "encode", which no caller adds)
# How long the router gets to show an added or removed worker in its list (0.3's jobs take ~0.5 s to add one:
# it asks the worker's /server_info and /model_info first).
CHANGE_TIMEOUT_S = 30.0
# smg checks a starting worker's /health every --worker-startup-check-interval (30 s by default): an add waits for
# two such checks before it gives up, so one that came too early is not a failure.
SMG_ADD_TIMEOUT_S = 75.0
POLL_S = 0.1
# smg's statuses: only "ready" is routed to (pending while its add job runs, draining while it is removed).
ROUTABLE = "ready"


class RouterError(Exception):
    """The router did not answer, refused, or did not do what it was asked in time: the message says which.
    `status` and `code` are the router's HTTP status and smg's error code, where it answered with them."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class RouterWorker:
    url: str
    id: str | None = None  # smg's and 0.3's id (DELETE takes it); a worker added again gets a new one
    healthy: bool | None = None  # None where the router's list does not say
    worker_type: str = "regular"  # regular | prefill | decode (PD); "regular" where the list does not say
    bootstrap_port: int | None = None  # a prefill worker's KV bootstrap port (PD)
    status: str | None = None  # smg's: pending | ready | not_ready | failed | draining; None before smg

    @property
    def routable(self) -> bool:
        """Whether the router may send it requests, as far as its list says (smg may still leave an overloaded or
        stalled worker out: the fleet overview reads that from its metrics)."""
        return self.healthy is not False and self.status in (None, ROUTABLE)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "id": self.id,
            "healthy": self.healthy,
            "worker_type": self.worker_type,
            "bootstrap_port": self.bootstrap_port,
            "status": self.status,
        }


def normalize_url(url: str) -> str:
    """A worker URL as compared: no trailing slash, scheme and host lower-case."""
    url = url.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    if not sep:
        return f"http://{url.lower()}" if url else url
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}://{host.lower()}{slash}{path}"


def parse_worker(item: Any) -> RouterWorker:
    """One entry of a worker list (or smg's GET /workers/{id}). ValueError for one without a url."""
    if isinstance(item, str):
        return RouterWorker(normalize_url(item))
    if not isinstance(item, dict) or not isinstance(item.get("url"), str):
        raise ValueError(f"a worker entry without a url: {str(item)[:200]}")
    wid = item.get("id") if isinstance(item.get("id"), str) else None
    healthy = item.get("is_healthy")
    kind = item.get("worker_type")
    port = item.get("bootstrap_port")
    status = item.get("status")
    return RouterWorker(
        normalize_url(item["url"]),
        wid,
        healthy if isinstance(healthy, bool) else None,
        kind if isinstance(kind, str) and kind else "regular",
        port if isinstance(port, int) and not isinstance(port, bool) else None,
        status if isinstance(status, str) else None,
    )


def parse_workers(payload: Any) -> tuple[WorkerApi, list[RouterWorker]]:
    """The worker list of any release: `{"workers": [...]}` (with `status`: smg; ids: 0.3; none: 0.2), `{"urls":
    [...]}` or a bare list (<= 0.1.9). An empty `{"workers": []}` says "workers-by-url" (the caller asks smg's
    /loads to tell smg from 0.2/0.3). ValueError for anything else."""
    if isinstance(payload, dict) and isinstance(payload.get("workers"), list):
        items = payload["workers"]
        workers = [parse_worker(item) for item in items]
        if any(isinstance(item, dict) and "status" in item for item in items):
            return "smg", workers
        return ("workers-by-id" if any(w.id is not None for w in workers) else "workers-by-url"), workers
    urls = payload.get("urls") if isinstance(payload, dict) else payload
    if isinstance(urls, list) and all(isinstance(u, str) for u in urls):
        return "legacy", [RouterWorker(normalize_url(u)) for u in urls]
    raise ValueError(f"not a router worker list: {str(payload)[:200]}")


def error_of(response: httpx.Response) -> tuple[str, str | None]:
    """The router's own words for a refusal: smg's (and 0.3's) `{"error": "...", "code": "..."}`, smg's
    `{"error": {"message", "code"}}` for an unknown route, else the body's start."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300], None
    if isinstance(body, dict):
        error: Any = body.get("error")
        code: Any = body.get("code")
        if isinstance(error, dict):
            error, code = error.get("message"), error.get("code")
        if isinstance(error, str):
            return error[:300], code if isinstance(code, str) else None
    return response.text.strip()[:300], None


class RouterClient:
    """One router, over HTTP. Every method raises RouterError with what the router said."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 10.0,
        change_timeout_s: float = CHANGE_TIMEOUT_S,
        add_timeout_s: float = SMG_ADD_TIMEOUT_S,
    ) -> None:
        self.url = url.rstrip("/")
        self.change_timeout_s = change_timeout_s
        self.add_timeout_s = add_timeout_s  # smg: how long an added worker gets to be ready
        self.api: WorkerApi | None = None
        self.release: str | None = None  # "smg-1.13.0", from smg's /loads
        self._release_asked = False
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout_s)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> RouterClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def name(self) -> str:
        """The router as the report names it: smg's release, or the API it speaks."""
        if self.api == "smg":
            return self.release or "smg"
        return {"workers-by-id": "sglang-router 0.3", "workers-by-url": "sglang-router 0.2",
                "legacy": "sglang-router <= 0.1.9"}.get(self.api or "", "router")  # fmt: skip

    async def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise RouterError(f"router {self.url}: {method} {path}: {type(exc).__name__}: {exc}") from None

    def _refused(self, response: httpx.Response, what: str) -> RouterError:
        message, code = error_of(response)
        said = f"{code}: {message}" if code else message
        return RouterError(f"router {self.url}: {what}: HTTP {response.status_code} {said}".rstrip(),
                           status=response.status_code, code=code)  # fmt: skip

    async def workers(self) -> list[RouterWorker]:
        """The router's worker list now (and which worker API it speaks, remembered in `api`)."""
        response = await self._call("GET", "/workers")
        if response.status_code == 404:
            response = await self._call("GET", "/list_workers")
        if response.status_code != 200:
            raise self._refused(response, "its worker list")
        try:
            api, workers = parse_workers(response.json())
        except ValueError as exc:
            raise RouterError(f"router {self.url}: {exc}") from None
        if not workers and api == "workers-by-url":  # an empty list does not tell smg from 0.2/0.3
            api = self.api or ("smg" if await self._learn_release() else api)
        elif api == "smg":
            await self._learn_release()
        self.api = api
        return workers

    async def _learn_release(self) -> bool:
        """Whether the router is smg, which (1.13 on) names itself in `GET /loads` ("version": "smg-1.13.0"; 0.3
        has no such route); its release is kept in `release`. Asked once."""
        if self._release_asked:
            return self.release is not None
        self._release_asked = True
        try:
            response = await self._http.get("/loads")
            body = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return False
        version = body.get("version") if isinstance(body, dict) else None
        if isinstance(version, str) and version.startswith("smg"):
            self.release = version
        return self.release is not None

    async def find(self, url: str) -> RouterWorker | None:
        wanted = normalize_url(url)
        return next((w for w in await self.workers() if w.url == wanted), None)

    async def worker(self, worker_id: str) -> tuple[RouterWorker | None, dict[str, Any] | None]:
        """smg's (and 0.3's) `GET /workers/{id}`: the worker and its running job (`job_status`), or (None, None)
        once the router has no such worker."""
        response = await self._call("GET", f"/workers/{worker_id}")
        if response.status_code == 404:
            return None, None
        if response.status_code != 200:
            raise self._refused(response, f"worker {worker_id}")
        try:
            body = response.json()
            found = parse_worker(body)
        except ValueError as exc:
            raise RouterError(f"router {self.url}: worker {worker_id}: {exc}") from None
        job = body.get("job_status")
        return found, job if isinstance(job, dict) else None

    async def remove(self, url: str, *, settle_s: float | None = 0.0) -> RouterWorker | None:
        """Take the worker out of the router; returns the worker as the router had it (None when it had none) once
        the router no longer has it. `settle_s`: smg's drain settle for this removal (None: the worker's own,
        5 s unless set); 0 takes it out at once, for a caller that waits for the worker's requests itself."""
        worker = await self.find(url)
        if worker is None:
            return None
        if self.api == "legacy":
            response = await self._call("POST", "/remove_worker", params={"url": url})
        elif self.api in ("smg", "workers-by-id") and worker.id is not None:
            if self.api == "smg" and settle_s is not None:
                await self._set_settle(worker, settle_s)
            response = await self._call("DELETE", f"/workers/{worker.id}")
            if response.status_code == 404:  # gone meanwhile
                return worker
        else:
            response = await self._call("DELETE", f"/workers/{quote(url, safe='')}")
        self._accepted(response, f"remove {url}")
        if self.api == "smg" and worker.id is not None:
            settle = 5.0 if settle_s is None else settle_s  # smg's default when the worker's spec sets none
            await self._until_gone(worker, timeout_s=self.change_timeout_s + settle)
        else:
            await self._until(url, listed=False, what=f"{url} to leave the worker list")
        return worker

    async def _set_settle(self, worker: RouterWorker, settle_s: float) -> None:
        """PATCH the worker's drain settle and wait for that job, so that the removal queued next reads it."""
        assert worker.id is not None
        body = {"health": {"drain_settle_secs": max(0, round(settle_s))}}
        response = await self._call("PATCH", f"/workers/{worker.id}", json=body)
        self._accepted(response, f"set the drain settle of {worker.url}")
        deadline = time.monotonic() + self.change_timeout_s
        while True:
            found, job = await self.worker(worker.id)
            if found is None or job is None or job.get("job_type") != "UpdateWorker":
                return
            if job.get("status") == "failed":
                raise RouterError(f"router {self.url}: setting the drain settle of {worker.url} failed: "
                                  f"{job.get('message') or 'no reason given'}")  # fmt: skip
            if time.monotonic() >= deadline:
                raise RouterError(f"router {self.url}: waited {self.change_timeout_s:g} s for the drain settle of "
                                  f"{worker.url} to be set")  # fmt: skip
            await asyncio.sleep(POLL_S)  # the router's job runs in the background: poll it

    async def _until_gone(self, worker: RouterWorker, *, timeout_s: float) -> None:
        assert worker.id is not None
        deadline = time.monotonic() + timeout_s
        while True:
            found, _job = await self.worker(worker.id)
            if found is None:
                return
            if time.monotonic() >= deadline:
                raise RouterError(f"router {self.url}: waited {timeout_s:g} s for {worker.url} ({worker.id}) to be "
                                  f"removed; it is still {found.status or 'listed'}")  # fmt: skip
            await asyncio.sleep(POLL_S)

    async def add(self, url: str, *, worker_type: str = "regular", bootstrap_port: int | None = None) -> RouterWorker:
        """Put the worker (back) into the router; returns it once the router routes to it (smg: its new id,
        `ready`; before smg: listed and not unhealthy). `worker_type` prefill|decode and a prefill's
        `bootstrap_port` place it in a PD router (smg and 0.3; older releases take a URL only)."""
        if worker_type not in WORKER_TYPES:
            raise ValueError(f"worker_type {worker_type!r}: one of {', '.join(WORKER_TYPES)}")
        if bootstrap_port is not None and worker_type != "prefill":
            raise ValueError("a bootstrap port belongs to a prefill worker")
        if self.api is None:
            await self.workers()
        if self.api == "legacy":
            response = await self._call("POST", "/add_worker", params={"url": url})
        else:
            spec: dict[str, Any] = {"url": url}
            if self.api in ("smg", "workers-by-id") or worker_type != "regular":
                spec["worker_type"] = worker_type
            if bootstrap_port is not None:
                spec["bootstrap_port"] = bootstrap_port
            response = await self._call("POST", "/workers", json=spec)
        if self.api == "smg":
            return await self._smg_added(url, response)
        self._accepted(response, f"add {url}")
        await self._until(url, listed=True, what=f"{url} to be listed as healthy")
        found = await self.find(url)
        return found or RouterWorker(normalize_url(url), worker_type=worker_type, bootstrap_port=bootstrap_port)

    async def _smg_added(self, url: str, response: httpx.Response) -> RouterWorker:
        """Follow smg's add job to `ready`. A 409 (the URL is there, or being added) follows that worker."""
        worker_id: str | None = None
        if response.status_code == 409:
            existing = await self.find(url)
            worker_id = existing.id if existing is not None else None
            if worker_id is None:  # being added: the list does not name it yet; the message does
                message, _code = error_of(response)
                worker_id = _id_in(message)
            if worker_id is None:
                raise self._refused(response, f"add {url}")
        else:
            self._accepted(response, f"add {url}")
            try:
                body = response.json()
            except ValueError:
                body = {}
            found = body.get("worker_id") if isinstance(body, dict) else None
            location = response.headers.get("location", "")
            worker_id = found if isinstance(found, str) else location.rsplit("/", 1)[-1] or None
            if worker_id is None:
                raise RouterError(f"router {self.url}: add {url}: the answer names no worker id: {response.text[:200]}")
        return await self._until_ready(url, worker_id)

    async def _until_ready(self, url: str, worker_id: str) -> RouterWorker:
        timeout_s = self.add_timeout_s
        deadline = time.monotonic() + timeout_s
        last = "not yet registered"
        while True:
            # smg's GET /workers/{id} can answer 404 for a moment between the add job's record and the registered
            # worker (seen with 1.13): not found is "not yet" until the deadline.
            found, job = await self.worker(worker_id)
            if found is not None and found.status == ROUTABLE and found.healthy is not False:
                return found
            if job is not None and job.get("status") == "failed":
                raise RouterError(f"router {self.url}: adding {url} failed: {job.get('message') or 'no reason given'}")
            if found is not None:
                last = f"status {found.status}" + (f", job {job.get('status')}" if job else "")
            if time.monotonic() >= deadline:
                # smg 1.13 refuses to remove a worker whose add job still runs (the removal job fails with "not
                # found"): it keeps checking it until --worker-startup-timeout-secs and adds it if it answers.
                raise RouterError(
                    f"router {self.url}: waited {timeout_s:g} s for {url} ({worker_id}) to be ready ({last}); smg "
                    "checks a starting worker every --worker-startup-check-interval (30 s by default) until "
                    "--worker-startup-timeout-secs (1800 s) and adds it if it answers by then"
                )
            await asyncio.sleep(POLL_S)

    def _accepted(self, response: httpx.Response, what: str) -> None:
        if response.status_code not in (200, 201, 202, 204):
            raise self._refused(response, what)

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


def _id_in(message: str) -> str | None:
    """The worker id in smg's 409 message ("... with ID 01a250b9-.... Poll GET /workers/<id>.")."""
    marker = "/workers/"
    if marker not in message:
        return None
    tail = message.split(marker, 1)[1]
    wid = "".join(c for c in tail.split()[0] if c.isalnum() or c == "-") if tail.split() else ""
    return wid or None
