"""The SGLang stand-in's runtime: the startup sequence, the engine driven in real time, the simulated GPUs.

The performance model (console.sim.engine.Engine) is a pure discrete-event core; this module runs it
against the wall clock. Each step is scheduled at an absolute deadline (previous deadline + the step's
duration) so that long runs do not drift, and the tokens a request got in a step go out as one SSE
chunk, exactly as a speculative server sends one chunk per verify round (with --stream-interval N > 1,
only on the steps SGLang's rule picks: `should_send`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.sglang.flags import server_fields
from console.sim import gpus as gpu_model
from console.sim import multinode, pd, shapes
from console.sim import sglang_log as L
from console.sim.content import Task
from console.sim.metrics import SimMetrics, metrics_for
from console.sim.prefix_cache import PrefixCache
from console.sim.startup_0523 import start_scheduler_0523
from console.sim.tokenizer import SimTokenizer, output_token_ids, write_model_dir

# SGLang hands a request that does not stream its progress every this many tokens anyway.
DEFAULT_FORCE_STREAM_INTERVAL = 50


def should_send(generated: int, stream_interval: int | None) -> bool:
    """SGLang's scheduler rule for an unfinished request: do this step's tokens go out now? A streaming request
    sends every `stream_interval` tokens, its first token at once (len % N == 1 for N > 1); a non-streaming one
    (None) every DEFAULT_FORCE_STREAM_INTERVAL. A finished request always sends. With speculation several tokens
    arrive per step, so a step can jump over the boundary and send nothing, as SGLang does."""
    if stream_interval is None:
        return generated % DEFAULT_FORCE_STREAM_INTERVAL == 0
    return generated % stream_interval == 1 if stream_interval > 1 else True


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
    dcgm_port: int | None = None  # where dcgm-exporter's /metrics of the simulated GPUs is served (None: nowhere)
    adaptive_config: str | None = None  # the text of --speculative-adaptive-config's file (None: SGLang's default)
    # Multi-node: how long a rank lives on after a peer died (its next collective; console.sim.multinode).
    peer_loss_exit_s: float = 2.0
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

    @property
    def context_length(self) -> int:
        """--context-length when given, else the model's (as SGLang takes it from config.json)."""
        value = self.resolved.get("context_length")
        return int(value) if value else int(self.profile.context_length)


@dataclass
class Live:
    """One request in flight."""

    rid: str
    prompt_tokens: int
    max_new_tokens: int
    seed: int
    started: float
    stream_interval: int | None = None  # tokens per streamed chunk; None: not streaming
    log_metrics: bool = True  # False for the health probe, as SGLang's
    queue: asyncio.Queue[int] = field(default_factory=asyncio.Queue)
    ids: list[int] = field(default_factory=list)
    verify_ct: int = 0
    # verify rounds by drafts accepted (index), SGLang's spec_accept_histogram: as long as the most seen + 1
    accept_histogram: list[int] = field(default_factory=list)
    cached_tokens: int = 0  # the prompt's leading tokens found in the prefix cache
    finish: str | None = None
    first_token_at: float | None = None
    # Ended with an error instead of tokens ("abort"): (HTTP status, SGLang's message); PD rooms that failed.
    abort: tuple[int, str] | None = None
    temperature: float = 0.0
    ignore_eos: bool = False
    task: Task = Task.CHAT


