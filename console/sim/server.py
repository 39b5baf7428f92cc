"""The SGLang stand-in's runtime: startup sequence, the engine driven in real time, and the HTTP API.

The performance model (console.sim.engine.Engine) is a pure discrete-event core; this module runs it
against the wall clock. Each step is scheduled at an absolute deadline (previous deadline + the step's
duration) so that long runs do not drift, and the tokens a request got in a step go out as one SSE
chunk, exactly as a speculative server sends one chunk per verify round.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from console.sim import gpus as gpu_model
from console.sim import sglang_log as L
from console.sim import shapes
from console.sim.metrics import SimMetrics
from console.sim.tokenizer import SimTokenizer, chat_prompt_text, output_token_ids, write_model_dir

SECRET_DESTS = ("api_key", "admin_api_key")


def redact(argv: list[str]) -> list[str]:
    """argv with the values of --api-key/--admin-api-key replaced by ***."""
    out: list[str] = []
    hide_next = False
    for token in argv:
        if hide_next:
            out.append("***")
            hide_next = False
        elif token.startswith(("--api-key=", "--admin-api-key=")):
            out.append(token.split("=", 1)[0] + "=***")
        else:
            out.append(token)
            hide_next = token in ("--api-key", "--admin-api-key")
    return out


@dataclass
class SimConfig:
    version: str
    profile: Any  # console.sim.profiles.SimProfile
    resolved: dict[str, Any]
    argv: list[str]
    time_scale: float = 1.0
    # Divides every decode/prefill step duration: >1 runs the model faster than real (benchmarks of the
    # server's own overhead); 1.0 keeps the profile's real tokens/s.
    speedup: float = 1.0
    gpu_count: int | None = None
    state_dir: Path | None = None
    seed: int = 0
    log: Callable[[str], None] = field(default=lambda s: print(s, flush=True))

    @property
    def host(self) -> str:
        return str(self.resolved.get("host") or "127.0.0.1")

    @property
    def port(self) -> int:
        return int(self.resolved.get("port") or 30000)

    @property
    def served_model_name(self) -> str:
        return str(self.resolved.get("served_model_name") or self.resolved.get("model_path") or "default")

    @property
    def speculative(self) -> bool:
        return bool(self.resolved.get("speculative_algorithm"))


@dataclass
class Live:
    """One request in flight."""

    rid: str
    prompt_tokens: int
    max_new_tokens: int
    seed: int
    started: float
    queue: asyncio.Queue[int] = field(default_factory=asyncio.Queue)
    ids: list[int] = field(default_factory=list)
    verify_ct: int = 0
    finish: str | None = None
    first_token_at: float | None = None


class SimServer:
    def __init__(self, config: SimConfig, engine: Any) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = SimTokenizer()
        self.live: dict[str, Live] = {}
        self.status = "Starting"  # -> "Up" after warm-up, "Terminating" after SIGTERM
        self.phase = "starting"
        self.memory_used_mib = 0
        self.memory_split: dict[str, float] = {"weight": 0.0, "kvcache": 0.0, "graph": 0.0}
        self._wake = asyncio.Event()
        self.last_gen_throughput = 0.0
        # Lifetime (since last flush) acceptance, refreshed only when a decode log line is emitted, as SGLang does.
        self.avg_spec_accept_length: float | None = None
        self.window_accept_length: float | None = None
        self.window_accept_rate: float | None = None
        self.metrics = SimMetrics(config.served_model_name) if config.resolved.get("enable_metrics") else None
        self.started_at = time.time()
        self.startup_time = 0.0
        self._seq = 0
        count = config.gpu_count or config.profile.gpu_count
        self.gpus = gpu_model.idle_gpus(config.profile.gpu, count, config.profile.name)
        self._gpu_clock = time.monotonic()

    # --- derived figures -------------------------------------------------------------------------

    @property
    def num_draft_tokens(self) -> int:
        return int(self.config.resolved.get("speculative_num_draft_tokens") or 1)

    @property
    def max_total_num_tokens(self) -> int:
        return int(self.engine.max_total_num_tokens)

    @property
    def max_running_requests(self) -> int:
        return int(self.engine.max_running_requests)

    @property
    def num_running(self) -> int:
        return int(self.engine.num_running)

    @property
    def num_queued(self) -> int:
        return int(self.engine.num_queued)

    @property
    def token_usage(self) -> float:
        return float(self.engine.token_usage)

    @property
    def used_tokens(self) -> int:
        return int(self.engine.num_tokens)

    @property
    def busy(self) -> bool:
        return bool(self.live) or not self.engine.idle

    # --- logging ---------------------------------------------------------------------------------

    def log(self, message: str, rank: str = "TP0") -> None:
        self.config.log(L.line(message, rank=rank))

    # --- the engine in real time -----------------------------------------------------------------

    def submit(self, prompt_tokens: int, max_new_tokens: int, temperature: float, ignore_eos: bool) -> Live:
        self._seq += 1
        rid = uuid.uuid4().hex
        req = Live(rid, prompt_tokens, max(1, max_new_tokens), self.config.seed * 1_000_003 + self._seq, time.time())
        self.live[rid] = req
        self.engine.add(rid, max(1, prompt_tokens), req.max_new_tokens, max(0.0, temperature), ignore_eos)
        if self.metrics:
            self.metrics.on_request(prompt_tokens)
        self._wake.set()
        return req

    def forget(self, req: Live) -> None:
        """The client went away: drop the request from the batch, as SGLang aborts it."""
        self.live.pop(req.rid, None)
        self.engine.abort(req.rid)

    async def drive(self) -> None:
        """Run engine steps at their real-time deadlines; idle until a request arrives."""
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        speedup = self.config.speedup
        interval = int(self.config.resolved.get("decode_log_interval") or 40)
        while True:
            step = self.engine.next_step()
            if step is None:
                self._wake.clear()
                if shapes.at_least(self.config.version, "0.5.23"):
                    self.last_gen_throughput = 0.0  # 0.5.23 decays it to 0 when idle
                await self._wake.wait()
                deadline = loop.time()
                continue
            deadline += step.duration_s / speedup
            now = loop.time()
            if deadline < now - 0.5:  # far behind (CPU starved): restart the clock instead of bursting
                deadline = now
            # sleep(0) still yields, so HTTP handlers run between back-to-back steps.
            await asyncio.sleep(max(0.0, deadline - now))
            self._deliver(step)
            if self.engine.window_decode_steps >= interval:
                self._log_decode_window()

    def _deliver(self, step: Any) -> None:
        now = time.time()
        finished = step.finished
        reasons = step.finish_reasons
        live = self.live
        for rid, n in step.emitted.items():
            req = live.get(rid)
            if req is None or n <= 0:
                continue
            req.ids.extend(output_token_ids(req.seed, len(req.ids), n))
            if step.kind == "decode":
                req.verify_ct += 1
            if req.first_token_at is None:
                req.first_token_at = now
            if rid in finished:
                req.finish = reasons.get(rid, "length")
            req.queue.put_nowait(n)
        for rid in finished:
            req = live.get(rid)
            if req is not None and req.finish is None:
                req.finish = reasons.get(rid, "length")
                req.queue.put_nowait(0)
        if self.metrics:
            self.metrics.on_step(step.emitted)

    def _log_decode_window(self) -> None:
        w = self.engine.take_window()
        self.last_gen_throughput = w.gen_throughput * self.config.speedup
        accept_len = w.accept_len
        accept_rate = w.accept_rate if shapes.at_least(self.config.version, "0.5.23") else w.accept_rate_with_bonus
        if accept_len is not None:
            # SGLang folds acceptance into its lifetime average only when it logs a decode window.
            self.avg_spec_accept_length = self.engine.avg_spec_accept_length
        self.window_accept_length, self.window_accept_rate = accept_len, accept_rate
        self.log(
            L.decode_batch(
                w.num_running,
                w.num_tokens,
                w.token_usage,
                accept_len,
                accept_rate,
                self.last_gen_throughput,
                w.num_queue,
            )
        )
        if self.metrics:
            self.metrics.on_window(
                running=w.num_running,
                queued=w.num_queue,
                used_tokens=w.num_tokens,
                token_usage=w.token_usage,
                gen_throughput=self.last_gen_throughput,
                accept_length=accept_len,
                accept_rate=accept_rate,
                max_total_num_tokens=self.max_total_num_tokens,
            )

    def flush(self) -> bool:
        """/flush_cache: refused while requests run or wait; resets acceptance and throughput counters."""
        if self.live or not self.engine.flush():
            return False
        self.avg_spec_accept_length = None
        self.window_accept_length = self.window_accept_rate = None
        self.last_gen_throughput = 0.0
        return True

    # --- simulated GPUs --------------------------------------------------------------------------

    def update_gpus(self) -> list[gpu_model.GpuState]:
        now = time.monotonic()
        dt, self._gpu_clock = now - self._gpu_clock, now
        up = self.status != "Starting" or self.memory_used_mib >= self.engine.perf.memory_used_mib()
        used = self.engine.perf.memory_used_mib() if up else self.memory_used_mib
        loads = self.engine.perf.gpu_load(self.num_running, busy=not self.engine.idle, memory_used_mib=used)
        proc_name = "python3"
        proc = (gpu_model.GpuProcess(os.getpid(), proc_name, max(0, used - 530)),) if used else ()
        self.gpus = [
            gpu_model.follow(g, loads[i % len(loads)], processes=proc, dt_s=dt) for i, g in enumerate(self.gpus)
        ]
        return self.gpus

    async def publish_gpus(self) -> None:
        directory = gpu_model.state_dir(self.config.state_dir)
        try:
            # Clients that count tokens with transformers (SGLang's bench_serving --tokenizer DIR) load this.
            write_model_dir(
                directory / "tokenizer",
                architecture=self.config.profile.architecture,
                context_length=self.config.profile.context_length,
                served_model_name=self.config.served_model_name,
            )
        except OSError as e:
            self.log(f"could not write the tokenizer folder to {directory}: {e}", rank="")
        while True:
            try:
                gpus = self.update_gpus()
                gpu_model.write_state(directory, pid=os.getpid(), profile=self.config.profile.name, gpus=gpus)
            except OSError as e:  # a read-only or full disk must not take the server down
                self.log(f"could not write GPU state to {directory}: {e}", rank="")
                return
            await asyncio.sleep(0.5)

    # --- startup ---------------------------------------------------------------------------------

    async def _phase(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds * self.config.time_scale))

    async def start_scheduler(self) -> None:
        """Weights, KV cache and CUDA graphs, with SGLang's log lines; the port is not bound meanwhile."""
        p = self.config.profile
        phases = dict(self.engine.startup_phases())
        total = p.gpu.memory_mib / 1024
        final_gib = self.engine.perf.memory_used_mib() / 1024
        weights = p.weights_gib_per_gpu + (p.draft_weights_gib_per_gpu if self.config.speculative else 0.0)
        graph_total = p.graph_mib_base / 1024
        kv = max(0.1, final_gib - weights - graph_total - 0.52)
        avail = total - 0.52
        self.memory_used_mib = 530
        self.log(L.load_weight_begin(avail))
        await self._phase(phases.get("load_weights", 0.0))
        self._use(weight=weights)
        self.log(L.load_weight_end(p.architecture, "torch.bfloat16", avail - weights, weights))
        avail -= weights
        await self._phase(phases.get("kv_cache_alloc", 0.0))
        self._use(kvcache=kv)
        self.log(L.kv_cache_allocated(self.max_total_num_tokens, kv / 2, kv / 2))
        avail -= kv
        self.log(L.memory_pool_end(avail))
        captures = [("", "capture_cuda_graph")]
        if "capture_draft_cuda_graph" in phases:
            captures += [("draft ", "capture_draft_cuda_graph"), ("draft extend ", "capture_draft_extend_cuda_graph")]
        remaining = max(0.0, final_gib - weights - kv - 0.52)
        for n, (kind, key) in enumerate(captures):
            share = remaining * (0.6 if n == 0 and len(captures) > 1 else 1.0 / len(captures) if n else 1.0)
            self.log(L.capture_begin(kind, avail))
            await self._phase(phases.get(key, 0.0))
            self._use(graph=share)
            avail -= share
            self.log(L.capture_end(kind, phases.get(key, 0.0) * self.config.time_scale, share, avail))
        chunked = int(self.config.resolved.get("chunked_prefill_size") or 8192)
        self.log(
            L.scheduler_summary(self.max_total_num_tokens, chunked, self.max_running_requests, p.context_length, avail)
        )

    def _use(self, **gib: float) -> None:
        for key, value in gib.items():
            self.memory_split[key] += value
            self.memory_used_mib += int(value * 1024)

    async def warm_up(self) -> None:
        """SGLang's startup warm-up: a short /generate through the scheduler, then "ready to roll"."""
        self.config.log(L.line(L.access("127.0.0.1:0", "GET", "/model_info", 200)))
        req = self.submit(prompt_tokens=6, max_new_tokens=8, temperature=0.0, ignore_eos=True)
        self.log(L.prefill_batch(1, 6, 0, 0.0, 0, 0))
        while req.finish is None:
            await req.queue.get()
        self.live.pop(req.rid, None)
        await self._phase(dict(self.engine.startup_phases()).get("warmup", 0.0))
        self.config.log(L.line(L.access("127.0.0.1:0", "POST", "/generate", 200)))
        self.engine.take_window()
        self.flush()
        self.status = "Up"
        self.startup_time = time.time() - self.started_at
        self.config.log(L.line(L.READY))


