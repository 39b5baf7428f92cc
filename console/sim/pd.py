"""PD disaggregation in the stand-in: a prefill server with its bootstrap server, and a decode server that fetches each
request's KV from it. No GPU moves anything: the KV transfer is a timed handshake between the two processes.

What it offers (SGLang 0.5.23, ../shared/research/wave5-facts.md §5; the stand-in's side of issue #45):

- `--disaggregation-mode prefill`: the bootstrap server on --host:--disaggregation-bootstrap-port (8998), up before
  the weights: GET /health "OK"; PUT /route (the scheduler's ranks register once the KV cache is allocated);
  GET /route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1, the server's layout (page
  size, KV dtype, allocation policy, ...) or 503 "Prefill server not fully registered yet (N workers registered)."
  until every rank has; with real ranks {rank_ip, rank_port} or 404; missing parameters 400; POST /register_dp_rank,
  /query_dp_ranks. A request carrying bootstrap_host/port/room waits for its decode to bootstrap the room
  (SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT, 300 s), is prefilled (one step: its first token), "sends" its KV (the
  prompt's KV bytes over a 25 GB/s link per rank) and then answers with that one token. `fake` is refused on prefill
  (SGLang's AssertionError, console.sglang.rules).
- `--disaggregation-mode decode`: a request's bootstrap_host/port name its prefill (a null port: this server's own
  --disaggregation-bootstrap-port). At first contact with a prefill the decode reads its /route (again once a second,
  15 tries) and checks it: a different page size or KV dtype raises in the scheduler, so the decode server dies as
  SGLang's does (exit 137, "Page size mismatch: ..."); a different --disaggregation-decode-allocation-policy fails the
  request (500). It then bootstraps the room on the prefill's KV sender and starts decoding once the KV has arrived:
  its answer's TTFT is prefill + transfer + a step. It heartbeats every prefill it knows (GET /health every
  SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL s, 5, at least 2); after SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE (2)
  misses in a row it forgets that prefill and fails its rooms whose KV has not arrived ("Lost connection with prefill
  instance", 500); requests already holding their KV decode on. SGLANG_DISAGGREGATION_WAITING_TIMEOUT (300 s) bounds
  the wait for a KV that never comes. A prefill that is back before its decodes dropped it (within two heartbeats)
  has a new KV port, which they do not know: its rooms stall until those timeouts (SGLang #34289, open), after which
  the decode reads its /route again. With `--disaggregation-transfer-backend fake` a decode serves every request
  alone (no prefill, auto room), as 0.5.23's synthetic decode benchmark mode.
- `/health` and the warm-up go the fake path on both roles (SGLang sends them to bootstrap host 2.2.2.2).
- /metrics carries engine_type="prefill"|"decode" and the PD families: the queue gauges, the bootstrap and transfer
  failure counters, the KV transfer histograms.
- A decode server that restarts loses its in-flight streams (they were its own connections).

The KV sender (the port a prefill registers as rank_port) speaks the stand-in's own handshake, `POST /kv/{room}`
answered when the room's KV has "arrived"; nothing outside the stand-in uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

FAKE_BOOTSTRAP_HOST = "2.2.2.2"  # SGLang's health checks and warm-up use this host: the fake transfer path
LINK_GB_S = 25.0  # per rank: a 200 Gb/s RDMA link
HANDSHAKE_S = 0.002  # the transfer's fixed cost (connection, metadata)
ROUTE_TRIES = 15  # decode.py _max_ensure_retries
ROUTE_RETRY_S = 1.0  # decode.py _ensure_retry_interval


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        return float(env.get(name) or default)
    except ValueError:
        return default


@dataclass(frozen=True)
class Bootstrap:
    """What a request carries to pair its prefill and decode halves (io_struct.GenerateReqInput)."""

    host: str | None = None
    port: int | None = None
    room: int | None = None

    @property
    def fake(self) -> bool:
        return self.host == FAKE_BOOTSTRAP_HOST


INTERNAL = Bootstrap(FAKE_BOOTSTRAP_HOST)  # the health probe's and the warm-up's


def bootstrap_of(body: Mapping[str, Any], index: int | None = None) -> Bootstrap:
    """The request's bootstrap fields; for a batch (`index`), its item's (smg sends lists for a batch)."""

    def pick(key: str) -> Any:
        value = body.get(key)
        if isinstance(value, list):
            return value[index] if index is not None and index < len(value) else None
        return value

    port, room = pick("bootstrap_port"), pick("bootstrap_room")
    host = pick("bootstrap_host")
    return Bootstrap(
        str(host) if host is not None else None,
        int(port) if port is not None else None,
        int(room) if room is not None else None,
    )


@dataclass(frozen=True)
class PdSpec:
    """A PD server's settings from its flags and SGLang's environment variables (pure)."""

    mode: str  # "prefill" | "decode"
    host: str
    http_port: int
    bootstrap_port: int
    backend: str
    allocation_policy: str
    page_size: int
    kv_cache_dtype: str
    tp_size: int
    pp_size: int
    heartbeat_s: float
    max_failures: int
    bootstrap_timeout_s: float
    waiting_timeout_s: float

    @classmethod
    def from_resolved(cls, resolved: Mapping[str, Any], env: Mapping[str, str] | None = None) -> PdSpec | None:
        """None unless --disaggregation-mode is prefill or decode."""
        mode = str(resolved.get("disaggregation_mode") or "null")
        if mode not in ("prefill", "decode"):
            return None
        env = os.environ if env is None else env
        backend = str(resolved.get("disaggregation_transfer_backend") or "mooncake")
        return cls(
            mode=mode,
            host=str(resolved.get("host") or "127.0.0.1"),
            http_port=int(resolved.get("port") or 30000),
            bootstrap_port=int(resolved.get("disaggregation_bootstrap_port") or 8998),
            backend="mooncake" if backend == "mooncake_tcp" else backend,
            allocation_policy=str(resolved.get("disaggregation_decode_allocation_policy") or "early"),
            page_size=int(resolved.get("page_size") or 1),
            kv_cache_dtype=str(resolved.get("kv_cache_dtype") or "auto"),
            tp_size=int(resolved.get("tp_size") or 1),
            pp_size=int(resolved.get("pp_size") or 1),
            # conn.py: at least 2 s, at least 1 failure
            heartbeat_s=max(_env_float(env, "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL", 5.0), 2.0),
            max_failures=max(int(_env_float(env, "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE", 2)), 1),
            bootstrap_timeout_s=_env_float(env, "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT", 300.0),
            waiting_timeout_s=_env_float(env, "SGLANG_DISAGGREGATION_WAITING_TIMEOUT", 300.0),
        )

    @property
    def route_info(self) -> dict[str, Any]:
        """What the prefill's GET /route with -1s answers (PrefillServerInfo)."""
        return {
            "attn_tp_size": self.tp_size,
            "attn_cp_size": 1,
            "dp_size": 1,
            "pp_size": self.pp_size,
            "page_size": self.page_size,
            "kv_cache_dtype": self.kv_cache_dtype,
            "follow_bootstrap_room": True,
            "enable_dsa_cache_layer_split": False,
            "enable_kv_cache_sharding": False,
            "prefill_http_port": self.http_port,
            "decode_allocation_policy": self.allocation_policy,
        }


