"""Benchmark records at fixed times and figures (the seeds' shapes), for the runs table, the side-by-side model and
the console's compare view."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from console.bench.records import BenchRecord, order_server_args

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
NO_SPEC = {"speculative_algorithm": None, "tp_size": 8}
EAGLE = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 2, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 3, "speculative_draft_model_path": "/m/eagle3", "tp_size": 8}  # fmt: skip
# the seeds' figures: no speculation ahead at C = 1 (92.7 vs 86.8), EAGLE3 topk 1 + v2 far ahead at 64 (775 vs 353)
SEEDS_NO_SPEC = {1: 92.7, 8: 300.0, 64: 353.0}
SEEDS_EAGLE = {1: 86.8, 8: 330.0, 64: 775.0}


def run(
    label: str,
    points: dict[int, float],
    *,
    args: dict[str, Any],
    at: datetime = T0,
    repeats: int = 1,
    spread: float = 0.0,
    tpot: dict[int, float] | None = None,
    host: str = "gpu-a",
) -> list[BenchRecord]:
    """One sweep: output tok/s per concurrency (repeats spread by ±spread), TPOT per concurrency (default: what a
    closed loop of C requests at that throughput gives per token)."""
    out = []
    for n, (c, tput) in enumerate(sorted(points.items())):
        for r in range(repeats):
            wiggle = (r - (repeats - 1) / 2) * spread
            out.append(BenchRecord(
                run_id=f"{label}@{at:%H%M%S}", label=label, repeat_index=r, target=host,
                started_at=at + timedelta(minutes=n, seconds=r), ended_at=at + timedelta(minutes=n, seconds=r + 30),
                sglang_version="0.5.9", model="moonshotai/Kimi-K2.5", server_args=order_server_args(args),
                unit_hash="sha256:0123456789abcdef", workload={"name": "random", "input_len": 1024, "output_len": 1024},
                max_concurrency=c, completed=64, output_throughput=tput + wiggle,
                median_tpot_ms=(tpot or {}).get(c, 1000.0 * c / tput), median_ttft_ms=80.0 + 4 * c,
                accept_length=2.4 if args.get("speculative_algorithm") else None,
                spec_v2=bool(args.get("speculative_algorithm")) and args.get("speculative_eagle_topk") == 1,
            ))  # fmt: skip
    return out
