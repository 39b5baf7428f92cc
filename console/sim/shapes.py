"""SGLang's JSON shapes per emulated version (pure builders, no I/O).

Version differences kept here (read from each release's http_server.py and io_struct.py): meta_info key names,
/server_info extras, which load endpoint exists. From 0.5.17 on the shapes follow what a real SGLang 0.5.17
server answered on an H200 (fixtures in tests/sim/fixtures/real-0.5.17/): every ServerArgs field in
/server_info, the detailed /v1/loads, /get_load, /model_info, meta_info and OpenAI chunk shapes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


# Cached: every streamed chunk asks for its version's shapes several times, and parsing the string each time was a
# quarter of the stand-in's CPU under load (a C=48 bench, cProfile). Only a handful of versions ever occur.
@functools.lru_cache(maxsize=64)
def version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def at_least(version: str, minimum: str) -> bool:
    return version_tuple(version) >= version_tuple(minimum)


def has_get_load(version: str) -> bool:
    """0.5.17 still serves it (a deprecated alias of /v1/loads, measured); 0.5.23's source has no route."""
    return not at_least(version, "0.5.23")


def has_ready(version: str) -> bool:
    """/ready (200 when taking requests, 503 while starting, paused or stopping): in 0.5.23's http_server.py, not in
    0.5.17's."""
    return at_least(version, "0.5.23")


def has_v1_loads(version: str) -> bool:
    return at_least(version, "0.5.9")


def new_spec_names(version: str) -> bool:
    """spec_accept_token_num/spec_draft_token_num and total_retractions carry their new names in 0.5.17 (measured)
    and 0.5.23 (source)."""
    return at_least(version, "0.5.17")


def has_tokenize(version: str) -> bool:
    """/tokenize and /detokenize (and their /v1/ aliases): first served by 0.5.4 (not in 0.5.3's http_server.py; PR
    sgl-project/sglang#9545), in every release since that this stand-in emulates (docs/traffic.md)."""
    return at_least(version, "0.5.4")


def tokenize_takes_messages(version: str) -> bool:
    """/tokenize's `messages` (the chat template applied, then counted): 0.5.12 on; 0.5.6 and 0.5.9 take `prompt`
    only."""
    return at_least(version, "0.5.12")


def detailed(version: str) -> bool:
    """Emulate what a real 0.5.17 server showed (more meta_info, /v1/loads, chunk and error keys, metrics, log
    lines, health timing, SIGTERM). For 0.5.17 up to the next supported release: 0.5.23 keeps the shapes read from
    its own source, which were not run on hardware."""
    return at_least(version, "0.5.17") and not at_least(version, "0.5.23")


def finish_reason(kind: str | None, length: int) -> dict[str, Any] | None:
    if kind is None:
        return None
    if kind == "length":
        return {"type": "length", "length": length}
    if kind == "abort":
        return {"type": "abort", "message": "Abort before prefill"}
    return {"type": "stop", "matched": 1}


