"""A workspace's benchmark records read once: an index of logs/bench-*.jsonl kept in logs/.index/, one file per log
file, valid while that log file's size and modification time are what they were (an append changes both).

What asks for many records again and again (the editor's prediction as it opens, `predict`, a tune's ranking) reads
the index instead of every line of every file: each record's host, SGLang version, start, model, GPU and draft, and
the record itself slimmed to what those readers use (its figures and workload; of its server arguments the
speculative ones, the overlap switch and the running cap: /server_info echoes some 465, most of a record's bytes).
Files whose day (bench-YYYY-MM-DD.jsonl, the UTC day their sweeps started: console.bench.records.log_path) is older
than asked are not opened at all. A line that is not a record is left out and counted, as runs.read_lenient does.

Before it, opening the editor read and validated every record in logs/ (230-350 ms for 1,000 records, issue 46);
benchmarks/records_index.py measures both ways with 10,000 records on disk (docs/measured.md).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from console.bench.records import BenchRecord

INDEX_DIR = ".index"
INDEX_VERSION = 2
_DAY = re.compile(r"^bench-(\d{4})-(\d{2})-(\d{2})\.jsonl$")
# What a slim record keeps of the server's arguments: the setup (console.sglang.setup), the spec-v2 verdict
# (console.sglang.specmode) and the running cap (console.core.predict.evidence).
_KEPT_ARGS = ("disable_overlap_schedule", "max_running_requests", "served_model_name", "model_path", "tp_size")


@dataclass(frozen=True, slots=True)
class Entry:
    """One record as the index holds it."""

    target: str
    sglang_version: str | None
    started_at: float  # seconds since the epoch
    model: str | None
    gpu: str | None  # the first GPU's name and the count, "NVIDIA H100 80GB HBM3 x1"
    draft: str | None  # speculative_draft_model_path
    record: bytes | memoryview  # the slim record's JSON: parsed only for the records asked for

    def load(self) -> BenchRecord:
        return BenchRecord.model_validate_json(bytes(self.record))


def slim(data: Mapping[str, Any]) -> dict[str, Any]:
    """A record's JSON without what none of the index's readers use: most server arguments and every GPU but the
    first's identity."""
    args = data.get("server_args") or {}
    kept = {k: v for k, v in args.items() if k.startswith("speculative_") or k in _KEPT_ARGS}
    gpus = data.get("gpus") or []
    return {**data, "server_args": kept, "gpus": gpus[:1]}


def gpu_of(data: Mapping[str, Any]) -> str | None:
    gpus = data.get("gpus") or []
    if not gpus or not isinstance(gpus[0], Mapping):
        return None
    return f"{gpus[0].get('name') or '?'} x{len(gpus)}"


def _entry(data: Mapping[str, Any]) -> Entry:
    started = datetime.fromisoformat(str(data["started_at"]))
    args = data.get("server_args") or {}
    draft = args.get("speculative_draft_model_path")
    return Entry(
        target=str(data["target"]),
        sglang_version=data.get("sglang_version"),
        started_at=started.timestamp(),
        model=data.get("model"),
        gpu=gpu_of(data),
        draft=str(draft) if draft else None,
        record=json.dumps(slim(data), separators=(",", ":")).encode(),
    )


def file_day(path: Path) -> date | None:
    match = _DAY.match(path.name)
    return date(int(match[1]), int(match[2]), int(match[3])) if match else None


