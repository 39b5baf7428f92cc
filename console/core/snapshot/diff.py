"""`opsconsole diff A B`: how two snapshots differ (pure: two Snapshots in, a SnapshotDiff out).

Flags are compared as SGLang reads them (aliases and abbreviations under their full name, `--x=v` as `--x v`),
together with the launcher's own options; then the environment, the values the server resolved, the other
server args, where and what it ran on, and the benchmarks (console.bench.comparison, A as the baseline).

`group_flags` is shared with restore (console/core/snapshot/freeze_plan.py): one reading of a flag list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.bench.comparison import Comparison, compare_runs
from console.core.change import values_equal
from console.core.snapshot.drift import show_value
from console.core.snapshot.model import RESOLVED_KEYS, Snapshot
from console.sglang.argv import is_option_token
from console.sglang.flags import FlagTable, UnsupportedVersionError, flag_table


@dataclass(frozen=True)
class FlagGroup:
    """One flag as written: its full name (aliases resolved), its value words, and whether SGLang knows it."""

    name: str
    values: tuple[str, ...]
    known: bool
    is_list: bool = False
    is_boolean: bool = False

    @property
    def shown(self) -> str:
        return " ".join(self.values) if self.values else "on"


def table_for(version: str | None) -> FlagTable:
    try:
        return flag_table(version)
    except UnsupportedVersionError:
        return flag_table(None)


def group_flags(words: Sequence[str], table: FlagTable) -> list[FlagGroup]:
    """Split launch words into flags with their values, as SGLang's parser (and the unit model) reads them."""
    groups: list[FlagGroup] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not is_option_token(word, table):
            continue  # a stray value: SGLang refuses it, and the unit model keeps it where it is
        head, sep, inline = word.partition("=")
        spec = table.lookup(head)
        start = i
        while i < len(words) and not is_option_token(words[i], table):
            i += 1
        following = list(words[start:i])
        if sep:
            values = [inline]  # `--x=v` takes no further words
        elif spec is not None and spec.is_boolean:
            values = []
        elif spec is not None and not spec.is_list:
            values = following[:1]
        else:
            values = following  # a list flag, or one SGLang does not know (a launcher's own option)
        i = start + len(values) if not sep else start  # the words it does not take are stray: skipped above
        name = spec.name if spec is not None else head
        groups.append(
            FlagGroup(
                name,
                tuple(values),
                spec is not None,
                bool(spec and spec.is_list),
                bool(spec and spec.is_boolean),
            )
        )
    return groups


def flag_map(words: Sequence[str], table: FlagTable) -> dict[str, FlagGroup]:
    """Flag name -> its group; a flag given twice counts as its last occurrence (argparse's rule)."""
    return {g.name: g for g in group_flags(words, table)}


@dataclass(frozen=True)
class Change:
    key: str
    a: Any
    b: Any

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "a": self.a, "b": self.b}


