"""What `opsconsole tune` concludes from the search (console/core/tune/search.py): pure, no I/O.

- The objective (`score_of`) is what a level's setups are ranked by: `throughput` (output tokens/s), `goodput`
  (requests/s whose own TTFT, TPOT and E2E met the SLO, console.bench.slo) or `capacity` (the requests/s a level
  carried if its percentiles met the SLO, else 0: the best setup per level is the one that carries the most
  within the SLO; the best overall, the one whose highest level meeting it carries the most).
- `recommend()`: per cell (workload × concurrency) the best setup by the objective, its score and output
  tokens/s, its margin over the next best and whether that margin is within the noise.
- `find_crossovers()`: where along the concurrency levels the best setup changes, and at about which
  concurrency the two cross (linear interpolation of their figures between the two measured levels):
  "EAGLE3 topk 1 + spec v2 best up to C ≈ 30, no speculation beyond". A straight line says where only between
  levels close together: levels further apart than PLACED_WITHIN (console.bench.comparison; at C = 1 and 48 the
  line put the Kimi seeds' crossing at C ≈ 6, they measured it near 30) give the bracket instead: "no speculation
  best up to a crossing between C = 1 and 48, ...".
- `speculation_verdicts()`: where speculation loses on this traffic: the levels (and the capacity) at which
  the setup without speculation is the best, when one was measured.
- `compare_workloads()`: the optimistic result (random prompts, forced output lengths, temperature 0) next
  to the realistic one (chat prompts, natural lengths, temperature 0.7) per concurrency, with a warning when
  the optimistic winner's acceptance under temperature 0 is clearly above what it gets on chat — the
  operators' trap: forced, greedy output is easy to draft, so its figures flatter speculation.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from console.bench.records import BenchRecord

from console.bench.comparison import bracketed
from console.bench.slo import Capacity
from console.core.tune.search import Cell, Search, StageKind, Standing

Objective = Literal["throughput", "goodput", "capacity"]
OBJECTIVES: tuple[Objective, ...] = ("throughput", "goodput", "capacity")
OBJECTIVE_UNITS = {"throughput": "tok/s", "goodput": "req/s", "capacity": "req/s"}

OPTIMISTIC = "random"
REALISTIC = "chat"
# Accept length under temperature 0 more than this much above chat's: the optimistic figure is inflated.
ACCEPT_INFLATION_PCT = 10.0


@dataclass(frozen=True)
class Recommendation:
    cell: Cell
    candidate: str  # key
    name: str
    config: dict[str, Any]
    output_throughput: float
    margin_pct: float | None  # over the runner-up; None when nothing else was measured in this cell
    within_noise: bool
    runner_up: str | None  # its name
    measured_by: str  # "full" (repeated full-length runs) or "screen" (one short run): what ranked the level
    awaiting_full: tuple[str, ...] = ()  # names of contenders the full runs never reached (the search stopped)
    objective: Objective = "throughput"
    score: float | None = None  # the objective's figure it won by (= output_throughput for throughput)

    @property
    def evidence_note(self) -> str | None:
        """Said under the level's line when the short screening runs ranked it (None when full runs did)."""
        if self.measured_by == "full":
            return None
        why = (
            f"the full runs did not reach {', '.join(self.awaiting_full)}"
            if self.awaiting_full
            else "no full runs were made here"
        )
        return f"C={self.cell.concurrency}: ranked by the short screening runs, one each ({why})"

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency": self.cell.concurrency,
            "config": dict(self.config),
            "output_throughput": round(self.output_throughput, 2),
            "margin_pct": None if self.margin_pct is None else round(self.margin_pct, 2),
            "within_noise": self.within_noise,
            "workload": self.cell.workload,
            "name": self.name,
            "runner_up": self.runner_up,
            "measured_by": self.measured_by,
            "awaiting_full_runs": list(self.awaiting_full),
            "objective": self.objective,
            "score": None if self.score is None else round(self.score, 3),
        }


def score_of(record: BenchRecord, objective: Objective) -> float:
    """What a level's record counts for under the objective (see the module's doc)."""
    if objective == "goodput":
        return float(record.request_goodput or 0.0)
    if objective == "capacity":
        return float(record.request_throughput) if record.slo_met else 0.0
    return float(record.output_throughput)


