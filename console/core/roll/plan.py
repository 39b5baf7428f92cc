"""The pure half of a rolling change over a group: the order, the rules that stop it, and its report.

    spec = RollSpec(canary=1, wave=parse_wave("25%"), max_failures=0)
    for batch in batches(["gpu-a", "gpu-b", "gpu-c", "gpu-d"], spec):   # canary first, then waves
        ...                                                              # run.py does the I/O
    ledger.finish(host, HostOutcome.DONE)                                # the outcome of each host
    ledger.stop_reason()                                                 # None while the roll may go on

- `batches()` puts the canary hosts first, then the rest in waves of `spec.wave` hosts (never more than a wave
  at once, so that with a router in front at least N - wave workers serve throughout).
- `RollLedger` keeps each host's outcome (done, unchanged, rolled back, failed, not started) and says when the
  roll must stop: more failures than `max_failures`, a gate that halted it, or the operator's interrupt.
- `gate_verdict()` judges the canary's short benchmark against the same host's last record at the same level.
- `may_start()` is the router's rule: a batch starts only if the workers still serving stay >= N - wave.

No I/O here: run.py talks to hosts and the router.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from console.errors import ExitCode, UsageError

_WAVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")
BatchKind = Literal["canary", "wave"]


class RollError(UsageError):
    """A rolling option that cannot be used: the message says what to write instead, naming the input by its field
    (canary, wave, max_failures, gate, gate_level, gate_max_loss: the CLI says them as its options, the console as
    its roll form's fields)."""


@dataclass(frozen=True)
class WaveSize:
    """How many hosts change at once after the canary: a count, or a share of the group (rounded down, at least 1)."""

    count: int | None = None
    percent: float | None = None

    def hosts(self, group_size: int) -> int:
        if self.count is not None:
            return max(1, min(self.count, group_size))
        assert self.percent is not None
        return max(1, min(group_size, math.floor(group_size * self.percent / 100 + 1e-9)))

    def __str__(self) -> str:
        return f"{self.count}" if self.count is not None else f"{self.percent:g}%"


def parse_wave(text: str) -> WaveSize:
    """`2` (hosts) or `25%` (of the group). RollError for anything else."""
    match = _WAVE.match(text or "")
    if not match:
        raise RollError(
            "{field} {text!r}: give a number of hosts (2) or a share of the group (25%)", field="wave", text=text
        )
    number, percent = float(match.group(1)), bool(match.group(2))
    if percent:
        if not 0 < number <= 100:
            raise RollError("{field} {text}: a share of the group is more than 0% and at most 100%", field="wave",
                            text=text)  # fmt: skip
        return WaveSize(percent=number)
    if number != int(number) or number < 1:
        raise RollError("{field} {text}: a number of hosts is a whole number of at least 1 (or write a share: 25%)",
                        field="wave", text=text)  # fmt: skip
    return WaveSize(count=int(number))


@dataclass(frozen=True)
class GateSpec:
    """`--gate bench`: the canary's short benchmark at a concurrency (None: its newest record's) against its last
    record there; a regression beyond `max_regression_pct` (and beyond the noise of the repeats) halts the roll."""

    concurrency: int | None = None
    max_regression_pct: float = 5.0

    def to_json(self) -> dict[str, Any]:
        return {"kind": "bench", "concurrency": self.concurrency, "max_regression_pct": self.max_regression_pct}


@dataclass(frozen=True)
class RollSpec:
    canary: int = 1  # hosts changed (and gated) first, before any wave
    wave: WaveSize = field(default_factory=lambda: WaveSize(count=1))
    max_failures: int = 0  # failed hosts the roll goes on past; the next one stops it
    gate: GateSpec | None = None  # --gate bench: the canary's benchmark judged before any wave

    def check(self, hosts: int | None = None) -> None:
        """The spec's own rules (the CLI's options and the console's form both hold to them), and with `hosts` (how
        many the roll changes) the canary against them: RollError naming the input to change."""
        if self.canary < 0:
            raise RollError("{field} {value}: give 0 or more hosts", field="canary", value=self.canary)
        if self.max_failures < 0:
            raise RollError("{field} {value}: give 0 or more", field="max_failures", value=self.max_failures)
        if self.gate is not None and self.canary < 1:
            raise RollError("{gate} bench judges the canary: give {field} 1 or more", field="canary")
        if hosts is None:
            return
        if hosts < 1:
            raise RollError("the group has no hosts")
        if self.canary > hosts:
            rolled = "1 host is" if hosts == 1 else f"{hosts} hosts are"
            raise RollError("{field} {value}: only {rolled} rolled", field="canary", value=self.canary, rolled=rolled)


@dataclass(frozen=True)
class Batch:
    """Hosts that change together: the canary (or a part of it), or one wave."""

    kind: BatchKind
    index: int  # 1-based within its kind
    hosts: tuple[str, ...]


def batches(hosts: Sequence[str], spec: RollSpec) -> list[Batch]:
    """The canary hosts first (the group's first `canary` members, in at most a wave at once), then the others in
    waves; every batch at most `spec.wave` hosts."""
    spec.check(len(hosts))
    size = spec.wave.hosts(len(hosts))
    canary, rest = list(hosts[: spec.canary]), list(hosts[spec.canary :])
    out: list[Batch] = []
    for kind, members in (("canary", canary), ("wave", rest)):
        for i in range(0, len(members), size):
            index = i // size + 1
            out.append(Batch(kind, index, tuple(members[i : i + size])))  # type: ignore[arg-type]
    return out


def may_start(batch_size: int, serving: int, group_size: int, wave: int) -> bool:
    """The router's rule: taking `batch_size` workers out must leave at least N - wave of them serving."""
    return serving - batch_size >= group_size - wave


class HostOutcome(StrEnum):
    DONE = "done"  # changed and verified (or restarted, restored, frozen)
    UNCHANGED = "unchanged"  # the host already had it; not restarted
    ROLLED_BACK = "rolled_back"  # it failed, and the host is back on its previous unit, healthy
    FAILED = "failed"  # it failed and the host is not healthy on its previous unit (or a restart failed)
    NOT_STARTED = "not_started"  # the roll stopped (or was refused) before this host: untouched

    @property
    def failure(self) -> bool:
        return self in (HostOutcome.ROLLED_BACK, HostOutcome.FAILED)


@dataclass(frozen=True)
class HostEnded:
    """How one host's change ended (or its rollback after a failed gate): the outcome, the line that says why, and
    the operation's own --json object (an apply's, a freeze's; None where there is none)."""

    outcome: HostOutcome
    detail: str
    result: dict[str, Any] | None = None


@dataclass
class HostRecord:
    """One host's part in the roll."""

    label: str
    outcome: HostOutcome = HostOutcome.NOT_STARTED
    detail: str = ""
    batch: str = ""  # "canary 1", "wave 2"
    started: datetime | None = None
    finished: datetime | None = None
    worker_url: str | None = None  # its URL in the group's router
    router: list[str] = field(default_factory=list)  # what was done at the router for it, in order
    result: dict[str, Any] | None = None  # the operation's own --json object (apply's, freeze's)
    gate: dict[str, Any] | None = None  # --gate bench on a canary: the verdict, both figures, the baseline run

    @property
    def seconds(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.label,
            "outcome": self.outcome.value,
            "detail": self.detail,
            "batch": self.batch,
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
            "seconds": self.seconds,
            "worker_url": self.worker_url,
            "router": list(self.router),
            "result": self.result,
            "gate": self.gate,
        }


StopCause = Literal["failures", "gate", "interrupted", "router", "refused"]


@dataclass
class RollLedger:
    """Every host's outcome, and whether the roll must stop."""

    hosts: list[str]
    max_failures: int = 0
    records: dict[str, HostRecord] = field(default_factory=dict)
    stopped: tuple[StopCause, str] | None = None

    def __post_init__(self) -> None:
        for label in self.hosts:
            self.records.setdefault(label, HostRecord(label))

    def begin(self, label: str, batch: Batch, at: datetime) -> HostRecord:
        record = self.records[label]
        record.batch = f"{batch.kind} {batch.index}"
        record.started = at
        return record

    def finish(self, label: str, outcome: HostOutcome, detail: str, at: datetime) -> None:
        record = self.records[label]
        record.outcome, record.detail, record.finished = outcome, detail, at
        if outcome.failure and self.failures > self.max_failures and self.stopped is None:
            allowed = f"at most {self.max_failures} may fail"
            self.stopped = ("failures", f"{label}: {detail} ({self.failures} failed; {allowed})")

    def stop(self, cause: StopCause, why: str) -> None:
        """Stop before the next host (the first reason is kept)."""
        if self.stopped is None:
            self.stopped = (cause, why)

    @property
    def failures(self) -> int:
        return sum(1 for r in self.records.values() if r.outcome.failure)

    def stop_reason(self) -> str | None:
        return None if self.stopped is None else self.stopped[1]

    def outcomes(self) -> dict[str, HostOutcome]:
        return {label: self.records[label].outcome for label in self.hosts}

    @property
    def ok(self) -> bool:
        """Every host done (or already so), nothing stopped the roll."""
        return self.stopped is None and all(
            r.outcome in (HostOutcome.DONE, HostOutcome.UNCHANGED) for r in self.records.values()
        )

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.ok else ExitCode.FAILED


@dataclass(frozen=True)
class GateVerdict:
    """The canary's benchmark against its last record at the same level."""

    passed: bool
    message: str
    level: str = ""
    metric: str = "output_throughput"
    baseline: float | None = None
    value: float | None = None
    delta_pct: float | None = None
    within_noise: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "message": self.message,
            "level": self.level,
            "metric": self.metric,
            "baseline": self.baseline,
            "value": self.value,
            "delta_pct": self.delta_pct,
            "within_noise": self.within_noise,
        }


