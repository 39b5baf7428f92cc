"""Model/hardware profiles of the simulated GPU host.

A profile says what is being served (model, architecture, context length), on what (GPU model and count,
tensor parallelism), how long a real start takes (per startup phase, in real seconds), how memory is split
(weights, draft weights, KV cache, recurrent state) and the cost constants the performance model in
`console.sim.perf` turns into step times and acceptance. The module docstring of `console.sim.perf`
explains every constant and which operator measurement it was fitted to.

Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console.sim.content import EAGLE_TASK_SCALES, NO_TASK_EFFECT, TaskScales


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model as `nvidia-smi` describes it."""

    name: str
    memory_mib: int
    power_limit_w: float
    idle_power_w: float
    max_sm_clock_mhz: int
    idle_sm_clock_mhz: int
    mem_clock_mhz: int
    idle_temp_c: float
    max_temp_c: float  # steady temperature at full load with the stock fan curve


@dataclass(frozen=True)
class StepCosts:
    """Time constants of one forward pass of the target model, per GPU-parallel group, in milliseconds.

    See `console.sim.perf` for the formula these feed and where each value comes from.
    """

    fixed_ms: float  # weight streaming of the dense part, all-reduce latency, kernel launches
    all_experts_ms: float  # streaming every routed expert once (0 for a dense model)
    num_experts: int  # routed experts per MoE layer (0 for a dense model)
    experts_per_token: int  # experts each token is routed to
    per_request_ms: float  # per sequence per forward at ref_context_tokens: KV/attention read, sampling
    per_token_ms: float  # per token in the forward: matmul compute, all-reduce volume
    ref_context_tokens: int  # context length per_request_ms was fitted at
    cpu_fixed_ms: float  # scheduler work per step on the host CPU (hidden by the overlap scheduler)
    cpu_per_request_ms: float  # scheduler work per running request per step
    prefill_fixed_ms: float
    prefill_per_token_ms: float


@dataclass(frozen=True)
class DraftCosts:
    """How a draft method accepts and what drafting costs (milliseconds)."""

    # P(the draft's guess at an output position is right), temperature 0, natural output: after a right guess at the
    # position before, and after a wrong one (accepts come in runs: console.sim.perf, "Acceptance")
    hit_after_hit: float
    hit_after_miss: float
    step_fixed_ms: float  # one draft step (a small forward + all-reduce) at batch 1
    step_per_token_ms: float  # per draft token (batch × topk) in one draft step
    round_fixed_ms: float  # per verify round: draft extend, tree build, accept/rewind bookkeeping
    overlap_hidden: float  # share of draft host-side work the overlap (spec v2) path hides, 0..1
    tree_per_token_ms: float  # extra verify cost per token with a tree mask (topk > 1)
    cpu_per_request_ms: float  # extra scheduler work per request per round (spec bookkeeping)
    # Host work the draft adds per round whatever the batch (console.sim.perf: a host-bound server pays it in full):
    cpu_round_ms: float = 0.0  # per round: drafting, verifying and accepting orchestrated from the host
    cpu_step_ms: float = 0.0  # per draft step: launching its forward (a graph replay) and its bookkeeping
    cpu_tree_ms: float = 0.0  # with topk > 1: selecting the top-k branches and building the tree and its mask
    cpu_tree_per_request_ms: float = 0.0  # with topk > 1: the same for each request of the batch, every round
    # A draft whose forced (ignore_eos) continuation is no easier to guess than its natural one sets this to 1.0; None:
    # the profile's ignore_eos_rejection_scale
    ignore_eos_rejection_scale: float | None = None
    # What each task (code, math, summarisation, translation; console.sim.content) multiplies the odds of a rejection
    # by: EAGLE-style drafts' published ratios, or none for a draft that accepts alike on every task
    task_scales: TaskScales = EAGLE_TASK_SCALES