def meta_info(
    *,
    version: str,
    rid: str,
    finish: str | None,
    prompt_tokens: int,
    completion_tokens: int,
    spec: bool,
    verify_ct: int,
    num_draft_tokens: int,
    e2e_latency: float | None,
    accept_histogram: Sequence[int] = (),
    started: float | None = None,
    first_token_at: float | None = None,
    streaming: bool = False,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    """A /generate chunk's meta_info; the final chunk (finish set) adds e2e_latency and the spec counters.
    From 0.5.17 also the scheduler's timestamps, reasoning/cached token details and the drafts' histograms, in
    the order a real 0.5.17 server sends them (streamed chunks put response_sent_to_client_ts earlier)."""
    now = time.time()
    t0 = started if started is not None else now
    first = first_token_at if first_token_at is not None else now
    more = detailed(version)
    meta: dict[str, Any] = {
        "id": rid,
        "finish_reason": finish_reason(finish, completion_tokens),
        "prompt_tokens": prompt_tokens,
        "weight_version": "default",
    }
    meta["num_retractions" if new_spec_names(version) else "total_retractions"] = 0
    if more:
        meta.update(forward_entry_time=t0 + 0.0002, prefill_finished_time=first, queue_time=0.0002, reasoning_tokens=0)
    meta["completion_tokens"] = completion_tokens
    meta["cached_tokens"] = cached_tokens
    if more:
        # {"device": N, "host": 0} once a prefix was cached (the real capture's generate_stream), else None
        meta["cached_tokens_details"] = {"device": cached_tokens, "host": 0} if cached_tokens else None
        meta["dp_rank"] = None
    if finish is None:
        if more:
            meta["response_sent_to_client_ts"] = now
        return meta
    meta["e2e_latency"] = e2e_latency
    if spec:
        meta.update(spec_meta_info(version, completion_tokens, verify_ct, num_draft_tokens, accept_histogram))
    if more:
        decode_s = max(1e-9, now - first)
        meta["request_received_ts"] = t0
        meta["api_server_dispatch_finish_ts"] = t0 + 0.0004
        if streaming:
            meta["response_sent_to_client_ts"] = now
        meta["request_finished_ts"] = now
        meta["decode_throughput"] = completion_tokens / decode_s
        if not streaming:
            meta["response_sent_to_client_ts"] = now
    return meta


def spec_meta_info(
    version: str, completion_tokens: int, verify_ct: int, num_draft_tokens: int, accept_histogram: Sequence[int] = ()
) -> dict[str, Any]:
    """The speculative keys of a finished request's meta_info, as each release's tokenizer manager writes them
    (`_calculate_spec_decoding_metrics`; tests/sglang/test_spec_meta_wheels.py holds this to every supported wheel):
    - 0.5.6: accept rate 0.0, length 0 and verify_ct always; with verify rounds and drafts proposed, the figures and
      spec_accept_token_num / spec_draft_token_num;
    - 0.5.9: nothing without a verify round; then the figures, the same counts, and spec_accept_histogram;
    - 0.5.12 to 0.5.17: spec_num_correct_drafts / spec_num_proposed_drafts, with the 0.5.11 names as aliases
      (spec_accepted_drafts / spec_proposed_drafts), and the histogram under both names;
    - 0.5.23: the new names only (spec_correct_drafts_histogram).
    The histogram is the rounds as drawn (the engine's: index = drafts accepted, bonus excluded, as long as the most
    seen + 1, its sum verify_ct), left out when empty; the correct drafts are its weighted sum. A caller without
    rounds gets the totals spread evenly. Proposed drafts are verify_ct x (draft tokens - 1) of the launch config."""
    proposed = verify_ct * max(0, num_draft_tokens - 1)
    histogram = list(accept_histogram) or drafts_histogram(max(0, completion_tokens - 1 - verify_ct), verify_ct)
    correct = sum(i * rounds for i, rounds in enumerate(histogram))
    accept_length = completion_tokens / verify_ct if verify_ct else 0.0
    accept_rate = correct / proposed if proposed else 0.0
    out: dict[str, Any] = {}
    if not at_least(version, "0.5.9"):
        out.update(spec_accept_rate=0.0, spec_accept_length=0, spec_verify_ct=verify_ct)
        if verify_ct > 0 and proposed > 0:
            out.update(spec_accept_rate=accept_rate, spec_accept_length=accept_length)
            out.update(spec_accept_token_num=correct, spec_draft_token_num=proposed, spec_verify_ct=verify_ct)
        return out
    if verify_ct <= 0:
        return out
    if not at_least(version, "0.5.12"):
        if proposed > 0:
            out.update(spec_accept_rate=accept_rate, spec_accept_length=accept_length)
            out.update(spec_accept_token_num=correct, spec_draft_token_num=proposed, spec_verify_ct=verify_ct)
        if histogram:
            out["spec_accept_histogram"] = histogram
        return out
    aliases = not at_least(version, "0.5.23")  # "FIXME: backward-compat aliases, remove in next release"
    if proposed > 0:
        out.update(spec_accept_rate=accept_rate, spec_accept_length=accept_length)
        out.update(spec_num_correct_drafts=correct, spec_num_proposed_drafts=proposed, spec_verify_ct=verify_ct)
        if aliases:
            out.update(spec_accepted_drafts=correct, spec_proposed_drafts=proposed)
    if histogram:
        out["spec_correct_drafts_histogram"] = histogram
        if aliases:
            out["spec_accept_histogram"] = list(histogram)
    return out


def drafts_histogram(accepted_drafts: int, verify_ct: int) -> list[int]:
    """Verify steps by their number of correct drafts (index = drafts accepted in that step), as SGLang's
    spec_correct_drafts_histogram; the stand-in knows only the totals, so the steps are spread as evenly as
    they can be (the counts add up to verify_ct and the drafts to accepted_drafts)."""
    if verify_ct <= 0:
        return []
    low, high_steps = divmod(accepted_drafts, verify_ct)
    histogram = [0] * (low + 2)
    histogram[low] = verify_ct - high_steps
    histogram[low + 1] = high_steps
    while len(histogram) > 1 and histogram[-1] == 0:
        histogram.pop()
    return histogram


def chat_chunk(
    cid: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish: str | None,
    usage: Any = None,
    *,
    version: str = "",
) -> dict[str, Any]:
    """One streamed chat chunk. 0.5.17 sends no "usage" key on them (usage comes in its own chunk)."""
    chunk: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": None}],
    }
    if not detailed(version):
        chunk["usage"] = usage
    return chunk