def recommend(
    search: Search,
    names: Mapping[str, str],
    configs: Mapping[str, dict[str, Any]],
    *,
    objective: Objective = "throughput",
    throughput: Mapping[tuple[str, Cell], float] | None = None,
) -> list[Recommendation]:
    """The best setup per cell by the search's figures (the objective's); `throughput` gives each setup's output
    tok/s per cell when the figures are another objective's."""
    out = []
    for cell in search.cells:
        decision = search.decision(cell)
        if decision.winner is None:
            continue
        winner = decision.winner
        tok_s = winner.median if throughput is None else throughput.get((winner.candidate, cell), winner.median)
        out.append(
            Recommendation(
                cell=cell,
                candidate=winner.candidate,
                name=names[winner.candidate],
                config=dict(configs[winner.candidate]),
                output_throughput=tok_s,
                margin_pct=decision.margin_pct,
                within_noise=decision.within_noise,
                runner_up=names[decision.runner_up.candidate] if decision.runner_up else None,
                measured_by=winner.kind,
                awaiting_full=tuple(names[key] for key in decision.awaiting_full),
                objective=objective,
                score=winner.median,
            )
        )
    return out


def speculation_verdicts(
    recommendations: Sequence[Recommendation],
    plain: Mapping[str, set[str]],
    capacities: Mapping[str, Mapping[str, Capacity]],
    names: Mapping[str, str],
    objective: Objective,
) -> list[str]:
    """Per workload, where the setup without speculation is the best (`plain`: workload -> the keys of setups
    without speculation measured there): "on dataset speculation loses at every level: no speculation is best by
    goodput at C=1, 8", or at some levels, or on capacity. Nothing for a workload where speculation wins
    everywhere, or where no setup without speculation was measured."""
    out = []
    for workload in dict.fromkeys(r.cell.workload for r in recommendations):
        recs = sorted((r for r in recommendations if r.cell.workload == workload), key=lambda r: r.cell.concurrency)
        keys = plain.get(workload, set())
        plain_names = {names[k] for k in keys if k in names}
        if not keys:
            continue
        losing = [r for r in recs if r.candidate in keys]
        levels = ", ".join(str(r.cell.concurrency) for r in losing)
        by = f"by {objective}"
        if losing and len(losing) == len(recs):
            out.append(f"on {workload} speculation loses at every level: no speculation is best {by} at C={levels}")
        elif losing:
            out.append(f"on {workload} speculation loses at C={levels}: no speculation is best there {by}")
        caps = capacities.get(workload, {})
        plain_caps = [c.request_throughput or 0.0 for name, c in caps.items() if name in plain_names]
        spec_caps = [c.request_throughput or 0.0 for name, c in caps.items() if name not in plain_names]
        if plain_caps and spec_caps and max(plain_caps) > max(spec_caps):
            out.append(
                f"on {workload} speculation lowers the capacity at the SLO: {max(plain_caps):,.2f} req/s without it, "
                f"{max(spec_caps):,.2f} at best with it"
            )
    return out


@dataclass(frozen=True)
class Crossover:
    workload: str
    below: str  # name of the setup that is best up to the crossing
    above: str  # name of the one best beyond it
    between: tuple[int, int]  # the two measured levels it lies between
    at: float  # estimated concurrency where the two are equal (meaningful only when `placed`)

    @property
    def placed(self) -> bool:
        """The measured levels bracket the crossing within PLACED_WITHIN (console.bench.comparison): `at` may be
        named."""
        return bracketed(*self.between)

    @property
    def where(self) -> str:
        """ "C ≈ 30" when placed, else "a crossing between C = 1 and 48"."""
        low, high = self.between
        return f"C ≈ {self.at:.0f}" if self.placed else f"a crossing between C = {low} and {high}"

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "below": self.below,
            "above": self.above,
            "between": list(self.between),
            "concurrency": round(self.at, 1) if self.placed else None,  # None: somewhere between, not placed
        }


def _like_for_like(search: Search, a: str, b: str, cell: Cell) -> tuple[float, float] | None:
    """Both candidates' figures in a cell from the same kind of run (full if both had full runs there)."""
    kinds: tuple[StageKind, ...] = ("full", "screen")
    for kind in kinds:
        sa = search.standing(a, cell, kind)
        sb = search.standing(b, cell, kind)
        if sa is not None and sb is not None:
            return sa.median, sb.median
    return None


def crossing(c1: int, d1: float, c2: int, d2: float) -> float:
    """Where a difference d that is d1 at c1 and d2 at c2 (opposite signs) reaches 0, linearly."""
    if d1 == d2:
        return (c1 + c2) / 2
    return c1 + (c2 - c1) * d1 / (d1 - d2)


