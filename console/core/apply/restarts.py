"""What a restart of a host costs: every start the console watched, kept per host in the workspace
(logs/restarts.jsonl, beside the benchmark records), and what the recent ones say before the next one.

    record = restart_record(host=..., began=..., ready=..., startup_time=info.get("startup_time"), phases=...)
    append_restart(logs, record)                          # the applier does this, once per start (run.py)
    cost = restart_cost(read_restarts(logs), host, unit)  # the median of the recent ones and the phase that dominates
    cost.text()  -> "a restart of gpu-a takes ~10 min 12 s (median of 4; loading weights 62 %)"

Every path that restarts a unit (apply, restart, a roll, a tune's trials, restore, a rollback) goes through the
applier (console/core/apply/run.py), and it is the applier's watch of a start that records it: one place, so that
what restarts a unit next (a deployment's members) is counted the same way.

A start's phases come from the server where it says them: SGLang 0.5.23's /server_info `startup_time` (load_weight,
kv_cache_allocation, cuda_graph per graph; observability/startup_time.py, the critical path over the ranks: wave5
§6), read beside the /health that answered ready. Before 0.5.23, from the journal's phase lines as the applier
followed them (console/core/phases.py). What neither covers (the old process's stop, the interpreter's start, the
HTTP server, the warm-up request) is the rest of the wall time from the restart command to ready: "the rest".

The module is pure but for `append_restart` and `read_restarts` (one JSON line each; a line cut short is skipped).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from console.core.phases import (
    CUDA_GRAPH,
    DRAFT_CUDA_GRAPH,
    DRAFT_EXTEND_CUDA_GRAPH,
    KV_CACHE,
    LOAD_WEIGHTS,
    PhaseState,
    PhaseStatus,
)
from console.sglang.vocabulary import CACHE_DIR_ENV

FILE = "restarts.jsonl"
# How many of a host's latest restarts its cost is the median of: recent enough to follow an option that shortened
# them, enough that one slow start (a cold disk cache after a reboot) does not set the figure.
RECENT = 5
REST = "rest"
REST_LABEL = "the rest (stop, start-up)"
# What the engine's own wall time (startup_time's tokenizer_e2e / scheduler_e2e) holds beyond its named phases: its
# processes, model and tokenizer set-up. On real 0.5.17 with an 8B-shaped target on an H100 that is 23 of a 54 s
# restart and the named phases 7 s: without it "the rest" was 87 % and said nothing of where the time went.
ENGINE_SETUP = "engine_setup"
# startup_time's graph phases (graph_memory_usage.py:5-12) in the journal's phases (console/core/phases.py).
_GRAPH_PHASES = {
    "prefill": CUDA_GRAPH,
    "decode": CUDA_GRAPH,
    "target_verify": CUDA_GRAPH,
    "draft_prefill": DRAFT_CUDA_GRAPH,
    "draft_decode": DRAFT_CUDA_GRAPH,
    "draft_extend": DRAFT_EXTEND_CUDA_GRAPH,
}
LABELS = {
    spec.name: spec.label for spec in (LOAD_WEIGHTS, KV_CACHE, CUDA_GRAPH, DRAFT_CUDA_GRAPH, DRAFT_EXTEND_CUDA_GRAPH)
} | {"warmup": "warm-up", ENGINE_SETUP: "engine set-up (processes, model init)", REST: REST_LABEL}

RestartKind = Literal["apply", "restart", "rollback"]
PhasesFrom = Literal["server", "journal"]
_KINDS: Mapping[str, RestartKind] = {"apply": "apply", "restart": "restart", "rollback": "rollback"}


@dataclass(frozen=True)
class PhaseTime:
    name: str
    seconds: float

    @property
    def label(self) -> str:
        return LABELS.get(self.name, self.name.replace("_", " "))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class RestartRecord:
    """One start the console watched up to ready: from the restart command to the /health that said ready."""

    host: str
    unit: str
    at: datetime  # when the restart was asked (UTC)
    total_s: float  # the wall time from the restart command to ready: what the operator waits
    phases: tuple[PhaseTime, ...]  # the server's phases, then REST: they add up to total_s
    phases_from: PhasesFrom
    sglang_version: str
    setup: str  # the speculative setup it started ("EAGLE3 steps 2 topk 1 + spec v2")
    start: RestartKind
    options: Mapping[str, Any] = field(default_factory=dict)  # what the unit set of the options that shorten a start

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "unit": self.unit,
            "at": self.at.isoformat(),
            "total_s": round(self.total_s, 3),
            "phases": [p.to_json() for p in self.phases],
            "phases_from": self.phases_from,
            "sglang_version": self.sglang_version,
            "setup": self.setup,
            "start": self.start,
            "options": dict(self.options),
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> RestartRecord:
        """KeyError, TypeError or ValueError for a row that is not one."""
        at = datetime.fromisoformat(row["at"])
        phases = tuple(PhaseTime(str(p["name"]), float(p["seconds"])) for p in row["phases"])
        return cls(
            host=str(row["host"]),
            unit=str(row["unit"]),
            at=at if at.tzinfo else at.replace(tzinfo=UTC),
            total_s=float(row["total_s"]),
            phases=phases,
            phases_from="server" if row.get("phases_from") == "server" else "journal",
            sglang_version=str(row.get("sglang_version") or ""),
            setup=str(row.get("setup") or ""),
            start=_KINDS.get(str(row.get("start")), "restart"),
            options=dict(row.get("options") or {}),
        )


def phases_from_startup_time(startup_time: Mapping[str, Any]) -> list[PhaseTime]:
    """SGLang 0.5.23's own account of its start (/server_info `startup_time`) as the journal's phases: weights (the
    target's and the draft's), the KV cache, and each kind of CUDA graph summed into its phase."""
    out = [
        PhaseTime(LOAD_WEIGHTS.name, _seconds(startup_time.get("load_weight"))),
        PhaseTime(KV_CACHE.name, _seconds(startup_time.get("kv_cache_allocation"))),
    ]
    graphs: dict[str, float] = {}
    cuda_graph = startup_time.get("cuda_graph")
    if isinstance(cuda_graph, Mapping):
        for kind, seconds in cuda_graph.items():
            spec = _GRAPH_PHASES.get(str(kind), CUDA_GRAPH)
            graphs[spec.name] = graphs.get(spec.name, 0.0) + _seconds(seconds)
    out += [PhaseTime(name, seconds) for name, seconds in graphs.items() if seconds > 0]
    return [p for p in out if p.seconds > 0]


def phases_from_journal(phases: Iterable[PhaseStatus]) -> list[PhaseTime]:
    """The phases the journal's lines marked (console.core.phases.PhaseTracker), each with its wall time."""
    out = []
    for phase in phases:
        if phase.state is PhaseState.DONE and phase.duration_s is not None and phase.duration_s > 0:
            out.append(PhaseTime(phase.name, phase.duration_s))
    return out