def chat_delta(version: str, *, first: bool = False, content: str | None = None) -> dict[str, Any]:
    """The delta of a chat chunk: the role opener, a token, or (content None) the finish chunk's.
    0.5.17 puts `reasoning_content: null` first in every delta and names the role only in the opener."""
    if not detailed(version):
        if first:
            return {"role": "assistant", "content": ""}
        return {} if content is None else {"role": None, "content": content}
    delta: dict[str, Any] = {"reasoning_content": None}
    if first:
        delta.update(role="assistant", content="")
    elif content is not None:
        delta["content"] = content
    return delta


def completion_chunk(cid: str, created: int, model: str, text: str, finish: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": None}],
        "usage": None,
    }


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
    }


def models_list(served_model_name: str, model_path: str, context_length: int, created: int) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": served_model_name,
                "object": "model",
                "created": created,
                "owned_by": "sglang",
                "root": model_path,
                "parent": None,
                "max_model_len": context_length,
            }
        ],
    }


# /model_info's "embedding" block of 0.5.17 for a generative model (measured; no embedding mode enabled).
EMBEDDING_0_5_17: dict[str, Any] = {
    "family": "none",
    "task": "none",
    "execution": "none",
    "attention": "none",
    "pooling": "model_defined",
    "normalize": False,
    "postprocessor": "none",
    "tokenizer_special_tokens": "model_default",
    "supports_dimensions": False,
    "supports_token_embeddings": False,
    "supports_multimodal": False,
    "requires_embedding_flag": False,
    "auto_enable_embedding": False,
    "bcg_eligibility": "disabled",
    "safe_disable_kv_cache": False,
    "safe_disable_radix_cache": False,
    "safe_disable_chunked_prefill": False,
    "enabled": False,
    "matryoshka_dimensions": [],
    "bcg": {"prefill_backend": "breakable", "enabled": True, "capture_token_budget": 8192, "capture_batch_sizes": []},
    "cache": {"kv_cache_disabled": False, "radix_cache_disabled": False, "chunked_prefill_disabled": False},
}
# SGLang 0.5.17's CUDA graph ladders: decode batch sizes and prefill token counts (server_info cuda_graph_config).
DECODE_GRAPH_BS = (
    *range(1, 9),
    *range(10, 33, 2),
    40,
    44,
    48,
    52,
    56,
    60,
    64,
    *range(72, 257, 8),
)
PREFILL_GRAPH_TOKENS = (
    *range(4, 33, 4),
    *range(48, 257, 16),
    *range(288, 513, 32),
    *range(576, 1025, 64),
    *range(1280, 4097, 256),
    *range(4608, 8193, 512),
)
_MODEL_TYPES = {"LlamaForCausalLM": "llama", "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe"}


def model_type(architecture: str) -> str:
    """HF config.model_type for an architecture: Llama's "llama", else the class name without its suffix."""
    if architecture in _MODEL_TYPES:
        return _MODEL_TYPES[architecture]
    for suffix in ("ForCausalLM", "ForConditionalGeneration"):
        architecture = architecture.removesuffix(suffix)
    return architecture.lower()


def model_info(
    version: str, model_path: str, tokenizer_path: str, architecture: str, served_model_name: str
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "model_path": model_path,
        "tokenizer_path": tokenizer_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": model_type(architecture) if detailed(version) else "opsconsole_sim",
        "architectures": [architecture],
    }
    if detailed(version):
        bcg = {**EMBEDDING_0_5_17["bcg"], "capture_batch_sizes": list(PREFILL_GRAPH_TOKENS)}
        info["embedding"] = {**EMBEDDING_0_5_17, "bcg": bcg}
    if at_least(version, "0.5.23"):
        info.update(
            served_model_name=served_model_name,
            load_format="auto",
            reasoning_parser=None,
            tool_call_parser=None,
            disaggregation_mode="null",
        )
    return info


