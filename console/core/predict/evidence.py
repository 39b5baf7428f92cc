"""What a host's benchmark records say, reduced to what a prediction rests on (pure: records in, facts out).

Each record (one level of one run: console.bench.records) becomes a `Measured`: the setup it ran (console.sglang.setup),
its workload (acceptance and round cost both depend on it: content, temperature, lengths), its level, and its
figures: output tok/s, TTFT, TPOT, the drafts accepted per round (from the pooled `spec_accept_histogram` where the
server sent one, else from the mean accept length), and the mean round at its decode batch.

Records written before those figures were kept (before the prediction) still serve: their round is the mean TPOT
times the accept length and their decode batch the concurrency times the share of a request spent decoding, both
read off the level's means (`Measured.derived`: the prediction says so).

`Evidence.noise` is the run-to-run spread the records show: for every (setup, workload, level) measured more than once
(repeats, or runs on different days), (max - min) / (2 x median) of the output tok/s, the median over those cells.
Nothing is assumed where nothing was repeated: `noise` is None and every band says so.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.bench.records import BenchRecord
from console.sglang.setup import SpecSetup
from console.sglang.specmode import SpecMode


def workload_key(workload: Mapping[str, Any]) -> str:
    """A record's workload in one line, the same for the same traffic: "random 128/64 t=0 forced" or
    "dataset 3f2a9c1e0b7d output<=256 t=0"."""
    name = str(workload.get("name") or "?")
    temperature = workload.get("temperature")
    parts = [name if workload.get("api") in (None, "generate") else f"{name} ({workload.get('api')})"]
    dataset = workload.get("dataset")
    shape = workload.get("shape")
    if isinstance(dataset, Mapping):
        parts.append(str(dataset.get("sha256") or dataset.get("file") or "?")[:12])
        if workload.get("output_len"):
            parts.append(f"output<={workload['output_len']}")
    elif isinstance(shape, Mapping):
        parts.append(json.dumps(shape, sort_keys=True)[:40])
    else:
        parts.append(f"{workload.get('input_len') or '?'}/{workload.get('output_len') or '?'}")
    if temperature is not None:
        parts.append(f"t={float(temperature):g}")
    if workload.get("ignore_eos"):
        parts.append("forced")
    return " ".join(parts)


def overlap_of(server_args: Mapping[str, Any], mode: SpecMode | None) -> bool:
    """Did (does) the overlap scheduler run: the spec-v2 verdict's where it knows, else SGLang's default (on) unless
    the server args say `disable_overlap_schedule`."""
    if mode is not None and mode.overlap is not None:
        return mode.overlap
    return not bool(server_args.get("disable_overlap_schedule"))


@dataclass(frozen=True)
class Measured:
    """One record's level, as the prediction reads it."""

    setup: SpecSetup
    overlap: bool
    workload: str
    concurrency: int
    output_tok_s: float
    ttft_ms: float
    tpot_ms: float
    output_len: float  # tokens per request, the mean
    completed: int
    accept_length: float | None  # SGLang's: completion tokens / verify rounds
    mean_accepted: float | None  # drafts accepted per round (the prefill's token taken out)
    histogram: tuple[int, ...] | None
    rounds: int  # verify rounds (decode rounds without speculation)
    decode_batch: float
    round_ms: float
    derived: bool  # round and batch read off the level's means (a record from before they were kept)
    max_running: int | None  # the server's effective max running requests, where the record kept it
    percentiles: dict[str, float]  # the record's latency figures (mean_ttft_ms, p95_tpot_ms, ...), for an SLO
    run_id: str
    label: str
    started_at: str
    host: str = ""  # the record's target: this host's, or another of its group's (pooled)

    @classmethod
    def from_record(cls, record: BenchRecord) -> Measured | None:
        """None for a level without a finished request, a rate level (open loop) or one without decode figures."""
        if record.max_concurrency is None or record.request_rate is not None or record.completed <= 0:
            return None
        setup = SpecSetup.from_server_args(record.server_args, record.spec_mode)
        output_len = record.total_output_tokens / record.completed
        accept = record.accept_length if setup.speculative else None
        rounds, mean_accepted = _rounds(record, setup, output_len)
        derived = record.round_time_ms is None or record.decode_batch is None
        if derived:
            round_ms = record.mean_tpot_ms * (accept or 1.0)
            e2e = record.mean_e2e_latency_ms
            decode_share = (e2e - record.mean_ttft_ms) / e2e if e2e > 0 else 0.0
            batch = record.concurrency * decode_share
        else:
            round_ms, batch = float(record.round_time_ms or 0.0), float(record.decode_batch or 0.0)
        if round_ms <= 0 or batch <= 0:
            return None
        histogram = tuple(record.spec_accept_histogram) if setup.speculative and record.spec_accept_histogram else None
        return cls(
            setup=setup,
            overlap=overlap_of(record.server_args, record.spec_mode),
            workload=workload_key(record.workload),
            concurrency=record.max_concurrency,
            output_tok_s=record.output_throughput,
            ttft_ms=record.mean_ttft_ms,
            tpot_ms=record.mean_tpot_ms,
            output_len=output_len,
            completed=record.completed,
            accept_length=accept,
            mean_accepted=mean_accepted,
            histogram=histogram,
            rounds=rounds,
            decode_batch=batch,
            round_ms=round_ms,
            derived=derived,
            max_running=_int(record.effective_max_running_requests)
            or _int(record.server_args.get("max_running_requests")),
            percentiles={
                k: float(v) for k in _LATENCY_FIELDS if isinstance(v := getattr(record, k, None), (int, float))
            },
            run_id=record.run_id,
            label=record.label,
            started_at=record.started_at.isoformat(),
            host=record.target,
        )

    def mean(self, metric: str) -> float:
        """The level's mean of a latency metric (ttft, tpot, itl, e2e), in ms."""
        return self.percentiles.get(f"mean_{'e2e_latency' if metric == 'e2e' else metric}_ms", 0.0)

    @property
    def cell(self) -> tuple[SpecSetup, bool, str, int]:
        """What repeats of one measurement share: the setup (its draft included), the overlap, workload and level."""
        return self.setup, self.overlap, self.workload, self.concurrency


