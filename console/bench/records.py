"""Benchmark result records: one JSONL line per level (and repeat), with full provenance.

Where: `logs/bench-<YYYY-MM-DD>.jsonl` in the workspace (UTC date of the sweep start), appended, one line
per level and repeat. A run is all the records of one sweep; they share `run_id` and `label`.
`compare` finds runs by label across every logs/bench-*.jsonl (the newest run with that label wins) or
takes a JSONL file directly.

Field names follow bench_serving where it has one (output_throughput, mean_ttft_ms, median_tpot_ms,
p99_itl_ms, accept_length, concurrency, ...); the speculative server args come first in `server_args`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from console.bench.levels import LevelKey
from console.secrets import REDACTED, is_secret_name
from console.sglang.specmode import SpecMode, spec_mode
from console.sglang.vocabulary import View, dests

if TYPE_CHECKING:  # only annotations: `compare` reads records without loading the load engine (aiohttp)
    from console.bench.engine import LevelResult, SweepResult

SCHEMA_VERSION = 1
# Where the load came from: `direct` (--url), `console` (this machine, through the SSH port forward), `host` (the
# console's engine carried to the GPU host over SSH and run there), `on-host` (the console itself runs on the host).
ClientLocation = Literal["direct", "console", "host", "on-host"]

# Server args an operator tunes for speculative decoding, shown first in every record.
SPECULATIVE_ARG_ORDER = dests(View.RECORD)


def unit_hash(unit_text: str) -> str:
    """Short content hash of the unit file, so a record says exactly which setup it measured."""
    return "sha256:" + hashlib.sha256(unit_text.encode()).hexdigest()[:16]


def order_server_args(args: dict[str, Any]) -> dict[str, Any]:
    """Speculative args first (in SPECULATIVE_ARG_ORDER), then any other speculative_*, then the rest
    alphabetically; secrets masked (console.secrets decides what is one), since a server echoes its args in
    /server_info and records go to logs."""
    clean = {k: (REDACTED if is_secret_name(k) and v else v) for k, v in args.items()}
    first = [k for k in SPECULATIVE_ARG_ORDER if k in clean]
    spec_rest = sorted(k for k in clean if k.startswith("speculative_") and k not in first)
    rest = sorted(k for k in clean if k not in first and k not in spec_rest)
    return {k: clean[k] for k in (*first, *spec_rest, *rest)}


class BenchRecord(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    label: str
    repeat_index: int = 0
    target: str
    client_location: ClientLocation = "direct"
    link_round_trip_ms: float | None = None  # the SSH link's round trip when the sweep started (TARGET runs)
    started_at: datetime
    ended_at: datetime
    # provenance
    sglang_version: str | None = None
    model: str | None = None
    server_args: dict[str, Any] = Field(default_factory=dict)
    unit_hash: str | None = None
    spec_v2: bool | None = None  # the spec-v2 worker, as the version's rules read the unit (the server does not say)
    gpus: list[dict[str, Any]] = Field(default_factory=list)
    driver_version: str | None = None
    workload: dict[str, Any] = Field(default_factory=dict)
    # what a dataset's or trace's lengths were counted in: "tokens" (the model's tokenizer) or "words" (none could be
    # had); None for synthetic workloads and for records written before it (docs/traffic.md)
    length_unit: str | None = None
    # the level
    max_concurrency: int | None = None
    request_rate: float | None = None
    trace_speed: float | None = None  # a trace replayed on its own clock, this many times its pace
    cache_flushed: bool = False
    stopped: str | None = None
    # metrics, bench_serving's names
    completed: int = 0
    failed: int = 0
    errors: dict[str, int] = Field(default_factory=dict)
    duration: float = 0.0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    request_throughput: float = 0.0
    input_throughput: float = 0.0
    output_throughput: float = 0.0
    total_throughput: float = 0.0
    mean_request_output_throughput: float = 0.0
    median_request_output_throughput: float = 0.0
    concurrency: float = 0.0
    accept_length: float | None = None
    accept_length_source: str | None = None
    # what a prediction rests on (console.core.predict): the level's verify rounds by drafts accepted (SGLang's
    # spec_accept_histogram summed over its requests; None where the server does not send it), their count, the
    # time-weighted mean of requests decoding, and the rounds' count and mean time (console.bench.metrics)
    spec_accept_histogram: list[int] | None = None
    spec_verify_ct: int | None = None
    # which spelling of SGLang's speculative meta_info the level saw (console.sglang.spec_meta): the spec keys its
    # requests carried, the key the histograms came from, the spelling's name ("0.5.23", "0.5.12-0.5.17", ...)
    spec_meta_keys: list[str] | None = None
    spec_histogram_key: str | None = None
    spec_spelling: str | None = None
    decode_batch: float | None = None
    decode_rounds: int | None = None
    round_time_ms: float | None = None
    effective_max_running_requests: int | None = None  # the server's running-request cap (its memory's, where lower)
    # how the level was warmed (console.bench.engine.Warmup): `level` (waves at its own concurrency) or `settle` (waves
    # until the round time of two in a row agreed: right after a start), the requests and waves sent, each wave's mean
    # round; None in records from before it was kept
    warmup_mode: str | None = None
    warmup_requests: int | None = None
    warmup_waves: int | None = None
    warmup_round_ms: list[float] | None = None
    warmup_settled: bool | None = None
    max_output_tokens_per_s: float = 0.0
    max_concurrent_requests: int = 0
    mean_ttft_ms: float = 0.0
    median_ttft_ms: float = 0.0
    std_ttft_ms: float = 0.0
    p90_ttft_ms: float = 0.0
    p95_ttft_ms: float = 0.0
    p99_ttft_ms: float = 0.0
    mean_tpot_ms: float = 0.0
    median_tpot_ms: float = 0.0
    std_tpot_ms: float = 0.0
    p90_tpot_ms: float = 0.0
    p95_tpot_ms: float = 0.0
    p99_tpot_ms: float = 0.0
    mean_itl_ms: float = 0.0
    median_itl_ms: float = 0.0
    std_itl_ms: float = 0.0
    p90_itl_ms: float = 0.0
    p95_itl_ms: float = 0.0
    p99_itl_ms: float = 0.0
    max_itl_ms: float = 0.0
    mean_e2e_latency_ms: float = 0.0
    median_e2e_latency_ms: float = 0.0
    std_e2e_latency_ms: float = 0.0
    p90_e2e_latency_ms: float = 0.0
    p95_e2e_latency_ms: float = 0.0
    p99_e2e_latency_ms: float = 0.0
    # against the SLO the sweep was given (console.bench.slo): absent without one
    slo: dict[str, float] | None = None  # {"ttft_p95": 800.0, ...}, limits in ms
    slo_met: bool | None = None  # every bound's percentile within its limit
    slo_misses: list[str] = Field(default_factory=list)
    request_goodput: float | None = None  # req/s whose own TTFT, TPOT, E2E met the limits
    slo_attainment: float | None = None  # good requests / requests sent
    # GPU telemetry over the level (absent when no sampler was given)
    gpu_samples: int = 0
    mean_power_w: float | None = None
    max_power_w: float | None = None
    mean_util_pct: float | None = None
    max_util_pct: float | None = None
    mean_sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    mean_memory_used_mib: float | None = None
    max_memory_used_mib: float | None = None
    energy_j: float | None = None
    tokens_per_joule: float | None = None
    # a PD deployment's level side by side, as its prefill and decode servers and smg counted it over the level's
    # measured requests (console.core.deployment.sides: prefill's TTFT, decode's TPOT, the KV transfer, every failure
    # and smg_pd_* counter's increase); None for a server of its own
    per_side: dict[str, Any] | None = None

    @property
    def spec_mode(self) -> SpecMode | None:
        """The spec-v2 worker and the overlap of the measured setup: the server's resolved args where the record
        has them with the version, else the verdict the record kept (console.sglang.specmode.spec_mode)."""
        return record_spec_mode(self.server_args, self.spec_v2, self.sglang_version)

    def _side(self, side: str, key: str) -> float | None:
        value = (self.per_side or {}).get(side, {}).get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    # A PD deployment's level side by side, as figures `compare` lines up (None for a server of its own).
    @property
    def pd_prefill_ttft_ms(self) -> float | None:
        """TTFT as the prefill servers measured it over the level (prefill's side)."""
        return self._side("prefill", "ttft_ms_servers")

    @property
    def pd_prefill_ms_smg(self) -> float | None:
        """The prefill's duration as smg measured it."""
        return self._side("prefill", "prefill_ms_smg")

    @property
    def pd_decode_tpot_ms(self) -> float | None:
        """TPOT as the decode servers measured it (their inter-token latency: decode's side)."""
        return self._side("decode", "tpot_ms_servers")

    @property
    def pd_kv_transfer_ms(self) -> float | None:
        return self._side("decode", "kv_transfer_ms")

    @property
    def pd_kv_bootstrap_ms(self) -> float | None:
        return self._side("decode", "kv_bootstrap_ms")

    @property
    def pd_failures(self) -> float | None:
        """Every PD failure counter's increase over the level: both sides' bootstrap and transfer failures and prefill
        retries, and smg's smg_pd_*_total (its bootstrap and rendezvous failures)."""
        if not self.per_side:
            return None
        total = 0.0
        for side in ("prefill", "decode"):
            failures = self.per_side.get(side, {}).get("failures", {})
            total += sum(float(v) for v in failures.values() if isinstance(v, (int, float)))
        smg = self.per_side.get("smg", {})
        total += sum(float(v) for k, v in smg.items() if "fail" in k and isinstance(v, (int, float)))
        return total

    @property
    def level(self) -> LevelKey:
        """What compare lines up across runs (console.bench.levels)."""
        return LevelKey.of(self.max_concurrency, self.request_rate, self.trace_speed)

    @property
    def level_key(self) -> str:
        """The level's text, `C=8`: what the rolling gate's baseline names (console/core/roll/gate_plan.py)."""
        return str(self.level)


def record_spec_mode(
    server_args: Mapping[str, Any], spec_v2: bool | None, version: str | None = None
) -> SpecMode | None:
    """A record's verdict on the spec-v2 worker and the overlap, from what it holds (its server args and
    version; else the `spec_v2` it kept)."""
    kept = SpecMode(spec_v2, None, "record") if spec_v2 is not None else None
    return spec_mode(version, server_args, rules=kept)


def records_from_sweep(
    sweep: SweepResult,
    *,
    run_id: str,
    label: str,
    target: str,
    client_location: ClientLocation = "direct",
    unit_hash: str | None = None,
    workload: dict[str, Any] | None = None,
    link_round_trip_ms: float | None = None,
    spec_v2: bool | None = None,
) -> list[BenchRecord]:
    out = []
    for level in sweep.levels:
        record = _record(level, sweep, run_id, label, target, client_location, unit_hash, workload or {})
        record.link_round_trip_ms = link_round_trip_ms
        record.spec_v2 = spec_v2
        record.length_unit = (workload or {}).get("dataset", {}).get("length_unit")
        out.append(record)
    return out


def _record(
    level: LevelResult,
    sweep: SweepResult,
    run_id: str,
    label: str,
    target: str,
    client_location: ClientLocation,
    unit_hash: str | None,
    workload: dict[str, Any],
) -> BenchRecord:
    return BenchRecord(
        run_id=run_id,
        label=label,
        repeat_index=level.repeat_index,
        target=target,
        client_location=client_location,
        started_at=level.started_at,
        ended_at=level.ended_at,
        sglang_version=sweep.server.version,
        model=sweep.server.model,
        server_args=order_server_args(sweep.server.server_args),
        effective_max_running_requests=sweep.server.effective_max_running_requests,
        unit_hash=unit_hash,
        gpus=sweep.gpus,
        driver_version=sweep.driver_version,
        workload=workload,
        max_concurrency=level.level.concurrency,
        request_rate=level.level.request_rate,
        trace_speed=level.level.trace_speed,
        cache_flushed=level.cache_flushed,
        stopped=level.stopped,
        accept_length_source=level.accept_length_source,
        **level.metrics,
        **level.telemetry,
        **(level.warmup.to_record() if level.warmup else {}),
        per_side=level.per_side,
    )


def log_path(logs_dir: Path, started: datetime) -> Path:
    return logs_dir / f"bench-{started:%Y-%m-%d}.jsonl"


def append_records(logs_dir: Path, records: Iterable[BenchRecord]) -> Path | None:
    """Append each record as one line to its day's file; returns the (last) file written."""
    path = None
    logs_dir.mkdir(parents=True, exist_ok=True)
    for record in records:
        path = log_path(logs_dir, record.started_at)
        with path.open("a", encoding="utf-8") as f:
            f.write(record.model_dump_json() + "\n")
    return path


def read_records(path: Path) -> list[BenchRecord]:
    """Every record of a JSONL file. A line that is not a record raises ValueError naming the line."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(BenchRecord.model_validate(json.loads(line)))
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not a benchmark record ({str(exc).splitlines()[0]})") from exc
    return out


def load_run(ref: str, logs_dir: Path) -> list[BenchRecord]:
    """A run by JSONL file path, or by label (newest run with it) across logs/bench-*.jsonl.
    Raises LookupError with what to do when nothing matches."""
    path = Path(ref)
    if path.suffix == ".jsonl" or path.is_file():
        if not path.is_file():
            raise LookupError(f"no such file: {ref}")
        records = read_records(path)
        if not records:
            raise LookupError(f"{ref} holds no benchmark records")
        return records
    matching: list[BenchRecord] = []
    for file in sorted(logs_dir.glob("bench-*.jsonl")):
        matching.extend(r for r in read_records(file) if r.label == ref or r.run_id == ref)
    if not matching:
        labels = sorted({r.label for f in logs_dir.glob("bench-*.jsonl") for r in read_records(f)})
        known = ", ".join(labels[-10:]) or "none yet"
        raise LookupError(f"no run labelled {ref!r} in {logs_dir} (labels there: {known}); or pass a .jsonl file")
    newest = max(matching, key=lambda r: r.started_at).run_id
    return [r for r in matching if r.run_id == newest]