@dataclass
class SnapshotDiff:
    a: str
    b: str
    host: list[Change] = field(default_factory=list)
    flags: list[Change] = field(default_factory=list)
    environment: list[Change] = field(default_factory=list)
    resolved: list[Change] = field(default_factory=list)
    server_args: list[Change] = field(default_factory=list)
    benchmarks: Comparison | None = None

    @property
    def same_setup(self) -> bool:
        return not (self.flags or self.environment or self.resolved or self.server_args)

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "same_setup": self.same_setup,
            "host": [c.to_json() for c in self.host],
            "flags": [c.to_json() for c in self.flags],
            "environment": [c.to_json() for c in self.environment],
            "resolved": [c.to_json() for c in self.resolved],
            "server_args": [c.to_json() for c in self.server_args],
            "benchmarks": self.benchmarks.as_dict() if self.benchmarks else None,
        }

    def lines(self) -> list[str]:
        """The diff for a person: one section per part that differs."""
        out: list[str] = []

        def section(title: str, changes: list[Change], show: Any = str) -> None:
            if not changes:
                return
            out.append(f"{title}:")
            width = max(len(c.key) for c in changes)
            for c in changes:
                out.append(f"  {c.key.ljust(width)}  {show(c.key, c.a)}  ->  {show(c.key, c.b)}")

        def plain(_key: str, value: Any) -> str:
            return "(absent)" if value is None else str(value)

        section("host", self.host, plain)
        section("flags", self.flags, plain)
        section("environment", self.environment, plain)
        section("resolved by the server", self.resolved, show_value)
        section("other server args", self.server_args, plain)
        if not out:
            out.append(f"{self.a} and {self.b} run the same setup (flags, environment, resolved values).")
        if self.benchmarks is not None:
            out.append("benchmarks:")
            for level in self.benchmarks.levels:
                cells = {r.label: r.cells for r in level.runs}
                if len(cells) < 2:
                    continue
                base, cand = cells.get(self.a), cells.get(self.b)
                if base is None or cand is None:
                    continue
                tput_a, tput_b = base["output_throughput"], cand["output_throughput"]
                delta = "" if tput_b.delta_pct is None else f" ({tput_b.delta_pct:+.1f} %, {tput_b.verdict})"
                out.append(
                    f"  {level.level}: output tok/s {_num(tput_a.median)} -> {_num(tput_b.median)}{delta}; "
                    f"median TTFT ms {_num(base['median_ttft_ms'].median)} -> {_num(cand['median_ttft_ms'].median)}"
                )
        return out


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _changes(a: Mapping[str, Any], b: Mapping[str, Any], keys: Sequence[str] | None = None) -> list[Change]:
    names = list(keys) if keys is not None else sorted(set(a) | set(b))
    return [Change(k, a.get(k), b.get(k)) for k in names if not values_equal(a.get(k), b.get(k))]


def diff_snapshots(a: Snapshot, b: Snapshot) -> SnapshotDiff:
    table = table_for(b.server.version or a.server.version)
    flags_a = {n: g.shown for n, g in flag_map([*a.unit.flags, *a.unit.launcher_options], table).items()}
    flags_b = {n: g.shown for n, g in flag_map([*b.unit.flags, *b.unit.launcher_options], table).items()}
    host_a = {
        "target": a.host.label,
        "hostname": a.host.hostname,
        "unit": a.host.unit,
        "SGLang": a.server.version,
        "GPUs": _gpus(a),
        "driver": a.host.driver_version,
        "launcher": " ".join(a.unit.launcher) or None,
    }
    host_b = {
        "target": b.host.label,
        "hostname": b.host.hostname,
        "unit": b.host.unit,
        "SGLang": b.server.version,
        "GPUs": _gpus(b),
        "driver": b.host.driver_version,
        "launcher": " ".join(b.unit.launcher) or None,
    }
    others_a = {k: v for k, v in a.server.server_args.items() if k not in RESOLVED_KEYS}
    others_b = {k: v for k, v in b.server.server_args.items() if k not in RESOLVED_KEYS}
    records_a, records_b = a.bench_records(label=a.name), b.bench_records(label=b.name)
    if a.name == b.name:
        records_b = b.bench_records(label=b.name + "'")
    benchmarks = compare_runs([records_a, records_b]) if records_a and records_b else None
    return SnapshotDiff(
        a.name,
        b.name,
        host=_changes(host_a, host_b, list(host_a)),
        flags=_changes(flags_a, flags_b),
        environment=_changes(a.unit.environment, b.unit.environment),
        resolved=_changes(a.resolved, b.resolved, RESOLVED_KEYS),
        server_args=_changes(others_a, others_b),
        benchmarks=benchmarks,
    )


def _gpus(snapshot: Snapshot) -> str | None:
    if not snapshot.gpus:
        return None
    names = sorted({g.name or "?" for g in snapshot.gpus})
    return f"{len(snapshot.gpus)} × {', '.join(names)}"