def server_info(
    *,
    version: str,
    resolved: dict[str, Any],
    launch_command: str,
    max_total_num_tokens: int,
    context_length: int,
    internal_state: dict[str, Any],
    startup_time: float | dict[str, Any],
) -> dict[str, Any]:
    """/server_info: the resolved args, scheduler info, internal_states (one DP rank) and version; 0.5.23's
    startup_time is its phases {load_weight, kv_cache_allocation, scheduler_e2e, cuda_graph{...}, tokenizer_e2e}."""
    info: dict[str, Any] = dict(resolved)
    if at_least(version, "0.5.23"):
        info["launch_command"] = launch_command
    info["status"] = "ready"
    info["max_total_num_tokens"] = max_total_num_tokens
    info["max_req_input_len"] = context_length - 1
    if at_least(version, "0.5.23"):
        info["kv_events"] = None
        info["startup_time"] = startup_time
    info["internal_states"] = [{**resolved, **internal_state}]
    info["version"] = version
    if at_least(version, "0.5.23"):
        info["frontend"] = "python"
    return info


def startup_resolved(
    resolved: dict[str, Any], *, max_running_requests: int, seed: int, speculative: bool
) -> dict[str, Any]:
    """The ServerArgs values SGLang 0.5.17 fills in while it starts (an unset flag's None becomes these); what a
    real server reported for each of them in /server_info."""
    model = resolved.get("model_path")
    ladder = [bs for bs in DECODE_GRAPH_BS if bs <= max(1, max_running_requests)] or [1]
    chunked = resolved.get("chunked_prefill_size") or 8192
    filled: dict[str, Any] = {
        "tokenizer_path": model,
        "chunked_prefill_size": chunked,
        "page_size": 1,
        "device": "cuda",
        "random_seed": 100_000_000 + seed % 900_000_000,
        "served_model_name": model,
        "sampling_backend": "flashinfer",
        "grammar_backend": "xgrammar",
        "cuda_graph_config": {
            "decode": {
                "backend": "full",
                "max_bs": DECODE_GRAPH_BS[-1],
                "bs": list(DECODE_GRAPH_BS),
                "tc_compiler": "eager",
                "full_prefill_max_req": None,
                "full_prefill_prefix_chunk_tokens": None,
            },
            "prefill": {
                "backend": "breakable",
                "max_bs": chunked,
                "bs": [n for n in PREFILL_GRAPH_TOKENS if n <= chunked],
                "tc_compiler": "eager",
                "full_prefill_max_req": None,
                "full_prefill_prefix_chunk_tokens": None,
            },
        },
        "expert_distribution_recorder_buffer_size": 1000,
        "mm_process_config": {},
        "mm_feature_transport": "cuda_ipc",
        "custom_weight_loader": [],
        "load_balance_method": "round_robin",
        "encoder_transfer_backend": "zmq_to_scheduler",
    }
    if resolved.get("speculative_draft_model_path"):
        filled["speculative_draft_model_revision"] = "main"
    if speculative:
        filled["speculative_moe_runner_backend"] = "auto"
    out = {k: v for k, v in filled.items() if resolved.get(k) is None}
    out["_graph_ladder"] = ladder  # not a field: the batch sizes captured, for the startup log
    return out


