"""The stand-in's HTTP API: SGLang's routes and JSON/SSE shapes over a running SimServer.

Route set and shapes follow the emulated version (console.sim.shapes). `--api-key` guards every route
except /health* and /metrics, with SGLang's 401 body; unknown routes answer FastAPI's JSON 404.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from aiohttp import web

from console.secrets import redact_argv
from console.sim import shapes
from console.sim.content import Task, classify_prompt
from console.sim.pd import Bootstrap, bootstrap_of
from console.sim.server import Live, SimServer
from console.sim.tokenizer import EOS_ID, UNK_ID, chat_prompt_text, pieces

SECRET_DESTS = ("api_key", "admin_api_key")
# Old routes 0.5.17 still serves, logging that they are deprecated (measured).
DEPRECATED_ALIASES = {"/get_server_info": "/server_info", "/get_model_info": "/model_info", "/get_load": "/v1/loads"}
SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"  # starlette adds the charset to SGLang's media type


def _env_true(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    return default if raw is None else raw.strip().lower() in ("true", "1", "yes", "y")


def _sse(payload: dict[str, Any] | list[Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def _error(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    return web.json_response(
        {"object": "error", "message": message, "type": kind, "param": None, "code": status}, status=status
    )


def _finish_name(finish: str | None) -> str:
    return "length" if finish == "length" else "stop"


# A prompt of token ids is chat to the stand-in's acceptance: they are another tokenizer's, which it cannot read.
IDS_TASK = Task.CHAT


class BadParameter(ValueError):
    """A request parameter of the wrong type: answered 400 with the message."""


class Aborted(Exception):
    """The request ended with SGLang's abort (a PD room that failed, console.sim.pd): (status, message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _number(value: Any, name: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise BadParameter(f"{name} must be a number, got {value!r}.") from None