# --- HTTP ------------------------------------------------------------------------------------------


def _sse(payload: dict[str, Any] | list[Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def _error(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    return web.json_response(
        {"object": "error", "message": message, "type": kind, "param": None, "code": status}, status=status
    )


class Api:
    def __init__(self, sim: SimServer) -> None:
        self.sim = sim
        self.cfg = sim.config
        self.api_key = self.cfg.resolved.get("api_key")
        self.created = int(time.time())

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.auth], client_max_size=64 * 1024**2)
        r = app.router
        for path in ("/health", "/health_generate"):
            r.add_get(path, self.health)
        for path in ("/server_info", "/get_server_info"):
            r.add_get(path, self.server_info)
        for path in ("/model_info", "/get_model_info"):
            r.add_get(path, self.model_info)
        r.add_get("/v1/models", self.models)
        r.add_get("/metrics", self.metrics)
        r.add_route("*", "/flush_cache", self.flush_cache)
        if shapes.has_get_load(self.cfg.version):
            r.add_get("/get_load", self.get_load)
        if shapes.has_v1_loads(self.cfg.version):
            r.add_get("/v1/loads", self.v1_loads)
        r.add_post("/generate", self.generate)
        r.add_post("/v1/chat/completions", self.chat)
        r.add_post("/v1/completions", self.completions)
        return app

    @web.middleware
    async def auth(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        protected = self.api_key and not request.path.startswith(("/health", "/metrics"))
        if protected and request.headers.get("Authorization", "") != f"Bearer {self.api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        try:
            return await handler(request)
        except web.HTTPException as e:  # unknown route or method: FastAPI's JSON, as SGLang answers
            if e.status in (404, 405):
                return web.json_response({"detail": e.reason}, status=e.status)
            raise

    # --- read-only endpoints -----------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.sim.status == "Up" else 503)

    def internal_state(self) -> dict[str, Any]:
        s = self.sim
        state: dict[str, Any] = {
            "last_gen_throughput": s.last_gen_throughput,
            "memory_usage": {
                "weight": round(s.memory_split["weight"], 2),
                "kvcache": round(s.memory_split["kvcache"], 2),
                "token_capacity": s.max_total_num_tokens,
                "graph": round(s.memory_split["graph"], 2),
            },
        }
        if shapes.at_least(self.cfg.version, "0.5.9"):
            state["effective_max_running_requests_per_dp"] = s.max_running_requests
        if shapes.at_least(self.cfg.version, "0.5.23"):
            state["world_size"] = int(self.cfg.resolved.get("tp_size") or 1)
            state["startup_time"] = s.startup_time
        accept = s.avg_spec_accept_length
        if accept is not None:
            state["avg_spec_accept_length"] = accept
        return state

    async def server_info(self, request: web.Request) -> web.Response:
        s = self.sim
        info = shapes.server_info(
            version=self.cfg.version,
            resolved=self.cfg.resolved,
            launch_command=shlex.join(["python3", "-m", "sglang.launch_server", *redact(self.cfg.argv)]),
            max_total_num_tokens=s.max_total_num_tokens,
            context_length=self.cfg.profile.context_length,
            internal_state=self.internal_state(),
            startup_time=s.startup_time,
        )
        for d in (info, info["internal_states"][0]):  # never hand a key out
            for key in SECRET_DESTS:
                if d.get(key):
                    d[key] = "***"
        return web.json_response(info, dumps=lambda o: json.dumps(o, default=str))

    async def model_info(self, request: web.Request) -> web.Response:
        path = str(self.cfg.resolved.get("model_path"))
        tok = str(self.cfg.resolved.get("tokenizer_path") or path)
        return web.json_response(
            shapes.model_info(self.cfg.version, path, tok, self.cfg.profile.architecture, self.cfg.served_model_name)
        )

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            shapes.models_list(
                self.cfg.served_model_name,
                str(self.cfg.resolved.get("model_path")),
                self.cfg.profile.context_length,
                self.created,
            )
        )

    async def metrics(self, request: web.Request) -> web.Response:
        if self.sim.metrics is None:
            return web.json_response({"detail": "Not Found"}, status=404)  # not mounted without --enable-metrics
        body, content_type = self.sim.metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def flush_cache(self, request: web.Request) -> web.Response:
        if not self.sim.flush():
            return web.Response(
                status=400,
                text="Cache not flushed. Please check backend logs for more details. "
                "(When there are running or waiting requests, the operation will not be performed.)\n",
            )
        return web.Response(
            text="Cache flushed.\nPlease check backend logs for more details. "
            "(When there are running or waiting requests, the operation will not be performed.)\n"
        )

    async def get_load(self, request: web.Request) -> web.Response:
        s = self.sim
        return web.json_response(shapes.get_load(s.num_running, s.num_queued, s.used_tokens))

    async def v1_loads(self, request: web.Request) -> web.Response:
        s = self.sim
        accept = s.window_accept_length if self.cfg.speculative else None
        memory = {
            "weight_gb": round(s.memory_split["weight"], 2),
            "kv_cache_gb": round(s.memory_split["kvcache"], 2),
            "graph_gb": round(s.memory_split["graph"], 2),
            "token_capacity": s.max_total_num_tokens,
        }
        return web.json_response(
            shapes.v1_loads(
                version=self.cfg.version,
                running=s.num_running,
                waiting=s.num_queued,
                used_tokens=s.used_tokens,
                max_total_num_tokens=s.max_total_num_tokens,
                max_running_requests=s.max_running_requests,
                gen_throughput=s.last_gen_throughput,
                memory=memory,
                accept_length=accept,
                accept_rate=s.window_accept_rate if accept is not None else None,
                gpu_count=len(s.gpus),
            )
        )

    # --- generation --------------------------------------------------------------------------------

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _error(400, "The request body is not valid JSON.")
        if not isinstance(body, dict):
            return _error(400, "The request body must be a JSON object.")
        if self.sim.status == "Terminating":
            # Requests already running drain; new ones are turned away while the server shuts down.
            return _error(503, "The server is shutting down.", "ServiceUnavailableError")
        return body

    def _start(self, prompt_tokens: int, max_new: int, sampling: dict[str, Any]) -> Live:
        return self.sim.submit(
            prompt_tokens,
            max_new,
            float(sampling.get("temperature", 1.0) if sampling.get("temperature") is not None else 1.0),
            bool(sampling.get("ignore_eos", False)),
        )

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        sampling = dict(body.get("sampling_params") or {})
        if "input_ids" in body and body["input_ids"] is not None:
            ids = body["input_ids"]
            if ids and isinstance(ids[0], list):
                return await self._generate_batch(request, [len(x) for x in ids], sampling, body)
            prompt = len(ids)
        else:
            text = body.get("text")
            if isinstance(text, list):
                return await self._generate_batch(request, [self.sim.tokenizer.count(t) for t in text], sampling, body)
            if not isinstance(text, str):
                return _error(400, "Either text or input_ids should be provided.")
            prompt = self.sim.tokenizer.count(text)
        max_new_raw = sampling.get("max_new_tokens")
        max_new = int(max_new_raw) if max_new_raw is not None else 128  # SGLang's default
        sampling.setdefault("temperature", 1.0)
        req = self._start(prompt, max_new, sampling)
        rid = str(body.get("rid") or req.rid)
        if body.get("stream"):
            return await self._stream_generate(request, req, rid)
        try:
            await self._wait(req)
        finally:
            self.sim.live.pop(req.rid, None)
        return web.json_response(self._generate_result(req, rid))

    async def _generate_batch(
        self, request: web.Request, prompts: list[int], sampling: dict[str, Any], body: dict[str, Any]
    ) -> web.StreamResponse:
        max_new = int(sampling.get("max_new_tokens") or 128)  # SGLang's default
        reqs = [self._start(p, max_new, sampling) for p in prompts]
        if body.get("stream"):
            return await self._stream_batch(request, reqs)
        try:
            for req in reqs:
                await self._wait(req)
        finally:
            for req in reqs:
                self.sim.live.pop(req.rid, None)
        return web.json_response([self._generate_result(r, r.rid) for r in reqs])

    async def _stream_batch(self, request: web.Request, reqs: list[Live]) -> web.StreamResponse:
        """A batch on one stream (bench_one_batch_server): each chunk is one request's, with its "index"."""
        resp = await self._open_sse(request)
        ready: asyncio.Queue[int] = asyncio.Queue()

        async def forward(i: int, req: Live) -> None:
            while True:
                await req.queue.get()
                ready.put_nowait(i)
                if req.finish is not None:
                    return

        forwarders = [asyncio.create_task(forward(i, r)) for i, r in enumerate(reqs)]
        sent = [0] * len(reqs)
        done: set[int] = set()
        try:
            while len(done) < len(reqs):
                i = await ready.get()
                req = reqs[i]
                if i in done or (len(req.ids) == sent[i] and req.finish is None):
                    continue
                sent[i] = len(req.ids)
                final = req.finish is not None
                if final:
                    done.add(i)
                    self._observe_done(req)
                chunk = {
                    "text": self.sim.tokenizer.decode(req.ids),
                    "output_ids": req.ids,
                    "meta_info": self._meta(req, req.rid, final),
                    "index": i,
                }
                await resp.write(_sse(chunk))
            await resp.write(DONE)
        except (ConnectionResetError, asyncio.CancelledError):
            for req in reqs:
                self.sim.forget(req)
            raise
        finally:
            for task in forwarders:
                task.cancel()
            for req in reqs:
                self.sim.live.pop(req.rid, None)
        return resp

    async def _wait(self, req: Live) -> None:
        while req.finish is None:
            await req.queue.get()

    def _meta(self, req: Live, rid: str, final: bool) -> dict[str, Any]:
        return shapes.meta_info(
            version=self.cfg.version,
            rid=rid,
            finish=req.finish if final else None,
            prompt_tokens=req.prompt_tokens,
            completion_tokens=len(req.ids),
            spec=self.cfg.speculative,
            verify_ct=req.verify_ct,
            num_draft_tokens=self.sim.num_draft_tokens,
            e2e_latency=time.time() - req.started,
        )

    def _generate_result(self, req: Live, rid: str) -> dict[str, Any]:
        self._observe_done(req)
        return {
            "text": self.sim.tokenizer.decode(req.ids),
            "output_ids": req.ids,
            "meta_info": self._meta(req, rid, True),
        }

    def _observe_done(self, req: Live) -> None:
        if self.sim.metrics:
            ttft = (req.first_token_at or time.time()) - req.started
            self.sim.metrics.on_finish(len(req.ids), ttft, time.time() - req.started)

    async def _open_sse(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        return resp

    async def _stream_generate(self, request: web.Request, req: Live, rid: str) -> web.StreamResponse:
        resp = await self._open_sse(request)
        tok = self.sim.tokenizer
        text = ""
        ids_csv = ""
        sent = 0
        incremental = bool(
            self.cfg.resolved.get("stream_output") or self.cfg.resolved.get("incremental_streaming_output")
        )
        try:
            while True:
                await req.queue.get()
                while not req.queue.empty():
                    req.queue.get_nowait()
                new_ids = req.ids[sent:]
                words = " ".join(tok.token_text(i, True) for i in new_ids)
                piece = words if not text else " " + words
                text += piece
                new_csv = ",".join(map(str, new_ids))
                ids_csv = new_csv if not ids_csv else ids_csv + "," + new_csv
                sent = len(req.ids)
                final = req.finish is not None
                if final:
                    self._observe_done(req)
                # Cumulative text and ids grow with every chunk; they are appended to as strings instead of
                # re-encoding the whole list each time. Token texts are JSON-safe (letters and <unk>/<eos>).
                chunk = (
                    b'data: {"text":"'
                    + (piece if incremental else text).encode()
                    + b'","output_ids":['
                    + (new_csv if incremental else ids_csv).encode()
                    + b'],"meta_info":'
                    + json.dumps(self._meta(req, rid, final), separators=(",", ":")).encode()
                    + b"}\n\n"
                )
                await resp.write(chunk)
                if final:
                    break
            await resp.write(DONE)
        except (ConnectionResetError, asyncio.CancelledError):
            self.sim.forget(req)
            raise
        finally:
            self.sim.live.pop(req.rid, None)
        return resp

    def _openai_max_tokens(self, body: dict[str, Any], prompt: int) -> int:
        for key in ("max_completion_tokens", "max_tokens"):
            if body.get(key) is not None:
                return int(body[key])
        return max(1, self.cfg.profile.context_length - prompt)

    def _openai_sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"temperature": body.get("temperature", 1.0), "ignore_eos": body.get("ignore_eos", False)}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "messages must be a non-empty list.")
        prompt = self.sim.tokenizer.count(chat_prompt_text(messages))
        return await self._openai(request, body, prompt, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        p = body.get("prompt")
        if isinstance(p, list) and p and isinstance(p[0], int):
            prompt = len(p)
        elif isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
            prompt = self.sim.tokenizer.count(p[0])
        elif isinstance(p, str):
            prompt = self.sim.tokenizer.count(p)
        else:
            return _error(400, "prompt must be a string or a list of token ids.")
        return await self._openai(request, body, prompt, chat=False)

    async def _openai(self, request: web.Request, body: dict[str, Any], prompt: int, chat: bool) -> web.StreamResponse:
        req = self._start(prompt, self._openai_max_tokens(body, prompt), self._openai_sampling(body))
        model = str(body.get("model") or self.cfg.served_model_name)
        cid = uuid.uuid4().hex
        created = int(time.time())
        if body.get("stream"):
            options = body.get("stream_options") or {}
            include_usage = bool(options.get("include_usage")) or bool(
                self.cfg.resolved.get("stream_response_default_include_usage")
            )
            return await self._openai_stream(request, req, cid, created, model, chat, include_usage)
        try:
            await self._wait(req)
        finally:
            self.sim.live.pop(req.rid, None)
        self._observe_done(req)
        text = self.sim.tokenizer.decode(req.ids)
        finish = "length" if req.finish == "length" else "stop"
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": None},
                "logprobs": None,
                "finish_reason": finish,
                "matched_stop": None if finish == "length" else 1,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": None}
        return web.json_response(
            {
                "id": cid,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": shapes.usage(req.prompt_tokens, len(req.ids)),
                "metadata": {"weight_version": "default"},
            }
        )

    async def _openai_stream(
        self, request: web.Request, req: Live, cid: str, created: int, model: str, chat: bool, include_usage: bool
    ) -> web.StreamResponse:
        resp = await self._open_sse(request)
        tok = self.sim.tokenizer
        sent = 0
        try:
            if chat:
                await resp.write(
                    _sse(shapes.chat_chunk(cid, created, model, {"role": "assistant", "content": ""}, None))
                )
            while True:
                await req.queue.get()
                while not req.queue.empty():
                    req.queue.get_nowait()
                new_ids = req.ids[sent:]
                piece = "".join(tok.token_text(i, first=(sent == 0 and k == 0)) for k, i in enumerate(new_ids))
                sent = len(req.ids)
                if new_ids:
                    if chat:
                        chunk = shapes.chat_chunk(cid, created, model, {"role": None, "content": piece}, None)
                    else:
                        chunk = shapes.completion_chunk(cid, created, model, piece, None)
                    await resp.write(_sse(chunk))
                if req.finish is not None:
                    break
            self._observe_done(req)
            finish = "length" if req.finish == "length" else "stop"
            if chat:
                await resp.write(_sse(shapes.chat_chunk(cid, created, model, {}, finish)))
            else:
                await resp.write(_sse(shapes.completion_chunk(cid, created, model, "", finish)))
            if include_usage:
                usage_chunk: dict[str, Any] = {
                    "id": cid,
                    "object": "chat.completion.chunk" if chat else "text_completion",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": shapes.usage(req.prompt_tokens, len(req.ids)),
                }
                await resp.write(_sse(usage_chunk))
            await resp.write(DONE)
        except (ConnectionResetError, asyncio.CancelledError):
            self.sim.forget(req)
            raise
        finally:
            self.sim.live.pop(req.rid, None)
        return resp


# --- the whole server's life -----------------------------------------------------------------------


async def serve(config: SimConfig, engine: Any, bound: asyncio.Event | None = None) -> int:
    """Start like SGLang, serve until SIGTERM/SIGINT, drain, exit 0."""
    sim = SimServer(config, engine)
    tasks = [asyncio.create_task(sim.drive(), name="engine"), asyncio.create_task(sim.publish_gpus(), name="gpus")]
    await sim.start_scheduler()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    api = Api(sim)
    runner = web.AppRunner(api.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, reuse_address=True)
    await site.start()
    for message in L.uvicorn_lines(os.getpid(), config.host, config.port):
        config.log(L.line(message))
    if bound is not None:
        bound.set()
    if not config.resolved.get("skip_server_warmup"):
        warm = asyncio.create_task(sim.warm_up())
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait({warm, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    else:
        sim.status = "Up"
        sim.startup_time = time.time() - sim.started_at
        config.log(L.line(L.READY))
    await stop.wait()

    # SGLang: health turns 503, requests drain, then the process tree goes.
    sim.status = "Terminating"
    config.log(L.line(f"Gracefully exiting... Remaining number of requests {len(sim.live)}."))
    while sim.live:
        await asyncio.sleep(0.05)
    await runner.cleanup()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    _mark_gpus_idle(sim)
    return 0


def _mark_gpus_idle(sim: SimServer) -> None:
    try:
        directory = gpu_model.state_dir(sim.config.state_dir)
        path = directory / gpu_model.STATE_FILE
        if path.exists():
            path.unlink()
    except OSError:
        pass