@dataclass(frozen=True)
class StartupPhases:
    """Real durations (seconds) of a cold start."""

    load_weights_s: float
    kv_alloc_s: float
    capture_cuda_graph_s: float  # target graphs at the default graph batch sizes
    draft_graph_per_step_s: float  # draft decode graphs: one set per draft step
    draft_extend_graph_s: float
    warmup_s: float
    # What the options that shorten a start can take off (console/sim/start_options.py); assumptions, not measured:
    # the share of weight loading that is post-processing (re-quantization, repacking), which a presharded checkpoint
    # skips, and the share of graph capture that is JIT compiles (Triton, DeepGEMM, FlashInfer), which a warm compile
    # cache skips.
    requantize_share: float = 0.2
    capture_jit_share: float = 0.5


@dataclass(frozen=True)
class OperatorUnit:
    """The SGLang launch the profile's operators ran on that hardware (the model and tensor parallelism are the
    profile's own): what `opsconsole demo --profile NAME` writes into the demo's unit, so that the demo starts
    from their setup and a tune of it has what it needs (an EAGLE3 draft model, for instance)."""

    served_model_name: str
    speculative_algorithm: str  # as written in the unit (NEXTN, EAGLE3, ...)
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    draft_model_path: str | None  # EAGLE3 and STANDALONE run a separate draft model
    spec_v2: bool  # SGLANG_ENABLE_SPEC_V2 in the unit's environment
    sglang_version: str  # the SGLang the stand-in behaves as


@dataclass(frozen=True)
class SimProfile:
    name: str
    served_model: str  # Hugging Face id
    architecture: str  # config.architectures[0]; feeds SGLang's spec auto-choice
    gpu: GpuSpec
    gpu_count: int
    tp_size: int
    context_length: int
    weights_gib_per_gpu: float
    draft_weights_gib_per_gpu: float
    default_mem_fraction_static: float
    kv_bytes_per_token_per_gpu: int
    draft_kv_bytes_per_token_per_gpu: int  # an EAGLE-family draft's own KV cache (one decoder layer)
    # Hybrid (linear-attention/recurrent) models keep a fixed-size state per request; its pool, not the
    # KV cache, bounds the running requests. 0 for plain transformers.
    recurrent_state_mib_per_copy: float
    recurrent_pool_share: float  # share of the post-weights memory SGLang gives the recurrent-state pool
    graph_mib_per_draft_step: float  # CUDA-graph memory of the draft graphs, per step
    graph_mib_base: float
    costs: StepCosts
    drafts: dict[str, DraftCosts]  # by resolved speculative_algorithm (EAGLE, EAGLE3, STANDALONE, NGRAM)
    startup: StartupPhases
    # Acceptance modifiers (see console.sim.perf).
    ignore_eos_rejection_scale: float  # forced continuation is repetitive: rejections shrink by this factor
    temperature_accept_drop: float  # at temperature 1 each position's acceptance is multiplied by 1 - this
    topk_rejection_gain: float  # each extra branch divides the rejection probability by 1 + this
    mean_natural_output_tokens: int  # mean length before a natural EOS (when ignore_eos is off)
    unit: OperatorUnit  # the launch its operators ran (the demo's unit)
    tokens_per_second_hint: str = ""  # a human note of what this profile reproduces
    extra: dict[str, str] = field(default_factory=dict)
    # Drafts told apart by their --speculative-draft-model-path (a draft of its own on this host), before the
    # algorithm's default draft
    drafts_by_path: dict[str, DraftCosts] = field(default_factory=dict)

    def draft(self, algorithm: str, draft_model_path: str | None = None) -> DraftCosts:
        """The draft costs for a resolved algorithm name and draft path (a path of drafts_by_path first, then the
        algorithm: NEXTN counts as EAGLE, unknown as the first)."""
        if draft_model_path and draft_model_path in self.drafts_by_path:
            return self.drafts_by_path[draft_model_path]
        key = algorithm.upper()
        if key == "NEXTN":
            key = "EAGLE"
        if key in self.drafts:
            return self.drafts[key]
        return next(iter(self.drafts.values()))