class RecordIndex:
    """The index of one logs/ folder. `entries` reads each log file's index, building (and keeping) those whose log
    changed; nothing is kept where logs/ cannot be written (read as before, every time)."""

    def __init__(self, logs_dir: Path) -> None:
        self.logs = logs_dir
        self.folder = logs_dir / INDEX_DIR
        self.problems: list[str] = []
        self.rebuilt: list[str] = []  # the log files indexed again on the last call (for tests and the benchmark)

    def entries(self, *, since: datetime | None = None, targets: Collection[str] | None = None) -> list[Entry]:
        """Every record of logs/bench-*.jsonl, oldest file first; with `since`, those started then or later (the
        files of earlier days not opened; undated files always); with `targets`, those of these hosts."""
        self.problems, self.rebuilt = [], []
        out: list[Entry] = []
        first_day = since.date() if since is not None else None
        cutoff = since.timestamp() if since is not None else None
        for path in sorted(self.logs.glob("bench-*.jsonl")):
            day = file_day(path)
            if first_day is not None and day is not None and day < first_day:
                continue
            out.extend(self._file(path, cutoff, targets))
        return out

    def records(
        self, *, since: datetime | None = None, where: Callable[[Entry], bool] | None = None
    ) -> list[BenchRecord]:
        """The (slim) records started at `since` or later that `where` keeps, validated."""
        return [e.load() for e in self.entries(since=since) if where is None or where(e)]

    def _file(self, path: Path, cutoff: float | None = None, targets: Collection[str] | None = None) -> list[Entry]:
        """The file's entries (those started at `cutoff` or later, of `targets`), from its index or built."""

        def wanted(target: str, started: float) -> bool:
            return (cutoff is None or started >= cutoff) and (targets is None or target in targets)

        try:
            stat = path.stat()
        except OSError as exc:
            self.problems.append(f"{path.name}: cannot be read ({exc.strerror or exc})")
            return []
        key = [INDEX_VERSION, stat.st_size, stat.st_mtime_ns]
        cache, bodies = self.folder / f"{path.name}.json", self.folder / f"{path.name}.slim"
        try:
            kept = json.loads(cache.read_text(encoding="utf-8"))
            if kept.get("key") == key:
                text = memoryview(bodies.read_bytes())
                problems = list(kept.get("problems", []))
                entries = [
                    Entry(target, version, started, model, gpu, draft, text[offset : offset + length])
                    for target, version, started, model, gpu, draft, offset, length in kept["entries"]
                    if wanted(target, started)
                ]
                self.problems.extend(problems)
                return entries
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            pass  # no index yet, or one of another file or version: build it
        entries, problems = _read(path)
        self.rebuilt.append(path.name)
        self.problems.extend(problems)
        rows, offset = [], 0
        for e in entries:
            rows.append([e.target, e.sglang_version, e.started_at, e.model, e.gpu, e.draft, offset, len(e.record)])
            offset += len(e.record) + 1
        # the bodies first: an index is only read beside the bodies it was written with (its key is the log's)
        _write(bodies, b"".join(bytes(e.record) + b"\n" for e in entries))
        _write(cache, json.dumps({"key": key, "problems": problems, "entries": rows}).encode())
        return [e for e in entries if wanted(e.target, e.started_at)]


def _read(path: Path) -> tuple[list[Entry], list[str]]:
    entries: list[Entry] = []
    problems: list[str] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return [], [f"{path.name}: cannot be read ({exc.strerror or exc})"]
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = BenchRecord.model_validate_json(line)  # a line must be a record to be indexed
            entries.append(_entry(json.loads(line) | {"started_at": record.started_at.isoformat()}))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{path.name}:{n}: not a benchmark record ({str(exc).splitlines()[0]})")
    return entries, problems


def _write(cache: Path, data: bytes) -> None:
    """Atomically (a reader never sees half a file); a folder that cannot be written keeps no index."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_name(f".{cache.name}.{os.getpid()}")
        partial.write_bytes(data)
        os.replace(partial, cache)
    except OSError:
        pass


def hosts_records(
    logs_dir: Path, hosts: Iterable[str], *, since: datetime | None = None
) -> tuple[list[BenchRecord], list[str]]:
    """The records of these hosts (targets), started at `since` or later, and the problem lines."""
    wanted = set(hosts)
    index = RecordIndex(logs_dir)
    records = index.records(since=since, where=lambda e: e.target in wanted)
    return records, index.problems
