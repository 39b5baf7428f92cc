"""What a host's benchmark records say, reduced to what a prediction rests on (pure: records in, facts out).

Each record (one level of one run: console.bench.records) becomes a `Measured`: the setup it ran (console.sglang.setup),
its workload (acceptance and round cost both depend on it: content, temperature, lengths), its level, and its
figures: output tok/s, TTFT, TPOT, the drafts accepted per round (from the pooled `spec_accept_histogram` where the
server sent one, else from the mean accept length), and the mean round at its decode batch.

Records written before those figures were kept (before the prediction) still serve: their round is the mean TPOT
times the accept length and their decode batch the concurrency times the share of a request spent decoding, both
read off the level's means (`Measured.derived`: the prediction says so).

`Evidence.noise` is the run-to-run spread the records show: the relative standard deviation of output tok/s pooled over
every (setup, workload, level) measured more than once (repeats, or runs of other launches and days), per level where
that level was repeated; `noise_dof` how many degrees of freedom it rests on (a band takes Student's t of them).
Nothing is assumed where nothing was repeated: `noise` is None and every band says so.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    unit_hash: str = ""  # the unit file it ran under (an edit restarts the server)
    launch: str = ""  # which start of the server it ran in (Evidence assigns it: `launches`)

    @classmethod
    def from_record(cls, record: BenchRecord) -> Measured | None:
        """None for a level without a finished request, a rate level (open loop) or one without decode figures."""
        if record.max_concurrency is None or record.request_rate is not None or record.completed <= 0:
            return None
        mode = record.spec_mode
        setup = SpecSetup.from_server_args(record.server_args, mode)
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
            overlap=overlap_of(record.server_args, mode),
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
            unit_hash=record.unit_hash or "",
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

    def __post_init__(self) -> None:
        if any(not m.launch for m in self.levels):
            self.levels = launches(self.levels)

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

    def noise(self, workload: str | None = None, concurrency: int | None = None) -> float | None:
        """The runs' relative standard deviation of output tok/s: pooled over the cells measured more than once (at
        `concurrency`, where some cell of that level was; else over every level); None without one. A level's
        spread is its own: at C = 1 a run is a few requests, and their accept lengths differ (the H100's 8B: 0.3 %
        at C = 16, 2-5 % at C = 1)."""
        return _pooled_sd(self._figures(workload, concurrency, lambda m: m.output_tok_s))

    def noise_dof(self, workload: str | None = None, concurrency: int | None = None) -> int:
        """How many degrees of freedom the runs' spread rests on (a cell of n runs gives n - 1): at `concurrency`
        where some cell of that level was repeated (what `noise` took there), else over every level."""
        return sum(len(f) - 1 for f in self._figures(workload, concurrency, lambda m: m.output_tok_s))

    def _figures(
        self, workload: str | None, concurrency: int | None, figure: Callable[[Measured], float | None]
    ) -> list[list[float]]:
        return [[f for _, f in cell] for cell in self._launch_figures(workload, concurrency, figure)]

    def _launch_figures(
        self, workload: str | None, concurrency: int | None, figure: Callable[[Measured], float | None]
    ) -> list[list[tuple[str, float]]]:
        """Each cell measured more than once: its figures with the launch each ran in (at `concurrency` where some
        cell of that level was, else at every level)."""
        cells = [
            cell
            for workload_name in ([workload] if workload else self.workloads())
            for cell in self.cells(workload_name).values()
        ]
        out = []
        for level in ([concurrency] if concurrency is not None else []) + [None]:
            out = [
                figures
                for cell in cells
                if level is None or cell[0].concurrency == level
                if len(figures := [(m.launch, f) for m in cell if (f := figure(m)) is not None]) >= 2
            ]
            if out:
                break
        return out

    def launch_ratio(self, workload: str | None = None, *, accept: bool = False) -> tuple[float, int] | None:
        """How much more a launch's figures differ from another launch's than one run's from the next run's in the
        same launch: the between-launch variance over the within-launch one (a random-effects analysis of variance,
        by moments, pooled over every cell measured in more than one launch, relative to each cell's mean), with the
        launches' degrees of freedom it rests on; None where no cell was measured in two launches with a repeat in
        one. Output tok/s, or the accept length (`accept`). Two launches of a setup differ by more than two runs of
        one: the H100's 8B steps 2 at C = 1, 222 and 238 tok/s (two runs each, 1-5 % apart)."""
        figure: Callable[[Measured], float | None] = _accept_length if accept else (lambda m: m.output_tok_s)
        between = within = 0.0
        dof_between = dof_within = 0
        size = 0.0  # the launches' effective size, weighed by their degrees of freedom
        for cell in self._launch_figures(workload, None, figure):
            mean = statistics.fmean(f for _, f in cell)
            if mean <= 0:
                continue
            groups: dict[str, list[float]] = {}
            for launch, f in cell:
                groups.setdefault(launch, []).append(f / mean)
            within += sum((f - statistics.fmean(g)) ** 2 for g in groups.values() for f in g)
            dof_within += len(cell) - len(groups)
            if len(groups) < 2:
                continue
            grand = statistics.fmean(f for g in groups.values() for f in g)
            between += sum(len(g) * (statistics.fmean(g) - grand) ** 2 for g in groups.values())
            dof_between += len(groups) - 1
            count = len(cell)
            size += count - sum(len(g) ** 2 for g in groups.values()) / count
        if not dof_between or not dof_within or within <= 0:
            return None
        ms_between, ms_within = between / dof_between, within / dof_within
        launch_variance = max(0.0, (ms_between - ms_within) / (size / dof_between))
        return launch_variance / ms_within, dof_between

    def accept_noise(self, workload: str | None = None, concurrency: int | None = None) -> float | None:
        """The runs' relative standard deviation of the accept length over the cells measured more than once (repeats
        and runs alike: a level's own rounds are one launch's and one set of prompts', and the next run's differ by
        more than their count says: two launches of one setup on the H100, 1.652 and 1.623); None without one."""
        return _pooled_sd(self._figures(workload, concurrency, _accept_length))

    def spread(
        self, workload: str | None = None, concurrency: int | None = None, *, accept: bool = False
    ) -> tuple[float | None, int]:
        """`noise` (or `accept_noise`) and the degrees of freedom it rests on, taken from the same cells."""
        cells = self._figures(workload, concurrency, _accept_length if accept else (lambda m: m.output_tok_s))
        return _pooled_sd(cells), sum(len(f) - 1 for f in cells)

    def repeated_cells(self, workload: str) -> int:
        return sum(1 for cell in self.cells(workload).values() if len(cell) >= 2)


def launches(levels: Sequence[Measured]) -> list[Measured]:
    """Each level with the launch of the server it ran in, where it has none yet. A record does not say when its
    server started; a change of setup does (another setup, overlap or unit file on a host needs a restart): a launch
    is a stretch of one host's records, in time, under one unit. Records of one setup with no other between them count
    as one launch (the server may have been restarted between them: their spread then counts as the runs')."""
    order = sorted(range(len(levels)), key=lambda i: (levels[i].host, levels[i].started_at))
    named: dict[int, str] = {}
    current: tuple[object, ...] | None = None
    name = ""
    for i in order:
        m = levels[i]
        here = (m.host, m.setup, m.overlap, m.unit_hash)
        if here != current:
            current, name = here, f"{m.host}@{m.started_at}"
        named[i] = name
    return [m if m.launch else replace(m, launch=named[i]) for i, m in enumerate(levels)]


def _accept_length(m: Measured) -> float | None:
    return 1.0 + m.mean_accepted if m.mean_accepted is not None else None


def _pooled_sd(cells: list[list[float]]) -> float | None:
    """The relative standard deviation pooled over cells (each about its own mean): sqrt(sum of squares / dof)."""
    squares, dof = 0.0, 0
    for figures in cells:
        mean = statistics.fmean(figures)
        if mean > 0:
            squares += sum((f / mean - 1.0) ** 2 for f in figures)
            dof += len(figures) - 1
    return math.sqrt(squares / dof) if dof else None


def median_figure(levels: Sequence[Measured], figure: str) -> float:
    return statistics.median(float(getattr(m, figure)) for m in levels)