class RoomFailed(Exception):
    """A request's KV did not get where it had to: (HTTP status, SGLang's message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class PeerMismatch(Exception):
    """The decode and its prefill disagree on page size or KV dtype: SGLang raises in the scheduler (fatal)."""


class PdMetrics:
    """SGLang 0.5.23's PD families (metrics_collector.py), in the server's registry with its labels."""

    def __init__(self, registry: CollectorRegistry, labels: Mapping[str, str]) -> None:
        names = tuple(labels)
        # 0.5.17's measured registry (console.sim.metrics.RealMetrics) already has some of them: reuse those.
        existing: dict[str, Any] = getattr(registry, "_names_to_collectors", {})

        def child(metric: Any) -> Any:
            return metric.labels(**{k: labels.get(k, "") for k in metric._labelnames})

        def gauge(name: str, doc: str) -> Any:
            full = f"sglang:{name}"
            if full in existing:
                return child(existing[full])
            return child(Gauge(full, doc, names, registry=registry, multiprocess_mode="mostrecent"))

        def counter(name: str, doc: str) -> Any:
            full = f"sglang:{name}"
            if full in existing or f"{full}_total" in existing:
                return child(existing.get(full) or existing[f"{full}_total"])
            return child(Counter(full, doc, names, registry=registry))

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Any:
            full = f"sglang:{name}"
            if full in existing:
                return child(existing[full])
            return child(Histogram(full, doc, names, registry=registry, buckets=buckets))

        self.prefill_bootstrap_queue = gauge(
            "num_prefill_bootstrap_queue_reqs", "The number of requests in the prefill bootstrap queue."
        )
        self.prefill_inflight_queue = gauge(
            "num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue."
        )
        self.decode_prealloc_queue = gauge(
            "num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue."
        )
        self.decode_transfer_queue = gauge(
            "num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue."
        )
        self.pending_prealloc_token_usage = gauge(
            "pending_prealloc_token_usage", "The token usage for pending preallocated tokens (not preallocated yet)."
        )
        self.prealloc_full_token_usage = gauge(
            "prealloc_full_token_usage",
            "Share of the full-attention KV pool held by decode requests whose KV transfer is pending.",
        )
        self.bootstrap_failed = counter("num_bootstrap_failed_reqs", "The number of bootstrap failed requests.")
        self.transfer_failed = counter("num_transfer_failed_reqs", "The number of transfer failed requests.")
        self.prefill_retries = counter("num_prefill_retries", "Total number of prefill retries.")
        self.transfer_speed = histogram(
            "kv_transfer_speed_gb_s",
            "Histogram of KV cache transfer speed in GB/s.",
            (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400),
        )
        self.transfer_latency = histogram(
            "kv_transfer_latency_ms",
            "Histogram of KV cache transfer latency in ms.",
            (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000),
        )
        self.bootstrap_ms = histogram(
            "kv_transfer_bootstrap_ms",
            "Histogram of KV transfer bootstrap time in ms.",
            (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500),
        )
        self.alloc_ms = histogram(
            "kv_transfer_alloc_ms",
            "Histogram of KV transfer allocation waiting time in ms.",
            (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500),
        )
        self.total_mb = histogram(
            "kv_transfer_total_mb",
            "Histogram of KV cache transfer size in MB.",
            (1, 5, 10, 50, 100, 500, 1000, 5000, 10000),
        )


@dataclass
class _Room:
    """One bootstrap room on the prefill side: its decode's arrival, its prefill, its transfer."""

    decode_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    transferred: asyncio.Event = field(default_factory=asyncio.Event)
    failed: str | None = None
    prompt_tokens: int = 0
    first_token: int = 0


