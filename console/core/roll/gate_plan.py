"""The pure half of `--gate bench`: which earlier record the canary is measured against, and the short benchmark
that measures it (no I/O: gate.py runs it, run.py acts on the verdict).

    baselines = plan_gate(records, ["gpu-a"], GateSpec(concurrency=8), rerun="opsconsole bench")
    config = gate_sweep(baselines["gpu-a"])        # the same workload, level, requests and repeats as that record
    verdict = gate_verdict(baselines["gpu-a"].values, measured, level="C=8", max_regression_pct=5)

The baseline is the canary host's newest benchmark run at that concurrency (records of the workspace's logs/, their
`target` the host's name), the gate's own runs left out: a gate compares with what the operator measured, so a
canary that failed its gate (and was rolled back) never becomes the next roll's baseline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console import hints
from console.bench.engine import SweepConfig
from console.bench.records import BenchRecord
from console.bench.workloads import WorkloadSpec
from console.core.roll.plan import GateSpec
from console.errors import UsageError

# The label of the gate's own benchmark runs (kept in logs/ like any run): gate@GROUP:HOST.
GATE_LABEL_PREFIX = "gate@"
# Workloads the gate can send again from what a record keeps (a dataset needs its file, a shape its server's window).
RERUNNABLE = ("random", "chat")


@dataclass(frozen=True)
class GateBaseline:
    """The canary's earlier run at the gate's level: what it sent and what it measured (one value per repeat)."""

    host: str
    concurrency: int
    run_id: str
    label: str
    started_at: datetime
    values: tuple[float, ...]  # output_throughput of each repeat at this level
    workload: Mapping[str, Any]
    requests: int  # per repeat, as the record sent them (completed + failed)
    client_location: str
    unit_hash: str | None = None

    @property
    def level(self) -> str:
        return f"C={self.concurrency}"

    @property
    def repeats(self) -> int:
        return len(self.values)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "level": self.level,
            "run_id": self.run_id,
            "label": self.label,
            "started_at": self.started_at.isoformat(),
            "values": list(self.values),
            "requests": self.requests,
            "repeats": self.repeats,
            "workload": dict(self.workload),
            "unit_hash": self.unit_hash,
        }


def is_gate_run(record: BenchRecord) -> bool:
    return record.label.startswith(GATE_LABEL_PREFIX)


def gate_label(group: str, host: str) -> str:
    return f"{GATE_LABEL_PREFIX}{group}:{host}"


def _closed_loop(record: BenchRecord, host: str) -> bool:
    return (
        record.target == host
        and record.request_rate is None
        and record.max_concurrency is not None
        and not is_gate_run(record)
    )


def gate_baseline(records: Iterable[BenchRecord], host: str, concurrency: int | None) -> GateBaseline | None:
    """The host's newest run at `concurrency` (None: at the level of its newest closed-loop record), or None."""
    mine = [r for r in records if _closed_loop(r, host)]
    if concurrency is None:
        if not mine:
            return None
        concurrency = max(mine, key=lambda r: r.started_at).max_concurrency
    at_level = [r for r in mine if r.max_concurrency == concurrency]
    if not at_level or concurrency is None:
        return None
    newest = max(at_level, key=lambda r: r.started_at).run_id
    run = sorted((r for r in at_level if r.run_id == newest), key=lambda r: r.repeat_index)
    first = run[0]
    return GateBaseline(
        host=host,
        concurrency=concurrency,
        run_id=first.run_id,
        label=first.label,
        started_at=first.started_at,
        values=tuple(r.output_throughput for r in run),
        workload=dict(first.workload),
        requests=max(1, first.completed + first.failed),
        client_location=first.client_location,
        unit_hash=first.unit_hash,
    )


def gate_workload(workload: Mapping[str, Any]) -> WorkloadSpec | None:
    """The record's workload as a spec to send again; None for one the record cannot reproduce alone."""
    name = workload.get("name")
    if name not in RERUNNABLE:
        return None
    temperature = workload.get("temperature")
    return WorkloadSpec(
        name=name,
        api=workload.get("api") or "generate",
        input_len=int(workload.get("input_len") or WorkloadSpec.input_len),
        output_len=int(workload.get("output_len") or WorkloadSpec.output_len),
        temperature=float(temperature) if temperature is not None else None,
        seed=int(workload.get("seed") or 1),
    )


def gate_sweep(baseline: GateBaseline) -> SweepConfig:
    """The short benchmark: the baseline's workload at its level, as many requests and repeats as it had."""
    workload = gate_workload(baseline.workload)
    if workload is None:  # plan_gate refused it before anything changed
        raise UsageError(f"the gate cannot send workload {baseline.workload.get('name')!r} again")
    return SweepConfig(
        workload=workload,
        concurrencies=[baseline.concurrency],
        requests=baseline.requests,
        repeat=baseline.repeats,
    )


def bench_command(host: str, concurrency: int | None) -> str:
    level = concurrency if concurrency is not None else 8
    return hints.BENCH_REPEATED.line(HOST=host, LEVEL=str(level))


def plan_gate(records: Sequence[BenchRecord], canaries: Sequence[str], gate: GateSpec) -> dict[str, GateBaseline]:
    """Every canary's baseline; UsageError (before anything changes) for a canary without a record at the level,
    or whose record's workload cannot be sent again, saying the bench command to run first."""
    if not canaries:
        raise UsageError("{gate} bench judges the canary: give {field} 1 or more", field="canary")
    out: dict[str, GateBaseline] = {}
    for host in canaries:
        baseline = gate_baseline(records, host, gate.concurrency)
        if baseline is None:
            where = f"at C={gate.concurrency}" if gate.concurrency is not None else "at any concurrency"
            raise UsageError(
                "{field} bench: no benchmark record of {host} {where} in the workspace's logs/ to compare its canary "
                "run with; run `{command}` first (on the setup it has now), then roll",
                field="gate", host=host, where=where, command=bench_command(host, gate.concurrency),
            )  # fmt: skip
        if gate_workload(baseline.workload) is None:
            raise UsageError(
                "{field} bench: {host}'s last run at {level} ({label}) used the {workload} workload, which the gate "
                "cannot send again; run `{command}` (random or chat) first",
                field="gate", host=host, level=baseline.level, label=baseline.label,
                workload=baseline.workload.get("name"), command=bench_command(host, baseline.concurrency),
            )  # fmt: skip
        out[host] = baseline
    return out