def find_crossovers(search: Search, recommendations: Sequence[Recommendation]) -> list[Crossover]:
    """Where the best setup changes between two consecutive levels of a workload."""
    out: list[Crossover] = []
    by_workload: dict[str, list[Recommendation]] = {}
    for rec in recommendations:
        by_workload.setdefault(rec.cell.workload, []).append(rec)
    for workload, recs in by_workload.items():
        recs = sorted(recs, key=lambda r: r.cell.concurrency)
        for low, high in itertools.pairwise(recs):
            if low.candidate == high.candidate:
                continue
            first = _like_for_like(search, low.candidate, high.candidate, low.cell)
            second = _like_for_like(search, low.candidate, high.candidate, high.cell)
            c1, c2 = low.cell.concurrency, high.cell.concurrency
            if first is None or second is None or first[0] - first[1] <= 0 or second[0] - second[1] >= 0:
                at = (c1 + c2) / 2  # one of them was not measured in both cells alike: say "between"
            else:
                at = crossing(c1, first[0] - first[1], c2, second[0] - second[1])
            out.append(Crossover(workload, low.name, high.name, (c1, c2), min(max(at, c1), c2)))
    return out


def crossover_summary(recommendations: Sequence[Recommendation], crossovers: Sequence[Crossover], workload: str) -> str:
    """One line per workload: "A best up to C ≈ 30, B beyond" (or "A best at every level"; a crossing between levels
    more than PLACED_WITHIN apart, not placed: "A best up to a crossing between C = 1 and 48, B beyond")."""
    recs = sorted((r for r in recommendations if r.cell.workload == workload), key=lambda r: r.cell.concurrency)
    if not recs:
        return ""
    crossings = [c for c in crossovers if c.workload == workload]
    if not crossings:
        return f"{recs[0].name} best at every level"
    parts = [
        f"{c.below} best up to {c.where}" if i == 0 else f"{c.below} up to {c.where}" for i, c in enumerate(crossings)
    ]
    return ", ".join(parts) + f", {crossings[-1].above} beyond"


@dataclass(frozen=True)
class WorkloadSide:
    """One concurrency level: the optimistic (random) and the realistic (chat) winner side by side."""

    concurrency: int
    optimistic: Recommendation | None
    realistic: Recommendation | None
    optimistic_accept_length: float | None  # the optimistic winner's, under each workload
    realistic_accept_length: float | None
    warning: str | None

    def to_json(self) -> dict[str, Any]:
        def side(rec: Recommendation | None, accept: float | None) -> dict[str, Any] | None:
            if rec is None:
                return None
            return {
                "name": rec.name,
                "config": dict(rec.config),
                "output_throughput": round(rec.output_throughput, 2),
                "accept_length": accept,
            }

        return {
            "concurrency": self.concurrency,
            "optimistic": side(self.optimistic, self.optimistic_accept_length),
            "realistic": side(self.realistic, self.realistic_accept_length),
            "warning": self.warning,
        }


def compare_workloads(
    recommendations: Sequence[Recommendation], accept_lengths: Mapping[tuple[str, Cell], float | None]
) -> list[WorkloadSide]:
    """Per concurrency level measured under both workloads. accept_lengths: (candidate, cell) -> the accept length
    it got there (None without speculation)."""
    optimistic = {r.cell.concurrency: r for r in recommendations if r.cell.workload == OPTIMISTIC}
    realistic = {r.cell.concurrency: r for r in recommendations if r.cell.workload == REALISTIC}
    out = []
    for concurrency in sorted(set(optimistic) & set(realistic)):
        opt, real = optimistic[concurrency], realistic[concurrency]
        accept_opt = accept_lengths.get((opt.candidate, opt.cell))
        accept_real = accept_lengths.get((opt.candidate, Cell(REALISTIC, concurrency)))
        out.append(
            WorkloadSide(
                concurrency, opt, real, accept_opt, accept_real, _inflation(opt, real, accept_opt, accept_real)
            )
        )
    return out


def _inflation(
    opt: Recommendation, real: Recommendation, accept_opt: float | None, accept_real: float | None
) -> str | None:
    if accept_opt is None or accept_real is None or accept_real <= 0:
        return None
    inflated = (accept_opt / accept_real - 1.0) * 100.0
    if inflated <= ACCEPT_INFLATION_PCT:
        return None
    text = (
        f"C={opt.cell.concurrency}: {opt.name} accepts {accept_opt:.2f} tokens per step under temperature 0 with "
        f"forced lengths but {accept_real:.2f} on chat (+{inflated:.0f} %): the optimistic figure "
        f"({opt.output_throughput:,.0f} tok/s) is inflated"
    )
    if real.candidate != opt.candidate:
        text += f"; on chat {real.name} is best ({real.output_throughput:,.0f} tok/s)"
    return text


def standing_json(standing: Standing | None) -> dict[str, Any] | None:
    if standing is None:
        return None
    return {
        "median": round(standing.median, 2),
        "low": round(standing.low, 2),
        "high": round(standing.high, 2),
        "samples": standing.samples,
        "measured_by": standing.kind,
    }