@dataclass
class _Prefill:
    """What a decode knows of one prefill (PrefillServerInfo, its rank's KV sender, its heartbeat)."""

    info: dict[str, Any]
    sender: str  # "host:port" of its rank 0's KV sender
    failures: int = 0
    rooms: dict[int, asyncio.Future[None]] = field(default_factory=dict)  # room -> failed with RoomFailed


class Disaggregation:
    """One PD server's role (see the module docstring). The server hands it its requests (`admit`) and, on prefill,
    each request whose prefill step ended (`hold_finish`); it calls back into the server with `callbacks`."""

    def __init__(self, spec: PdSpec, callbacks: Callbacks) -> None:
        self.spec = spec
        self.cb = callbacks
        self.metrics: PdMetrics | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runners: list[web.AppRunner] = []
        self._session: aiohttp.ClientSession | None = None
        # prefill side
        self._rooms: dict[int, _Room] = {}
        self._registered = 0
        self._route_layout: dict[str, Any] = {}
        self._rank_table: dict[tuple[int, int, int, int], dict[str, Any]] = {}
        self._room_dp: dict[int, int] = {}
        self._held: dict[str, tuple[Any, int | None]] = {}  # rid -> (request, room): answered after the transfer
        self.sender_port = 0
        # decode side
        self._prefills: dict[str, _Prefill] = {}
        self._fetching: dict[str, asyncio.Task[_Prefill]] = {}
        self._fake_room = 0
        self._queues = {"prefill_bootstrap": 0, "prefill_inflight": 0, "decode_prealloc": 0, "decode_transfer": 0}
        self._last_transfer = (0.0, 0.0)  # (GB/s, ms) of the last KV sent (prefill)

    # --- start and stop -----------------------------------------------------------------------------------------

    def attach_metrics(self, registry: CollectorRegistry, labels: Mapping[str, str]) -> None:
        self.metrics = PdMetrics(registry, labels)

    async def start(self) -> None:
        """Prefill: the bootstrap server and the KV sender (before the weights, as SGLang's tokenizer manager starts
        them). Decode: the heartbeat. Decode (not fake) logs that its radix cache is off."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        if self.spec.mode == "prefill":
            await self._serve(self._bootstrap_app(), self.spec.bootstrap_port)
            self.sender_port = await self._serve(self._sender_app(), 0)
        else:
            self.cb.log("Radix cache is disabled for decode server")
            self._spawn(self._heartbeat())

    async def register_ranks(self) -> None:
        """Prefill, after the KV cache: every scheduler rank PUTs its /route entry (the 503 ends here)."""
        if self.spec.mode != "prefill" or self._session is None:
            return
        url = f"http://{self._local(self.spec.host)}:{self.spec.bootstrap_port}/route"
        for rank in range(self.spec.tp_size):
            payload = {
                "attn_tp_size": self.spec.tp_size, "attn_tp_rank": rank, "attn_cp_size": 1, "attn_cp_rank": 0,
                "attn_dp_size": 1, "attn_dp_rank": 0, "pp_size": self.spec.pp_size, "pp_rank": 0,
                "system_dp_size": 1, "system_dp_rank": 0, "rank_ip": self._rank_ip(),
                "rank_port": self.sender_port, "page_size": self.spec.page_size,
                "kv_cache_dtype": self.spec.kv_cache_dtype, "prefill_http_port": self.spec.http_port,
                "decode_allocation_policy": self.spec.allocation_policy,
                "load_balance_method": "follow_bootstrap_room",
            }  # fmt: skip
            async with self._session.put(url, json=payload) as response:
                await response.read()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for runner in self._runners:
            await runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _serve(self, app: web.Application, port: int) -> int:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.spec.host, port, reuse_address=True)
        await site.start()
        self._runners.append(runner)
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    @staticmethod
    def _local(host: str) -> str:
        return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host

    def _rank_ip(self) -> str:
        """The address a decode reaches this prefill's KV sender at: SGLANG_HOST_IP / HOST_IP as SGLang's
        get_local_ip_auto reads them, else --host, else (bound to every address) this host's outward address."""
        given = os.environ.get("SGLANG_HOST_IP") or os.environ.get("HOST_IP")
        if given:
            return given
        if self.spec.host not in ("0.0.0.0", "::", ""):
            return self.spec.host
        return outward_address()

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _queue(self, name: str, delta: int) -> None:
        self._queues[name] += delta
        if self.metrics is not None:
            gauge = {
                "prefill_bootstrap": self.metrics.prefill_bootstrap_queue,
                "prefill_inflight": self.metrics.prefill_inflight_queue,
                "decode_prealloc": self.metrics.decode_prealloc_queue,
                "decode_transfer": self.metrics.decode_transfer_queue,
            }[name]
            gauge.set(self._queues[name])

    def loads_section(self) -> dict[str, Any]:
        """/v1/loads' "disaggregation" section (load_snapshot.DisaggregationMetrics), as smg's load poll reads it."""
        return {
            "mode": self.spec.mode,
            "prefill_bootstrap_queue_reqs": self._queues["prefill_bootstrap"],
            "prefill_inflight_queue_reqs": self._queues["prefill_inflight"],
            "decode_prealloc_queue_reqs": self._queues["decode_prealloc"],
            "decode_transfer_queue_reqs": self._queues["decode_transfer"],
            "decode_retracted_queue_reqs": 0,
            "kv_transfer_speed_gb_s": self._last_transfer[0],
            "kv_transfer_latency_ms": self._last_transfer[1],
        }

    # --- requests -----------------------------------------------------------------------------------------------

    def admit(self, req: Any, bootstrap: Bootstrap) -> None:
        """A request the server took: when it may enter the engine is the role's to say."""
        if bootstrap.fake:
            self.cb.add(req, prefilled=False)
            return
        if self.spec.mode == "prefill":
            self._spawn(self._prefill_request(req, bootstrap))
        elif self.spec.backend == "fake":
            self._fake_room += 1
            self.cb.add(req, prefilled=True)  # no prefill: the "KV" is there at once (synthetic decode benchmark)
        else:
            self._spawn(self._decode_request(req, bootstrap))

    def hold_finish(self, req: Any) -> bool:
        """Prefill: a request whose prefill step just ended answers only once its KV has gone (True: held)."""
        held = self._held.pop(req.rid, None)
        if held is None:
            return False
        self._spawn(self._send_kv(req, held[1]))
        return True

    # prefill side --------------------------------------------------------------------------------------------

    async def _prefill_request(self, req: Any, bootstrap: Bootstrap) -> None:
        room_id = bootstrap.room
        room = self._rooms.setdefault(room_id, _Room()) if room_id is not None else _Room()
        started = time.monotonic()
        self._queue("prefill_bootstrap", +1)
        try:
            await asyncio.wait_for(room.decode_arrived.wait(), self.spec.bootstrap_timeout_s)
        except TimeoutError:
            self._queue("prefill_bootstrap", -1)
            if room_id is not None:
                self._rooms.pop(room_id, None)
            if self.metrics is not None:
                self.metrics.bootstrap_failed.inc()
            reason = f"Request {room_id} timed out after {time.monotonic() - started:.1f}s in KVPoll.Bootstrapping"
            message = (
                f"Prefill bootstrap failed for request rank=0 req.rid='{req.rid}' req.bootstrap_room={room_id} "
                f"with exception KVTransferError(bootstrap_room={room_id}): {reason}"
            )
            self.cb.log(message)
            self.cb.fail(req, 500, message)
            return
        self._queue("prefill_bootstrap", -1)
        if self.metrics is not None:
            self.metrics.bootstrap_ms.observe((time.monotonic() - started) * 1000)
        room.prompt_tokens = req.prompt_tokens
        self._held[req.rid] = (req, room_id)
        self.cb.add(req, prefilled=False, max_new_tokens=1)  # a prefill computes the first token only

    async def _send_kv(self, req: Any, room_id: int | None) -> None:
        room = self._rooms.get(room_id) if room_id is not None else None
        if room is None:
            self.cb.release(req)
            return
        self._queue("prefill_inflight", +1)
        try:
            room.first_token = req.ids[0] if req.ids else 0
            per_rank = self.cb.kv_bytes(req.prompt_tokens) / max(1, self.spec.tp_size)
            seconds = HANDSHAKE_S + per_rank / (LINK_GB_S * 1e9)
            await asyncio.sleep(seconds)
            if room.failed is not None:
                if self.metrics is not None:
                    self.metrics.transfer_failed.inc()
                message = (
                    f"Prefill transfer failed for request rank=0 req.rid='{req.rid}' req.bootstrap_room={room_id} "
                    f"with exception KVTransferError(bootstrap_room={room_id}): {room.failed}"
                )
                self.cb.log(message)
                self.cb.fail(req, 500, message)
                return
            room.transferred.set()
            self._last_transfer = (per_rank / 1e9 / seconds, seconds * 1000)
            if self.metrics is not None:
                total = per_rank * self.spec.tp_size
                self.metrics.transfer_latency.observe(seconds * 1000)
                self.metrics.transfer_speed.observe(per_rank / 1e9 / seconds)
                self.metrics.total_mb.observe(total / 1e6)
            self.cb.release(req)
        finally:
            self._queue("prefill_inflight", -1)
            if room_id is not None:
                self._rooms.pop(room_id, None)

    def _sender_app(self) -> web.Application:
        async def kv(request: web.Request) -> web.Response:
            """A decode bootstraps a room and waits for its KV (the stand-in's handshake)."""
            room_id = int(request.match_info["room"])
            room = self._rooms.setdefault(room_id, _Room())
            room.decode_arrived.set()
            try:
                await asyncio.wait_for(room.transferred.wait(), self.spec.waiting_timeout_s)
            except TimeoutError:
                self._rooms.pop(room_id, None)
                return web.json_response({"error": "no prefill for this room"}, status=504)
            except asyncio.CancelledError:
                room.failed = "Failed to send KV to the decode instance: it went away"
                raise
            return web.json_response({"first_token": room.first_token, "prompt_tokens": room.prompt_tokens})

        app = web.Application()
        app.router.add_post("/kv/{room}", kv)
        return app

    def _bootstrap_app(self) -> web.Application:
        """CommonKVBootstrapServer's routes (disaggregation/common/conn.py), as aiohttp serves them there."""

        async def health(request: web.Request) -> web.Response:
            return web.Response(text="OK")

        def ready() -> bool:
            return self._registered >= self.spec.tp_size * self.spec.pp_size

        async def route(request: web.Request) -> web.Response:
            if request.method == "PUT":
                data = await request.json()
                policy = data.get("decode_allocation_policy", "early")
                if self._registered and self._route_layout.get("decode_allocation_policy") != policy:
                    return web.Response(text="Inconsistent prefill allocation policies", status=400)
                if not self._route_layout:
                    self._route_layout = {**self.spec.route_info, "decode_allocation_policy": policy}
                key = (int(data["attn_dp_rank"]), int(data["attn_cp_rank"]), int(data["attn_tp_rank"]),
                       int(data["pp_rank"]))  # fmt: skip
                self._rank_table[key] = {"rank_ip": data["rank_ip"], "rank_port": int(data["rank_port"])}
                self._registered += 1
                return web.Response(text="OK")
            if request.method != "GET":
                return web.Response(text="Method not allowed", status=405, content_type="application/json")
            keys = ("prefill_dp_rank", "prefill_cp_rank", "target_tp_rank", "target_pp_rank")
            values = [request.query.get(k) for k in keys]
            if not all(values):
                return web.Response(text="Missing inputs for bootstrap server.", status=400)
            ranks = tuple(int(v) for v in values if v is not None)
            if not ready():
                return web.Response(
                    text=f"Prefill server not fully registered yet ({self._registered} workers registered).",
                    status=503,
                )
            if ranks == (-1, -1, -1, -1):
                return web.json_response(self._route_layout)
            found = self._rank_table.get(ranks)  # type: ignore[arg-type]
            if found is None:
                dp, cp, tp, pp = ranks
                return web.Response(
                    text=f"Bootstrap info not found for dp_rank={dp} cp_rank={cp} tp_rank={tp} pp_rank={pp}",
                    status=404,
                )
            return web.json_response(found)

        async def register_dp_rank(request: web.Request) -> web.Response:
            data = await request.json()
            self._room_dp[int(data["bootstrap_room"])] = int(data["dp_rank"])
            return web.Response(text="OK")

        async def query_dp_ranks(request: web.Request) -> web.Response:
            data = await request.json()
            rooms = [int(r) for r in data["bootstrap_rooms"]]
            return web.json_response({str(r): self._room_dp[r] for r in rooms if r in self._room_dp})

        app = web.Application()
        app.router.add_route("*", "/route", route)
        app.router.add_post("/register_dp_rank", register_dp_rank)
        app.router.add_post("/query_dp_ranks", query_dp_ranks)
        app.router.add_get("/health", health)
        return app

    # decode side ---------------------------------------------------------------------------------------------

    async def _decode_request(self, req: Any, bootstrap: Bootstrap) -> None:
        addr = f"{bootstrap.host}:{bootstrap.port if bootstrap.port is not None else self.spec.bootstrap_port}"
        room_id = bootstrap.room if bootstrap.room is not None else 0
        started = time.monotonic()
        self._queue("decode_prealloc", +1)
        in_transfer = False
        try:
            prefill = await self._ensure_prefill(addr)
            policy = prefill.info.get("decode_allocation_policy", "early")
            if policy != self.spec.allocation_policy:
                raise self._handshake_failed(
                    req,
                    room_id,
                    "Disaggregation decode allocation policy mismatch: "
                    f"prefill={policy}, decode={self.spec.allocation_policy}. "
                    "Set --disaggregation-decode-allocation-policy identically on both roles.",
                )
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            prefill.rooms[room_id] = failed
            self._queue("decode_prealloc", -1)
            self._queue("decode_transfer", +1)
            in_transfer = True
            if self.metrics is not None:
                self.metrics.bootstrap_ms.observe((time.monotonic() - started) * 1000)
                self.metrics.alloc_ms.observe(0.0)
            fetch = asyncio.ensure_future(self._fetch_kv(prefill.sender, room_id))
            try:
                waits: set[asyncio.Future[Any]] = {fetch, failed}
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if failed in done:
                    failed.result()  # raises the room's failure
                if fetch.result() is None:
                    # The prefill's sender went away: nothing tells the decode but its heartbeat (or the timeout).
                    try:
                        await asyncio.wait_for(asyncio.shield(failed), self.spec.waiting_timeout_s)
                    except TimeoutError:
                        # invalidate_cached_bootstrap_infos: the next request reads the prefill's /route again
                        if self._prefills.get(addr) is prefill:
                            self._prefills.pop(addr, None)
                        elapsed = time.monotonic() - started
                        reason = f"Request {room_id} timed out after {elapsed:.1f}s in KVPoll.WaitingForInput"
                        raise self._transfer_failed(req, room_id, reason) from None
            finally:
                fetch.cancel()
                prefill.rooms.pop(room_id, None)
            self.cb.add(req, prefilled=True)
        except RoomFailed as e:
            if self.metrics is not None:
                (self.metrics.transfer_failed if in_transfer else self.metrics.bootstrap_failed).inc()
            self.cb.log(e.message)
            self.cb.fail(req, e.status, e.message)
        except PeerMismatch as e:
            self.cb.die(f"RuntimeError: {e}")
        finally:
            self._queue("decode_transfer" if in_transfer else "decode_prealloc", -1)

    def _handshake_failed(self, req: Any, room: int, reason: str) -> RoomFailed:
        return RoomFailed(
            500,
            f"Decode handshake failed for request rank=0 decode_req.req.rid='{req.rid}' "
            f"decode_req.req.bootstrap_room={room} with exception KVTransferError(bootstrap_room={room}): {reason}",
        )

    def _transfer_failed(self, req: Any, room: int, reason: str) -> RoomFailed:
        return RoomFailed(
            500,
            f"Decode transfer failed for request rank=0 decode_req.req.rid='{req.rid}' "
            f"decode_req.req.bootstrap_room={room} with exception KVTransferError(bootstrap_room={room}): {reason}",
        )

    async def _fetch_kv(self, sender: str, room: int) -> dict[str, Any] | None:
        assert self._session is not None
        try:
            async with self._session.post(f"http://{sender}/kv/{room}", json={}) as response:
                if response.status != 200:
                    return None
                return dict(await response.json())
        except (aiohttp.ClientError, OSError):
            return None

    async def _ensure_prefill(self, addr: str) -> _Prefill:
        known = self._prefills.get(addr)
        if known is not None:
            return known
        fetching = self._fetching.get(addr)
        if fetching is None:
            fetching = asyncio.ensure_future(self._fetch_prefill(addr))
            self._fetching[addr] = fetching
            fetching.add_done_callback(lambda _: self._fetching.pop(addr, None))
        return await asyncio.shield(fetching)

    async def _fetch_prefill(self, addr: str) -> _Prefill:
        """try_ensure_parallel_info, once a second up to ROUTE_TRIES times; the sanity checks that raise."""
        assert self._session is not None
        for attempt in range(1, ROUTE_TRIES + 1):
            info = await self._get_json(f"http://{addr}/route?prefill_dp_rank=-1&prefill_cp_rank=-1&"
                                        "target_tp_rank=-1&target_pp_rank=-1")  # fmt: skip
            if info is not None:
                self._check_layout(info)
                rank = await self._get_json(f"http://{addr}/route?prefill_dp_rank=0&prefill_cp_rank=0&"
                                            "target_tp_rank=0&target_pp_rank=0")  # fmt: skip
                if rank is not None:
                    prefill = _Prefill(info, f"{rank['rank_ip']}:{rank['rank_port']}")
                    self._prefills[addr] = prefill
                    return prefill
            if attempt < ROUTE_TRIES:
                await asyncio.sleep(ROUTE_RETRY_S)
        message = f"Could not fetch prefill parallel info from {addr} after {ROUTE_TRIES} attempts"
        self.cb.log(message)
        raise RoomFailed(500, f"Decode handshake failed for bootstrap_addr {addr}: {message}")

    async def _get_json(self, url: str) -> dict[str, Any] | None:
        assert self._session is not None
        try:
            async with self._session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as response:
                if response.status == 200:
                    return dict(await response.json())
                self.cb.log(f"Failed to get prefill server info: {response.status}, {await response.text()}")
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as e:
            self.cb.log(f"Error fetching prefill server info from bootstrap: {e}")
        return None

    def _check_layout(self, info: Mapping[str, Any]) -> None:
        page, dtype = info.get("page_size"), info.get("kv_cache_dtype")
        if page is not None and int(page) != self.spec.page_size:
            raise PeerMismatch(
                f"Page size mismatch: prefill server has page_size={page}, but decode server has "
                f"page_size={self.spec.page_size}. Both servers must use the same --page-size value."
            )
        if dtype is not None and dtype != self.spec.kv_cache_dtype:
            raise PeerMismatch(
                f"KV cache dtype mismatch: prefill server has kv_cache_dtype={dtype}, but decode server has "
                f"kv_cache_dtype={self.spec.kv_cache_dtype}. Both servers must use the same --kv-cache-dtype value."
            )

    async def _heartbeat(self) -> None:
        """The decode's heartbeat checker: every known prefill's bootstrap /health; drop it after max_failures."""
        assert self._session is not None
        while True:
            await asyncio.sleep(self.spec.heartbeat_s)
            for addr, prefill in list(self._prefills.items()):
                ok = False
                with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                    async with self._session.get(
                        f"http://{addr}/health", timeout=aiohttp.ClientTimeout(sock_connect=2, sock_read=3)
                    ) as response:
                        ok = response.status == 200
                if ok:
                    prefill.failures = 0
                    continue
                self.cb.log(f"Attempting to reconnect to {addr}...")
                prefill.failures += 1
                if prefill.failures >= self.spec.max_failures:
                    self._node_failed(addr, prefill)

    def _node_failed(self, addr: str, prefill: _Prefill) -> None:
        self._prefills.pop(addr, None)
        reason = f"Lost connection with prefill instance (bootstrap_addr: {addr})"
        affected = [f for f in prefill.rooms.values() if not f.done()]
        for room, failed in list(prefill.rooms.items()):
            if not failed.done():
                failed.set_exception(
                    RoomFailed(
                        500,
                        f"Decode transfer failed for request rank=0 decode_req.req.bootstrap_room={room} with "
                        f"exception KVTransferError(bootstrap_room={room}): {reason}",
                    )
                )
        self.cb.log(f"{reason}, {len(affected)} requests affected")


def outward_address() -> str:
    """This host's address on its default route (no packet is sent), else its name's, else loopback."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route is looked up
        return str(probe.getsockname()[0])
    with contextlib.suppress(OSError):
        return socket.gethostbyname(socket.gethostname())
    return "127.0.0.1"


@dataclass
class Callbacks:
    """What the role needs from its server (console.sim.server.SimServer)."""

    add: Callable[..., None]  # (request, prefilled=bool): into the engine
    release: Callable[[Any], None]  # a held request answers now
    fail: Callable[[Any, int, str], None]  # (request, status, message): it ends with an error
    kv_bytes: Callable[[int], float]  # KV bytes of so many prompt tokens over all ranks
    log: Callable[[str], None]
    die: Callable[[str], None]  # a fatal scheduler exception (its text): the server goes
