"""A PD deployment's benchmark, side by side (pure): what the prefill servers, the decode servers and smg say of the
requests a sweep sent through smg, from their counters read before and after it.

    sides = pd_sides(deployment, before, after)      # SideReadings each: smg's /metrics, each member's /metrics

- prefill: TTFT as smg measures it (`smg_pd_ttft_seconds`, `smg_pd_prefill_duration_seconds`) and as the prefill
  servers do (`sglang:time_to_first_token_seconds`), their bootstrap failures and retries;
- decode: TPOT, the decode servers' inter-token latency (`sglang:inter_token_latency_seconds`), the KV transfer's
  latency and bootstrap time (`sglang:kv_transfer_latency_ms`, `sglang:kv_transfer_bootstrap_ms`), their transfer
  and bootstrap failures; smg's `smg_pd_decode_ttft_seconds` where 1.13 has it;
- smg: every `smg_pd_*` counter's increase (bootstrap and rendezvous failures).

A mean is the histogram's sum over its count, both as increases over the sweep; None where nothing was observed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from console.core.deployment.model import Deployment

ENGINE_FAILURES = (
    "sglang:num_bootstrap_failed_reqs_total",
    "sglang:num_transfer_failed_reqs_total",
    "sglang:num_prefill_retries_total",
)


@dataclass(frozen=True)
class SideReadings:
    """Counters at one moment: smg's (summed over labels) and each member's (its /metrics)."""

    router: Mapping[str, float] = field(default_factory=dict)
    members: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


def _delta(before: Mapping[str, float], after: Mapping[str, float], name: str) -> float:
    return max(0.0, after.get(name, 0.0) - before.get(name, 0.0))


Pairs = Iterable[tuple[Mapping[str, float], Mapping[str, float]]]


def _mean_ms(pairs: Pairs, histogram: str, scale: float) -> float | None:
    total = count = 0.0
    for before, after in pairs:
        total += _delta(before, after, f"{histogram}_sum")
        count += _delta(before, after, f"{histogram}_count")
    return round(total / count * scale, 3) if count else None


def pd_sides(deployment: Deployment, before: SideReadings, after: SideReadings) -> dict[str, Any]:
    """The per-side figures of what happened between the two readings (see the module's docstring)."""

    def pairs(role: str) -> list[tuple[Mapping[str, float], Mapping[str, float]]]:
        return [(before.members.get(m.name, {}), after.members.get(m.name, {})) for m in deployment.members
                if m.role == role]  # fmt: skip

    def failures(role: str) -> dict[str, float]:
        both = pairs(role)
        return {name.removeprefix("sglang:"): sum(_delta(b, a, name) for b, a in both) for name in ENGINE_FAILURES}

    router = [(before.router, after.router)]
    counters = sorted({k for k in after.router if k.startswith("smg_pd_") and k.endswith("_total")})
    return {
        "prefill": {
            "ttft_ms_smg": _mean_ms(router, "smg_pd_ttft_seconds", 1000.0),
            "prefill_ms_smg": _mean_ms(router, "smg_pd_prefill_duration_seconds", 1000.0),
            "ttft_ms_servers": _mean_ms(pairs("prefill"), "sglang:time_to_first_token_seconds", 1000.0),
            "failures": failures("prefill"),
        },
        "decode": {
            "tpot_ms_servers": _mean_ms(pairs("decode"), "sglang:inter_token_latency_seconds", 1000.0),
            "first_token_ms_smg": _mean_ms(router, "smg_pd_decode_ttft_seconds", 1000.0),
            # the transfer's figures are the side's that observes them (SGLang: the sender's latency, the receiver's
            # bootstrap): both sides' together
            "kv_transfer_ms": _mean_ms(pairs("prefill") + pairs("decode"), "sglang:kv_transfer_latency_ms", 1.0),
            "kv_bootstrap_ms": _mean_ms(pairs("prefill") + pairs("decode"), "sglang:kv_transfer_bootstrap_ms", 1.0),
            "failures": failures("decode"),
        },
        "smg": {name: _delta(before.router, after.router, name) for name in counters},
    }


def sides_lines(sides: Mapping[str, Any]) -> list[str]:
    """The per-side figures as lines for a person."""

    def ms(value: Any) -> str:
        return "–" if value is None else f"{value:.1f} ms"

    pre, dec, smg = sides["prefill"], sides["decode"], sides["smg"]
    lines = [
        f"prefill: TTFT {ms(pre['ttft_ms_smg'])} (smg), {ms(pre['ttft_ms_servers'])} (the prefill servers); "
        f"prefill {ms(pre['prefill_ms_smg'])}; failures "
        + ", ".join(f"{k.removeprefix('num_')} {v:g}" for k, v in pre["failures"].items()),
        f"decode: TPOT {ms(dec['tpot_ms_servers'])} (the decode servers' inter-token latency); KV transfer "
        f"{ms(dec['kv_transfer_ms'])}, bootstrap {ms(dec['kv_bootstrap_ms'])}; failures "
        + ", ".join(f"{k.removeprefix('num_')} {v:g}" for k, v in dec["failures"].items()),
    ]
    if smg:
        lines.append("smg: " + ", ".join(f"{k} +{v:g}" for k, v in smg.items()))
    return lines