def restart_record(
    *,
    host: str,
    unit: str,
    began: datetime,
    ready: datetime,
    startup_time: Any,
    journal_phases: Iterable[PhaseStatus],
    sglang_version: str,
    setup: str,
    start: RestartKind,
    options: Mapping[str, Any] | None = None,
) -> RestartRecord:
    """The record of a start: the server's own phases where it reports them (a `startup_time` object, with the rest
    of the engine's own wall time as ENGINE_SETUP), else the journal's, and the rest of the wall time as REST (never
    negative: the server's clock and ours differ a little)."""
    total = max(0.0, (ready - began).total_seconds())
    if isinstance(startup_time, Mapping) and startup_time.get("load_weight") is not None:
        phases, source = phases_from_startup_time(startup_time), "server"
        phases += _engine_setup(startup_time, phases)
    else:
        phases, source = phases_from_journal(journal_phases), "journal"
    counted = sum(p.seconds for p in phases)
    if counted > total:  # the phases' own clocks ran past ours: scale them into the wall time, keeping proportions
        phases = [PhaseTime(p.name, p.seconds * total / counted) for p in phases]
        counted = total
    phases.append(PhaseTime(REST, total - counted))
    return RestartRecord(
        host=host,
        unit=unit,
        at=began,
        total_s=total,
        phases=tuple(phases),
        phases_from=source,  # type: ignore[arg-type]
        sglang_version=sglang_version,
        setup=setup,
        start=start,
        options=dict(options or {}),
    )


# --- what the recent ones say --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestartCost:
    """What a restart of one host costs: the median wall time of its recent restarts and the phase that takes the most
    of it. `count` 0: no restart recorded, the figure is the running server's own account of its last start."""

    host: str
    median_s: float
    count: int
    dominant: str  # the phase's name
    dominant_share: float  # of the median wall time, 0..1
    phases: tuple[PhaseTime, ...]  # each phase's median over the same restarts
    source: Literal["history", "server"] = "history"

    @property
    def dominant_label(self) -> str:
        return LABELS.get(self.dominant, self.dominant.replace("_", " "))

    def text(self) -> str:
        """ "a restart of gpu-a takes ~10 min 12 s (median of 4; loading weights 62 %)"."""
        share = f"{self.dominant_label} {self.dominant_share:.0%}".replace("%", " %")
        if self.source == "server":
            took = duration_text(self.median_s)
            return (
                f"{self.host}'s server took ~{took} to start last time, by its own startup_time "
                f"({share}; its stop and warm-up not counted: no restart of it recorded here yet)"
            )
        return f"a restart of {self.host} takes ~{duration_text(self.median_s)} (median of {self.count}; {share})"

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "median_s": round(self.median_s, 3),
            "count": self.count,
            "source": self.source,
            "dominant": self.dominant,
            "dominant_label": self.dominant_label,
            "dominant_share": round(self.dominant_share, 3),
            "phases": [p.to_json() for p in self.phases],
            "text": self.text(),
        }