EAGLE_REPEAT_DRAFT = "sim/eagle-repeat"  # the tiny-test profile's draft that behaves like the H200's eagle-repeat

RTX_PRO_6000_SERVER = GpuSpec(
    name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
    memory_mib=97887,
    power_limit_w=600.0,
    idle_power_w=34.0,
    max_sm_clock_mhz=2430,
    idle_sm_clock_mhz=180,
    mem_clock_mhz=14001,
    idle_temp_c=33.0,
    max_temp_c=78.0,
)

_QWEN = SimProfile(
    name="qwen3.5-122b-fp8-4x-rtxpro6000",
    served_model="Qwen/Qwen3.5-122B-A10B-FP8",
    architecture="Qwen3_5MoeForConditionalGeneration",
    gpu=RTX_PRO_6000_SERVER,
    gpu_count=4,
    tp_size=4,
    context_length=262144,
    weights_gib_per_gpu=31.6,
    draft_weights_gib_per_gpu=0.9,
    default_mem_fraction_static=0.86,
    kv_bytes_per_token_per_gpu=12 * 2 * 256 * 2,  # 12 full-attention layers, K+V, 1 KV head/GPU, bf16
    draft_kv_bytes_per_token_per_gpu=2 * 256 * 2,
    recurrent_state_mib_per_copy=290.0,
    recurrent_pool_share=0.62,
    graph_mib_per_draft_step=420.0,
    graph_mib_base=1900.0,
    costs=StepCosts(
        fixed_ms=14.5,
        all_experts_ms=15.0,
        num_experts=256,
        experts_per_token=8,
        per_request_ms=0.4,
        per_token_ms=0.01,
        ref_context_tokens=2048,
        cpu_fixed_ms=1.0,
        cpu_per_request_ms=0.6,
        prefill_fixed_ms=12.0,
        prefill_per_token_ms=0.03,
    ),
    drafts={
        # Qwen drafts accept alike on every task: the one published per-task table of Qwen drafts (AngelSlim's Qwen3
        # EAGLE3 heads, 1.7B to 32B and 30B-A3B) has GSM8K, Alpaca, HumanEval and MT-bench within ±0.05 of one another.
        "EAGLE": DraftCosts(  # MTP (NEXTN resolves to EAGLE): one extra decoder layer from the checkpoint
            hit_after_hit=0.90,
            hit_after_miss=0.68,
            step_fixed_ms=0.1,
            step_per_token_ms=0.002,
            round_fixed_ms=0.4,
            overlap_hidden=0.5,
            tree_per_token_ms=0.03,
            cpu_per_request_ms=1.4,
            task_scales=NO_TASK_EFFECT,
        ),
        "EAGLE3": DraftCosts(
            hit_after_hit=0.83,
            hit_after_miss=0.60,
            step_fixed_ms=0.3,
            step_per_token_ms=0.004,
            round_fixed_ms=0.5,
            overlap_hidden=0.5,
            tree_per_token_ms=0.03,
            cpu_per_request_ms=1.4,
            task_scales=NO_TASK_EFFECT,
        ),
    },
    startup=StartupPhases(
        load_weights_s=96.0,
        kv_alloc_s=4.0,
        capture_cuda_graph_s=42.0,
        draft_graph_per_step_s=14.0,
        draft_extend_graph_s=9.0,
        warmup_s=6.0,
    ),
    ignore_eos_rejection_scale=0.06,
    temperature_accept_drop=0.12,
    topk_rejection_gain=0.15,
    mean_natural_output_tokens=420,
    unit=OperatorUnit(  # MTP, one step, without the overlap path (design.md: steps 1/2/3 gave 123/186/234 tok/s)
        served_model_name="qwen3.5-122b",
        speculative_algorithm="NEXTN",
        num_steps=1,
        eagle_topk=1,
        num_draft_tokens=2,
        draft_model_path=None,
        spec_v2=False,
        sglang_version="0.5.9",
    ),
    tokens_per_second_hint="topk 1, steps 1/2/3: ~123/186/234 tok/s at C=1 (temperature 0, ignore_eos)",
)

