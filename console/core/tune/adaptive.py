"""Predictions for an adaptive setup (`--speculative-adaptive`, SGLang 0.5.23): a thin layer over the forecast API.

An adaptive server runs one static setup at a time: the tier (draft steps, topk 1, steps + 1 draft tokens; 0 = no
drafting) that the slot of its batch size has settled on (console.sglang.adaptive: the per-batch-size candidates,
the EMA of accepted drafts and its up/down rule). So each candidate tier is forecast as the static chain it is
(`Predictor.forecast`), and at each level the tier SGLang's table would pick is found from the predicted drafts
accepted a round at each tier (the EMA's steady state), starting from the launch steps: where the rule keeps
switching between two tiers (it probes 0 -> 1 and drops back), that is said, and the level shows both.

What it cannot say: how long the warm-up and the switches take (the first 10 batches of a slot, then every 5), nor a
tier's graphs' extra memory (one set per candidate). Records measured while adaptive ran mix tiers in one histogram
and are taken as the launch steps' chain (docs/predict.md says so): static setups' records give the firmest bands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from console.core.predict import Predictor, SetupForecast, Unknown
from console.sglang.adaptive import DEFAULT_DECODE_GRAPH_BS, candidate_union, settled_tier
from console.sglang.setup import SpecSetup


def tier_setup(base: SpecSetup, steps: int) -> SpecSetup:
    """The static setup an adaptive tier runs: the base's draft as a chain of `steps` (0: no speculation)."""
    if steps == 0:
        return SpecSetup(None)
    return replace(base, steps=steps, topk=1, draft_tokens=steps + 1)


@dataclass(frozen=True)
class AdaptiveLevel:
    concurrency: int
    slot: int  # the config key serving this batch size
    candidates: tuple[int, ...]
    tier: int  # the tier the rule settles on (with `cycles`: the last of the tiers it keeps switching between)
    path: tuple[int, ...]  # the tiers it goes through from the launch steps
    cycles: bool
    accepted: dict[int, float]  # predicted drafts accepted a round at each tier of the slot (the EMA's steady state)
    output_throughput: float | None  # the tier's forecast at this level (the mean of the cycle's tiers when it cycles)
    why_not: str | None = None


@dataclass(frozen=True)
class AdaptiveForecast:
    launch_steps: int
    tiers: dict[int, SetupForecast]  # each candidate tier's static forecast
    unknown: dict[int, str]  # the tiers that could not be forecast, and why
    levels: list[AdaptiveLevel] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "launch_steps": self.launch_steps,
            "tiers": {
                str(steps): [
                    {
                        "concurrency": lv.concurrency,
                        "output_throughput": round(lv.output_tok_s.value, 2),
                        "accept_length": round(lv.accept_length.value, 4) if lv.accept_length else None,
                    }
                    for lv in forecast.levels
                ]
                for steps, forecast in sorted(self.tiers.items())
            },
            "unknown": {str(k): v for k, v in sorted(self.unknown.items())},
            "levels": [
                {
                    "concurrency": lv.concurrency,
                    "slot": lv.slot,
                    "candidates": list(lv.candidates),
                    "tier": lv.tier,
                    "path": list(lv.path),
                    "cycles": lv.cycles,
                    "accepted_per_round": {str(k): round(v, 4) for k, v in sorted(lv.accepted.items())},
                    "output_throughput": None if lv.output_throughput is None else round(lv.output_throughput, 2),
                    "why_not": lv.why_not,
                }
                for lv in self.levels
            ],
        }

    def lines(self) -> list[str]:
        """What the CLI prints: one line per level."""
        out = [f"adaptive (launch steps {self.launch_steps}): the tier SGLang's table settles on at each level"]
        for lv in self.levels:
            if lv.why_not:
                out.append(f"  C={lv.concurrency}: {lv.why_not}")
                continue
            moves = " -> ".join(str(s) for s in lv.path)
            settle = f"switches between {lv.path[-2]} and {lv.tier}" if lv.cycles else f"settles on steps {lv.tier}"
            tok = f", {lv.output_throughput:,.0f} tok/s predicted" if lv.output_throughput is not None else ""
            out.append(f"  C={lv.concurrency}: slot {lv.slot} {list(lv.candidates)}: {moves}: {settle}{tok}")
        for steps, why in sorted(self.unknown.items()):
            out.append(f"  steps {steps} not predicted: {why}")
        return out


def forecast_adaptive(
    predictor: Predictor,
    base: SpecSetup,
    overlap: bool,
    levels: Sequence[int],
    *,
    config: Mapping[str, Any] | None = None,
    graph_bs: Sequence[int] = DEFAULT_DECODE_GRAPH_BS,
) -> AdaptiveForecast:
    """Each tier of the config (None: SGLang's default) forecast as its static setup, and per level the tier the rule
    settles on from `base.steps` (the launch steps), with that tier's predicted output."""
    tiers: dict[int, SetupForecast] = {}
    unknown: dict[int, str] = {}
    for steps in candidate_union(config):
        try:
            tiers[steps] = predictor.forecast(tier_setup(base, steps), overlap, levels)
        except Unknown as exc:
            unknown[steps] = f"{exc} ({exc.settle})"
    result = AdaptiveForecast(base.steps, tiers, unknown)
    for concurrency in levels:
        accepted: dict[int, float] = {}
        missing: list[int] = []
        for steps in candidate_union(config):
            if steps == 0:
                accepted[0] = 0.0
                continue
            try:
                accepted[steps] = predictor.acceptance(tier_setup(base, steps), concurrency).tokens - 1.0
            except Unknown:
                missing.append(steps)
        settled = settled_tier(concurrency, accepted.get, launch=base.steps, config=config, graph_bs=graph_bs)
        needed = [s for s in settled.candidates if s in missing]
        if needed:
            why = f"no acceptance for steps {', '.join(map(str, needed))} of {base.algorithm} (no record of its draft)"
            result.levels.append(AdaptiveLevel(concurrency, settled.slot, settled.candidates, settled.steps,
                                               settled.path, settled.cycles, accepted, None, why))  # fmt: skip
            continue
        shown = [settled.path[-2], settled.steps] if settled.cycles else [settled.steps]
        figures = [lv.output_tok_s.value for s in shown if s in tiers and (lv := tiers[s].level(concurrency))]
        throughput = sum(figures) / len(figures) if len(figures) == len(shown) else None
        result.levels.append(
            AdaptiveLevel(concurrency, settled.slot, settled.candidates, settled.steps, settled.path, settled.cycles,
                          {s: accepted[s] for s in settled.candidates if s in accepted}, throughput)
        )  # fmt: skip
    return result