def server_info_detailed(
    *,
    version: str,
    fields: tuple[tuple[str, Any], ...],
    resolved: dict[str, Any],
    filled: dict[str, Any],
    max_total_num_tokens: int,
    context_length: int,
    internal_state: dict[str, Any],
    startup_time: dict[str, Any],
) -> dict[str, Any]:
    """/server_info as 0.5.17 builds it: every ServerArgs field in declaration order (flags as resolved, the others
    at their defaults or what startup filled in), then the scheduler's figures; internal_states[0] is the
    scheduler's copy of the args (without custom_sigquit_handler) plus its private resolution state and
    memory, startup times and effective limits."""
    args: dict[str, Any] = {}
    for name, default in fields:
        value = resolved.get(name, default)
        args[name] = filled.get(name, value) if value is None else value
    info: dict[str, Any] = dict(args)
    info["status"] = "ready"
    info["max_total_num_tokens"] = max_total_num_tokens
    info["max_req_input_len"] = context_length - 6
    info["startup_time"] = startup_time
    state = {k: v for k, v in args.items() if k != "custom_sigquit_handler"}
    # The scheduler's copy differs where the scheduler resolves further (measured on 0.5.17).
    if state.get("pp_max_micro_batch_size") is None:
        state["pp_max_micro_batch_size"] = args.get("max_running_requests")
    state["disable_chunked_prefix_cache"] = True
    overrides: list[list[Any]] = [
        ["_sampling_backend_default", {"sampling_backend": args.get("sampling_backend")}],
        ["_page_size_default", {"page_size": args.get("page_size")}],
        ["_data_parallelism_defaults", {"enable_dp_attention": False, "enable_dp_lm_head": False}],
    ]
    if args.get("speculative_algorithm"):
        overrides.append(["_speculative_moe_runner_default", {"speculative_moe_runner_backend": "auto"}])
    state.update(
        _resolved_overrides=overrides,
        grpc_worker_threads=4,
        _quantization_explicitly_unset=False,
        _cuda_graph_config_locked=[],
        _declarations_materialized=True,
        _mx_config_cache={},
        max_speculative_num_draft_tokens=args.get("speculative_num_draft_tokens"),
    )
    scheduler_startup = {k: v for k, v in startup_time.items() if k != "tokenizer_e2e"}
    extras = dict(internal_state)
    avg = extras.pop("avg_spec_accept_length", None)
    state.update(
        last_gen_throughput=extras.pop("last_gen_throughput", 0.0),
        memory_usage=extras.pop("memory_usage", {}),
        startup_time=scheduler_startup,
        effective_max_running_requests_per_dp=extras.pop("effective_max_running_requests_per_dp", None),
    )
    if avg is not None:
        state["avg_spec_accept_length"] = avg
    info["internal_states"] = [state]
    info["version"] = version
    info["kv_events"] = None
    return info


def get_load(version: str, running: int, waiting: int, used_tokens: int) -> list[dict[str, Any]]:
    load: dict[str, Any] = {"dp_rank": 0, "num_reqs": running, "num_waiting_reqs": waiting, "num_tokens": used_tokens}
    if detailed(version):
        load.update(num_pending_tokens=0, ts_tic=time.monotonic())
    return [load]


def v1_loads(
    *,
    version: str,
    running: int,
    waiting: int,
    used_tokens: int,
    max_total_num_tokens: int,
    max_running_requests: int,
    gen_throughput: float,
    memory: dict[str, float],
    accept_length: float | None,
    accept_rate: float | None,
    gpu_count: int,
    accelerator: str = "cuda",
) -> dict[str, Any]:
    now = time.time()
    load: dict[str, Any] = {"dp_rank": 0, "num_running_reqs": running, "num_waiting_reqs": waiting}
    if detailed(version):
        load = {"timestamp": now, **load, "num_waiting_uncached_tokens": 0}
    load["num_used_tokens"] = used_tokens
    if detailed(version):
        load.update(num_total_tokens=used_tokens, num_active_tokens=used_tokens)
    load.update(
        max_total_num_tokens=max_total_num_tokens,
        max_running_requests=max_running_requests,
        token_usage=used_tokens / max_total_num_tokens if max_total_num_tokens else 0.0,
        gen_throughput=gen_throughput,
        cache_hit_rate=0.0,
        utilization=running / max_running_requests if max_running_requests else 0.0,
    )
    if detailed(version):
        load.update(total_prefill_uncached_tokens=0, total_prefill_busy_us=0, decode_moments=[0.0] * 6)
    load["memory"] = memory
    if accept_length is not None:
        load["speculative"] = {"accept_length": accept_length, "accept_rate": accept_rate}
    if detailed(version):
        load["disaggregation"] = {
            "mode": "null",
            "prefill_bootstrap_queue_reqs": 0,
            "prefill_inflight_queue_reqs": 0,
            "decode_prealloc_queue_reqs": 0,
            "decode_transfer_queue_reqs": 0,
            "decode_retracted_queue_reqs": 0,
            "kv_transfer_speed_gb_s": 0.0,
            "kv_transfer_latency_ms": 0.0,
        }
        load["queues"] = {"waiting": waiting, "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0}
    stamp: Any = datetime.fromtimestamp(now, UTC).isoformat() if detailed(version) else now
    return {
        "timestamp": stamp,
        "version": version,
        "accelerator": accelerator if detailed(version) else "cuda",
        "num_accelerators": gpu_count,
        "loads": [load],
    }
