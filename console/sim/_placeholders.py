"""TEMPORARY stand-ins for console.sim.profiles/engine and console.sglang.rules while those land.

Used only when the real modules cannot be imported (see console/sim/deps.py). Delete this file once
profiles.py, engine.py and console/sglang/rules.py exist. It implements the agreed contracts with
constant figures and no rules at all; it is not a performance model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GpuSpec:
    name: str = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    memory_mib: int = 97887
    power_limit_w: float = 600.0
    idle_power_w: float = 35.0
    max_sm_clock_mhz: int = 2617
    mem_clock_mhz: int = 13365


@dataclass(frozen=True)
class SimProfile:
    name: str
    served_model_name: str
    architecture: str
    gpu: GpuSpec
    gpu_count: int
    context_length: int
    weights_gb_per_gpu: float = 32.0


PROFILES = {
    "qwen3.5-122b-fp8-4x-rtxpro6000": SimProfile(
        "qwen3.5-122b-fp8-4x-rtxpro6000", "Qwen/Qwen3.5-122B-A10B-FP8", "Qwen3_5MoeForCausalLM", GpuSpec(), 4, 262144
    ),
    "kimi-k2.5-int4-8x-rtxpro6000-pcie": SimProfile(
        "kimi-k2.5-int4-8x-rtxpro6000-pcie", "moonshotai/Kimi-K2.5", "DeepseekV3ForCausalLM", GpuSpec(), 8, 262144
    ),
}
DEFAULT_PROFILE = "qwen3.5-122b-fp8-4x-rtxpro6000"


def get_profile(name: str) -> SimProfile:
    return PROFILES[name]


@dataclass
class Step:
    duration_s: float
    emitted: dict[str, int]
    finished: set[str]


@dataclass
class _Req:
    rid: str
    prompt_tokens: int
    max_new_tokens: int
    done: int = 0


class Engine:
    def __init__(self, profile: SimProfile, resolved_args: dict[str, Any], seed: int = 0) -> None:
        self.profile = profile
        self.max_running_requests = int(resolved_args.get("max_running_requests") or 48)
        self.max_total_num_tokens = 500000
        self.spec = bool(resolved_args.get("speculative_algorithm"))
        self.running: dict[str, _Req] = {}
        self.queue: list[_Req] = []
        self.accepted_tokens = 0
        self.verify_ct = 0

    def add(self, rid: str, prompt_tokens: int, max_new_tokens: int, temperature: float, ignore_eos: bool) -> None:
        self.queue.append(_Req(rid, prompt_tokens, max(1, max_new_tokens)))

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_queued(self) -> int:
        return len(self.queue)

    @property
    def token_usage(self) -> float:
        used = sum(r.prompt_tokens + r.done for r in self.running.values())
        return used / self.max_total_num_tokens

    def next_step(self) -> Step | None:
        while self.queue and len(self.running) < self.max_running_requests:
            r = self.queue.pop(0)
            self.running[r.rid] = r
        if not self.running:
            return None
        per = 3 if self.spec else 1
        emitted: dict[str, int] = {}
        finished: set[str] = set()
        for r in list(self.running.values()):
            n = min(per, r.max_new_tokens - r.done)
            r.done += n
            emitted[r.rid] = n
            self.accepted_tokens += n
            self.verify_ct += 1
            if r.done >= r.max_new_tokens:
                finished.add(r.rid)
                del self.running[r.rid]
        return Step(0.01, emitted, finished)

    def startup_phases(self) -> list[tuple[str, float]]:
        phases = [("load_weights", 60.0), ("kv_cache", 5.0), ("cuda_graph", 40.0)]
        if self.spec:
            phases += [("draft_cuda_graph", 20.0), ("draft_extend_cuda_graph", 10.0)]
        return [*phases, ("warmup", 3.0)]

    def gpu_load(self) -> list[dict[str, float]]:
        busy = min(1.0, len(self.running) / max(1, self.max_running_requests))
        return [{"util": 100.0 * (0.3 + 0.7 * busy) if self.running else 0.0}] * self.profile.gpu_count


@dataclass
class _Msg:
    sglang_log: str


@dataclass
class LaunchReport:
    resolved: dict[str, Any]
    errors: list[_Msg] = field(default_factory=list)
    warnings: list[_Msg] = field(default_factory=list)
    adjustments: list[_Msg] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def check_launch(argv: list[str], env: dict[str, str], version: str, architecture: str | None = None) -> LaunchReport:
    """No rules: flags are parsed into dest names as given."""
    resolved: dict[str, Any] = {"port": 30000, "host": "127.0.0.1", "decode_log_interval": 40}
    i = 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--"):
            i += 1
            continue
        key, _, val = a[2:].partition("=")
        dest = key.replace("-", "_")
        if not val and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            val = argv[i + 1]
            i += 1
        resolved[dest] = (int(val) if val.isdigit() else val) if val else True
        i += 1
    for alias, dest in (("model", "model_path"), ("tp", "tp_size")):
        if alias in resolved:
            resolved[dest] = resolved.pop(alias)
    return LaunchReport(resolved)
