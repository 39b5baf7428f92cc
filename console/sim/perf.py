"""The simulator's performance model: how fast a real SGLang server with a given configuration decodes.

Everything here is pure arithmetic on a `SimProfile` (console.sim.profiles) and SGLang's *resolved* server
args; the engine (console.sim.engine) calls it once per scheduler step. Times are real-hardware seconds;
the caller scales and sleeps.

Decode step time (one scheduler iteration over a running batch of B requests)
------------------------------------------------------------------------------
With speculation each round drafts `speculative_num_steps` (s) steps with `speculative_eagle_topk` (k)
candidates per step, then verifies `speculative_num_draft_tokens` (n) tokens per request in one target
forward; without speculation n = 1 and there is no draft. With T = B·n tokens in the target forward:

    target = fixed + all_experts · (1 − (1 − e/E)^T) + B · per_request(ctx) + T · per_token  [+ T · tree]
    draft  = s · (step_fixed + B · k · step_per_token) + round_fixed
    cpu    = cpu_fixed + B · (cpu_per_request [+ spec cpu_per_request])
             [+ cpu_round + s · cpu_step + (cpu_tree + B · cpu_tree_per_request if k > 1)]

* `fixed`: what every forward pays whatever the batch: streaming the dense weights (attention, shared
  expert, embeddings), all-reduce latency across the tensor-parallel group (PCIe here, no NVLink) and
  kernel launches.
* Mixture-of-experts weight streaming: each token is routed to e of E experts per layer, so a forward of T
  tokens touches a fraction 1 − (1 − e/E)^T of all experts. At batch 1 one more verify token therefore costs
  almost as much as a whole token's expert weights (why speculation is expensive at C = 1 on a sparse MoE),
  while at a large batch every expert is read anyway and verify tokens are nearly free (why speculation's
  gain grows with concurrency on these profiles: Qwen +51 % at C = 1 but +56 % at C = 32, Kimi EAGLE3
  behind at C = 1 and ahead from C ≈ 30).
* `per_request(ctx)`: attention reads the request's KV cache once per forward (half of the constant scales
  with context length relative to `ref_context_tokens`), plus sampling and bookkeeping. Speculation amortises
  it over the accepted tokens.
* `per_token`: matmul compute and all-reduce volume per token.
* `tree`: with k > 1 the verify forward uses a tree attention mask instead of the causal fast path.
* `cpu`: the scheduler's host work per step. With the overlap scheduler on (`disable_overlap_schedule`
  false; with speculation this is "spec v2") it runs while the GPU computes, so a step costs
  max(gpu, cpu), and the draft's host-side share (`overlap_hidden` of the fixed draft costs) is hidden too;
  without overlap a step costs target + draft + cpu. The draft adds host work of its own that no batch
  amortises: the round's orchestration (`cpu_round`), each draft step launched from the host (`cpu_step`), and
  with k > 1 the top-k branches are selected and the tree and its mask built every round (`cpu_tree`, and
  `cpu_tree_per_request` for each request of the batch). A server whose forwards are short (the tiny Llama on an
  H200, issue 20) is host-bound: its round grows with the steps even at batch 1, which the GPU terms alone cannot
  give, and topk 2's tree costs per request: the full grid on the real server had topk 2 level with topk 1 at
  C = 1 and 15-36 % behind it at C = 32. The seeds' profiles leave all four at 0 (their forwards are long:
  the host work hides under them).

Acceptance
----------
Accepts come in runs, as on a real server: a draft guesses the next token right far more often right after a right
guess than after a wrong one (SGLang 0.5.17 on the H200, ../shared/research/wave4-facts.md: P(A ≥ 2 | A ≥ 1) = 0.92,
P(A ≥ 3 | A ≥ 2) = 0.95 with an EAGLE draft, and a shorter chain is *not* the longer one cut short: steps 2 and 1
accept 5-10 % more per round than cutting the steps-3 histogram gives). So each request carries a hidden state over
its output positions: the draft's guess at a position is right with probability `hit_after_hit` (h) when its guess
at the position before was right, `hit_after_miss` (m) when it was wrong (the profile's DraftCosts, temperature 0,
natural output). A round starts after the previous round's bonus token; it accepts drafts position by position
while the guesses are right, at most the tree depth D = s (topk 1) or min(s, n − 1); the first wrong guess is the
bonus position (the target's own token), so the next round starts after a miss; when all D are accepted the bonus
position's guess was never checked, and it was right with probability h. The per-round chance of a hit therefore
depends on where the round starts, which is what makes a short chain more than a cut long one.

Both rejection probabilities 1 − h and 1 − m are scaled alike, in this order, by:

* temperature t > 0: the hit probability × (1 − temperature_accept_drop · min(t, 1)) (the target samples, so greedy
  drafts match less often);
* ignore_eos: forced continuation past the natural end is repetitive and easy to predict, so the rejection
  probability is multiplied by `ignore_eos_rejection_scale` (why temperature 0 + ignore_eos benchmarks inflate
  acceptance);
* the task: real drafts accept more on code and math than on chat, and less on summarising a given text and on
  translation (the EAGLE-3 and Spec-Bench tables, docs/demo.md). The stand-in cannot read its own output (its
  tokens are drawn at random), so it reads the request's prompt and sorts it into code, math, chat, summarisation
  or translation (console.sim.content.classify_prompt: indentation and operators, equations and math questions, an
  instruction to summarise a long given text or to translate another language); the draft's `task_scales` multiply
  the odds of a rejection, (1 − p) / p, by the task's factor (chat: 1). Random token ids, random words and the
  bundled chat prompts are chat: the synthetic workloads and the calibration below are unchanged. A prompt of token
  ids (`input_ids`) is chat too: the stand-in cannot read another tokenizer's ids.
* topk k > 1: the target token may match any of the branches: the rejection probability is divided by
  1 + topk_rejection_gain · (k_eff − 1), with k_eff = min(k, (n − 1) / s) the branching the draft-token budget n
  actually keeps.

The request emits 1 + A tokens a round (the bonus token included), as SGLang counts them: accept length = (accepted
drafts + 1) / verifies, and its `spec_accept_histogram` counts the rounds by A. `expected_accept_length` is the
long-run mean over the rounds (the round-start state's stationary mix).

Capacity
--------
Per GPU, SGLang's static pool is `mem_fraction_static` of memory minus the weights (and the draft's); the
draft CUDA graphs' workspace comes out of it per draft step. Hybrid models (Qwen3.5: gated-delta-net layers)
give `recurrent_pool_share` of it to fixed-size recurrent states: a running request holds one state, one
snapshot for the prefix cache and, with speculation, one intermediate state per draft token (to roll back
rejected drafts), so the running-request limit falls as draft tokens grow (26 → 21 for steps 1 → 2 on the
qwen profile). The rest is the KV cache: `max_total_num_tokens` = pool / (KV bytes per token, plus one draft
layer's with EAGLE-family drafts). Plain transformers get SGLang's request-pool size
clamp(max_total_num_tokens / context_length · 512, 2048, 4096). The effective max running requests is the
smaller of that and the resolved `max_running_requests` (48 when SGLang reset it for speculation).

Where the constants come from
-----------------------------
Physical figures set the shapes: RTX PRO 6000 Blackwell memory (97,887 MiB) and power (600 W); checkpoint
sizes per GPU (Qwen3.5-122B-A10B FP8 ≈ 126 GB over 4 GPUs; Kimi-K2.5 INT4 ≈ 595 GB over 8); expert counts
(256 routed / 8 per token for Qwen3.5-122B-A10B, 384 / 8 for Kimi K2.x); KV layouts (12 full-attention
layers with GQA for Qwen3.5, MLA 512+64 for Kimi); `all_experts_ms` ≈ routed-expert bytes per GPU / memory
bandwidth (~1.8 TB/s). The remaining time constants (fixed, per_request, per_token, cpu, draft) and the
acceptance chains were then fitted to the operators' measurements (the calibration table in docs/demo.md). What the
fit implies, so that nobody mistakes it for a derivation:

* qwen: temperature 0 + ignore_eos acceptance is ≈ 0.99 per position (accept length 1.99 / 2.98 / 3.95 for
  steps 1 / 2 / 3): anything lower cannot give +51 % from steps 1 → 2 at C = 1. Past ~14 running requests
  the step time is the host-side work per request (`cpu_per_request_ms` + the draft's, ≈ 2 ms per request
  per round, hidden under the GPU at low batch by the overlap scheduler): the measured steps 1 → 2 gain at
  C = 32 / 64 despite 26 → 21 running requests is only possible if a step grows in proportion to the
  running batch. The gain at capped batch is therefore ≈ the accept-length ratio (≤ 1.5).
* kimi: the EAGLE3 draft accepts poorly (accept length ≈ 1.38 at steps 2) and a draft round costs a fixed
  ≈ 5 ms over PCIe, so speculation trails at C = 1; verify tokens get cheap once every expert is streamed
  anyway, so it pulls ahead near C = 30 and peaks at the 48-request cap; a topk-4 tree without overlap
  pays the tree mask on 8 verify tokens per request plus the host work in series.

Calibration (virtual-clock closed loop, 1024 in / 1024 out, temperature 0, ignore_eos; measured → model):
qwen steps 1/2/3 at C = 1: 123 / 186 / 234 → 123.5 / 178 / 229 tok/s; max running requests 26 / 21 → 26 / 21;
steps 1 → 2 gain at C = 32 / 64: +56 % / +50 % → +45 % / +46 %; kimi no speculation at C = 1: 92.7 → 93.0;
EAGLE3 1/2 spec v2 at C = 1: 86.8 → 86.7, ratio to no speculation at C = 24 / 30 / 40: 0.95 / 0.99 / 1.05,
at C = 64: ~775 → 729; topk 4 steps 2 without overlap at C = 64: ~353 → 351.
tests/sim/test_perf_calibration.py checks each figure within 10 %.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from console.sim.content import Task, odds_scaled_rejection
from console.sim.profiles import DraftCosts, SimProfile

MIB = 1024 * 1024
_ATTENTION_SHARE = 0.5  # share of per_request that is KV reading (scales with context)
_EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})
_SPEC_DEFAULT_MAX_RUNNING = 48  # SGLang resets an unset --max-running-requests to this with speculation


class Hits(NamedTuple):
    """The chance that a draft's guess at an output position is right, after a right and after a wrong guess."""

    after_hit: float
    after_miss: float