# A regression of the canary's throughput beyond this halts the roll (when the noise of the repeats allows a verdict).
DEFAULT_GATE_PCT = GateSpec.max_regression_pct


def gate_verdict(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    level: str,
    max_regression_pct: float = DEFAULT_GATE_PCT,
    metric: str = "output_throughput",
) -> GateVerdict:
    """Higher is better (tokens/s). The canary halts the roll when its median is below the baseline's by more than
    `max_regression_pct` and the two runs' ranges (over their repeats) do not overlap: a difference repeating the
    same setup already produces is noise, not a regression. With one repeat on a side the % alone decides."""
    if not baseline:
        return GateVerdict(False, f"no earlier record of this host at {level} to compare with", level, metric)
    if not candidate:
        return GateVerdict(False, f"the canary's benchmark at {level} gave no {metric}", level, metric)
    base, cand = _median(baseline), _median(candidate)
    if base <= 0:
        return GateVerdict(
            False, f"the last record at {level} has {metric} {base:g}: nothing to compare", level, metric
        )
    delta = 100.0 * (cand - base) / base
    measured = len(baseline) > 1 and len(candidate) > 1
    overlap = measured and max(candidate) >= min(baseline)
    within_noise = overlap if measured else None
    regressed = delta < -max_regression_pct and not overlap
    figures = f"{metric} {cand:.1f} vs {base:.1f} ({delta:+.1f}%) at {level}"
    if regressed:
        return GateVerdict(
            False,
            f"{figures}: a regression beyond {max_regression_pct:g}%"
            + (" and beyond the noise of the repeats" if measured else ""),
            level,
            metric,
            base,
            cand,
            delta,
            within_noise,
        )
    note = " (within the noise of the repeats)" if overlap and delta < -max_regression_pct else ""
    return GateVerdict(True, f"{figures}{note}", level, metric, base, cand, delta, within_noise)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def parse_percent(text: str, field: str = "gate_max_loss") -> float:
    """`5%` (or 5): a non-negative percentage; RollError naming `field`."""
    match = _WAVE.match(text or "")
    if not match:
        raise RollError("{field} {text!r}: give a percentage such as 5%", field=field, text=text)
    return float(match.group(1))


