"""Production snapshots as data (pure: no I/O): what `opsconsole freeze` records, its TOML form, which snapshot
is a host's production one, and which benchmark records measured the frozen setup.

A snapshot is `profiles/snapshots/NAME.toml` in the workspace (console/core/snapshot/store.py reads and writes
the files). Everything in it has been through the session's secret mask before it got here: unit text, flags,
environment, launch command and server args carry `***` where a key was.

TOML has no null. A value the server reported as null is left out of its table (absent = null), and a null
inside a list is written as the string "None" (SGLang's own spelling; console.core.change.values_equal
treats the two as equal).

Which snapshot is production: for each host (its TARGET label as the freeze was run, and its unit) the latest
freeze. Restoring an older snapshot does not change that: the document on the host and the snapshot agree on
what production is until the next freeze, and status reports the difference as drift.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from console import hints
from console.bench.levels import LevelKey
from console.bench.records import BenchRecord
from console.core.change import values_equal
from console.errors import UsageError
from console.sglang.specmode import spec_mode
from console.sglang.vocabulary import View, dests, terms
from console.tomlwrite import dumps

SNAPSHOT_FORMAT = 1
SNAPSHOTS_DIR = "snapshots"  # under the workspace's profiles/
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

# The server's resolved values a snapshot shows first and status watches for drift, in display order
# (console.sglang.client.summarize's semantics: the scheduler's internal state first, then the top level).
RESOLVED_KEYS = dests(View.SNAPSHOT)
# The speculative values a benchmark record must agree on to count as a run of the frozen setup.
BENCH_MATCH_KEYS = dests(View.SPECULATIVE)
# /server_info keys that are the server's state, not its arguments.
NOT_SERVER_ARGS = frozenset({"internal_states", "status", "startup_time", "last_gen_throughput", "version"})
# Benchmark record fields a snapshot leaves out (the setup is the snapshot's own; GPUs are listed once).
BENCH_DROPPED = frozenset({"server_args", "gpus"})
# The figures the comparison against the previous production snapshot shows.
COMPARISON_METRICS = (
    "output_throughput",
    "mean_request_output_throughput",
    "median_ttft_ms",
    "median_tpot_ms",
    "p99_itl_ms",
    "accept_length",
)


class SnapshotError(ValueError):
    """A snapshot file that cannot be read; the message names the file and what is wrong."""


def check_name(name: str) -> str:
    """A snapshot name: it becomes a file name here and a document name on the host."""
    if not _NAME.match(name or ""):
        raise UsageError(
            f"snapshot name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit "
            "(for example v2 or qwen-eagle3-s2)"
        )
    return name


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class SnapshotHost(_Part):
    label: str  # the TARGET the freeze was run against (profile name, alias or user@host)
    unit: str
    transport: str = "ssh"
    hostname: str | None = None  # `uname -n` on the host
    ssh_user: str | None = None  # the user the console works as there
    fragment_path: str | None = None
    document: str | None = None  # the production document's path on the host
    driver_version: str | None = None


class SnapshotUnit(_Part):
    hash: str  # console.bench.records.unit_hash of the unit file as the freeze left it
    text: str  # the unit file, masked
    launcher: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)  # SGLang's launch flags, masked
    launcher_options: list[str] = Field(default_factory=list)  # the launcher's own options (not SGLang's)
    environment: dict[str, str] = Field(default_factory=dict)  # Environment= of [Service], masked
    environment_files: list[str] = Field(default_factory=list)
    launch_command: str = ""  # the whole ExecStart argv, shell-quoted, masked
    unit_file_state: str | None = None  # is-enabled after the freeze


class SnapshotServer(_Part):
    version: str | None = None
    resolved: dict[str, Any] = Field(default_factory=dict)  # RESOLVED_KEYS, as the server resolved them
    server_args: dict[str, Any] = Field(default_factory=dict)  # every argument /server_info shows, masked


class SnapshotGpu(_Part):
    index: int
    name: str | None = None
    uuid: str | None = None
    memory_total_mib: float | None = None
    power_limit_w: float | None = None


class ComparisonRow(_Part):
    level: str
    metric: str
    previous: float | None = None
    value: float | None = None
    delta_pct: float | None = None
    verdict: str = "n/a"  # better | worse | same | n/a, in the metric's own direction
    within_noise: bool | None = None


class Forced(_Part):
    reason: str
    overridden: list[str] = Field(default_factory=list)  # the refusals the reason overrode


class Snapshot(_Part):
    format: int = SNAPSHOT_FORMAT
    name: str
    note: str = ""
    frozen_at: datetime
    frozen_by: str  # the console's user@machine (and the SSH user on the host)
    opsconsole_version: str = ""
    previous: str | None = None  # the production snapshot of this host when this one was frozen
    forced: Forced | None = None
    warnings: list[str] = Field(default_factory=list)
    host: SnapshotHost
    server: SnapshotServer
    unit: SnapshotUnit
    gpus: list[SnapshotGpu] = Field(default_factory=list)
    benchmarks: list[dict[str, Any]] = Field(default_factory=list)  # records of this setup (BenchRecord fields)
    comparison: list[ComparisonRow] = Field(default_factory=list)  # against `previous`

    @property
    def resolved(self) -> dict[str, Any]:
        return {k: self.server.resolved.get(k) for k in RESOLVED_KEYS}

    def bench_records(self, label: str | None = None) -> list[BenchRecord]:
        """The benchmark records as BenchRecords (labelled `label`, e.g. the snapshot's name, for comparisons)."""
        out = []
        for entry in self.benchmarks:
            record = BenchRecord.model_validate(entry)
            out.append(record.model_copy(update={"label": label}) if label else record)
        return out

    def to_toml(self) -> str:
        data = _without_nulls(self.model_dump(mode="python"))
        header = (
            f"# opsconsole production snapshot {self.name!r} of {self.host.label} ({self.host.unit}), "
            f"written by `{hints.verb('freeze')}`.\n# Format: docs/snapshots.md. Secrets are masked (***).\n"
        )
        return header + dumps(data)

    @classmethod
    def from_toml(cls, text: str, *, where: str) -> Snapshot:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SnapshotError(f"{where}: not valid TOML ({exc})") from None
        if data.get("format", SNAPSHOT_FORMAT) > SNAPSHOT_FORMAT:
            raise SnapshotError(f"{where}: snapshot format {data['format']} is newer than this opsconsole reads")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            raise SnapshotError(f"{where}: not an opsconsole snapshot ({problems})") from None


def _without_nulls(value: Any) -> Any:
    """Tables lose their null values (absent = null); a null inside a list becomes "None"."""
    if isinstance(value, Mapping):
        return {str(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return ["None" if v is None else _without_nulls(v) for v in value]
    return value


def server_args_of(server_info: Mapping[str, Any]) -> dict[str, Any]:
    """The server's arguments from /server_info (top level), without its state (internal_states, status ...)."""
    return {k: v for k, v in server_info.items() if k not in NOT_SERVER_ARGS}


# --- which snapshot is production ---------------------------------------------------------------------


def host_key(snapshot: Snapshot) -> tuple[str, str]:
    return snapshot.host.label, snapshot.host.unit


def production_of(snapshots: Iterable[Snapshot], label: str, unit: str) -> Snapshot | None:
    """The host's production snapshot: its latest freeze (None when it has none)."""
    mine = [s for s in snapshots if host_key(s) == (label, unit)]
    return max(mine, key=lambda s: (s.frozen_at, s.name), default=None)


def production_names(snapshots: Sequence[Snapshot]) -> set[str]:
    """The names of the snapshots that are production for their host."""
    hosts = {host_key(s) for s in snapshots}
    found = (production_of(snapshots, label, unit) for label, unit in hosts)
    return {s.name for s in found if s is not None}


# --- benchmarks of the frozen setup --------------------------------------------------------------------


def same_setup(record: BenchRecord, *, unit_hashes: set[str], resolved: Mapping[str, Any], version: str | None) -> bool:
    """The record measured this setup: the same unit file (by hash), the same SGLang version, and the server
    resolved the same speculative values (a value the record's server did not report is not held against it)."""
    if record.unit_hash not in unit_hashes:
        return False
    if version and record.sglang_version and record.sglang_version != version:
        return False
    for key in BENCH_MATCH_KEYS:
        theirs = record.server_args.get(key)
        if theirs is not None and not values_equal(theirs, resolved.get(key)):
            return False
    return True


def benchmarks_of_setup(
    records: Iterable[BenchRecord], *, unit_hashes: set[str], resolved: Mapping[str, Any], version: str | None
) -> list[BenchRecord]:
    """For each level, every repeat of the latest run of this setup at that level; ordered by level."""
    matching = [r for r in records if same_setup(r, unit_hashes=unit_hashes, resolved=resolved, version=version)]
    latest: dict[LevelKey, str] = {}
    started: dict[LevelKey, datetime] = {}
    for record in matching:
        key = record.level
        if key not in started or record.started_at > started[key]:
            started[key], latest[key] = record.started_at, record.run_id
    chosen = [r for r in matching if latest.get(r.level) == r.run_id]
    return sorted(chosen, key=lambda r: (r.level, r.repeat_index, r.started_at))


def bench_entry(record: BenchRecord) -> dict[str, Any]:
    """A record as a snapshot keeps it: everything but the server args and GPUs, which the snapshot has once."""
    data: dict[str, Any] = record.model_dump(mode="python", exclude=set(BENCH_DROPPED))
    return data


def comparison_rows(previous: Snapshot, name: str, records: Sequence[BenchRecord]) -> list[ComparisonRow]:
    """This setup's benchmarks against the previous production snapshot's, per level both measured."""
    from console.bench.comparison import compare_runs

    before = previous.bench_records(label=previous.name)
    after = [r.model_copy(update={"label": name}) for r in records]
    if not before or not after or previous.name == name:
        return []
    comparison = compare_runs([before, after])
    rows = []
    for level in comparison.levels:
        if len(level.runs) < 2 or level.runs[0].label != previous.name:
            continue
        base, cand = level.runs[0], level.runs[1]
        for metric in COMPARISON_METRICS:
            b, c = base.cells.get(metric), cand.cells.get(metric)
            if b is None or c is None or (b.median is None and c.median is None):
                continue
            rows.append(
                ComparisonRow(
                    level=str(level.level),  # as the snapshot file keeps it
                    metric=metric,
                    previous=b.median,
                    value=c.median,
                    delta_pct=c.delta_pct,
                    verdict=c.verdict,
                    within_noise=c.within_noise,
                )
            )
    return rows


# --- how a setup is named in one line -------------------------------------------------------------------


def setup_text(resolved: Mapping[str, Any], version: str | None = None) -> str:
    """`EAGLE steps 2, topk 1, draft tokens 3, overlap on` (or `no speculative decoding`); with the server's
    version, also whether the spec-v2 worker runs (console.sglang.specmode: `..., overlap off, spec v1`)."""
    algorithm = resolved.get("speculative_algorithm")
    if not algorithm or str(algorithm).upper() == "NONE":
        return "no speculative decoding"
    parts = [str(algorithm)]
    for tree in terms(View.DRAFT_TREE):
        if resolved.get(tree.dest) is not None:
            parts.append(f"{tree.name} {resolved[tree.dest]}")
    overlap = resolved.get("disable_overlap_schedule")
    if overlap is not None:
        parts.append(f"overlap {'off' if values_equal(overlap, True) else 'on'}")
    mode = spec_mode(version, {**resolved, "disable_overlap_schedule": values_equal(overlap, True)})
    if overlap is not None and mode is not None and mode.spec_v2 is not None:
        parts.append("spec v2" if mode.spec_v2 else "spec v1")
    return parts[0] + " " + ", ".join(parts[1:]) if len(parts) > 1 else parts[0]


def best_throughput(snapshot: Snapshot) -> float | None:
    """The highest output tokens/s among the snapshot's benchmark levels."""
    values = [e.get("output_throughput") for e in snapshot.benchmarks]
    found = [float(v) for v in values if isinstance(v, int | float)]
    return max(found) if found else None


def next_name(snapshots: Sequence[Snapshot], label: str) -> str:
    """A name for the host's next snapshot: v(N+1) after its highest vN, never one that is taken."""
    taken = {s.name for s in snapshots}
    numbers = [int(m.group(1)) for s in snapshots if s.host.label == label and (m := re.fullmatch(r"v(\d+)", s.name))]
    n = max(numbers, default=0) + 1
    while f"v{n}" in taken:
        n += 1
    return f"v{n}"
