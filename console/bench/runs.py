"""The benchmark runs kept in a workspace's logs/ (bench-*.jsonl), one summary per sweep: what the console's runs
table lists and filters (pure reading, no UI).

A run is every record sharing a `run_id` (all levels, all repeats of one sweep). A line that is not a record (cut
short by a crash, edited by hand) is skipped and named in the problems, so one bad line hides nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from console.bench.levels import LevelKey
from console.bench.records import BenchRecord, record_spec_mode
from console.sglang.specmode import setup_short


def setup_of(server_args: Mapping[str, Any], spec_v2: bool | None = None, version: str | None = None) -> str:
    """The speculative setup a run measured, as the server resolved it, e.g. `eagle3 s2 k1 d3 v2` or `no spec`:
    the dashboard's short form (console.sglang.specmode.setup_short), the spec-v2 worker decided from the server
    args and `version` where the record has them, else from the record's `spec_v2`."""
    return setup_short(server_args, record_spec_mode(server_args, spec_v2, version))


@dataclass(frozen=True)
class RunSummary:
    """One sweep, as the runs table shows it."""

    run_id: str
    label: str
    host: str
    setup: str
    version: str
    started_at: datetime
    levels: tuple[LevelKey, ...]  # in axis order (C=1, C=8 ...)
    repeats: int
    workload: str  # `random 1024/256`, `chat ≤256`
    stopped: str | None  # why a level stopped early, if one did
    records: tuple[BenchRecord, ...]

    @property
    def levels_text(self) -> str:
        """`C=1,8,32` (or `rate=2,4`); `×3` when the levels were repeated."""
        kinds = {key.kind for key in self.levels}
        if len(kinds) == 1:
            text = f"{kinds.pop()}={','.join(key.number for key in self.levels)}"
        else:
            text = " ".join(str(key) for key in self.levels)
        return text + (f" ×{self.repeats}" if self.repeats > 1 else "")

    def search_text(self) -> str:
        return " ".join((self.label, self.host, self.setup, self.version, self.workload, self.levels_text)).lower()


def workload_text(workload: Mapping[str, Any]) -> str:
    name = str(workload.get("name") or "?")
    out = workload.get("output_len")
    dataset = workload.get("dataset")
    if name == "dataset" and isinstance(dataset, Mapping):
        cap = f" ≤{out}" if out is not None else ""
        return f"{dataset.get('file')} ({dataset.get('format')}, {dataset.get('requests')} req{cap})"
    if name == "random":
        return f"random {workload.get('input_len')}/{out}"
    return f"{name} ≤{out}" if out is not None else name


def summarize(records: Sequence[BenchRecord]) -> RunSummary:
    """The summary of one run's records (all sharing a run_id)."""
    first = min(records, key=lambda r: r.started_at)
    levels = tuple(sorted({r.level for r in records}))
    return RunSummary(
        run_id=first.run_id,
        label=first.label,
        host=first.target,
        setup=setup_of(first.server_args, first.spec_v2, first.sglang_version),
        version=first.sglang_version or "?",
        started_at=first.started_at,
        levels=levels,
        repeats=max(r.repeat_index for r in records) + 1,
        workload=workload_text(first.workload),
        stopped=next((r.stopped for r in records if r.stopped), None),
        records=tuple(sorted(records, key=lambda r: (r.level, r.repeat_index))),
    )


def read_lenient(path: Path) -> tuple[list[BenchRecord], list[str]]:
    """The records of one JSONL file, and a problem line for each line that is not a record."""
    records: list[BenchRecord] = []
    problems: list[str] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return [], [f"{path.name}: cannot be read ({exc.strerror or exc})"]
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(BenchRecord.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            problems.append(f"{path.name}:{n}: not a benchmark record ({str(exc).splitlines()[0]})")
    return records, problems


def list_runs(logs_dir: Path) -> tuple[list[RunSummary], list[str]]:
    """Every run in logs_dir's bench-*.jsonl, newest first, and the lines that could not be read."""
    by_run: dict[str, list[BenchRecord]] = {}
    problems: list[str] = []
    for path in sorted(logs_dir.glob("bench-*.jsonl")):
        records, bad = read_lenient(path)
        problems.extend(bad)
        for record in records:
            by_run.setdefault(record.run_id, []).append(record)
    runs = [summarize(records) for records in by_run.values()]
    runs.sort(key=lambda r: r.started_at, reverse=True)
    return runs, problems


def filter_runs(runs: Iterable[RunSummary], query: str) -> list[RunSummary]:
    """The runs whose label, host, setup, version, workload or levels hold every word of the query
    (case-insensitive; an empty query keeps them all)."""
    words = query.lower().split()
    return [run for run in runs if all(word in run.search_text() for word in words)]