# The record's latency figures an SLO is held to (mean_ttft_ms, p95_tpot_ms, ...): its fields ending in _ms.
_LATENCY_FIELDS = tuple(
    name for name in BenchRecord.model_fields if name.endswith("_ms") and name.split("_")[0] in
    ("mean", "median", "std", "p90", "p95", "p99", "max")
)  # fmt: skip


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _rounds(record: BenchRecord, setup: SpecSetup, output_len: float) -> tuple[int, float | None]:
    """(verify rounds, drafts accepted per round). SGLang's accept length counts the prefill's token too (completion
    tokens / verify rounds), one token a request that no round produced: taken out here."""
    if not setup.speculative:
        return max(0, record.total_output_tokens - record.completed), None
    histogram = record.spec_accept_histogram
    if histogram and sum(histogram):
        return sum(histogram), sum(i * n for i, n in enumerate(histogram)) / sum(histogram)
    verify = record.spec_verify_ct or (
        round(record.total_output_tokens / record.accept_length) if record.accept_length else 0
    )
    if not verify:
        return 0, None
    return verify, max(0.0, (record.total_output_tokens - record.completed) / verify - 1.0)


@dataclass
class Evidence:
    """A host's measured levels, newest last."""

    levels: list[Measured] = field(default_factory=list)

    @classmethod
    def from_records(cls, records: Iterable[BenchRecord]) -> Evidence:
        levels = [m for r in sorted(records, key=lambda r: r.started_at) if (m := Measured.from_record(r))]
        return cls(levels)

    def workloads(self) -> list[str]:
        """Every workload measured, the most measured first."""
        counts: dict[str, int] = {}
        for m in self.levels:
            counts[m.workload] = counts.get(m.workload, 0) + 1
        return sorted(counts, key=lambda w: -counts[w])

    def of(self, workload: str) -> list[Measured]:
        return [m for m in self.levels if m.workload == workload]

    def setups(self, workload: str) -> list[SpecSetup]:
        return list(dict.fromkeys(m.setup for m in self.of(workload)))

    def cells(self, workload: str) -> dict[tuple[SpecSetup, bool, str, int], list[Measured]]:
        out: dict[tuple[SpecSetup, bool, str, int], list[Measured]] = {}
        for m in self.of(workload):
            out.setdefault(m.cell, []).append(m)
        return out

    def noise(self, workload: str | None = None) -> float | None:
        """The median half-spread of output tok/s over the cells measured more than once; None without one."""
        spreads = []
        for workload_name in [workload] if workload else self.workloads():
            for cell in self.cells(workload_name).values():
                figures = [m.output_tok_s for m in cell]
                if len(figures) >= 2 and statistics.median(figures) > 0:
                    spreads.append((max(figures) - min(figures)) / (2 * statistics.median(figures)))
        return statistics.median(spreads) if spreads else None

    def accept_noise(self, workload: str | None = None) -> float | None:
        """The median half-spread of the accept length over the cells measured more than once (repeats and runs
        alike: a level's own rounds are one launch's and one set of prompts', and the next run's differ by more than
        their count says: two launches of one setup on the H100, 1.652 and 1.623); None without one."""
        spreads = []
        for workload_name in [workload] if workload else self.workloads():
            for cell in self.cells(workload_name).values():
                figures = [1.0 + m.mean_accepted for m in cell if m.mean_accepted is not None]
                if len(figures) >= 2:
                    spreads.append((max(figures) - min(figures)) / (2 * statistics.median(figures)))
        return statistics.median(spreads) if spreads else None

    def repeated_cells(self, workload: str) -> int:
        return sum(1 for cell in self.cells(workload).values() if len(cell) >= 2)


def median_figure(levels: Sequence[Measured], figure: str) -> float:
    return statistics.median(float(getattr(m, figure)) for m in levels)
