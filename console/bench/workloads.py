"""Benchmark workloads: what each request asks for, built up front and seeded (pure, no I/O).

Two named workloads:
- `random`: the optimistic case. Seeded random prompts of exactly `input_len` tokens (token ids sent as
  `input_ids` on /generate; on chat, `input_len` common words, about one token each), forced output length
  (`ignore_eos`), temperature 0 unless overridden.
- `chat`: the realistic case. A bundled set of varied chat prompts (chat_prompts.json), natural
  stopping (no `ignore_eos`, `output_len` only caps it), temperature 0.7 unless overridden. Repetitive
  forced output inflates speculative acceptance; this workload shows the acceptance real traffic gets.
Request bodies are encoded to bytes once here so the load loop only sends them.
"""

from __future__ import annotations

import json
import pkgutil
import random
from dataclasses import dataclass
from functools import cache
from typing import Literal

WorkloadName = Literal["random", "chat"]
ApiName = Literal["generate", "chat"]

# Token ids drawn from this range exist in every vocabulary operators run (≥ 32k entries) and avoid the
# special tokens that tokenizers keep at the low ids.
RANDOM_TOKEN_ID_RANGE = (1000, 30000)
DEFAULT_TEMPERATURE: dict[str, float] = {"random": 0.0, "chat": 0.7}

# Common English words that encode to one token (with their leading space) in the Llama/Qwen/DeepSeek
# tokenizers, so that N words make a prompt of about N tokens on the chat API.
_WORD_LIST = (
    "the of and to in is was for on that with as by at from his her it an are were which this be or "
    "has had not but its they one all their new also more first who two been can other time after "
    "over year into most only then some these used may would where out made world about when there "
    "work part well life city state under three team people many such them later during known both "
    "through before while since long name high like well home game back early second area four began"
)
_WORDS = tuple(_WORD_LIST.split())


@dataclass(frozen=True)
class WorkloadSpec:
    name: WorkloadName = "random"
    api: ApiName = "generate"
    input_len: int = 1024
    output_len: int = 256
    temperature: float | None = None  # None: the workload's own default
    seed: int = 1
    model: str = "default"  # the served model name, for the OpenAI API

    @property
    def effective_temperature(self) -> float:
        return DEFAULT_TEMPERATURE[self.name] if self.temperature is None else self.temperature

    @property
    def forced_output(self) -> bool:
        return self.name == "random"

    def describe(self) -> dict[str, object]:
        """The workload as it goes into a record: enough to reproduce it."""
        return {
            "name": self.name,
            "api": self.api,
            "input_len": self.input_len if self.name == "random" else None,
            "output_len": self.output_len,
            "ignore_eos": self.forced_output,
            "temperature": self.effective_temperature,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class PreparedRequest:
    body: bytes
    prompt_len: int  # client-side estimate; the server's own count replaces it when it reports one


@cache
def chat_prompts() -> tuple[str, ...]:
    # pkgutil rather than importlib.resources: it also reads from the in-memory loader the engine runs under
    # on a GPU host (console.bench.agent), which answers get_data() only.
    raw = pkgutil.get_data("console.bench", "chat_prompts.json")
    if raw is None:
        raise RuntimeError("console.bench's chat_prompts.json cannot be read")
    prompts = json.loads(raw.decode("utf-8"))
    return tuple(str(p) for p in prompts)


def _sampling(spec: WorkloadSpec) -> dict[str, object]:
    params: dict[str, object] = {"max_new_tokens": spec.output_len, "temperature": spec.effective_temperature}
    if spec.forced_output:
        params["ignore_eos"] = True
    return params


def _chat_body(spec: WorkloadSpec, text: str) -> dict[str, object]:
    body: dict[str, object] = {
        "model": spec.model,
        "messages": [{"role": "user", "content": text}],
        "max_completion_tokens": spec.output_len,
        "temperature": spec.effective_temperature,
        "stream": True,
        # continuous usage: every chunk says how many tokens it carries, so ITL can be split per token.
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if spec.forced_output:
        body["ignore_eos"] = True
    return body


def build_requests(spec: WorkloadSpec, count: int, offset: int = 0) -> list[PreparedRequest]:
    """`count` request bodies; request i is the same for a given (spec, offset + i) on every run."""
    if spec.input_len < 1 or spec.output_len < 1:
        raise ValueError("input and output lengths must be at least 1 token")
    out: list[PreparedRequest] = []
    prompts = chat_prompts()
    for i in range(offset, offset + count):
        rng = random.Random(spec.seed * 1_000_003 + i)
        if spec.name == "chat":
            text = prompts[rng.randrange(len(prompts))]
            if spec.api == "chat":
                payload = _chat_body(spec, text)
            else:
                payload = {"text": text, "sampling_params": _sampling(spec), "stream": True}
            out.append(PreparedRequest(json.dumps(payload).encode(), prompt_len=len(text.split())))
            continue
        if spec.api == "generate":
            lo, hi = RANDOM_TOKEN_ID_RANGE
            ids = [rng.randrange(lo, hi) for _ in range(spec.input_len)]
            payload = {"input_ids": ids, "sampling_params": _sampling(spec), "stream": True}
        else:
            words = " ".join(rng.choice(_WORDS) for _ in range(spec.input_len))
            payload = _chat_body(spec, words)
        out.append(PreparedRequest(json.dumps(payload).encode(), prompt_len=spec.input_len))
    return out
