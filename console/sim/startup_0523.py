"""The start of SGLang 0.5.23 as its source logs it (wave5-facts §6; not run on hardware: the GPU machine's torch
fits 0.5.17 at most), over a SimServer: the phases' lines in order, then `startup_time` as `/server_info` carries it.

    Init parallel begin. / Init parallel ends. elapsed=X s                       (distributed/bootstrap.py:115, 190)
    Load weight begin. avail mem=X GB / Load weight end. elapsed=X s, type=..., avail mem=X GB, mem usage=X GB.
                                       (model_runner.py:1273-1379; the EAGLE draft the same pair, after the target)
    Memory pool end. avail mem=X GB      (kv_cache_configurator.py:498-501; one per pool, no "KV Cache is allocated")
    Capture target prefill CUDA graph begin/end                                  (cuda_graph_setup.py:683-699)
    Capture target verify CUDA graph begin/end ("target decode" without speculation; end lists bs=[...])
    Capture draft decode CUDA graph begin/end (steps > 1) / Capture draft extend CUDA graph begin/end
                                                                               (eagle_worker_v2.py:513-537, 632-659)
    Engine startup timings (s): load_weight=..., kv_cache_allocation=..., scheduler_e2e=..., cuda_graph={...},
    tokenizer_e2e=...                                                            (entrypoints/engine.py:1104-1125)

With `--speculative-adaptive` a runtime state (its CUDA graphs) is built for every candidate step
(adaptive_runtime_state.py:103-120): the verify and draft captures repeat per tier, and the start takes that much
longer. The durations are the profile's (console.sim.perf.startup_phases) times --sim-time-scale.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from console.sglang.adaptive import candidate_union, parse_config
from console.sim import gpus as gpu_model
from console.sim import sglang_log as L
from console.sim import shapes
from console.sim.start_options import (
    OVERLAP_COMMIT_SHARE,
    WeightLoad,
    compile_cache_marker,
    keep_compiled,
    leave_presharded,
    presharded_load,
    warm,
    weight_cache_load,
)

CUDA_GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")


def adaptive_tiers(resolved: dict[str, Any], adaptive_config: str | None) -> list[int]:
    """The draft steps a start captures graphs for: every adaptive candidate, else the launch steps alone."""
    steps = int(resolved.get("speculative_num_steps") or 0)
    if not resolved.get("speculative_adaptive"):
        return [steps]
    config = parse_config(adaptive_config) if adaptive_config is not None else None
    return candidate_union(config)


def weight_load(sim: Any) -> WeightLoad:
    """How the target's weights load at this start, by the options that shorten one (console.sim.start_options)."""
    cfg, resolved = sim.config, sim.config.resolved
    state = gpu_model.state_dir(cfg.state_dir)
    if resolved.get("load_format") == "presharded":
        return presharded_load(resolved, state, cfg.profile.startup.requantize_share)
    if resolved.get("weight_cache_mode") == "client":
        return weight_cache_load(resolved, gpu_model.gpu_uuid(cfg.profile.name, 0), cfg.profile.name)
    return WeightLoad()


