"""Benchmark records of the SGLang stand-in's engine on its virtual clock: what `opsconsole bench` would write for a
setup at some levels, in a fraction of a second and the same every time (for the prediction's tests, which hold the
prediction to the stand-in's truth without a server process: the truth comes from console.sim, the prediction from
the records only).

The requests go through the engine as bench_serving's closed loop sends them (C clients, each sending its next
request when its last one finishes); each request's TTFT, latency, verify rounds and accept histogram are what the
engine's steps gave it, and the level's figures come from console.bench.metrics as for a real run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from console.bench.metrics import RequestResult, compute_metrics
from console.bench.records import BenchRecord, order_server_args
from console.sglang.specmode import spec_mode
from console.sim.engine import Engine, run_closed_loop
from console.sim.profiles import SimProfile

EPOCH = datetime(2026, 12, 1, tzinfo=UTC)


def level_results(
    profile: SimProfile,
    resolved: Mapping[str, Any],
    concurrency: int,
    input_len: int,
    output_len: int,
    n_requests: int,
    *,
    seed: int = 0,
    temperature: float = 0.0,
) -> tuple[list[RequestResult], float]:
    """Each request's result, as the bench engine would have measured it, and the level's duration (virtual s)."""
    traces, engine, _peak = run_closed_loop(
        profile, resolved, concurrency, input_len, output_len, n_requests, temperature=temperature, seed=seed
    )
    results = [
        RequestResult(
            success=True, prompt_len=input_len, output_len=t.tokens, start=t.start,
            ttft=(t.first or t.start) - t.start, latency=(t.end or t.start) - t.start,
            spec_verify_ct=t.verify_ct or None, spec_accept_histogram=t.accept_histogram or None,
        )
        for t in traces
    ]  # fmt: skip
    return results, engine.clock_s


def virtual_records(
    profile: SimProfile,
    resolved: Mapping[str, Any],
    levels: Sequence[int],
    *,
    input_len: int = 1024,
    output_len: int = 256,
    requests_per_client: int = 4,
    repeat: int = 1,
    seed: int = 0,
    label: str = "virtual",
    version: str = "0.5.17",
    temperature: float = 0.0,
    start: datetime = EPOCH,
) -> list[BenchRecord]:
    """One record per level and repeat, as `bench` writes them (the repeats interleave level by level, each with
    its own seed: their spread is the draws' own)."""
    server_args = order_server_args(dict(resolved))
    max_running = Engine(profile, resolved).perf.max_running_requests
    mode = spec_mode(version, server_args)
    records = []
    for index, concurrency in enumerate(levels):
        for r in range(repeat):
            results, duration = level_results(
                profile, resolved, concurrency, input_len, output_len,
                max(16, requests_per_client * concurrency), seed=seed + 1000 * index + r, temperature=temperature,
            )  # fmt: skip
            metrics = compute_metrics(results, duration)
            at = start + timedelta(minutes=len(records))
            workload = {"name": "random", "api": "generate", "input_len": input_len, "output_len": output_len,
                        "ignore_eos": True, "temperature": temperature, "seed": seed}  # fmt: skip
            record = BenchRecord(
                run_id=f"{label}@{start:%Y%m%dT%H%M%S}", label=label, repeat_index=r, target="virtual",
                started_at=at, ended_at=at + timedelta(seconds=duration), sglang_version=version,
                model=profile.served_model, server_args=server_args, spec_v2=mode.spec_v2 if mode else None,
                workload=workload, max_concurrency=concurrency, cache_flushed=True, accept_length_source="requests",
                effective_max_running_requests=max_running, **metrics,
            )  # fmt: skip
            records.append(record)
    return records


def without_prediction_figures(record: BenchRecord) -> BenchRecord:
    """The record as a server before SGLang 0.5.17 (no histogram) and a console before the prediction left it."""
    return record.model_copy(
        update={"spec_accept_histogram": None, "decode_batch": None, "round_time_ms": None, "decode_rounds": None}
    )


def resolved_args(
    algorithm: str | None,
    steps: int = 0,
    topk: int = 1,
    draft_tokens: int | None = None,
    *,
    spec_v2: bool = True,
    draft_model_path: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """What /server_info says for a setup (the keys the prediction reads), overlap on for spec v2 (0.5.14+ meaning)."""
    args: dict[str, Any] = {"disable_overlap_schedule": not spec_v2 if algorithm else False, **extra}
    if algorithm:
        args.update(
            speculative_algorithm=algorithm,
            speculative_num_steps=steps,
            speculative_eagle_topk=topk,
            speculative_num_draft_tokens=draft_tokens if draft_tokens is not None else steps + 1,
            speculative_draft_model_path=draft_model_path,
        )
    return args