def restart_cost(
    records: Iterable[RestartRecord], host: str, unit: str | None = None, *, recent: int = RECENT
) -> RestartCost | None:
    """The host's latest `recent` restarts (of `unit`, where given), as one figure; None when it has none."""
    mine = [r for r in records if r.host == host and (unit is None or r.unit == unit)]
    mine.sort(key=lambda r: r.at)
    chosen = mine[-recent:]
    if not chosen:
        return None
    return _summary(host, [r.phases for r in chosen], statistics.median(r.total_s for r in chosen), "history")


def cost_from_server(host: str, startup_time: Any) -> RestartCost | None:
    """The running server's own account of its last start (0.5.23's `startup_time`), for a host no restart of which
    is recorded yet: its engine's wall time (tokenizer_e2e, else scheduler_e2e) and its phases. None where the server
    does not report one."""
    if not isinstance(startup_time, Mapping) or startup_time.get("load_weight") is None:
        return None
    phases = phases_from_startup_time(startup_time)
    phases += _engine_setup(startup_time, phases)
    engine = sum(p.seconds for p in phases)
    if engine <= 0:
        return None
    return _summary(host, [tuple(phases)], engine, "server")


def _engine_setup(startup_time: Mapping[str, Any], phases: Sequence[PhaseTime]) -> list[PhaseTime]:
    """The engine's wall time (the longer of its tokenizer's and scheduler's end-to-end) beyond its named phases."""
    engine = max(_seconds(startup_time.get("tokenizer_e2e")), _seconds(startup_time.get("scheduler_e2e")))
    beyond = engine - sum(p.seconds for p in phases)
    return [PhaseTime(ENGINE_SETUP, beyond)] if beyond > 0 else []


def _summary(
    host: str, runs: Sequence[Sequence[PhaseTime]], median_s: float, source: Literal["history", "server"]
) -> RestartCost:
    names = list(dict.fromkeys(p.name for run in runs for p in run))
    medians = []
    for name in names:
        each = [sum(p.seconds for p in run if p.name == name) for run in runs]
        medians.append(PhaseTime(name, statistics.median(each)))
    top = max(medians, key=lambda p: p.seconds, default=PhaseTime(REST, median_s))
    share = top.seconds / median_s if median_s > 0 else 0.0
    count = len(runs) if source == "history" else 0
    return RestartCost(host, median_s, count, top.name, min(share, 1.0), tuple(medians), source)


def no_restart_text(host: str) -> str:
    """What is said where nothing is known of a host's restarts."""
    return f"no restart of {host} recorded yet (its cost is known after the first)"


def cost_text(cost: RestartCost | None, host: str) -> str:
    return cost.text() if cost is not None else no_restart_text(host)


def duration_text(seconds: float) -> str:
    """ "10 min 12 s", "42 s", "1.4 s", "1 h 05 min": a wait as a person reads it."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(whole, 3600)
    return f"{hours} h {rest // 60:02d} min"


def _seconds(value: Any) -> float:
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return 0.0


# --- the workspace's file ------------------------------------------------------------------------------------


def append_restart(logs: Path, record: RestartRecord) -> None:
    """One line at the end of logs/restarts.jsonl (a write of one short line: whole or not at all)."""
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / FILE).open("a") as out:
        out.write(json.dumps(record.to_json()) + "\n")


def read_restarts(logs: Path) -> list[RestartRecord]:
    """Every restart kept in the workspace, oldest first (a line cut short by a crash is skipped)."""
    path = logs / FILE
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(RestartRecord.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def host_restart_cost(logs: Path | None, host: str, unit: str | None = None) -> RestartCost | None:
    """restart_cost over the workspace's file (None without a workspace)."""
    if logs is None:
        return None
    return restart_cost(read_restarts(logs), host, unit)


# The options that shorten a start (wave5 §6) with SGLang's defaults, as a record keeps them (only those set otherwise),
# and the variable that moves the compile caches.
START_OPTION_DEFAULTS: Mapping[str, Any] = {
    "load_format": "auto",
    "startup_weight_load_mode": "serial",
    "weight_cache_mode": "off",
    "weight_loader_prefetch_checkpoints": False,
}


def start_options(resolved: Mapping[str, Any], unit_text: str, version: str) -> dict[str, Any]:
    """What the unit sets of the options that shorten a start: {"load_format": "presharded", ...}, and the cache dir."""
    out = {
        dest: resolved[dest]
        for dest, default in START_OPTION_DEFAULTS.items()
        if resolved.get(dest) is not None and resolved.get(dest) != default
    }
    try:
        from console.sglang.unit import UnitFile

        cache_dir = UnitFile.parse(unit_text, version).environment().get(CACHE_DIR_ENV)
    except ValueError:  # not an SGLang unit after all: the record keeps the flags it has
        cache_dir = None
    if cache_dir:
        out[CACHE_DIR_ENV] = cache_dir
    return out
