"""SGLang 0.5.23's adaptive speculative decoding (`--speculative-adaptive`), as its source does it (pure).

[0.5.23 speculative/adaptive_spec_params.py] The number of draft steps changes at run time. The config is keyed by
batch size: each key ("1", "8", "32", "64" by default) has its own candidate steps and its own state. A batch is
padded up to a captured CUDA-graph batch size and served by the largest key not above it. Each slot keeps an EMA
(alpha 0.2) of the drafts accepted per request (bonus excluded) while it drafts; after `warmup_batches` (10), every
`update_interval` (5) batches it recomputes its steps: down one candidate while the EMA is at or below
`prev - 0.5 + down_hysteresis` (0.5 + hysteresis when prev is 0), else up while it is above `cur - 0.5 +
up_hysteresis`; from 0 steps (no drafting) it probes the next candidate. Launch steps must be one of the union of
every slot's candidates (the middle one of that union when unset), draft tokens are steps + 1, and a runtime state
(CUDA graphs) is built for every candidate at startup.

What shows it: `/server_info`'s internal_states[i].speculative_num_steps / speculative_num_draft_tokens and the
gauges sglang:spec_num_steps / spec_num_draft_tokens carry the active tier (the top-level fields keep the launch
config); the log says "Adaptive spec params updated: steps A -> B (ema_accept_len=x)".

Used by the stand-in (to run it) and by the console (to say which tier a level would settle on, console.core.tune's
adaptive predictions).
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_CONFIG: Mapping[str, Mapping[str, Any]] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}


# SGLang's default decode CUDA-graph batch sizes (0.5.17's and 0.5.23's ladder): an adaptive batch is padded up to one
DEFAULT_DECODE_GRAPH_BS: tuple[int, ...] = (
    *range(1, 9), *range(10, 33, 2), 40, 44, 48, 52, 56, 60, 64, *range(72, 257, 8),
)  # fmt: skip


class AdaptiveConfigError(ValueError):
    """The config SGLang would refuse at startup (its ValueError's text)."""


def parse_config(text: str | None) -> dict[str, Any]:
    """The JSON of `--speculative-adaptive-config` (None: the default), validated as SGLang validates it."""
    if text is None:
        config: Any = {key: dict(value) for key, value in DEFAULT_CONFIG.items()}
    else:
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise AdaptiveConfigError(f"the adaptive config is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise AdaptiveConfigError("the adaptive config must be a JSON object keyed by batch size")
    slots = batch_slots(config)
    if not slots:
        raise AdaptiveConfigError(
            "speculative_adaptive_config must contain at least one integer-string BS key, e.g. "
            f'{{"1": {{"candidate_steps": [1,3,7]}}}}. Got keys: {list(config)}'
        )
    return config


def batch_slots(config: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """{batch size: its entry with the top-level knobs under it}, as `_load_adaptive_config` builds them."""
    slots: dict[int, dict[str, Any]] = {}
    shared = {k: v for k, v in config.items() if not k.isdigit()}
    for key, entry in config.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
            raise AdaptiveConfigError(f"BS {key}: candidate_steps must be a list of non-negative ints, got {steps!r}")
        slots[int(key)] = {**shared, **entry}
    return slots


def candidate_union(config: Mapping[str, Any] | None = None) -> list[int]:
    """Every slot's candidate steps together: what launch steps must be one of (and what sizes the buffers)."""
    slots = batch_slots(config if config is not None else DEFAULT_CONFIG)
    return sorted({s for entry in slots.values() for s in entry["candidate_steps"]})


def launch_steps(config: Mapping[str, Any] | None = None) -> int:
    """The steps SGLang starts with when --speculative-num-steps is unset: the middle of the union."""
    union = candidate_union(config)
    return union[len(union) // 2]


class StepSlot:
    """One batch-size slot: its candidates, EMA and current steps (SGLang's AdaptiveStepSlot)."""

    def __init__(self, initial_steps: int, entry: Mapping[str, Any]) -> None:
        self.candidate_steps = sorted(set(entry["candidate_steps"]))
        self.ema_alpha = float(entry.get("ema_alpha", 0.2))
        self.update_interval = int(entry.get("update_interval", 5))
        self.warmup_batches = int(entry.get("warmup_batches", 10))
        self.down_hysteresis = float(entry.get("down_hysteresis", -0.25))
        self.up_hysteresis = float(entry.get("up_hysteresis", 0.0))
        self.ceiling_coeff = float(entry.get("ceiling_coeff", 0))
        if initial_steps in self.candidate_steps:
            self.current_steps = initial_steps
        else:
            self.current_steps = self.candidate_steps[len(self.candidate_steps) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0

    def update(self, correct_drafts_per_request: Sequence[int]) -> bool:
        """One verified batch; True when the steps changed."""
        if not correct_drafts_per_request:
            return False
        if self.current_steps > 0:
            batch_avg = sum(correct_drafts_per_request) / len(correct_drafts_per_request)
            self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * batch_avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return False
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        old = self.current_steps
        return self.recompute() != old

    def recompute(self) -> int:
        """The steps the EMA asks for now (applied); SGLang's _recompute_params."""
        old = self.current_steps
        self.current_steps = self.target_steps(self.ema_accept_len, old)
        if old == 0 and self.current_steps > 0 and self.ema_accept_len < 0:
            self.ema_accept_len = float(self.current_steps - 1)
        return self.current_steps

    def target_steps(self, ema: float, old: int) -> int:
        """The candidate the rule moves to from `old` with this EMA."""
        steps = self.candidate_steps
        idx = old_idx = steps.index(old)
        if old == 0:
            return steps[min(idx + 1, len(steps) - 1)]
        while idx > 0:
            prev = steps[idx - 1]
            drop = (0.5 if prev == 0 else prev - 0.5) + self.down_hysteresis
            if ema <= drop:
                idx -= 1
            else:
                break
        if idx >= old_idx:
            while idx < len(steps) - 1 and ema > steps[idx] - 0.5 + self.up_hysteresis:
                idx += 1
        target = steps[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(ema * self.ceiling_coeff))
            if ceiling < target <= old:
                while idx > 0 and steps[idx] > ceiling:
                    idx -= 1
                target = steps[idx]
        return target


class AdaptiveSpecParams:
    """Routes a batch to its slot (SGLang's AdaptiveSpeculativeParams)."""

    def __init__(self, initial_steps: int, config: Mapping[str, Any] | None = None, graph_bs: Sequence[int] = ()):
        slots = batch_slots(config if config is not None else DEFAULT_CONFIG)
        self.bs_list = sorted(slots)
        self.slots = {bs: StepSlot(initial_steps, slots[bs]) for bs in self.bs_list}
        self.graph_bs = sorted(graph_bs) or None

    def slot_key(self, batch_size: int) -> int:
        """The key serving this batch: padded up to a captured graph size, then the largest key not above it."""
        padded = batch_size
        if self.graph_bs is not None:
            i = bisect.bisect_left(self.graph_bs, batch_size)
            padded = self.graph_bs[i] if i < len(self.graph_bs) else batch_size
        i = bisect.bisect_right(self.bs_list, padded) - 1
        return self.bs_list[max(0, i)]

    def slot(self, batch_size: int) -> StepSlot:
        return self.slots[self.slot_key(batch_size)]

    def steps_for_batch(self, batch_size: int) -> int:
        return self.slot(batch_size).current_steps

    def on_verify_complete(self, correct_drafts_per_request: Sequence[int], batch_size: int) -> int | None:
        """A verified batch fed to its slot; its new steps when they changed, else None."""
        slot = self.slot(batch_size)
        return slot.current_steps if slot.update(correct_drafts_per_request) else None


@dataclass(frozen=True)
class SettledTier:
    """Where a slot's steps come to rest for a traffic whose mean accepted drafts per round at s steps is known."""

    slot: int  # the config key serving the batch
    candidates: tuple[int, ...]
    steps: int  # the tier it settles on (or the last of a cycle)
    path: tuple[int, ...]  # the tiers it goes through from the launch steps
    cycles: bool  # it keeps switching between tiers instead of settling


def settled_tier(
    batch_size: int,
    mean_correct_drafts: Callable[[int], float | None],
    *,
    launch: int,
    config: Mapping[str, Any] | None = None,
    graph_bs: Sequence[int] = (),
) -> SettledTier:
    """The tier SGLang's rule settles on at this batch size when a round at s steps accepts mean_correct_drafts(s)
    drafts on average (the EMA's steady state there): from the launch steps (or the slot's middle), apply the rule
    to the EMA each tier would reach, until a tier repeats."""
    params = AdaptiveSpecParams(launch, config, graph_bs)
    key = params.slot_key(batch_size)
    slot = params.slots[key]
    current = slot.current_steps
    path = [current]
    seen = {current}
    while True:
        ema = mean_correct_drafts(current) if current > 0 else None
        nxt = slot.target_steps(ema if ema is not None else slot.ema_accept_len, current)
        if nxt == current:
            return SettledTier(key, tuple(slot.candidate_steps), current, tuple(path), False)
        if nxt in seen:
            path.append(nxt)
            return SettledTier(key, tuple(slot.candidate_steps), nxt, tuple(path), True)
        seen.add(nxt)
        path.append(nxt)
        current = nxt