def spec_from_fields(
    canary: str, wave: str, max_failures: str, *, gate: GateSpec | None = None, hosts: int | None = None
) -> RollSpec:
    """The console's roll form, each field as typed: RollError naming the field and what to write; with `hosts`,
    also checked against the number of hosts rolled (RollSpec.check, as the CLI's options are)."""
    spec = RollSpec(
        canary=_count(canary, "canary"),
        wave=parse_wave(wave),
        max_failures=_count(max_failures, "max_failures"),
        gate=gate,
    )
    spec.check(hosts)
    return spec


def gate_from_fields(concurrency: str, max_regression: str) -> GateSpec:
    """The form's gate: the level (blank: that of the canary's newest record) and the loss that halts the roll."""
    level = concurrency.strip()
    if level and (not level.isdigit() or int(level) < 1):
        raise RollError("{field} {text!r}: a concurrency of at least 1, or blank for the newest record's",
                        field="gate_level", text=concurrency)  # fmt: skip
    pct = DEFAULT_GATE_PCT if not max_regression.strip() else parse_percent(max_regression)
    return GateSpec(concurrency=int(level) if level else None, max_regression_pct=pct)


def _count(text: str, field: str) -> int:
    value = text.strip()
    if not value.isdigit():
        raise RollError("{field} {text!r}: give a whole number, 0 or more", field=field, text=text)
    return int(value)


def outcome_of_apply(state: str, *, restart_only: bool = False) -> HostOutcome:
    """A host's outcome from where its apply (or restart, restore) ended (console.core.change.ApplyState values)."""
    if state == "verified":
        return HostOutcome.DONE
    if state == "unchanged":
        return HostOutcome.UNCHANGED
    if state == "healthy_on_old":
        return HostOutcome.ROLLED_BACK
    if state == "aborted":  # stopped before anything was written
        return HostOutcome.NOT_STARTED
    return HostOutcome.FAILED  # refused, mismatch, write/restart/rollback failed
