"""What a tune concludes from what it measured (pure): the recommendation per level, the capacities at the SLO, where
speculation loses, the crossovers, how the workloads compare, and the setup --apply-best applies.

    found = conclude(search, candidates, metrics, objective=..., slo=...)   # once the search has ended
    best = best_setup(found, candidates, objective=..., best_at=...)        # None: nothing to apply

`metrics` is what the run kept of each benchmark (Metrics: a setup, a level and the kind of stage -> each run's
figures); a setup's figure at a level comes from the runs its standing there comes from (Search.standing).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.bench.slo import Capacity, capacity
from console.core.tune.report import (
    Crossover,
    Objective,
    Recommendation,
    WorkloadSide,
    compare_workloads,
    find_crossovers,
    recommend,
    speculation_verdicts,
)
from console.core.tune.search import Cell, Search, StageKind
from console.core.tune.space import Candidate

# Each run's figures (a bench record's model_dump) per setup key, level and kind of stage.
Metrics = Mapping[tuple[str, Cell, StageKind], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class Conclusions:
    recommendations: list[Recommendation] = field(default_factory=list)
    capacities: dict[str, dict[str, Capacity]] = field(default_factory=dict)  # workload -> setup name -> capacity
    verdicts: list[str] = field(default_factory=list)  # where speculation loses on this traffic
    crossovers: list[Crossover] = field(default_factory=list)
    workload_sides: list[WorkloadSide] = field(default_factory=list)


def conclude(
    search: Search,
    candidates: Sequence[Candidate],
    metrics: Metrics,
    *,
    objective: Objective,
    slo: bool,
) -> Conclusions:
    """The search's conclusions; `slo`: whether the tune judged against one (then each setup's capacity)."""
    names = {c.key: c.name for c in candidates}
    configs = {c.key: c.config for c in candidates}
    # Under another objective the figures are not tok/s: each winner's tok/s comes from its runs' records.
    throughput = throughputs(search, metrics) if objective != "throughput" else None
    recs = recommend(search, names, configs, objective=objective, throughput=throughput)
    caps = capacities(search, candidates, metrics) if slo else {}
    plain: dict[str, set[str]] = {}
    for cell in search.cells:
        for c in candidates:
            if c.setting.algorithm is None and search.standing(c.key, cell) is not None:
                plain.setdefault(cell.workload, set()).add(c.key)
    accept: dict[tuple[str, Cell], float | None] = {}
    for (key, cell, kind), runs in metrics.items():
        standing = search.standing(key, cell)
        if standing is None or standing.kind != kind:
            continue
        values = [float(r["accept_length"]) for r in runs if r.get("accept_length") is not None]
        accept[(key, cell)] = statistics.median(values) if values else None
    return Conclusions(
        recommendations=recs,
        capacities=caps,
        verdicts=speculation_verdicts(recs, plain, caps, names, objective),
        crossovers=find_crossovers(search, recs),
        workload_sides=compare_workloads(recs, accept),
    )


def throughputs(search: Search, metrics: Metrics) -> dict[tuple[str, Cell], float]:
    """Each setup's output tok/s per cell, from the runs its standing there comes from."""
    out: dict[tuple[str, Cell], float] = {}
    for (key, cell, kind), runs in metrics.items():
        standing = search.standing(key, cell)
        if standing is not None and standing.kind == kind and runs:
            out[(key, cell)] = statistics.median(float(r["output_throughput"]) for r in runs)
    return out


def capacities(search: Search, candidates: Sequence[Candidate], metrics: Metrics) -> dict[str, dict[str, Capacity]]:
    """Each setup's capacity at the SLO per workload: its highest level that met it (the runs its standing comes
    from, every repeat meeting it)."""
    out: dict[str, dict[str, Capacity]] = {}
    for workload in dict.fromkeys(cell.workload for cell in search.cells):
        for candidate in candidates:
            points = []
            for cell in (c for c in search.cells if c.workload == workload):
                standing = search.standing(candidate.key, cell)
                runs = metrics.get((candidate.key, cell, standing.kind), []) if standing else []
                verdicts = [r.get("slo_met") for r in runs]
                if runs and None not in verdicts:
                    carried = statistics.median(float(r["request_throughput"]) for r in runs)
                    points.append((f"C={cell.concurrency}", float(cell.concurrency), all(verdicts), carried))
            if points:
                out.setdefault(workload, {})[candidate.name] = capacity(points)
    return out


def best_setup(
    found: Conclusions, candidates: Sequence[Candidate], *, objective: Objective, best_at: int | None
) -> Candidate | None:
    """The setup --apply-best applies: the winner at --best-at, else (objective capacity) the one with the highest
    capacity at the SLO, else the one that wins the most levels; of the operator's dataset, else the realistic
    workload when it ran; ties to the one best at the highest level."""
    recs = found.recommendations
    if not recs:
        return None
    by_key = {c.key: c for c in candidates}
    realistic = [w for w in ("dataset", "chat") if any(r.cell.workload == w for r in recs)]
    workload = realistic[0] if realistic else recs[0].cell.workload
    recs = [r for r in recs if r.cell.workload == workload]
    if objective == "capacity" and best_at is None:
        # The setup that carries the most requests/s while meeting the SLO, at whichever level that is.
        caps = found.capacities.get(workload, {})
        by_name = {c.name: c for c in candidates}
        carried = [(cap.request_throughput, name) for name, cap in caps.items() if cap.request_throughput]
        if carried:
            return by_name[max(carried)[1]]
    if best_at is not None:
        chosen = [r for r in recs if r.cell.concurrency == best_at]
        return by_key[chosen[0].candidate] if chosen else None
    wins: dict[str, int] = {}
    for r in recs:
        wins[r.candidate] = wins.get(r.candidate, 0) + 1
    top = max(recs, key=lambda r: (wins[r.candidate], r.cell.concurrency))
    return by_key[top.candidate]
