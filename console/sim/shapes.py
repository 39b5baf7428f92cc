"""SGLang's JSON shapes per emulated version (pure builders, no I/O).

Version differences kept here (read from each release's http_server.py and io_struct.py): meta_info key names,
/server_info extras, which load endpoint exists.
"""

from __future__ import annotations

import time
from typing import Any


def version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def at_least(version: str, minimum: str) -> bool:
    return version_tuple(version) >= version_tuple(minimum)


def has_get_load(version: str) -> bool:
    return not at_least(version, "0.5.15")


def has_v1_loads(version: str) -> bool:
    return at_least(version, "0.5.9")


def new_spec_names(version: str) -> bool:
    """0.5.23 renamed spec_accept_token_num/spec_draft_token_num and total_retractions."""
    return at_least(version, "0.5.23")


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
) -> dict[str, Any]:
    """A /generate chunk's meta_info; the final chunk (finish set) adds e2e_latency and the spec counters."""
    meta: dict[str, Any] = {
        "id": rid,
        "finish_reason": finish_reason(finish, completion_tokens),
        "prompt_tokens": prompt_tokens,
        "weight_version": "default",
        "completion_tokens": completion_tokens,
        "cached_tokens": 0,
    }
    meta["num_retractions" if new_spec_names(version) else "total_retractions"] = 0
    if finish is not None:
        meta["e2e_latency"] = e2e_latency
        if spec:
            accepted_drafts = max(0, completion_tokens - verify_ct)
            proposed = verify_ct * max(0, num_draft_tokens - 1)
            meta["spec_verify_ct"] = verify_ct
            meta["spec_accept_length"] = completion_tokens / verify_ct if verify_ct else 0.0
            meta["spec_accept_rate"] = accepted_drafts / proposed if proposed else 0.0
            if new_spec_names(version):
                meta["spec_num_correct_drafts"] = accepted_drafts
                meta["spec_num_proposed_drafts"] = proposed
            else:
                meta["spec_accept_token_num"] = accepted_drafts
                meta["spec_draft_token_num"] = proposed
    return meta


def chat_chunk(
    cid: str, created: int, model: str, delta: dict[str, Any], finish: str | None, usage: Any = None
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": None}],
        "usage": usage,
    }


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
        "model_type": "opsconsole_sim",
        "architectures": [architecture],
    }
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
    startup_time: float,
) -> dict[str, Any]:
    """/server_info: the resolved args, scheduler info, internal_states (one DP rank) and version."""
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


def get_load(running: int, waiting: int, used_tokens: int) -> list[dict[str, Any]]:
    return [{"dp_rank": 0, "num_reqs": running, "num_waiting_reqs": waiting, "num_tokens": used_tokens}]


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
) -> dict[str, Any]:
    load: dict[str, Any] = {
        "dp_rank": 0,
        "num_running_reqs": running,
        "num_waiting_reqs": waiting,
        "num_used_tokens": used_tokens,
        "max_total_num_tokens": max_total_num_tokens,
        "max_running_requests": max_running_requests,
        "token_usage": used_tokens / max_total_num_tokens if max_total_num_tokens else 0.0,
        "gen_throughput": gen_throughput,
        "cache_hit_rate": 0.0,
        "utilization": running / max_running_requests if max_running_requests else 0.0,
        "memory": memory,
    }
    if accept_length is not None:
        load["speculative"] = {"accept_length": accept_length, "accept_rate": accept_rate}
    return {
        "timestamp": time.time(),
        "version": version,
        "accelerator": "cuda",
        "num_accelerators": gpu_count,
        "loads": [load],
    }