async def start_scheduler_0523(sim: Any) -> None:
    """The scheduler's start (the port is not bound meanwhile); sets sim.startup_breakdown. StartRefused where an
    option that shortens a start cannot do what it asks (console.sim.start_options)."""
    p, cfg, resolved = sim.config.profile, sim.config, sim.config.resolved
    scale = cfg.time_scale
    phases = dict(sim.engine.startup_phases())
    sim.log(L.server_args(dict(resolved)), rank="")
    draft = cfg.speculative and str(resolved.get("speculative_algorithm")) in ("EAGLE", "EAGLE3", "STANDALONE")
    total = p.gpu.memory_mib / 1024
    final_gib = sim.engine.perf.memory_used_mib() / 1024
    weights = p.weights_gib_per_gpu
    draft_weights = p.draft_weights_gib_per_gpu if draft else 0.0
    graph_total = p.graph_mib_base / 1024
    kv = max(0.1, final_gib - weights - draft_weights - graph_total - 0.52)
    avail = total - 0.52
    sim.memory_used_mib = 530
    await sim.init_parallel()  # the ranks' rendezvous and the gate, between its two lines (console.sim.multinode)
    load = weight_load(sim)
    marker = compile_cache_marker(dict(os.environ), cfg.version, p.architecture, int(resolved.get("tp_size") or 1))
    jit = 1.0 - p.startup.capture_jit_share if warm(marker) else 1.0  # a warm compile cache: no JIT compiles
    overlap = resolved.get("startup_weight_load_mode") == "overlap"
    load_s = phases.get("load_weights", 0.0) * scale * load.factor
    models = [(p.architecture, weights, load_s)]
    if draft:
        suffix = "Eagle3" if resolved.get("speculative_algorithm") == "EAGLE3" else "Eagle"
        models.append((p.architecture + suffix, draft_weights, phases.get("load_weights", 0.0) * scale * 0.1))
    for line in load.before:
        sim.log(line)
    loaded_s = 0.0
    for n, (arch, gib, seconds) in enumerate(models):
        sim.log(L.load_weight_begin(avail))
        if overlap and n == 0:  # staged while the graphs are captured, committed after them (below)
            continue
        await asyncio.sleep(seconds)
        loaded_s += seconds
        sim._use(weight=gib)
        avail -= gib
        if n == 0:
            leave_presharded(load)
            for line in load.after:
                sim.log(line)
        sim.log(L.load_weight_end_0517(seconds, arch, avail, gib))
    staging = asyncio.ensure_future(asyncio.sleep(load_s)) if overlap else None
    kv_s = phases.get("kv_cache_alloc", 0.0) * scale
    await asyncio.sleep(kv_s)
    for gib in [kv * 0.8, kv * 0.2] if draft else [kv]:
        sim._use(kvcache=gib)
        avail -= gib
        sim.log(L.memory_pool_end(avail))
    ladder = [bs for bs in shapes.DECODE_GRAPH_BS if bs <= max(1, sim.max_running_requests)] or [1]
    chunked = int(resolved.get("chunked_prefill_size") or 8192)
    tokens = [n for n in shapes.PREFILL_GRAPH_TOKENS if n <= chunked]
    topk = int(resolved.get("speculative_eagle_topk") or 1)
    tiers = adaptive_tiers(resolved, cfg.adaptive_config) if cfg.speculative else [0]
    graphs: list[tuple[str, str, str, bool, float]] = []  # (name, timing key, begin's listing, end lists bs, s)
    if not resolved.get("disable_cuda_graph"):
        target_s = phases.get("capture_cuda_graph", 0.0) * scale * jit
        graphs.append(("target prefill", "prefill", f"backend=breakable, num_tokens={tokens}", False, target_s * 0.6))
        verify_s = target_s * 0.4 / len(tiers)
        for steps in tiers:
            per_req = (steps + 1 if topk == 1 else sim.num_draft_tokens) if cfg.speculative else 1
            name, key = ("target verify", "target_verify") if cfg.speculative and steps else ("target decode", "decode")
            graphs.append((name, key, f"backend=full, num_tokens_per_req={per_req}", True, verify_s))
        if draft:
            draft_s = phases.get("capture_draft_cuda_graph", 0.0) * scale * jit
            extend_s = phases.get("capture_draft_extend_cuda_graph", 0.0) * scale * jit
            graphs.append(("draft prefill", "draft_prefill", f"backend=breakable, num_tokens={tokens}", False,
                           draft_s * 0.3))  # fmt: skip
            for steps in [s for s in tiers if s > 0]:
                listing = f"backend=full, num_tokens_per_req={topk}, bs={ladder}"
                if steps > 1:  # one draft step runs no draft decode graph (eagle_worker_v2.py:505-510)
                    graphs.append(("draft decode", "draft_decode", listing, False, draft_s * 0.7 / len(tiers)))
                listing = f"backend=full, num_tokens_per_req={steps + 1 if topk == 1 else sim.num_draft_tokens}, "
                graphs.append(("draft extend", "draft_extend", listing + f"bs={ladder}", False, extend_s / len(tiers)))
    remaining = max(0.0, final_gib - weights - draft_weights - kv - 0.52)
    timings = dict.fromkeys(CUDA_GRAPH_PHASES, 0.0)
    sim.graph_gb = dict.fromkeys(CUDA_GRAPH_PHASES, 0.0)
    for name, key, listing, lists_bs, seconds in graphs:
        share = remaining / len(graphs)
        sim.log(f"Capture {name} CUDA graph begin. {listing}, avail mem={avail:.2f} GB")
        await asyncio.sleep(seconds)
        sim._use(graph=share)
        avail -= share
        timings[key] += seconds
        sim.graph_gb[key] = round(sim.graph_gb[key] + share, 3)
        bs = f"bs={ladder}, " if lists_bs else ""
        sim.log(
            f"Capture {name} CUDA graph end. {bs}elapsed={seconds:.2f} s, mem usage={share:.2f} GB, "
            f"avail mem={avail:.2f} GB."
        )
    if staging is not None:  # the overlap: what staging is left after the capture, then the commit
        captured_at = time.time()
        await staging
        commit_s = load_s * OVERLAP_COMMIT_SHARE
        await asyncio.sleep(commit_s)
        sim._use(weight=weights)
        avail -= weights
        window = captured_at - sim.started_at
        loaded_s += time.time() - captured_at  # the weights' time that the capture did not hide
        sim.log(
            f"Load weight end. Committed real weights after CUDA graph capture in {commit_s:.2f} s (capture overlap "
            f"window {window:.2f} s, startup overlap total {time.time() - sim.started_at:.2f} s)"
        )
    problem = keep_compiled(marker)
    if problem is not None:
        sim.log(problem)
    sim.log(L.scheduler_summary(sim.max_total_num_tokens, chunked, sim.max_running_requests, cfg.context_length, avail))
    scheduler_e2e = time.time() - sim.started_at
    sim.startup_breakdown = {
        "load_weight": round(loaded_s, 4),  # the target's and the draft's, as startup_time.py sums them
        "kv_cache_allocation": round(kv_s, 4),
        "scheduler_e2e": round(scheduler_e2e, 4),
        "cuda_graph": {k: round(v, 4) for k, v in timings.items()},
        "tokenizer_e2e": round(scheduler_e2e + 0.01, 4),
    }
    sim.log(L.engine_startup_timings(sim.startup_breakdown), rank="")
    if sim.metrics is not None:
        top = {k: v for k, v in sim.startup_breakdown.items() if k != "cuda_graph"}
        sim.metrics.set_startup(top, timings, sim.graph_gb)
        sim.metrics.set_static(
            max_total_num_tokens=sim.max_total_num_tokens,
            context_len=cfg.context_length,
            page_size=1,
            num_pages=sim.max_total_num_tokens,
            weight_memory_usage_gb=round(weights + draft_weights, 3),
            kv_cache_memory_usage_gb=round(kv, 3),
            startup_available_gpu_memory_gb=round(avail, 3),
            spec_num_steps=float(resolved.get("speculative_num_steps") or 0),
            spec_num_draft_tokens=float(resolved.get("speculative_num_draft_tokens") or 0),
            kv_available_tokens=sim.max_total_num_tokens,
        )