_KIMI = SimProfile(
    name="kimi-k2.5-int4-8x-rtxpro6000-pcie",
    served_model="moonshotai/Kimi-K2.5",
    architecture="KimiK25ForConditionalGeneration",
    gpu=RTX_PRO_6000_SERVER,
    gpu_count=8,
    tp_size=8,
    context_length=262144,
    weights_gib_per_gpu=69.4,
    draft_weights_gib_per_gpu=0.7,
    default_mem_fraction_static=0.88,
    kv_bytes_per_token_per_gpu=61 * (512 + 64) * 2,  # MLA latent + rope key, 61 layers, bf16, replicated
    draft_kv_bytes_per_token_per_gpu=2 * 8 * 128 * 2,  # EAGLE3 draft layer: GQA, 8 KV heads of 128, bf16
    recurrent_state_mib_per_copy=0.0,
    recurrent_pool_share=0.0,
    graph_mib_per_draft_step=300.0,
    graph_mib_base=1500.0,
    costs=StepCosts(
        fixed_ms=9.2,
        all_experts_ms=34.0,
        num_experts=384,
        experts_per_token=8,
        per_request_ms=0.86,
        per_token_ms=0.015,
        ref_context_tokens=2048,
        cpu_fixed_ms=1.0,
        cpu_per_request_ms=0.12,
        prefill_fixed_ms=30.0,
        prefill_per_token_ms=0.06,
    ),
    drafts={
        "EAGLE3": DraftCosts(
            hit_after_hit=0.42,
            hit_after_miss=0.16,
            step_fixed_ms=1.06,
            step_per_token_ms=0.005,
            round_fixed_ms=5.15,
            overlap_hidden=0.5,
            tree_per_token_ms=0.262,
            cpu_per_request_ms=0.12,
        ),
    },
    startup=StartupPhases(
        load_weights_s=330.0,
        kv_alloc_s=6.0,
        capture_cuda_graph_s=70.0,
        draft_graph_per_step_s=21.0,
        draft_extend_graph_s=12.0,
        warmup_s=10.0,
        requantize_share=0.35,  # INT4 experts repacked for the Marlin kernels at every load
    ),
    ignore_eos_rejection_scale=0.9,
    temperature_accept_drop=0.12,
    topk_rejection_gain=0.08,
    mean_natural_output_tokens=520,
    unit=OperatorUnit(  # EAGLE3 chain of 2 with spec v2: ~775 tok/s at high concurrency (design.md)
        served_model_name="kimi-k2.5",
        speculative_algorithm="EAGLE3",
        num_steps=2,
        eagle_topk=1,
        num_draft_tokens=3,
        draft_model_path="sim/kimi-k2.5-eagle3",
        spec_v2=True,
        sglang_version="0.5.9",
    ),
    tokens_per_second_hint="no spec 92.7 tok/s at C=1; EAGLE3 1/2 spec v2 86.8 at C=1, ~775 aggregate; topk 4 ~353",
)

