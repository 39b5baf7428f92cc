"""A test server whose emission schedule is known exactly, in SGLang's /generate and chat SSE shapes.

Every streamed request gets its first chunk `ttft_ms` after it arrives, then one chunk every `interval_ms`,
each chunk carrying `tokens_per_chunk` tokens, until `max_new_tokens` / `max_completion_tokens` tokens were
sent (ignore_eos semantics). Chunk i is due at arrival + ttft + i × interval (absolute times, so timer jitter
does not accumulate). With `--spec`, the final meta_info reports spec_verify_ct = number of chunks, like a
speculative server accepting `tokens_per_chunk` tokens per verify step.

`--interval-ms 0` emits as fast as the server can (for the client-speed benchmark). `--cold-requests N --cold-factor F`
is a server just started: its first N requests stream F times slower (the warm-up tests).

Run: python -m tests.bench.schedule_server --port 0 [--ttft-ms 50 --interval-ms 20 --tokens-per-chunk 2]
Prints `LISTENING <port>` on stdout once it accepts connections. GET /in_flight says how many streamed answers
are being sent (a client that went away ends its own) and, in `peaks_at_flush`, the most that were sent at once before
each /flush_cache (what a level's warm-up sent together: the engine flushes after it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

from aiohttp import web

MODEL = "schedule-test-model"
FAST_BATCH = 16


class Schedule:
    def __init__(
        self,
        ttft_ms: float,
        interval_ms: float,
        tokens_per_chunk: int,
        spec: bool,
        fail_every: int = 0,
        events_per_write: int = FAST_BATCH,
        cold_requests: int = 0,
        cold_factor: float = 1.0,
    ) -> None:
        self.cold_requests = cold_requests
        self.cold_factor = cold_factor
        self.events_per_write = events_per_write
        self.fail_every = fail_every  # every k-th request answers HTTP 500 (guard-rail tests); 0: never
        self.ttft = ttft_ms / 1000.0
        self.interval = interval_ms / 1000.0
        self.per_chunk = tokens_per_chunk
        self.spec = spec

    def chunk_sizes(self, total: int) -> list[int]:
        sizes = [self.per_chunk] * (total // self.per_chunk)
        if total % self.per_chunk:
            sizes.append(total % self.per_chunk)
        return sizes


# streamed answers being sent now (GET /in_flight): a client that went away ends its own; the most at once since the
# last flush, and at each flush
IN_FLIGHT: dict[str, Any] = {"streams": 0, "peak": 0, "peaks_at_flush": []}


async def _emit(
    request: web.Request, schedule: Schedule, events: Any, interval: float | None = None
) -> web.StreamResponse:
    """Send the events (an iterator of bytes, one per chunk) on the schedule, then [DONE]."""
    IN_FLIGHT["streams"] += 1
    IN_FLIGHT["peak"] = max(IN_FLIGHT["peak"], IN_FLIGHT["streams"])
    try:
        return await _emit_counted(request, schedule, events, schedule.interval if interval is None else interval)
    finally:
        IN_FLIGHT["streams"] -= 1


async def _emit_counted(request: web.Request, schedule: Schedule, events: Any, interval: float) -> web.StreamResponse:
    arrived = time.perf_counter()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    if schedule.interval <= 0:
        # As fast as possible: after the first token, events leave in batches of events_per_write, so
        # that the server is not what limits a client-speed measurement. Each event stays its own SSE event.
        events = iter(events)
        first = next(events, None)
        rest = list(events)
        events = ([first] if first is not None else []) + [
            b"".join(rest[i : i + schedule.events_per_write]) for i in range(0, len(rest), schedule.events_per_write)
        ]
    for i, event in enumerate(events):
        if interval > 0 or i == 0:
            delay = arrived + schedule.ttft + i * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        await resp.write(event)
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def _generate_events(schedule: Schedule, prompt_tokens: int, total: int, rid: str) -> Any:
    sizes = schedule.chunk_sizes(total)
    sent = 0
    text = ""
    for n, size in enumerate(sizes):
        sent += size
        text += " tok" * size
        meta: dict[str, Any] = {
            "id": rid,
            "finish_reason": None,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": sent,
            "cached_tokens": 0,
        }
        if n == len(sizes) - 1:
            meta["finish_reason"] = {"type": "length", "length": total}
            if schedule.spec:
                meta["spec_verify_ct"] = len(sizes)
                meta["spec_accept_length"] = total / len(sizes)
        chunk = {"text": text, "output_ids": list(range(sent - size, sent)), "meta_info": meta}
        yield b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _chat_events(
    schedule: Schedule, prompt_tokens: int, total: int, rid: str, continuous: bool, include_usage: bool
) -> Any:
    sizes = schedule.chunk_sizes(total)
    base = {"id": rid, "object": "chat.completion.chunk", "created": 0, "model": MODEL}
    sent = 0
    for n, size in enumerate(sizes):
        sent += size
        delta: dict[str, Any] = {"content": " tok" * size}
        if n == 0:
            delta["role"] = "assistant"
        last = n == len(sizes) - 1
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": "length" if last else None}
        chunk: dict[str, Any] = {**base, "choices": [choice], "usage": None}
        if continuous:
            chunk["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": sent, "total_tokens": 0}
        payload = b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
        if last and include_usage:  # the include_usage chunk goes out with the last content chunk
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": total, "total_tokens": prompt_tokens + total}
            payload += b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n"
        yield payload


def build_app(schedule: Schedule) -> web.Application:
    counter = {"n": 0}

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        params = body.get("sampling_params") or {}
        total = int(params.get("max_new_tokens", 16))
        prompt = len(body["input_ids"]) if "input_ids" in body else len(str(body.get("text", "")).split())
        counter["n"] += 1
        if schedule.fail_every and counter["n"] % schedule.fail_every == 0:
            return web.json_response({"error": {"message": "injected failure"}}, status=500)
        cold = counter["n"] <= schedule.cold_requests
        interval = schedule.interval * (schedule.cold_factor if cold else 1.0)
        return await _emit(request, schedule, _generate_events(schedule, prompt, total, f"r{counter['n']}"), interval)

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        total = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        options = body.get("stream_options") or {}
        continuous = bool(options.get("continuous_usage_stats"))
        include_usage = bool(options.get("include_usage"))
        counter["n"] += 1
        if schedule.fail_every and counter["n"] % schedule.fail_every == 0:
            return web.json_response({"error": {"message": "injected failure"}}, status=500)
        rid = f"c{counter['n']}"
        return await _emit(request, schedule, _chat_events(schedule, prompt, total, rid, continuous, include_usage))

    async def server_info(_request: web.Request) -> web.Response:
        info = {"model_path": MODEL, "version": "0.5.9", "speculative_algorithm": "EAGLE" if schedule.spec else None}
        info["internal_states"] = [{"avg_spec_accept_length": float(schedule.per_chunk) if schedule.spec else None}]
        return web.json_response(info)

    async def models(_request: web.Request) -> web.Response:
        card = {"id": MODEL, "object": "model", "created": 0, "owned_by": "sglang", "root": MODEL}
        return web.json_response({"object": "list", "data": [card]})

    async def flush(_request: web.Request) -> web.Response:
        IN_FLIGHT["peaks_at_flush"].append(IN_FLIGHT["peak"])
        IN_FLIGHT["peak"] = IN_FLIGHT["streams"]
        return web.Response(text="Cache flushed.\n")

    async def health(_request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/generate", generate)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/server_info", server_info)
    app.router.add_get("/get_server_info", server_info)
    app.router.add_get("/model_info", lambda _r: web.json_response({"model_path": MODEL}))  # type: ignore[arg-type,return-value]
    app.router.add_get("/v1/models", models)
    app.router.add_route("*", "/flush_cache", flush)
    app.router.add_get("/health", health)
    app.router.add_get("/in_flight", lambda _r: web.json_response(IN_FLIGHT))  # type: ignore[arg-type,return-value]
    return app


async def _serve(args: argparse.Namespace) -> None:
    schedule = Schedule(
        args.ttft_ms, args.interval_ms, args.tokens_per_chunk, args.spec, args.fail_every, args.events_per_write,
        args.cold_requests, args.cold_factor,
    )  # fmt: skip
    runner = web.AppRunner(build_app(schedule), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=4096)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"LISTENING {port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--ttft-ms", type=float, default=50.0)
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--spec", action="store_true", help="report spec_verify_ct like a speculative server")
    parser.add_argument("--fail-every", type=int, default=0, help="every k-th request fails with HTTP 500")
    parser.add_argument("--events-per-write", type=int, default=FAST_BATCH, help="with --interval-ms 0")
    parser.add_argument("--cold-requests", type=int, default=0, help="the first N requests stream --cold-factor slower")
    parser.add_argument("--cold-factor", type=float, default=1.0)
    parser.add_argument("--cpu", type=int, help="pin the server to this CPU core")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
