"""A discrete-event continuous-batching scheduler, shaped like SGLang's, on a virtual clock.

The caller (the simulator's HTTP server, or a test harness) adds requests, then calls `next_step()`
repeatedly; each call performs one scheduler iteration and returns how long it takes on the real hardware
(`Step.duration_s`) and which tokens it produced. The caller sleeps that long (scaled) and delivers the
tokens. Nothing here touches a clock, a socket or a thread.

Scheduling follows SGLang's default policy: new requests are prefilled first (as many as fit in one
chunked-prefill budget, the running-request limit and the KV cache), each gets its first token from the
prefill; otherwise every running request advances by one decode round, emitting 1 + accepted drafts tokens
with speculation (drawn per request by `PerfModel.draw_round` from its hit chances, which depend on the request's
temperature, ignore_eos and what its prompt asks for (code, math, chat ...), and from where its last round ended:
accepts come in runs).
Requests past the running limit wait in a
FIFO queue. A request stops at `max_new_tokens` ("length") or, without `ignore_eos`, at a natural end of
sequence drawn deterministically from the seed and the request id ("stop").

Counters mirror SGLang's: lifetime accept length since the last flush (accepted tokens incl. the bonus token
/ request-verifies, like `avg_spec_accept_length`) and a decode-log window (accept len, accept rate, gen
throughput, #running-req, #queue-req, #token, token usage) taken with `take_window()`.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from console.sglang.adaptive import AdaptiveSpecParams, parse_config
from console.sim.content import Task
from console.sim.perf import GpuLoad, Hits, PerfModel
from console.sim.profiles import SimProfile
from console.sim.shapes import DECODE_GRAPH_BS

_NATURAL_LENGTH_SIGMA = 0.7  # spread (lognormal) of natural output lengths around the profile mean
# SGLang admits a request if its prompt plus its *estimated* output fits the KV cache; the estimate clips
# max_new_tokens at SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION (default 4096).
_CLIP_MAX_NEW_TOKENS_ESTIMATION = 4096


@dataclass(slots=True)
class Step:
    """One scheduler iteration."""

    kind: str  # "prefill" or "decode"
    duration_s: float  # on the real hardware; the caller scales it
    emitted: dict[str, int]  # rid -> tokens produced this step
    finished: set[str] = field(default_factory=set)
    finish_reasons: dict[str, str] = field(default_factory=dict)  # finished rid -> "stop" | "length"
    verify_ct: dict[str, int] = field(default_factory=dict)  # finished rid -> verify rounds (spec_verify_ct)
    accepted: dict[str, int] = field(default_factory=dict)  # rid -> drafts accepted this round (speculative decode)
    batch_size: int = 0
    steps: int = 0  # the draft steps of this decode round (the adaptive tier where --speculative-adaptive is on)


@dataclass(frozen=True, slots=True)
class WindowStats:
    """What SGLang prints in a "Decode batch" log line, over the steps since the last window."""

    decode_steps: int
    elapsed_s: float
    generated_tokens: int
    accept_len: float | None  # (accepted drafts + 1 per verify) / verifies; None without speculation
    accept_rate: float | None  # correct drafts / proposed drafts (0.5.23 meaning, no bonus)
    accept_rate_with_bonus: float | None  # accepted incl. bonus / (verifies × draft tokens) (0.5.6 meaning)
    gen_throughput: float  # tokens/s over the window's (virtual) time
    num_running: int
    num_queue: int
    num_tokens: int
    token_usage: float


class _Request:
    __slots__ = (
        "after_hit", "context", "generated", "hits", "limit", "max_new_tokens", "prefilled", "prompt_tokens", "rid",
        "verify_ct",
    )  # fmt: skip

    def __init__(
        self, rid: str, prompt_tokens: int, max_new_tokens: int, limit: int, hits: Hits, prefilled: bool = False
    ):
        self.rid = rid
        self.prefilled = prefilled  # its KV (and first token) came from a PD prefill server: admission costs no compute
        self.prompt_tokens = prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.limit = limit  # tokens it will produce: max_new_tokens or its natural end, whichever is first
        self.hits = hits  # the draft's chance of a right guess per position (PerfModel.hit_probs)
        self.after_hit = False  # whether the next round starts after a right guess (the prefill's token: no draft)
        self.generated = 0
        self.verify_ct = 0
        self.context = prompt_tokens


def _reservation(request: _Request) -> int:
    return request.prompt_tokens + min(request.max_new_tokens, _CLIP_MAX_NEW_TOKENS_ESTIMATION)


class Engine:
    """Continuous batching over a `PerfModel`; see the module docstring."""

    def __init__(
        self, profile: SimProfile, resolved: Mapping[str, Any], seed: int = 0, adaptive_config: str | None = None
    ) -> None:
        """`adaptive_config`: the text of --speculative-adaptive-config's file (None: SGLang's default tiers)."""
        self.profile = profile
        self.perf = PerfModel(profile, resolved)
        self.seed = seed
        self._rng = random.Random(seed)
        self._waiting: deque[_Request] = deque()
        self._waiting_ids: dict[str, _Request] = {}
        self._running: dict[str, _Request] = {}
        self._tokens_in_use = 0  # prompt + generated tokens of the running requests (KV slots)
        self._reserved = 0  # KV the running requests were admitted against (prompt + clipped output)
        self.clock_s = 0.0  # virtual time: the sum of every step's duration
        # --speculative-adaptive (0.5.23's per-batch-size tiers, console.sglang.adaptive): the steps of each round
        # come from the slot of its batch size; each tier has its own step cost (its own CUDA graphs and draft).
        self.adaptive: AdaptiveSpecParams | None = None
        self._tier_perf: dict[int, PerfModel] = {}
        self.active_steps = self.perf.num_steps if self.perf.speculative else 0
        self.tier_changes: list[tuple[int, int, float]] = []  # (old, new steps, EMA) since the server last looked
        if self.perf.speculative and resolved.get("speculative_adaptive"):
            graph_bs = [bs for bs in DECODE_GRAPH_BS if bs <= self.perf.cuda_graph_max_bs]
            config = parse_config(adaptive_config) if adaptive_config is not None else None
            self.adaptive = AdaptiveSpecParams(self.perf.num_steps, config, graph_bs)
            self._resolved = dict(resolved)
        self._reset_lifetime()
        self._reset_window()
        self.last_gen_throughput = 0.0

    # ---- state ----------------------------------------------------------------------------------------------

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_queued(self) -> int:
        return len(self._waiting)

    @property
    def idle(self) -> bool:
        return not self._running and not self._waiting

    @property
    def max_running_requests(self) -> int:
        return self.perf.max_running_requests

    @property
    def max_total_num_tokens(self) -> int:
        return self.perf.max_total_num_tokens

    @property
    def num_tokens(self) -> int:
        """KV slots held by running requests (SGLang's #token)."""
        return self._tokens_in_use

    @property
    def token_usage(self) -> float:
        capacity = self.perf.max_total_num_tokens
        # Without retraction modelled, outputs past the admission estimate could overrun: report at most full.
        return min(1.0, self._tokens_in_use / capacity) if capacity else 0.0

    @property
    def speculative(self) -> bool:
        return self.perf.speculative

    @property
    def avg_spec_accept_length(self) -> float | None:
        """Accepted tokens (bonus included) / request-verifies since the last flush; None without any."""
        if not self.perf.speculative or self.spec_verify_total == 0:
            return None
        return self.spec_accepted_total / self.spec_verify_total

    def has_request(self, rid: str) -> bool:
        return rid in self._running or rid in self._waiting_ids

    def startup_phases(self) -> list[tuple[str, float]]:
        return self.perf.startup_phases()

    def gpu_load(self) -> list[GpuLoad]:
        return self.perf.gpu_load(len(self._running), busy=not self.idle)

    # ---- requests -------------------------------------------------------------------------------------------

    def add(
        self,
        rid: str,
        prompt_tokens: int,
        max_new_tokens: int,
        temperature: float = 0.0,
        ignore_eos: bool = False,
        task: Task = Task.CHAT,
        prefilled: bool = False,
    ) -> None:
        """Queue a request (`task`: its prompt's, console.sim.content.classify_prompt). `prefilled`: its KV was
        computed by a PD prefill server, so its admission step computes nothing (console.sim.pd). Raises ValueError
        for a duplicate id or impossible sizes."""
        if self.has_request(rid):
            raise ValueError(f"request id {rid!r} is already in flight; use a unique rid")
        if prompt_tokens < 1:
            raise ValueError("prompt_tokens must be at least 1")
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if temperature < 0:
            raise ValueError("temperature must be >= 0")
        limit = max_new_tokens if ignore_eos else min(max_new_tokens, self._natural_length(rid))
        hits = self.perf.hit_probs(temperature, ignore_eos, task)
        request = _Request(rid, prompt_tokens, max_new_tokens, limit, hits, prefilled)
        self._waiting.append(request)
        self._waiting_ids[rid] = request

    def _natural_length(self, rid: str) -> int:
        # A string seed is hashed with SHA-512 by random.Random: stable across runs and processes.
        draw = random.Random(f"{self.seed}:{rid}")
        mean = self.profile.mean_natural_output_tokens
        mu = math.log(mean) - _NATURAL_LENGTH_SIGMA**2 / 2
        return max(1, int(draw.lognormvariate(mu, _NATURAL_LENGTH_SIGMA)))

    def abort(self, rid: str) -> bool:
        """Drop a waiting or running request; False if there was none with that id."""
        request = self._waiting_ids.pop(rid, None)
        if request is not None:
            self._waiting.remove(request)
            return True
        request = self._running.pop(rid, None)
        if request is None:
            return False
        self._tokens_in_use -= request.context
        self._reserved -= _reservation(request)
        return True

    def flush(self) -> bool:
        """Reset the accept-length and throughput counters, like /flush_cache; refused (False) unless idle."""
        if not self.idle:
            return False
        self._reset_lifetime()
        self._reset_window()
        self.last_gen_throughput = 0.0
        return True

    # ---- scheduling -----------------------------------------------------------------------------------------

    def next_step(self) -> Step | None:
        """Run one scheduler iteration; None when there is nothing to do."""
        if self._waiting and len(self._running) < self.perf.max_running_requests:
            step = self._prefill()
            if step is not None:
                return step
        if self._running:
            return self._decode()
        return None

    def _prefill(self) -> Step | None:
        perf = self.perf
        budget = perf.chunked_prefill_size
        room = perf.max_running_requests - len(self._running)
        free_kv = perf.max_total_num_tokens - self._reserved
        batch: list[_Request] = []
        tokens = 0
        while self._waiting and len(batch) < room:
            request = self._waiting[0]
            reserve = _reservation(request)
            # A prompt longer than the chunked-prefill budget goes alone (SGLang prefills it chunk by chunk,
            # one prefill step after another; modelled as one step of the same total cost).
            if batch and tokens + request.prompt_tokens > budget:
                break
            if reserve > free_kv and (batch or self._running):  # alone it is admitted: never deadlock
                break
            self._waiting.popleft()
            del self._waiting_ids[request.rid]
            batch.append(request)
            tokens += request.prompt_tokens
            free_kv -= reserve
        if not batch:
            return None
        computed = sum(r.prompt_tokens for r in batch if not r.prefilled)
        duration = perf.prefill_s(computed, len(batch))
        step = Step(kind="prefill", duration_s=duration, emitted={}, batch_size=len(batch))
        for request in batch:
            request.generated = 1  # the prefill samples the first token
            request.context = request.prompt_tokens + 1
            self._tokens_in_use += request.context
            self._reserved += _reservation(request)
            step.emitted[request.rid] = 1
            if request.limit <= 1:
                self._finish(request, step)
            else:
                self._running[request.rid] = request
        self._account(step, generated=len(batch))
        return step

    def tier_perf(self, steps: int) -> PerfModel:
        """The step costs of an adaptive tier: the launch setup with `steps` draft steps (0: no drafting)."""
        perf = self._tier_perf.get(steps)
        if perf is None:
            if steps == self.perf.num_steps:
                perf = self.perf
            elif steps == 0:
                perf = PerfModel(self.profile, {**self._resolved, "speculative_algorithm": None})
            else:
                tier = {"speculative_num_steps": steps, "speculative_num_draft_tokens": steps + 1}
                perf = PerfModel(self.profile, {**self._resolved, **tier})
            self._tier_perf[steps] = perf
        return perf

    def _decode(self) -> Step:
        running = self._running
        batch = len(running)
        perf = self.perf
        if self.adaptive is not None:
            self.active_steps = self.adaptive.steps_for_batch(batch)
            perf = self.tier_perf(self.active_steps)
        duration = perf.decode_step_s(batch, self._tokens_in_use / batch)
        emitted: dict[str, int] = {}
        step = Step(kind="decode", duration_s=duration, emitted=emitted, batch_size=batch, steps=self.active_steps)
        done: list[_Request] = []
        generated = 0
        if self.perf.speculative:
            rand = self._rng.random
            draw_round = PerfModel.draw_round
            depth = perf.max_accepted_drafts if perf.speculative else 0
            accepted = step.accepted
            accepted_total = 0
            for request in running.values():
                drafts, request.after_hit = draw_round(rand, request.hits, depth, request.after_hit)
                accepted[request.rid] = drafts
                tokens = 1 + drafts
                accepted_total += tokens
                left = request.limit - request.generated
                if tokens >= left:
                    tokens = left
                    done.append(request)
                request.generated += tokens
                request.context += tokens
                request.verify_ct += 1
                emitted[request.rid] = tokens
                generated += tokens
            self.spec_accepted_total += accepted_total
            self.spec_verify_total += batch
            self._win_accepted += accepted_total
            self._win_verifies += batch
            self._win_proposed += batch * max(0, perf.num_draft_tokens - 1)
            if self.adaptive is not None:
                slot = self.adaptive.slot(batch)
                old_steps = slot.current_steps
                if self.adaptive.on_verify_complete(list(accepted.values()), batch) is not None:
                    self.tier_changes.append((old_steps, slot.current_steps, slot.ema_accept_len))
        else:
            for request in running.values():
                request.generated += 1
                request.context += 1
                emitted[request.rid] = 1
                if request.generated >= request.limit:
                    done.append(request)
            generated = batch
        self._tokens_in_use += generated
        for request in done:
            self._finish(request, step)
        self._win_decode_steps += 1
        self._account(step, generated=generated)
        return step

    def _finish(self, request: _Request, step: Step) -> None:
        self._running.pop(request.rid, None)
        self._tokens_in_use -= request.context  # its KV slots are freed (no prefix cache is modelled)
        self._reserved -= _reservation(request)
        step.finished.add(request.rid)
        step.finish_reasons[request.rid] = "length" if request.generated >= request.max_new_tokens else "stop"
        step.verify_ct[request.rid] = request.verify_ct

    def _account(self, step: Step, generated: int) -> None:
        self.clock_s += step.duration_s
        self._win_elapsed += step.duration_s
        self._win_generated += generated
        self.generated_total += generated

    # ---- counters -------------------------------------------------------------------------------------------

    def _reset_lifetime(self) -> None:
        self.spec_accepted_total = 0
        self.spec_verify_total = 0
        self.generated_total = 0

    def _reset_window(self) -> None:
        self._win_decode_steps = 0
        self._win_elapsed = 0.0
        self._win_generated = 0
        self._win_accepted = 0
        self._win_verifies = 0
        self._win_proposed = 0

    @property
    def window_decode_steps(self) -> int:
        """Decode steps since the last `take_window()` (log a line every --decode-log-interval of them)."""
        return self._win_decode_steps

    def take_window(self) -> WindowStats:
        """The decode-log window's figures; starts a new window."""
        spec = self.perf.speculative and self._win_verifies > 0
        draft = self.perf.num_draft_tokens
        accept_len = self._win_accepted / self._win_verifies if spec else None
        accept_rate = None
        accept_rate_with_bonus = None
        if spec:
            proposed = self._win_proposed  # each round's draft tokens - 1 (an adaptive tier's own)
            accept_rate = (self._win_accepted - self._win_verifies) / proposed if proposed else 0.0
            accept_rate_with_bonus = self._win_accepted / (self._win_verifies * draft)
        throughput = self._win_generated / self._win_elapsed if self._win_elapsed > 0 else 0.0
        stats = WindowStats(
            decode_steps=self._win_decode_steps,
            elapsed_s=self._win_elapsed,
            generated_tokens=self._win_generated,
            accept_len=accept_len,
            accept_rate=accept_rate,
            accept_rate_with_bonus=accept_rate_with_bonus,
            gen_throughput=throughput,
            num_running=len(self._running),
            num_queue=len(self._waiting),
            num_tokens=self._tokens_in_use,
            token_usage=self.token_usage,
        )
        self.last_gen_throughput = throughput
        self._reset_window()
        return stats


@dataclass(frozen=True, slots=True)
class ClosedLoopResult:
    """Figures of a closed-loop run, with bench_serving's definitions (virtual time)."""

    duration_s: float
    completed: int
    output_tokens: int
    output_throughput: float  # Σ output tokens / duration
    mean_request_tok_s: float  # mean over requests of (output − 1) / (latency − TTFT): single-stream speed
    mean_ttft_s: float
    accept_length: float | None
    peak_running: int


@dataclass(slots=True)
class RequestTrace:
    """One request of a closed loop on the virtual clock: when it was sent, got its first token and ended, and what
    its decode rounds accepted (drafts per round, as SGLang's spec_accept_histogram counts them)."""

    start: float
    first: float | None = None
    end: float | None = None
    tokens: int = 0
    verify_ct: int = 0
    accept_histogram: list[int] = field(default_factory=list)


def run_closed_loop(
    profile: SimProfile,
    resolved: Mapping[str, Any],
    concurrency: int,
    input_len: int,
    output_len: int,
    n_requests: int,
    *,
    temperature: float = 0.0,
    ignore_eos: bool = True,
    seed: int = 0,
    task: Task = Task.CHAT,
) -> tuple[list[RequestTrace], Engine, int]:
    """Run `n_requests` through an Engine with `concurrency` clients that each send the next request as soon
    as their previous one finishes (bench_serving --max-concurrency with request rate inf), on the virtual
    clock: every finished request's trace, in the order they finished, the engine, and the peak running batch."""
    if concurrency < 1 or n_requests < 1:
        raise ValueError("concurrency and n_requests must be at least 1")
    engine = Engine(profile, resolved, seed=seed)
    live: dict[str, RequestTrace] = {}
    done: list[RequestTrace] = []
    sent = peak = 0

    def send() -> None:
        nonlocal sent
        rid = f"r{sent}"
        sent += 1
        engine.add(rid, input_len, output_len, temperature=temperature, ignore_eos=ignore_eos, task=task)
        live[rid] = RequestTrace(start=engine.clock_s)

    for _ in range(min(concurrency, n_requests)):
        send()
    while (step := engine.next_step()) is not None:
        now = engine.clock_s
        peak = max(peak, engine.num_running)
        for rid, count in step.emitted.items():
            trace = live[rid]
            if trace.first is None:
                trace.first = now
            trace.tokens += count
            drafts = step.accepted.get(rid)
            if drafts is not None:
                trace.verify_ct += 1
                histogram = trace.accept_histogram
                histogram.extend([0] * (drafts + 1 - len(histogram)))
                histogram[drafts] += 1
        for rid in step.finished:
            trace = live.pop(rid)
            trace.end = now
            done.append(trace)
            if sent < n_requests:
                send()
    return done, engine, peak


def simulate_closed_loop(
    profile: SimProfile,
    resolved: Mapping[str, Any],
    concurrency: int,
    input_len: int,
    output_len: int,
    n_requests: int,
    *,
    temperature: float = 0.0,
    ignore_eos: bool = True,
    seed: int = 0,
    task: Task = Task.CHAT,
) -> ClosedLoopResult:
    """run_closed_loop's figures with bench_serving's definitions. Used by the calibration tests and to predict a
    configuration's throughput without a server."""
    traces, engine, peak = run_closed_loop(
        profile, resolved, concurrency, input_len, output_len, n_requests,
        temperature=temperature, ignore_eos=ignore_eos, seed=seed, task=task,
    )  # fmt: skip
    ttfts = [(t.first or t.start) - t.start for t in traces]
    speeds = [
        (t.tokens - 1) / ((t.end or 0.0) - (t.first or 0.0))
        for t in traces
        if t.tokens > 1 and (t.end or 0.0) > (t.first or 0.0)
    ]
    output_tokens = sum(t.tokens for t in traces)
    duration = engine.clock_s
    return ClosedLoopResult(
        duration_s=duration,
        completed=len(traces),
        output_tokens=output_tokens,
        output_throughput=output_tokens / duration if duration > 0 else 0.0,
        mean_request_tok_s=sum(speeds) / len(speeds) if speeds else 0.0,
        mean_ttft_s=sum(ttfts) / len(ttfts) if ttfts else 0.0,
        accept_length=engine.avg_spec_accept_length,
        peak_running=peak,
    )