_TINY = SimProfile(
    name="tiny-test",
    served_model="sim/tiny-test",
    architecture="LlamaForCausalLM",
    gpu=RTX_PRO_6000_SERVER,
    gpu_count=1,
    tp_size=1,
    context_length=32768,
    weights_gib_per_gpu=2.0,
    draft_weights_gib_per_gpu=0.2,
    default_mem_fraction_static=0.5,
    kv_bytes_per_token_per_gpu=16 * 2 * 8 * 64 * 2,
    draft_kv_bytes_per_token_per_gpu=2 * 8 * 64 * 2,
    recurrent_state_mib_per_copy=0.0,
    recurrent_pool_share=0.0,
    graph_mib_per_draft_step=40.0,
    graph_mib_base=200.0,
    costs=StepCosts(
        fixed_ms=0.5,
        all_experts_ms=0.0,
        num_experts=0,
        experts_per_token=0,
        per_request_ms=0.004,
        per_token_ms=0.001,
        ref_context_tokens=2048,
        cpu_fixed_ms=0.05,
        cpu_per_request_ms=0.001,
        prefill_fixed_ms=0.5,
        prefill_per_token_ms=0.0005,
    ),
    drafts={
        "EAGLE": DraftCosts(
            hit_after_hit=0.855,
            hit_after_miss=0.655,
            step_fixed_ms=0.05,
            step_per_token_ms=0.0005,
            round_fixed_ms=0.05,
            overlap_hidden=0.5,
            tree_per_token_ms=0.0005,
            cpu_per_request_ms=0.0005,
        ),
        # the real 0.5.17 on the H200 with a STANDALONE draft (issue 20: the tiny Llama and its sa-p90 draft), which
        # is host-bound: the round's host work, each draft step launched from the host, topk 2's tree (per round, and
        # per request: the full grid had topk 2 15-36 % behind topk 1 at C = 32, level at C = 1); fitted to its
        # full runs (tests/sim/test_real_0517_tune_calibration.py). Its acceptance is EAGLE's here. The base costs
        # above stay fast: the rest of the suite runs on them.
        "STANDALONE": DraftCosts(
            hit_after_hit=0.855,
            hit_after_miss=0.655,
            step_fixed_ms=0.05,
            step_per_token_ms=0.001,
            round_fixed_ms=0.05,
            overlap_hidden=0.5,
            tree_per_token_ms=0.0005,
            cpu_per_request_ms=0.17,
            cpu_round_ms=2.9,
            cpu_step_ms=0.55,
            cpu_tree_ms=0.3,
            cpu_tree_per_request_ms=0.12,
        ),
    },
    startup=StartupPhases(
        load_weights_s=2.0,
        kv_alloc_s=0.2,
        capture_cuda_graph_s=1.0,
        draft_graph_per_step_s=0.3,
        draft_extend_graph_s=0.2,
        warmup_s=0.3,
    ),
    ignore_eos_rejection_scale=0.5,
    temperature_accept_drop=0.12,
    topk_rejection_gain=0.15,
    mean_natural_output_tokens=64,
    unit=OperatorUnit(  # the tests' small server: MTP, one step, as the default demo
        served_model_name="tiny-test",
        speculative_algorithm="NEXTN",
        num_steps=1,
        eagle_topk=1,
        num_draft_tokens=2,
        draft_model_path=None,
        spec_v2=False,
        sglang_version="0.5.9",
    ),
    tokens_per_second_hint="very fast decoding, for tests and load benchmarks",
    drafts_by_path={
        # The EAGLE draft that proposes the last token again (scripts/real_sglang/build_drafts.py, eagle-repeat) on the
        # random-weight tiny Llama: SGLang 0.5.17 on the H200 (../shared/research/wave4-facts.md) accepted in runs,
        # steps-3 pooled histogram [2302, 39, 20, 405] at C = 1 (accept length 1.47), 1.40 at steps 2 and 1.27 at
        # steps 1; the two-state chain fitted to the steps-3 histogram by maximum likelihood gives 0.934 / 0.047, and
        # forced lengths change nothing on a target with no natural end.
        EAGLE_REPEAT_DRAFT: DraftCosts(
            hit_after_hit=0.934,
            hit_after_miss=0.047,
            step_fixed_ms=0.05,
            step_per_token_ms=0.0005,
            round_fixed_ms=0.05,
            overlap_hidden=0.5,
            tree_per_token_ms=0.0005,
            cpu_per_request_ms=0.0005,
            ignore_eos_rejection_scale=1.0,
            task_scales=NO_TASK_EFFECT,  # it proposes the last token again, over random weights: there is no task
        ),
    },
)

PROFILES: dict[str, SimProfile] = {p.name: p for p in (_QWEN, _KIMI, _TINY)}
DEFAULT_PROFILE: str = _QWEN.name


def get_profile(name: str) -> SimProfile:
    """The profile called `name`; an unknown name raises ValueError listing the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown simulator profile {name!r}; choose one of: {known}") from None