@dataclass(frozen=True, slots=True)
class GpuLoad:
    """One simulated GPU as `nvidia-smi --query-gpu` would report it right now."""

    index: int
    name: str
    memory_total_mib: int
    memory_used_mib: int
    utilization_gpu_pct: int
    utilization_memory_pct: int
    power_draw_w: float
    power_limit_w: float
    sm_clock_mhz: int
    max_sm_clock_mhz: int
    mem_clock_mhz: int
    temperature_c: int
    pstate: str


def _arg(resolved: Mapping[str, Any], key: str, default: Any) -> Any:
    value = resolved.get(key)
    return default if value is None else value


class PerfModel:
    """Step times, acceptance, capacity, startup durations and GPU load for one profile + resolved args."""

    def __init__(self, profile: SimProfile, resolved: Mapping[str, Any]) -> None:
        self.profile = profile
        algorithm = resolved.get("speculative_algorithm")
        self.algorithm: str | None = str(algorithm).upper() if algorithm else None
        self.speculative = self.algorithm is not None
        if self.speculative:
            steps = int(_arg(resolved, "speculative_num_steps", 3))
            topk = int(_arg(resolved, "speculative_eagle_topk", 1))
            draft_tokens = int(_arg(resolved, "speculative_num_draft_tokens", steps + 1))
            if topk == 1:
                draft_tokens = steps + 1  # SGLang's chain rule (console/sglang/rules.py, draft tokens := steps + 1)
            self.num_steps = max(1, steps)
            self.topk = max(1, topk)
            self.num_draft_tokens = max(2, draft_tokens)
        else:
            self.num_steps = 0
            self.topk = 1
            self.num_draft_tokens = 1
        self.overlap = not bool(_arg(resolved, "disable_overlap_schedule", False))
        self.mem_fraction_static = float(_arg(resolved, "mem_fraction_static", profile.default_mem_fraction_static))
        self.context_length = int(_arg(resolved, "context_length", profile.context_length))
        self.chunked_prefill_size = int(_arg(resolved, "chunked_prefill_size", 8192))
        if self.chunked_prefill_size <= 0:
            self.chunked_prefill_size = self.context_length
        self.cuda_graph_max_bs = int(_arg(resolved, "cuda_graph_max_bs", 256))
        draft_path = resolved.get("speculative_draft_model_path")
        self._draft: DraftCosts | None = (
            profile.draft(self.algorithm, str(draft_path) if draft_path else None) if self.algorithm else None
        )
        self._resolved_max_running = resolved.get("max_running_requests")
        self._compute_capacity()
        self._hits_cache: dict[tuple[float, bool, Task], Hits] = {}

    # ---- capacity -------------------------------------------------------------------------------------------

    def _compute_capacity(self) -> None:
        p = self.profile
        pool_mib = p.gpu.memory_mib * self.mem_fraction_static - p.weights_gib_per_gpu * 1024
        kv_bytes = p.kv_bytes_per_token_per_gpu
        state_slots: int | None = None
        if self.speculative and self.algorithm in _EAGLE_FAMILY:
            pool_mib -= p.draft_weights_gib_per_gpu * 1024 + p.graph_mib_per_draft_step * self.num_steps
            kv_bytes += p.draft_kv_bytes_per_token_per_gpu
        pool_mib = max(pool_mib, 0.0)
        if p.recurrent_state_mib_per_copy > 0:
            state_pool_mib = pool_mib * p.recurrent_pool_share
            copies = 2 + (self.num_draft_tokens if self.speculative else 0)
            state_slots = int(state_pool_mib // (copies * p.recurrent_state_mib_per_copy))
            pool_mib -= state_pool_mib
        self.max_total_num_tokens = int(pool_mib * MIB // kv_bytes)
        request_pool = min(max(int(self.max_total_num_tokens / self.context_length * 512), 2048), 4096)
        if state_slots is not None:
            request_pool = min(request_pool, state_slots)
        resolved = self._resolved_max_running
        if resolved is None:
            resolved = _SPEC_DEFAULT_MAX_RUNNING if self.speculative else request_pool
        self.max_running_requests = max(1, min(int(resolved), request_pool))

    # ---- step times -----------------------------------------------------------------------------------------

    def decode_step_s(self, batch: int, mean_context_tokens: float | None = None) -> float:
        """Seconds for one decode step (a draft + verify round with speculation) over `batch` requests."""
        if batch <= 0:
            return 0.0
        c = self.profile.costs
        n = self.num_draft_tokens
        tokens = batch * n
        ctx = c.ref_context_tokens if mean_context_tokens is None else mean_context_tokens
        per_request = c.per_request_ms * (1 - _ATTENTION_SHARE + _ATTENTION_SHARE * ctx / c.ref_context_tokens)
        target = c.fixed_ms + batch * per_request + tokens * c.per_token_ms
        if c.num_experts > 0:
            untouched = (1.0 - c.experts_per_token / c.num_experts) ** tokens
            target += c.all_experts_ms * (1.0 - untouched)
        cpu = c.cpu_fixed_ms + batch * c.cpu_per_request_ms
        draft_ms = 0.0
        d = self._draft
        if self.speculative and d is not None:
            if self.topk > 1:
                target += tokens * d.tree_per_token_ms
            hidden = d.overlap_hidden if self.overlap else 0.0
            fixed_draft = (self.num_steps * d.step_fixed_ms + d.round_fixed_ms) * (1.0 - hidden)
            draft_ms = fixed_draft + self.num_steps * batch * self.topk * d.step_per_token_ms
            cpu += batch * d.cpu_per_request_ms + d.cpu_round_ms + self.num_steps * d.cpu_step_ms
            if self.topk > 1:
                cpu += d.cpu_tree_ms + batch * d.cpu_tree_per_request_ms
        gpu = target + draft_ms
        total_ms = max(gpu, cpu) if self.overlap else gpu + cpu
        return total_ms / 1000.0

    def prefill_s(self, num_tokens: int, num_requests: int = 1) -> float:
        """Seconds to prefill `num_tokens` prompt tokens of `num_requests` requests (draft extend included)."""
        c = self.profile.costs
        ms = c.prefill_fixed_ms + num_tokens * c.prefill_per_token_ms + num_requests * c.per_request_ms
        if self.speculative:
            ms *= 1.08  # the draft model extends over the same tokens: one more (small) layer
        return ms / 1000.0

    # ---- acceptance -----------------------------------------------------------------------------------------

    @property
    def max_accepted_drafts(self) -> int:
        """The tree depth: the most draft tokens one round can accept."""
        if not self.speculative:
            return 0
        return self.num_steps if self.topk == 1 else min(self.num_steps, self.num_draft_tokens - 1)

    def hit_probs(self, temperature: float = 0.0, ignore_eos: bool = False, task: Task = Task.CHAT) -> Hits:
        """(P(right guess | right guess before), P(right guess | wrong guess before)) at one output position, for
        this setup and a request's temperature, ignore_eos and task (console.sim.content.classify_prompt); cached
        (the engine draws against it every round). (0, 0) without speculation."""
        key = (round(temperature, 3), ignore_eos, Task(task))
        cached = self._hits_cache.get(key)
        if cached is None:
            cached = self._hits(*key)
            self._hits_cache[key] = cached
        return cached

    def _hits(self, temperature: float, ignore_eos: bool, task: Task) -> Hits:
        d = self._draft
        if d is None or not self.speculative:
            return Hits(0.0, 0.0)
        p = self.profile
        k_eff = max(1.0, min(float(self.topk), (self.num_draft_tokens - 1) / self.num_steps))
        forced_scale = d.ignore_eos_rejection_scale
        if forced_scale is None:
            forced_scale = p.ignore_eos_rejection_scale
        task_scale = d.task_scales.for_task(task)

        def adjusted(q: float) -> float:
            if temperature > 0:
                q *= 1.0 - p.temperature_accept_drop * min(temperature, 1.0)
            reject = 1.0 - q
            if ignore_eos:
                reject *= forced_scale
            reject = odds_scaled_rejection(reject, task_scale)
            reject /= 1.0 + p.topk_rejection_gain * (k_eff - 1.0)
            return min(max(1.0 - reject, 0.0), 1.0)

        return Hits(adjusted(d.hit_after_hit), adjusted(d.hit_after_miss))

    def expected_accept_length(
        self, temperature: float = 0.0, ignore_eos: bool = False, task: Task = Task.CHAT
    ) -> float:
        """Mean tokens emitted per request per round over a long output, bonus token included (SGLang's accept
        length): the rounds' mean accepted drafts from either starting state, mixed by how often rounds start there."""
        if not self.speculative:
            return 1.0
        hits = self.hit_probs(temperature, ignore_eos, task)
        depth = self.max_accepted_drafts
        # From a start after a right (after_hit) or a wrong guess: P(all depth accepted), then E[accepted drafts].
        run = [hits.after_hit**j for j in range(depth)]  # P(positions 2..j+1 right | position 1 right)
        mean_from = [first * sum(run) for first in (hits.after_miss, hits.after_hit)]
        full_from = [first * hits.after_hit ** (depth - 1) for first in (hits.after_miss, hits.after_hit)]
        # The next round starts after a right guess only when this one accepted everything and the bonus position's
        # unchecked guess was right too.
        to_hit = [full * hits.after_hit for full in full_from]
        share_after_hit = to_hit[0] / (1.0 - to_hit[1] + to_hit[0]) if to_hit[0] > 0 else 0.0
        return 1.0 + (1.0 - share_after_hit) * mean_from[0] + share_after_hit * mean_from[1]

    @staticmethod
    def draw_round(rand: Callable[[], float], hits: Hits, depth: int, after_hit: bool) -> tuple[int, bool]:
        """One round of one request: (drafts accepted, whether the next round starts after a right guess)."""
        accepted = 0
        right = after_hit
        while accepted < depth:
            if rand() >= (hits.after_hit if right else hits.after_miss):
                return accepted, False  # the first wrong guess is the bonus position
            accepted += 1
            right = True
        return accepted, rand() < hits.after_hit  # the bonus position's guess was never checked

    # ---- startup --------------------------------------------------------------------------------------------

    def startup_phases(self) -> list[tuple[str, float]]:
        """(phase, real seconds) in SGLang's order; draft graph phases only with EAGLE-family drafts.

        Names: load_weights, kv_cache_alloc, capture_cuda_graph, capture_draft_cuda_graph,
        capture_draft_extend_cuda_graph, warmup.
        """
        p = self.profile
        s = p.startup
        eagle = self.speculative and self.algorithm in _EAGLE_FAMILY
        load = s.load_weights_s
        if eagle:
            load *= 1.0 + p.draft_weights_gib_per_gpu / max(p.weights_gib_per_gpu, 0.1)
        # Graphs are captured per batch size up to cuda_graph_max_bs; a verify graph is n tokens wide.
        graph_scale = min(self.cuda_graph_max_bs, self.max_running_requests) / 256.0
        graph_scale = 0.35 + 0.65 * min(graph_scale, 2.0)
        capture = s.capture_cuda_graph_s * graph_scale * (1.0 + 0.08 * (self.num_draft_tokens - 1))
        phases = [("load_weights", load), ("kv_cache_alloc", s.kv_alloc_s), ("capture_cuda_graph", capture)]
        if eagle:
            draft = s.draft_graph_per_step_s * self.num_steps * graph_scale * (1.0 + 0.15 * (self.topk - 1))
            phases.append(("capture_draft_cuda_graph", draft))
            phases.append(("capture_draft_extend_cuda_graph", s.draft_extend_graph_s * graph_scale))
        phases.append(("warmup", s.warmup_s))
        return phases

    # ---- memory and GPU load --------------------------------------------------------------------------------

    def memory_used_mib(self) -> int:
        """Per-GPU memory in use once the server is up: the static pool, graphs and the CUDA context."""
        p = self.profile
        graphs = p.graph_mib_base * (0.35 + 0.65 * min(self.cuda_graph_max_bs / 256.0, 2.0))
        if self.speculative:
            graphs *= 1.0 + 0.1 * (self.num_draft_tokens - 1)
        used = p.gpu.memory_mib * self.mem_fraction_static + graphs + 530
        return int(min(used, p.gpu.memory_mib - 200))

    def gpu_load(self, batch: int, busy: bool, memory_used_mib: int | None = None) -> list[GpuLoad]:
        """Every GPU's telemetry with `batch` requests running (`busy` false = no step in flight).

        Utilisation, power, clock and temperature are steady-state values for that load: intensity grows
        with the tokens per forward (batch × draft tokens) and saturates; power throttles the SM clock near
        the limit, as the H200 fixture shows (1530 of 1980 MHz at ~690 W).
        """
        p = self.profile
        g = p.gpu
        used = self.memory_used_mib() if memory_used_mib is None else memory_used_mib
        tokens = batch * self.num_draft_tokens if busy else 0
        intensity = 0.0 if not busy else 0.3 + 0.7 * (1.0 - math.exp(-tokens / 96.0))
        loads = []
        for i in range(p.gpu_count):
            skew = 1.0 + (0.03 if i == 0 else -0.005 * (i % 3))  # rank 0 also samples and schedules
            level = min(intensity * skew, 1.0)
            power = g.idle_power_w + (g.power_limit_w * 0.93 - g.idle_power_w) * level
            clock = g.idle_sm_clock_mhz if not busy else int(g.max_sm_clock_mhz - 260 * level**3)
            temp = g.idle_temp_c + (g.max_temp_c - g.idle_temp_c) * level + (i % 4) * 0.7
            util = 0 if not busy else min(100, round(60 + 40 * min(1.0, level / 0.6)))
            mem_util = 0 if not busy else min(100, round(20 + 65 * level))
            loads.append(
                GpuLoad(
                    index=i,
                    name=g.name,
                    memory_total_mib=g.memory_mib,
                    memory_used_mib=used,
                    utilization_gpu_pct=util,
                    utilization_memory_pct=mem_util,
                    power_draw_w=round(power, 2),
                    power_limit_w=g.power_limit_w,
                    sm_clock_mhz=clock,
                    max_sm_clock_mhz=g.max_sm_clock_mhz,
                    mem_clock_mhz=g.mem_clock_mhz if busy or used > 0 else 405,
                    temperature_c=round(temp),
                    pstate="P0" if busy or used > 0 else "P8",
                )
            )
        return loads