class SimServer:
    def __init__(self, config: SimConfig, engine: Any) -> None:
        self.config = config
        self.engine = engine
        self.tokenizer = SimTokenizer()
        self.live: dict[str, Live] = {}
        self.status = "Starting"  # -> "Up" after warm-up, "Terminating" after SIGTERM
        self.memory_used_mib = 0
        self.memory_split: dict[str, float] = {"weight": 0.0, "kvcache": 0.0, "graph": 0.0}
        self._wake = asyncio.Event()
        self._output = asyncio.Event()  # set (and replaced) whenever a step sends output to any request
        self.last_gen_throughput = 0.0
        # Lifetime (since last flush) acceptance, refreshed only when a decode log line is emitted, as SGLang does.
        self.avg_spec_accept_length: float | None = None
        self.window_accept_length: float | None = None
        self.window_accept_rate: float | None = None
        self.metrics: SimMetrics | None = None
        # PD disaggregation (console.sim.pd): None unless --disaggregation-mode is prefill or decode.
        pd_spec = pd.PdSpec.from_resolved(config.resolved)
        if config.resolved.get("enable_metrics"):
            self.metrics = metrics_for(
                config.version,
                config.served_model_name,
                collect_tokens_histogram=bool(config.resolved.get("collect_tokens_histogram")),
                engine_type=pd_spec.mode if pd_spec is not None else "unified",
                tp_rank=multinode.first_tp_rank(config.resolved),
            )
        self.disagg: pd.Disaggregation | None = None
        if pd_spec is not None:
            self.disagg = pd.Disaggregation(
                pd_spec,
                pd.Callbacks(
                    add=self._engine_add,
                    release=self.release,
                    fail=self.fail,
                    kv_bytes=self.kv_bytes,
                    log=lambda message: self.log(message),
                    die=self.die,
                ),
            )
            if self.metrics is not None:
                self.disagg.attach_metrics(self.metrics.registry, self.metrics.labels)
        self._prefix_cache: PrefixCache | None = None  # made once the KV pool's size is known
        self.started_at = time.time()
        self.startup_time = 0.0
        # 0.5.17+: SGLang's own breakdown of the start (server_info startup_time, the "Engine startup timings" line)
        self.startup_breakdown: dict[str, Any] = {}
        self.graph_gb: dict[str, float] = {}
        self.detailed = shapes.detailed(config.version)
        fields = server_fields(config.version) if self.detailed else None
        self.fields = fields
        self.filled = (
            shapes.startup_resolved(
                config.resolved,
                max_running_requests=int(engine.max_running_requests),
                seed=config.seed,
                speculative=config.speculative,
            )
            if self.detailed
            else {}
        )
        self._seq = 0
        # uvicorn's access log, as SGLang configures it (--log-level-http, --uvicorn-access-log-exclude-prefixes)
        self.access_on = L.access_log_on(config.resolved)
        self.access_excluded = L.access_log_excluded(config.resolved)
        # --speculative-adaptive: the tier the last decode round ran (internal_states, spec_num_steps)
        self.launch_steps = int(config.resolved.get("speculative_num_steps") or 0)
        self.active_steps = self.launch_steps
        count = config.gpu_count or multinode.gpus_per_node(config.resolved) or config.profile.gpu_count
        self.gpus = gpu_model.idle_gpus(config.profile.gpu, count, config.profile.name)
        self._gpu_clock = time.monotonic()
        # Multi-node and the gate (console.sim.multinode): None on a plain single node.
        spec = multinode.GroupSpec.from_resolved(config.resolved, peer_loss_exit_s=config.peer_loss_exit_s)
        self.group = multinode.Group(spec, self.log_as) if spec is not None else None
        self.first_tp_rank = multinode.first_tp_rank(config.resolved)

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

    # --- logging ---------------------------------------------------------------------------------

    def log(self, message: str, rank: str | None = None) -> None:
        """A scheduler line: "[... TP0] message"; 0.5.17 with one GPU prints no rank (measured)."""
        if rank is None:
            single = self.detailed and int(self.config.resolved.get("tp_size") or 1) <= 1
            rank = "" if single else f"TP{self.first_tp_rank}"
        self.config.log(L.line(message, rank=rank))

    def log_as(self, message: str, rank: str) -> None:
        """A line with the given rank prefix ("" for the main process): the multi-node group's lines."""
        self.config.log(L.line(message, rank=rank))

    def log_access(self, peer: str, method: str, target: str, status: int, http_version: str = "1.1") -> None:
        """One HTTP request as uvicorn logs it when the response starts, to the same stream as every other line;
        nothing when the access log is off or the path is excluded."""
        if self.access_on and L.access_logged(target, self.access_excluded):
            self.config.log(L.line(L.access(peer, method, target, status, http_version)))

    def args(self) -> dict[str, Any]:
        """0.5.17+: every ServerArgs field as the server holds it after startup (its /server_info's keys)."""
        out: dict[str, Any] = {}
        for name, default in self.fields or ():
            value = self.config.resolved.get(name, default)
            out[name] = self.filled.get(name, value) if value is None else value
        return out

    # --- the engine in real time -----------------------------------------------------------------

    @property
    def stream_interval(self) -> int:
        """--stream-interval: tokens per streamed chunk unless a request asks for its own."""
        return max(1, int(self.config.resolved.get("stream_interval") or 1))

    def submit(
        self,
        prompt_tokens: int,
        max_new_tokens: int,
        temperature: float,
        ignore_eos: bool,
        *,
        stream_interval: int | None = None,
        log_metrics: bool = True,
        task: Task = Task.CHAT,
        prompt: Sequence[Hashable] | None = None,
        bootstrap: pd.Bootstrap | None = None,
    ) -> Live:
        """A request into the batch; `task` is what its prompt asks for (console.sim.content.classify_prompt): code
        accepts more draft tokens than chat, translation fewer. `prompt` (its token ids, or words) is matched against
        the prefix cache: the tokens found there are the request's cached_tokens. On a PD server `bootstrap` is what
        the client's request carried (None: the stand-in's own requests, which go SGLang's fake path), and the role
        decides when the request enters the engine (console.sim.pd)."""
        self._seq += 1
        rid = uuid.uuid4().hex
        seed = self.config.seed * 1_000_003 + self._seq
        req = Live(rid, prompt_tokens, max(1, max_new_tokens), seed, time.time(), stream_interval, log_metrics)
        req.temperature, req.ignore_eos, req.task = max(0.0, temperature), ignore_eos, task
        if prompt is not None and log_metrics:
            req.cached_tokens = self.prefix_cache.admit(prompt)
        self.live[rid] = req
        if self.disagg is not None:
            self.disagg.admit(req, bootstrap or pd.INTERNAL)
        else:
            self._engine_add(req)
        if self.metrics and log_metrics:
            self.metrics.on_request(prompt_tokens, cached_tokens=req.cached_tokens)
        return req

    def _engine_add(self, req: Live, *, prefilled: bool = False, max_new_tokens: int | None = None) -> None:
        if req.rid not in self.live or req.finish is not None:
            return  # the client went away while its KV was on its way
        max_new = req.max_new_tokens if max_new_tokens is None else max_new_tokens
        ignore_eos = req.ignore_eos or max_new_tokens is not None
        self.engine.add(
            req.rid, max(1, req.prompt_tokens), max_new, req.temperature, ignore_eos, task=req.task, prefilled=prefilled
        )
        self._wake.set()

    # --- PD (console.sim.pd calls these) -----------------------------------------------------------------------

    def release(self, req: Live) -> None:
        """A PD prefill request whose KV has gone answers now."""
        req.finish = req.finish or "length"
        req.queue.put_nowait(0)
        self._output.set()
        self._output = asyncio.Event()

    def fail(self, req: Live, status: int, message: str) -> None:
        """End a request with SGLang's abort (status, message) instead of tokens."""
        self.engine.abort(req.rid)
        req.abort = (status, message)
        req.finish = "abort"
        req.queue.put_nowait(0)

    def kv_bytes(self, prompt_tokens: int) -> float:
        """The KV cache bytes of so many tokens, over every GPU of the server."""
        per_gpu = self.memory_split["kvcache"] * 2**30 / max(1, self.max_total_num_tokens)
        return prompt_tokens * per_gpu * max(1, int(self.config.resolved.get("tp_size") or 1))

    def die(self, error: str) -> None:
        """A fatal scheduler exception (a PD peer that does not match): the server goes as SGLang's does."""
        multinode.die_like_sglang(
            self.log_as, error, self.first_tp_rank, self._forget_gpus, running_leader=self.status == "Up"
        )

    def batch_now(self) -> dict[str, float]:
        """Rank 0's batch as its heartbeats carry it to the other ranks (console.sim.multinode)."""
        return {
            "running": self.num_running,
            "busy": float(not self.engine.idle),
            "queued": self.num_queued,
            "used_tokens": self.used_tokens,
            "token_usage": self.token_usage,
            "gen_throughput": self.last_gen_throughput,
        }

    def mirrored_metrics(self) -> tuple[bytes, str]:
        """(a rank >= 1 with --enable-metrics-for-all-schedulers) its scheduler's /metrics: rank 0's batch, which
        every TP rank computes, under its own tp_rank."""
        assert self.metrics is not None
        batch = (self.group.mirror if self.group is not None else None) or {}
        self.metrics.on_window(
            running=int(batch.get("running", 0)),
            queued=int(batch.get("queued", 0)),
            used_tokens=int(batch.get("used_tokens", 0)),
            token_usage=batch.get("token_usage", 0.0),
            gen_throughput=batch.get("gen_throughput", 0.0),
            accept_length=None,
            accept_rate=None,
            max_total_num_tokens=self.max_total_num_tokens,
        )
        return self.metrics.render()

    def _forget_gpus(self) -> None:
        with contextlib.suppress(OSError):
            (gpu_model.state_dir(self.config.state_dir) / gpu_model.STATE_FILE).unlink(missing_ok=True)

    def forget(self, req: Live) -> None:
        """The client went away: drop the request from the batch, as SGLang aborts it."""
        self.live.pop(req.rid, None)
        self.engine.abort(req.rid)

    async def probe(self, timeout_s: float, poll_s: float | None = None) -> bool:
        """SGLang's generating health check: a 1-token request joins the batch, and the server counts as healthy
        once the scheduler sends any output after that (the next step under load, the probe's own prefill when
        idle); False after `timeout_s` without. SGLang looks once a second (`poll_s` = 1.0 emulates that, so the
        answer takes a second as on 0.5.17); without poll_s it answers as soon as it holds."""
        output = self._output
        req = self.submit(prompt_tokens=1, max_new_tokens=1, temperature=0.0, ignore_eos=True, log_metrics=False)
        try:
            if poll_s is None:
                await asyncio.wait_for(output.wait(), timeout_s)
                return True
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while loop.time() < deadline:
                await asyncio.sleep(poll_s)
                if output.is_set():
                    return True
            raise TimeoutError
        except TimeoutError:
            self.log(
                f"Health check failed. Server couldn't get a response from detokenizer for last {timeout_s:g} seconds.",
                rank="",
            )
            return False
        finally:
            self.forget(req)

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
            if self.engine.adaptive is not None and step.kind == "decode":
                self._follow_adaptive(step.steps)
            if self.engine.window_decode_steps >= interval:
                self._log_decode_window()

    def _follow_adaptive(self, steps: int) -> None:
        """0.5.23's adaptive lines: a slot's tier moved (adaptive_spec_params.py:268), the worker switched its runtime
        state to the round's tier (eagle_worker_v2.py:1866-1872); the active tier goes to the gauges."""
        for old, new_steps, ema in self.engine.tier_changes:
            self.log(f"Adaptive spec params updated: steps {old} -> {new_steps} (ema_accept_len={ema:.2f})")
        self.engine.tier_changes.clear()
        if steps != self.active_steps:
            self.log(
                f"Switch adaptive runtime state: steps {self.active_steps} -> {steps}, "
                f"draft_tokens {self.active_steps + 1} -> {steps + 1}"
            )
            self.active_steps = steps
            if self.metrics is not None:
                self.metrics.set_static(spec_num_steps=float(steps), spec_num_draft_tokens=float(steps + 1))

    def _deliver(self, step: Any) -> None:
        now = time.time()
        finished = step.finished
        reasons = step.finish_reasons
        live = self.live
        sent = False
        counted = 0  # tokens of requests that log metrics
        for rid, n in step.emitted.items():
            req = live.get(rid)
            if req is None or n <= 0:
                continue
            req.ids.extend(output_token_ids(req.seed, len(req.ids), n))
            if req.log_metrics:
                counted += n
            if step.kind == "decode":
                req.verify_ct += 1
                drafts = step.accepted.get(rid)
                if drafts is not None:
                    histogram = req.accept_histogram
                    if len(histogram) <= drafts:
                        histogram.extend([0] * (drafts + 1 - len(histogram)))
                    histogram[drafts] += 1
            if req.first_token_at is None:
                req.first_token_at = now
            if rid in finished:
                if self.disagg is not None and self.disagg.hold_finish(req):
                    continue  # a PD prefill answers once its KV has gone to the decode
                req.finish = reasons.get(rid, "length")
            if req.finish is not None or should_send(len(req.ids), req.stream_interval):
                req.queue.put_nowait(n)
                sent = True
        for rid in finished:
            req = live.get(rid)
            if req is not None and req.finish is None:
                req.finish = reasons.get(rid, "length")
                req.queue.put_nowait(0)
                sent = True
        if sent:
            self._output.set()
            self._output = asyncio.Event()
        if self.metrics:
            self.metrics.on_step(counted)

    def _log_decode_window(self) -> None:
        w = self.engine.take_window()
        self.last_gen_throughput = w.gen_throughput * self.config.speedup
        accept_len = w.accept_len
        # 0.5.17 (measured: 0.00 with a draft nothing accepted) and 0.5.23 count the correct drafts only.
        accept_rate = w.accept_rate if shapes.at_least(self.config.version, "0.5.17") else w.accept_rate_with_bonus
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

    @property
    def prefix_cache(self) -> PrefixCache:
        if self._prefix_cache is None:
            self._prefix_cache = PrefixCache(self.max_total_num_tokens)
        return self._prefix_cache

    def flush(self) -> bool:
        """/flush_cache: refused while requests run or wait; empties the prefix cache, resets acceptance and
        throughput counters."""
        if self.live or not self.engine.flush():
            return False
        self.prefix_cache.clear()
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
        running, busy = self.num_running, not self.engine.idle
        if self.group is not None and self.group.mirror is not None:  # a rank >= 1 computes rank 0's batch
            running, busy = int(self.group.mirror.get("running", 0)), bool(self.group.mirror.get("busy", 0))
        loads = self.engine.perf.gpu_load(running, busy=busy, memory_used_mib=used)
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
                context_length=self.config.context_length,
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

    async def init_parallel(self) -> None:
        """0.5.23's "Init parallel begin/ends" with, between them, the ranks' rendezvous (console.sim.multinode), then
        the gate (--gated-launch-port) before any weights. GroupError when the group does not form."""
        logged = shapes.at_least(self.config.version, "0.5.23") or self.group is not None
        started = time.monotonic()
        if logged:
            self.log("Init parallel begin.")
        if self.group is not None:
            await self.group.rendezvous()
        if logged:
            self.log(f"Init parallel ends. elapsed={time.monotonic() - started:.2f} s")
        if self.group is not None:
            await self.group.wait_gate()

    async def start_scheduler(self) -> None:
        """Weights, KV cache and CUDA graphs, with SGLang's log lines; the port is not bound meanwhile."""
        if self.detailed:
            await self._start_scheduler_detailed()
            return
        if shapes.at_least(self.config.version, "0.5.23"):
            await start_scheduler_0523(self)
            return
        self.log(L.server_args(self.args() or dict(self.config.resolved)), rank="")
        await self.init_parallel()
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
            L.scheduler_summary(
                self.max_total_num_tokens, chunked, self.max_running_requests, self.config.context_length, avail
            )
        )

    async def _start_scheduler_detailed(self) -> None:
        """The start as SGLang 0.5.17 logs it (measured on an H200): the args, per model (target, then the EAGLE
        draft) torch distributed and the weights, per model the KV pool, one capture line pair per CUDA graph
        (target prefill and verify/decode, draft prefill, decode and extend), the summary and the timings."""
        p, cfg, resolved = self.config.profile, self.config, self.config.resolved
        scale = cfg.time_scale
        phases = dict(self.engine.startup_phases())
        args = self.args()
        self.log(L.server_args(args), rank="")
        if self.group is not None:
            await self.group.rendezvous()
            await self.group.wait_gate()
        draft = cfg.speculative and str(resolved.get("speculative_algorithm")) in ("EAGLE", "EAGLE3", "STANDALONE")
        total = p.gpu.memory_mib / 1024
        final_gib = self.engine.perf.memory_used_mib() / 1024
        weights = p.weights_gib_per_gpu
        draft_weights = p.draft_weights_gib_per_gpu if draft else 0.0
        graph_total = p.graph_mib_base / 1024
        kv = max(0.1, final_gib - weights - draft_weights - graph_total - 0.52)
        avail = total - 0.52
        self.memory_used_mib = 530
        load_s = phases.get("load_weights", 0.0) * scale
        models = [(p.architecture, weights, load_s)]
        if draft:
            suffix = "Eagle3" if resolved.get("speculative_algorithm") == "EAGLE3" else "Eagle"
            models.append((p.architecture + suffix, draft_weights, load_s * 0.1))
        for arch, gib, seconds in models:
            self.log("Init torch distributed begin.")
            self.log("Init torch distributed ends. elapsed=0.04 s, mem usage=0.09 GB")
            self.log(L.load_weight_begin(avail))
            await asyncio.sleep(seconds)
            self._use(weight=gib)
            avail -= gib
            self.log(L.load_weight_end_0517(seconds, arch, avail, gib))
        kv_s = phases.get("kv_cache_alloc", 0.0) * scale
        await asyncio.sleep(kv_s)
        pools = [kv * 0.8, kv * 0.2] if draft else [kv]
        for gib in pools:
            self._use(kvcache=gib)
            avail -= gib
            self.log(L.kv_cache_allocated_0517(self.max_total_num_tokens, gib / 2, gib / 2))
            self.log(L.memory_pool_end(avail))
        ladder = list(self.filled.get("_graph_ladder") or [1])
        chunked = int(resolved.get("chunked_prefill_size") or self.filled.get("chunked_prefill_size") or 8192)
        tokens = [n for n in shapes.PREFILL_GRAPH_TOKENS if n <= chunked]
        draft_tokens, topk = self.num_draft_tokens, int(resolved.get("speculative_eagle_topk") or 1)
        graphs: list[tuple[str, str, str, float]] = []  # (name, timing key, what the begin line lists, seconds)
        if not resolved.get("disable_cuda_graph"):
            target_s = phases.get("capture_cuda_graph", 0.0) * scale
            verify = "target verify" if cfg.speculative else "target decode"
            per_req = draft_tokens if cfg.speculative else 1
            graphs += [
                ("target prefill", "prefill", f"backend=breakable, num_tokens={tokens}", target_s * 0.6),
                (verify, "target_verify" if cfg.speculative else "decode",
                 f"backend=full, num_tokens_per_req={per_req}, bs={ladder}", target_s * 0.4),
            ]  # fmt: skip
            if draft:
                draft_s = phases.get("capture_draft_cuda_graph", 0.0) * scale
                extend_s = phases.get("capture_draft_extend_cuda_graph", 0.0) * scale
                graphs += [
                    ("draft prefill", "draft_prefill", f"backend=breakable, num_tokens={tokens}", draft_s * 0.5),
                    ("draft decode", "draft_decode", f"backend=full, num_tokens_per_req={topk}, bs={ladder}",
                     draft_s * 0.5),
                    ("draft extend", "draft_extend", f"backend=full, num_tokens_per_req={draft_tokens}, bs={ladder}",
                     extend_s),
                ]  # fmt: skip
        remaining = max(0.0, final_gib - weights - draft_weights - kv - 0.52)
        timings = {key: 0.0 for key in ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode")}
        timings["draft_extend"] = 0.0
        self.graph_gb = dict.fromkeys(timings, 0.0)
        for name, key, listing, seconds in graphs:
            share = remaining / len(graphs)
            self.log(f"Capture {name} CUDA graph begin. {listing}, avail mem={avail:.2f} GB")
            await asyncio.sleep(seconds)
            self._use(graph=share)
            avail -= share
            timings[key], self.graph_gb[key] = seconds, round(share, 3)
            self.log(
                f"Capture {name} CUDA graph end. elapsed={seconds:.2f} s, mem usage={share:.2f} GB, "
                f"avail mem={avail:.2f} GB."
            )
        self.log(
            L.scheduler_summary(
                self.max_total_num_tokens, chunked, self.max_running_requests, self.config.context_length, avail
            )
        )
        scheduler_e2e = time.time() - self.started_at
        self.startup_breakdown = {
            "load_weight": load_s,
            "kv_cache_allocation": kv_s,
            "scheduler_e2e": scheduler_e2e,
            "cuda_graph": timings,
            "tokenizer_e2e": scheduler_e2e + 0.01,
        }
        self.log(L.engine_startup_timings(self.startup_breakdown), rank="")
        if self.metrics is not None:
            top = {k: v for k, v in self.startup_breakdown.items() if k != "cuda_graph"}
            self.metrics.set_startup(top, timings, self.graph_gb)
            self.metrics.set_static(
                max_total_num_tokens=self.max_total_num_tokens,
                context_len=self.config.context_length,
                page_size=1,
                num_pages=self.max_total_num_tokens,
                weight_memory_usage_gb=round(weights + draft_weights, 3),
                kv_cache_memory_usage_gb=round(kv, 3),
                startup_available_gpu_memory_gb=round(avail, 3),
                spec_num_steps=float(resolved.get("speculative_num_steps") or 0),
                spec_num_draft_tokens=float(resolved.get("speculative_num_draft_tokens") or 0),
                kv_available_tokens=self.max_total_num_tokens,
            )
        self.startup_available_gb = avail

    def memory_usage_0517(self) -> dict[str, Any]:
        """internal_states[0].memory_usage of 0.5.17: weights, KV, what was free at the end of the start, the
        token capacity and each CUDA graph's memory."""
        return {
            "weight": round(self.memory_split["weight"], 3),
            "kvcache": round(self.memory_split["kvcache"], 3),
            "startup_available": round(getattr(self, "startup_available_gb", 0.0), 3),
            "token_capacity": self.max_total_num_tokens,
            "token_capacity_swa": None,
            "graph": dict(self.graph_gb),
        }

    def _use(self, **gib: float) -> None:
        for key, value in gib.items():
            self.memory_split[key] += value
            self.memory_used_mib += int(value * 1024)

    async def warm_up(self) -> None:
        """SGLang's startup warm-up: a short /generate through the scheduler, then "ready to roll"."""
        # SGLang's warm-up thread asks over HTTP, a new connection each time (measured: two ephemeral ports).
        self.log_access(f"127.0.0.1:{random.randint(32768, 60999)}", "GET", "/model_info", 200)
        req = self.submit(prompt_tokens=6, max_new_tokens=8, temperature=0.0, ignore_eos=True)
        if self.detailed:
            self.log(L.prefill_batch_0517(1, 6, 0, 0.0, 0, 0, cuda_graph=False, throughput=5.0))
        else:
            self.log(L.prefill_batch(1, 6, 0, 0.0, 0, 0))
        while req.finish is None:
            await req.queue.get()
        self.live.pop(req.rid, None)
        await self._phase(dict(self.engine.startup_phases()).get("warmup", 0.0))
        self.log_access(f"127.0.0.1:{random.randint(32768, 60999)}", "POST", "/generate", 200)
        self.engine.take_window()
        self.flush()
        self.status = "Up"
        self.startup_time = time.time() - self.started_at
        self.config.log(L.line(L.READY))