class Api:
    def __init__(self, sim: SimServer) -> None:
        self.sim = sim
        self.cfg = sim.config
        self.api_key = self.cfg.resolved.get("api_key")
        self.created = int(time.time())
        # SGLang's /health generates unless this is turned off; /health_generate always does.
        self.health_generates = _env_true("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", True)
        self.health_timeout_s = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT") or 20)
        self._v0523 = shapes.at_least(self.cfg.version, "0.5.23")

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.auth], client_max_size=64 * 1024**2)
        if self.sim.access_on:
            app.on_response_prepare.append(self.access_log)
        r = app.router
        for path in ("/health", "/health_generate"):
            r.add_get(path, self.health)
        for path in ("/server_info", "/get_server_info"):
            r.add_get(path, self.server_info)
        for path in ("/model_info", "/get_model_info"):
            r.add_get(path, self.model_info)
        r.add_get("/v1/models", self.models)
        if shapes.has_ready(self.cfg.version):
            r.add_get("/ready", self.ready)
        r.add_get("/metrics", self.metrics)
        r.add_route("*", "/flush_cache", self.flush_cache)
        if shapes.has_get_load(self.cfg.version):
            r.add_get("/get_load", self.get_load)
        if shapes.has_v1_loads(self.cfg.version):
            r.add_get("/v1/loads", self.v1_loads)
        if shapes.has_tokenize(self.cfg.version):
            for path in ("/tokenize", "/v1/tokenize"):
                r.add_post(path, self.tokenize)
            for path in ("/detokenize", "/v1/detokenize"):
                r.add_post(path, self.detokenize)
        r.add_post("/generate", self.generate)
        r.add_post("/v1/chat/completions", self.chat)
        r.add_post("/v1/completions", self.completions)
        return app

    async def access_log(self, request: web.BaseRequest, response: web.StreamResponse) -> None:
        """uvicorn logs a request when its response starts (its headers go out): after the work of a plain
        response, before the first event of a stream."""
        transport = request.transport
        peername = transport.get_extra_info("peername") if transport is not None else None
        peer = f"{peername[0]}:{peername[1]}" if peername else ""
        version = request.version
        self.sim.log_access(peer, request.method, request.raw_path, response.status, f"{version.major}.{version.minor}")

    @web.middleware
    async def auth(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        response = await self._handle(request, handler)
        if self.sim.metrics is not None:
            self.sim.metrics.on_http(request.method, request.path, response.status)
        return response

    async def _handle(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        protected = self.api_key and not request.path.startswith(("/health", "/metrics"))
        if protected and request.headers.get("Authorization", "") != f"Bearer {self.api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        new_name = DEPRECATED_ALIASES.get(request.path)
        if new_name and shapes.detailed(self.cfg.version):
            self.sim.log(
                f"Endpoint '{request.path}' is deprecated and will be removed in a future version. "
                f"Please use '{new_name}' instead.",
                rank="",
            )
        try:
            return await handler(request)
        except BadParameter as e:
            if shapes.detailed(self.cfg.version):
                return self._http_server_error(str(e))
            return _error(400, str(e))
        except Aborted as e:
            # OpenAI routes answer their error object; /generate a FastAPI HTTPException (400: a ValueError's body).
            if request.path.startswith("/v1/"):
                return _error(e.status, e.message, "InternalServerError" if e.status >= 500 else "BadRequestError")
            if e.status == 400:
                return web.json_response({"error": {"message": e.message}}, status=400)
            return web.json_response({"detail": e.message}, status=e.status)
        except web.HTTPException as e:  # unknown route or method: FastAPI's JSON, as SGLang answers
            if e.status in (404, 405):
                return web.json_response({"detail": e.reason}, status=e.status)
            raise

    def _http_server_error(self, message: str) -> web.Response:
        """0.5.17's native endpoints: 400 {"error": {"message": ...}} and the http_server's log line (measured)."""
        self.sim.log(f"[http_server] Error: {message}", rank="")
        return web.json_response({"error": {"message": message}}, status=400)

    # --- read-only endpoints -----------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        if self.sim.status == "Terminating" and (shapes.detailed(self.cfg.version) or self._v0523):
            self.sim.log("Health check request received during shutdown. Returning 503.", rank="")
            return web.Response(status=503)
        if self.sim.status != "Up":
            return web.Response(status=503)
        if request.path == "/health" and not self.health_generates:
            return web.Response(status=200)
        # 0.5.17 looks for the probe's output once a second, so /health takes about 1 s (measured 1.003 s).
        every = 1.0 if shapes.detailed(self.cfg.version) else None
        return web.Response(status=200 if await self.sim.probe(self.health_timeout_s, poll_s=every) else 503)

    async def ready(self, request: web.Request) -> web.Response:
        """0.5.23's /ready: 200 while the server takes new requests (up, not paused, not shutting down), else 503;
        it generates nothing [http_server.py:714-718]."""
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
            # the scheduler's own phases (the tokenizer's e2e is the top level's alone) [scheduler.py:745-759]
            state["startup_time"] = {k: v for k, v in s.startup_breakdown.items() if k != "tokenizer_e2e"}
            if self.cfg.resolved.get("speculative_adaptive") and self.cfg.speculative:
                # the scheduler's overrides overlaid: the active tier, not the launch config [internal_state.py:45-63]
                state["speculative_num_steps"] = s.active_steps
                state["speculative_num_draft_tokens"] = s.active_steps + 1
        accept = s.avg_spec_accept_length
        if accept is not None:
            state["avg_spec_accept_length"] = accept
        return state

    async def server_info(self, request: web.Request) -> web.Response:
        s = self.sim
        if s.fields is not None:
            state = self.internal_state()
            state["memory_usage"] = s.memory_usage_0517()
            info = shapes.server_info_detailed(
                version=self.cfg.version,
                fields=s.fields,
                resolved=self.cfg.resolved,
                filled=s.filled,
                max_total_num_tokens=s.max_total_num_tokens,
                context_length=self.cfg.context_length,
                internal_state=state,
                startup_time=s.startup_breakdown,
            )
            return self._secret_free(info)
        info = shapes.server_info(
            version=self.cfg.version,
            resolved=self.cfg.resolved,
            launch_command=shlex.join(["python3", "-m", "sglang.launch_server", *redact_argv(self.cfg.argv)]),
            max_total_num_tokens=s.max_total_num_tokens,
            context_length=self.cfg.context_length,
            internal_state=self.internal_state(),
            startup_time=s.startup_breakdown if shapes.at_least(self.cfg.version, "0.5.23") else s.startup_time,
        )
        return self._secret_free(info)

    def _secret_free(self, info: dict[str, Any]) -> web.Response:
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
                self.cfg.context_length,
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
        return web.json_response(shapes.get_load(self.cfg.version, s.num_running, s.num_queued, s.used_tokens))

    async def v1_loads(self, request: web.Request) -> web.Response:
        s = self.sim
        accept = s.window_accept_length if self.cfg.speculative else None
        memory = {
            "weight_gb": round(s.memory_split["weight"], 2),
            "kv_cache_gb": round(s.memory_split["kvcache"], 2),
            "graph_gb": round(s.memory_split["graph"], 2),
            "token_capacity": s.max_total_num_tokens,
        }
        loads = shapes.v1_loads(
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
            accelerator=s.gpus[0].name if s.gpus else "cuda",
        )
        if s.disagg is not None:  # a PD server's queues and transfers (LoadSnapshot.disaggregation)
            for load in loads["loads"]:
                load["disaggregation"] = s.disagg.loads_section()
        return web.json_response(loads)

    # --- generation --------------------------------------------------------------------------------

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _error(400, "The request body is not valid JSON.")
        if not isinstance(body, dict):
            return _error(400, "The request body must be a JSON object.")
        if self.sim.status == "Terminating" and not shapes.detailed(self.cfg.version):
            # Requests already running drain; new ones are turned away while the server shuts down (0.5.17 takes
            # them: its drain waits for them too).
            return _error(503, "The server is shutting down.", "ServiceUnavailableError")
        return body

    def _start(
        self,
        prompt_tokens: int,
        max_new: int,
        sampling: dict[str, Any],
        stream: bool,
        task: Task = Task.CHAT,
        prompt: Sequence[Hashable] | None = None,
        bootstrap: Bootstrap | None = None,
    ) -> Live:
        temperature = sampling.get("temperature")
        # SGLang: a request's own sampling_params.stream_interval, else --stream-interval.
        interval = _number(sampling.get("stream_interval") or self.sim.stream_interval, "stream_interval", int)
        return self.sim.submit(
            prompt_tokens,
            max_new,
            1.0 if temperature is None else _number(temperature, "temperature", float),
            bool(sampling.get("ignore_eos", False)),
            stream_interval=max(1, interval) if stream else None,
            task=task,
            prompt=prompt,
            bootstrap=bootstrap or Bootstrap(),  # a client's request: the PD role reads what it carried
        )

    def _max_new_tokens(self, sampling: dict[str, Any]) -> int:
        value = sampling.get("max_new_tokens")
        count = 128 if value is None else _number(value, "max_new_tokens", int)  # 128: SGLang's default
        if count < 0 and shapes.detailed(self.cfg.version):
            raise BadParameter(f"max_new_tokens must be at least 0, got {count}.")  # 0.5.17's text (measured)
        return int(count)

    async def _json_only(self, request: web.Request) -> dict[str, Any] | web.Response:
        """SGLang's OpenAI-style routes first check the media type (validate_json_request), then parse the body."""
        media = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            return _error(400, "Unsupported Media Type: Only 'application/json' is allowed", "Bad Request")
        return await self._body(request)

    async def tokenize(self, request: web.Request) -> web.StreamResponse:
        """SGLang's /tokenize (serving_tokenize.py, 0.5.4 on): `prompt` a string or a list of strings (0.5.12 on:
        or chat `messages`, the template applied), `add_special_tokens` (default true; the stand-in has none) ->
        {"tokens", "count", "max_model_len"}, a list of each for a list of prompts."""
        body = await self._json_only(request)
        if isinstance(body, web.Response):
            return body
        prompt, messages = body.get("prompt"), body.get("messages")
        if shapes.tokenize_takes_messages(self.cfg.version):
            if (prompt is None) == (messages is None):
                return _error(400, "Value error, Exactly one of 'prompt' or 'messages' must be provided.")
        elif prompt is None:
            return _error(400, "[{'type': 'missing', 'loc': ('body', 'prompt'), 'msg': 'Field required'}]")
        tok = self.sim.tokenizer
        max_len = self.cfg.context_length
        if messages is not None:
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                return _error(400, "messages must be a list of chat messages.")
            ids = tok.encode(chat_prompt_text(messages))
            return web.json_response({"tokens": ids, "count": len(ids), "max_model_len": max_len})
        if isinstance(prompt, str):
            ids = tok.encode(prompt)
            return web.json_response({"tokens": ids, "count": len(ids), "max_model_len": max_len})
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            lists = [tok.encode(p) for p in prompt]
            return web.json_response({"tokens": lists, "count": [len(ids) for ids in lists], "max_model_len": max_len})
        return _error(400, f"Invalid prompt type: {type(prompt)}. Expected str or List[str].")

    async def detokenize(self, request: web.Request) -> web.StreamResponse:
        """SGLang's /detokenize: `tokens` a list of ids or of id lists -> {"text"}, special tokens skipped unless
        `skip_special_tokens` is false."""
        body = await self._json_only(request)
        if isinstance(body, web.Response):
            return body
        tokens = body.get("tokens")
        skip = body.get("skip_special_tokens", True) is not False

        def text(ids: list[Any]) -> str:
            kept = [int(t) for t in ids if not (skip and t in (UNK_ID, EOS_ID))]
            return self.sim.tokenizer.decode(kept)

        if isinstance(tokens, list) and not tokens:
            return web.json_response({"text": ""})
        if isinstance(tokens, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            return web.json_response({"text": text(tokens)})
        if isinstance(tokens, list) and all(isinstance(t, list) for t in tokens):
            if not all(isinstance(t, int) for ids in tokens for t in ids):
                return _error(400, "Invalid input: Sublist in 'tokens' must contain only integers.")
            return web.json_response({"text": [text(ids) for ids in tokens]})
        return _error(400, f"Invalid tokens type: {type(tokens)}. Expected List[int] or List[List[int]].")

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        sampling = dict(body.get("sampling_params") or {})
        if "input_ids" in body and body["input_ids"] is not None:
            ids = body["input_ids"]
            if ids and isinstance(ids[0], list):
                return await self._generate_batch(request, [(len(x), IDS_TASK) for x in ids], sampling, body)
            prompt, task = len(ids), IDS_TASK
            tokens: Sequence[Hashable] = ids
        else:
            text = body.get("text")
            if isinstance(text, list):
                prompts = [(self.sim.tokenizer.count(t), classify_prompt(t)) for t in text]
                return await self._generate_batch(request, prompts, sampling, body)
            if not isinstance(text, str):
                return _error(400, "Either text or input_ids should be provided.")
            prompt, task = self.sim.tokenizer.count(text), classify_prompt(text)
            tokens = pieces(text)  # the stand-in's tokens as strings (console.sim.tokenizer)
        stream = bool(body.get("stream"))
        req = self._start(prompt, self._max_new_tokens(sampling), sampling, stream, task, tokens, bootstrap_of(body))
        rid = str(body.get("rid") or req.rid)
        if stream:
            return await self._stream_generate(request, req, rid)
        try:
            await self._wait(req)
        finally:
            self.sim.live.pop(req.rid, None)
        return web.json_response(self._generate_result(req, rid))

    async def _generate_batch(
        self, request: web.Request, prompts: list[tuple[int, Task]], sampling: dict[str, Any], body: dict[str, Any]
    ) -> web.StreamResponse:
        stream = bool(body.get("stream"))
        max_new = self._max_new_tokens(sampling)
        reqs = [
            self._start(p, max_new, sampling, stream, task, bootstrap=bootstrap_of(body, i))
            for i, (p, task) in enumerate(prompts)
        ]
        if stream:
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
                    "meta_info": self._meta(req, req.rid, final, streaming=True),
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
        if req.abort is not None:
            raise Aborted(*req.abort)

    def _meta(self, req: Live, rid: str, final: bool, streaming: bool = False) -> dict[str, Any]:
        meta = self._meta_info(req, rid, final, streaming)
        if final and req.abort is not None:  # FINISH_ABORT as a stream's last chunk carries it
            status, message = req.abort
            meta["finish_reason"] = {"type": "abort", "message": message, "status_code": status}
        return meta

    def _meta_info(self, req: Live, rid: str, final: bool, streaming: bool) -> dict[str, Any]:
        return shapes.meta_info(
            version=self.cfg.version,
            rid=rid,
            finish=req.finish if final else None,
            prompt_tokens=req.prompt_tokens,
            completion_tokens=len(req.ids),
            cached_tokens=req.cached_tokens,
            spec=self.cfg.speculative,
            verify_ct=req.verify_ct,
            accept_histogram=req.accept_histogram,
            num_draft_tokens=self.sim.num_draft_tokens,
            e2e_latency=time.time() - req.started,
            started=req.started,
            first_token_at=req.first_token_at,
            streaming=streaming,
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
            streaming = req.stream_interval is not None
            verify_ct = req.verify_ct if self.cfg.speculative else 0
            self.sim.metrics.on_finish(len(req.ids), ttft, time.time() - req.started, streaming, verify_ct)

    async def _open_sse(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": SSE_CONTENT_TYPE, "Cache-Control": "no-cache"})
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
                    + json.dumps(self._meta(req, rid, final, streaming=True), separators=(",", ":")).encode()
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
                return _number(body[key], key, int)
        return max(1, self.cfg.context_length - prompt)

    def _openai_sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"temperature": body.get("temperature", 1.0), "ignore_eos": body.get("ignore_eos", False)}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "messages must be a non-empty list.")
        text = chat_prompt_text(messages)
        return await self._openai(
            request,
            body,
            self.sim.tokenizer.count(text),
            chat=True,
            task=classify_prompt(text),
            tokens=pieces(text),
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        p = body.get("prompt")
        tokens: Sequence[Hashable]
        if isinstance(p, list) and p and isinstance(p[0], int):
            prompt, task, tokens = len(p), IDS_TASK, p
        elif isinstance(p, list) and len(p) == 1 and isinstance(p[0], str):
            prompt, task, tokens = self.sim.tokenizer.count(p[0]), classify_prompt(p[0]), pieces(p[0])
        elif isinstance(p, str):
            prompt, task, tokens = self.sim.tokenizer.count(p), classify_prompt(p), pieces(p)
        else:
            return _error(400, "prompt must be a string or a list of token ids.")
        return await self._openai(request, body, prompt, chat=False, task=task, tokens=tokens)

    async def _openai(
        self,
        request: web.Request,
        body: dict[str, Any],
        prompt: int,
        chat: bool,
        task: Task = Task.CHAT,
        tokens: Sequence[Hashable] | None = None,
    ) -> web.StreamResponse:
        stream = bool(body.get("stream"))
        sampling = self._openai_sampling(body)
        max_new = self._openai_max_tokens(body, prompt)
        req = self._start(prompt, max_new, sampling, stream, task, tokens, bootstrap_of(body))
        model = str(body.get("model") or self.cfg.served_model_name)
        cid = uuid.uuid4().hex
        created = int(time.time())
        if stream:
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
        version = self.cfg.version
        # 0.5.17 puts a completion's finish_reason on its last token's chunk; a chat ends with its own chunk.
        finish_on_last = shapes.detailed(version) and not chat
        sent = 0
        finish_sent = False
        try:
            if chat:
                opener = shapes.chat_chunk(
                    cid, created, model, shapes.chat_delta(version, first=True), None, version=version
                )
                await resp.write(_sse(opener))
            while True:
                await req.queue.get()
                while not req.queue.empty():
                    req.queue.get_nowait()
                new_ids = req.ids[sent:]
                piece = "".join(tok.token_text(i, first=(sent == 0 and k == 0)) for k, i in enumerate(new_ids))
                sent = len(req.ids)
                last = req.finish is not None
                if new_ids:
                    if chat:
                        delta = shapes.chat_delta(version, content=piece)
                        chunk = shapes.chat_chunk(cid, created, model, delta, None, version=version)
                    else:
                        ends = _finish_name(req.finish) if last and finish_on_last else None
                        finish_sent = ends is not None
                        chunk = shapes.completion_chunk(cid, created, model, piece, ends)
                    await resp.write(_sse(chunk))
                if last:
                    break
            if req.abort is not None:  # an OpenAI stream ends with the error object, then [DONE]
                status, message = req.abort
                await resp.write(_sse({"error": {"message": message, "type": "InternalServerError", "code": status}}))
                await resp.write(DONE)
                return resp
            self._observe_done(req)
            finish = _finish_name(req.finish)
            if chat:
                closer = shapes.chat_chunk(cid, created, model, shapes.chat_delta(version), finish, version=version)
                await resp.write(_sse(closer))
            elif not finish_sent:
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
