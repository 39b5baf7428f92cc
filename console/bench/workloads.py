"""Benchmark workloads: what each request asks for, built up front and seeded (pure, no I/O).

Four named workloads:
- `random`: the optimistic case. Seeded random prompts of exactly `input_len` tokens (token ids sent as
  `input_ids` on /generate; on chat, `input_len` common words, about one token each), forced output length
  (`ignore_eos`), temperature 0 unless overridden.
- `chat`: the realistic case. A bundled set of varied chat prompts (chat_prompts.json), natural
  stopping (no `ignore_eos`, `output_len` only caps it), temperature 0.7 unless overridden. Repetitive
  forced output inflates speculative acceptance; this workload shows the acceptance real traffic gets.
- `dataset`: the operator's own prompts, sampled from a file by console.bench.datasets (the sample travels in
  the spec: `DatasetSample`). As SGLang's bench_serving does with a dataset: each request's output length is the
  dataset's own (capped by `--output-len` when given) and forced (`ignore_eos`), temperature 0 unless overridden.
  Request i of a level is sample[i mod len(sample)]: every level of every run sends the same requests in the
  same order. The spec's description (what a record keeps) holds the file's sha256, the format, the sample and
  length statistics, never a prompt's text.
- `shape`: the server's own traffic (`--shape-from-server`): lengths drawn from its /metrics histograms, shared
  prefixes sized to its cache hit share (console.bench.shape), token ids on /generate, forced output lengths.
Request bodies are encoded to bytes once here so the load loop only sends them.
"""

from __future__ import annotations

import json
import math
import pkgutil
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal

from console.bench.shape import ShapeSpec, shaped_requests, shared_ids
from console.bench.traces import bench_serving_text, trace_prompt_ids

WorkloadName = Literal["random", "chat", "dataset", "shape"]
ApiName = Literal["generate", "chat"]

# Token ids drawn from this range exist in every vocabulary operators run (≥ 32k entries) and avoid the
# special tokens that tokenizers keep at the low ids.
RANDOM_TOKEN_ID_RANGE = (1000, 30000)
DEFAULT_TEMPERATURE: dict[str, float] = {"random": 0.0, "chat": 0.7, "dataset": 0.0, "shape": 0.0}
# A dataset request without an output length of its own, and no --output-len: bench_serving's openai default.
DATASET_DEFAULT_OUTPUT_LEN = 256

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
class DatasetRequest:
    """One request of a dataset: a prompt (ShareGPT, prompt JSONL) or chat messages (chat JSONL), its length (in
    the model's tokens, or words where no tokenizer could be had: DatasetSample.length_unit; the server's own count
    replaces it in the metrics) and the dataset's own output length, if it has one."""

    prompt: str = ""
    messages: tuple[dict[str, Any], ...] = ()
    prompt_len: int = 0
    output_len: int | None = None
    # a trace's request (console.bench.traces): when it arrives (ms from the trace's start) and its prompt's blocks
    at_ms: float | None = None
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class DatasetSample:
    """The requests sampled from a dataset file, and what a record says about them (console.bench.datasets)."""

    file: str  # the file's name (not its folder: records travel)
    sha256: str
    format: str  # sharegpt | prompt-jsonl | chat-jsonl
    seed: int
    sample: int  # how many were asked for (--dataset-sample)
    entries: int  # usable records in the file (JSONL: its non-blank lines)
    requests: tuple[DatasetRequest, ...] = ()
    skipped: tuple[tuple[str, int], ...] = ()  # (why, how many) records of the file were left out
    output_len_cap: int | None = None  # --output-len, when given
    too_long: int = 0  # requests left out because the prompt exceeds the server's context length
    source: str = ""  # the path as given (for the caller that hashes it later; not in the description)
    file_bytes: int = 0
    entries_estimated: bool = False  # sampled by position: `entries` is the file's size / the mean line's
    length_unit: str = "words"  # what prompt_len and the ShareGPT output lengths count: "tokens" or "words"
    length_counter: str = ""  # what counted them (the server's /tokenize, the host's tokenizer files, ...)
    trace_window: tuple[float, float | None] | None = None  # a trace: the slice replayed (s from its start)

    def output_len(self, request: DatasetRequest) -> int:
        own = request.output_len
        cap = self.output_len_cap
        if own is None:
            return cap if cap is not None else DATASET_DEFAULT_OUTPUT_LEN
        return own if cap is None else min(own, cap)

    def output_len_source(self) -> str:
        """Where the output lengths come from, as the record says it."""
        own = sum(1 for r in self.requests if r.output_len is not None)
        cap = self.output_len_cap
        if own == 0:
            return f"--output-len {cap}" if cap is not None else f"default {DATASET_DEFAULT_OUTPUT_LEN}"
        base = "dataset" if own == len(self.requests) else f"dataset ({own} of {len(self.requests)} have one)"
        return base + (f", capped by --output-len {cap}" if cap is not None else "")

    def within_context(self, context_length: int | None) -> DatasetSample:
        """The sample without the requests whose prompt is longer than the server's context length (counted)."""
        if not context_length:
            return self
        kept = tuple(r for r in self.requests if r.prompt_len <= context_length)
        return replace(self, requests=kept, too_long=self.too_long + len(self.requests) - len(kept))

    @property
    def is_trace(self) -> bool:
        return self.format == "mooncake-trace"

    def arrivals_s(self) -> list[float]:
        """A trace's arrival times in seconds from its first request's (at speed 1)."""
        stamps = [r.at_ms or 0.0 for r in self.requests]
        first = min(stamps, default=0.0)
        return [(t - first) / 1000 for t in stamps]

    def describe(self) -> dict[str, Any]:
        """For the records: provenance, counts and length statistics, never a prompt's text."""
        prompts = [r.prompt_len for r in self.requests]
        outputs = [self.output_len(r) for r in self.requests]
        trace: dict[str, Any] = {}
        if self.is_trace:
            arrivals = self.arrivals_s()
            start, end = self.trace_window or (0.0, None)
            span = max(arrivals, default=0.0)
            trace = {
                "trace_window": {"start_s": start, "end_s": end},
                "trace_span_s": round(span, 3),
                "trace_rate": round((len(arrivals) - 1) / span, 3) if span > 0 else None,
                "hash_blocks": sum(len(r.hash_ids) for r in self.requests),
            }
        return {
            "file": self.file,
            "sha256": self.sha256,
            "format": self.format,
            "seed": self.seed,
            "sample": self.sample,
            "entries": self.entries,
            "entries_estimated": self.entries_estimated,
            "file_bytes": self.file_bytes,
            "requests": len(self.requests),
            "skipped": dict(self.skipped),
            "too_long_for_context": self.too_long,
            "output_len_source": self.output_len_source(),
            "length_unit": self.length_unit,
            "lengths_in": self.length_unit,  # the name records had before length_unit (kept for their readers)
            "length_counter": self.length_counter or ("words" if self.length_unit == "words" else ""),
            "prompt_len": length_stats(prompts),
            "output_len": length_stats(outputs),
            **trace,
        }


def length_stats(values: list[int]) -> dict[str, float]:
    """count, mean, p50, p90, p99 and max of a list of lengths (nearest-rank percentiles: whole numbers)."""
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def rank(q: float) -> int:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]

    return {
        "count": len(ordered),
        "mean": round(sum(ordered) / len(ordered), 1),
        "p50": rank(50),
        "p90": rank(90),
        "p99": rank(99),
        "max": ordered[-1],
    }


@dataclass(frozen=True)
class WorkloadSpec:
    name: WorkloadName = "random"
    api: ApiName = "generate"
    input_len: int = 1024
    output_len: int = 256
    temperature: float | None = None  # None: the workload's own default
    seed: int = 1
    model: str = "default"  # the served model name, for the OpenAI API
    dataset: DatasetSample | None = None  # name "dataset": the sampled requests
    shape: ShapeSpec | None = None  # name "shape": the server's measured traffic shape (console.bench.shape)
    # a trace dataset's prompts (console.bench.traces): "tokens" (its lengths and blocks, token ids on /generate) or
    # "bench-serving" (the text bench_serving's mooncake mode builds, on the chat API)
    trace_prompts: str = "tokens"

    @property
    def effective_temperature(self) -> float:
        return DEFAULT_TEMPERATURE[self.name] if self.temperature is None else self.temperature

    @property
    def forced_output(self) -> bool:
        return self.name in ("random", "dataset", "shape")

    def describe(self) -> dict[str, object]:
        """The workload as it goes into a record: enough to reproduce it."""
        out: dict[str, object] = {
            "name": self.name,
            "api": self.api,
            "input_len": self.input_len if self.name == "random" else None,
            "output_len": self.output_len,
            "ignore_eos": self.forced_output,
            "temperature": self.effective_temperature,
            "seed": self.seed,
        }
        if self.dataset is not None:
            out["output_len"] = self.dataset.output_len_cap
            described = self.dataset.describe()
            if self.dataset.is_trace:
                described["trace_prompts"] = self.trace_prompts
            out["dataset"] = described
        if self.shape is not None:
            out["input_len"] = out["output_len"] = None
            out["shape"] = self.shape.to_json()
        return out


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


def _sampling(spec: WorkloadSpec, output_len: int | None = None) -> dict[str, object]:
    params: dict[str, object] = {
        "max_new_tokens": spec.output_len if output_len is None else output_len,
        "temperature": spec.effective_temperature,
    }
    if spec.forced_output:
        params["ignore_eos"] = True
    return params


def _chat_body(
    spec: WorkloadSpec, text: str, output_len: int | None = None, messages: list[dict[str, Any]] | None = None
) -> dict[str, object]:
    body: dict[str, object] = {
        "model": spec.model,
        "messages": messages if messages is not None else [{"role": "user", "content": text}],
        "max_completion_tokens": spec.output_len if output_len is None else output_len,
        "temperature": spec.effective_temperature,
        "stream": True,
        # continuous usage: every chunk says how many tokens it carries, so ITL can be split per token.
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if spec.forced_output:
        body["ignore_eos"] = True
    return body


class TraceRequests(Sequence[PreparedRequest]):
    """A trace's requests 0..count-1 (cycled), each body made when it is taken: a long trace's prompts (thousands of
    token ids each) are never all held at once. The blocks made are kept for the next requests that share them."""

    def __init__(self, spec: WorkloadSpec, count: int) -> None:
        assert spec.dataset is not None
        self.spec = spec
        self.requests = spec.dataset.requests
        self.size = count
        self._blocks: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> PreparedRequest:  # type: ignore[override]
        if not 0 <= index < self.size:
            raise IndexError(index)
        spec, sample = self.spec, self.spec.dataset
        assert sample is not None
        request = self.requests[index % len(self.requests)]
        output_len = sample.output_len(request)
        if spec.trace_prompts == "bench-serving":
            text = bench_serving_text(request.hash_ids)
            payload = _chat_body(spec, text, output_len)
            return PreparedRequest(json.dumps(payload).encode(), prompt_len=len(text.split()))
        if spec.api != "generate":
            raise ValueError("a trace's token prompts go to the generate API (or use --trace-prompts bench-serving)")
        own = spec.seed * 1_000_003 + index % len(self.requests) + 700_000_000
        ids = trace_prompt_ids(request.hash_ids, request.prompt_len, own, RANDOM_TOKEN_ID_RANGE, self._blocks)
        payload = {"input_ids": ids, "sampling_params": _sampling(spec, output_len), "stream": True}
        return PreparedRequest(json.dumps(payload).encode(), prompt_len=len(ids))


def _dataset_requests(spec: WorkloadSpec, count: int) -> Sequence[PreparedRequest]:
    """Requests 0..count-1 of the dataset's sample, cycled (see the module's doc)."""
    sample = spec.dataset
    if sample is None or not sample.requests:
        raise ValueError("the dataset workload has no requests (none sampled, or none fits the context length)")
    if sample.is_trace:
        return TraceRequests(spec, count)
    out = []
    for i in range(count):
        request = sample.requests[i % len(sample.requests)]
        output_len = sample.output_len(request)
        if spec.api == "chat":
            messages = [dict(m) for m in request.messages] or None
            payload = _chat_body(spec, request.prompt, output_len, messages)
        elif request.messages:
            raise ValueError("a chat (messages) dataset is sent to the chat API: use --api chat")
        else:
            payload = {"text": request.prompt, "sampling_params": _sampling(spec, output_len), "stream": True}
        out.append(PreparedRequest(json.dumps(payload).encode(), prompt_len=request.prompt_len))
    return out


def _shape_requests(spec: WorkloadSpec, count: int, offset: int) -> list[PreparedRequest]:
    """Requests drawn from the server's traffic shape, token ids on /generate (exact lengths; console.bench.shape)."""
    shape = spec.shape
    if shape is None:
        raise ValueError("the shape workload has no shape (observe the server first: --shape-from-server)")
    if spec.api != "generate":
        raise ValueError("the shape workload sends token ids: it runs on the generate API")
    requests, _hit = shaped_requests(shape, spec.seed, count, offset)
    shared = shared_ids(spec.seed, max((r.prefix_len for r in requests), default=0), RANDOM_TOKEN_ID_RANGE)
    lo, hi = RANDOM_TOKEN_ID_RANGE
    out = []
    for i, request in zip(range(offset, offset + count), requests, strict=True):
        rng = random.Random(spec.seed * 1_000_003 + i + 500_000_000)  # apart from the length draws' streams
        own = [rng.randrange(lo, hi) for _ in range(request.prompt_len - request.prefix_len)]
        payload = {
            "input_ids": shared[: request.prefix_len] + own,
            "sampling_params": _sampling(spec, request.output_len),
            "stream": True,
        }
        out.append(PreparedRequest(json.dumps(payload).encode(), prompt_len=request.prompt_len))
    return out


def build_requests(spec: WorkloadSpec, count: int, offset: int = 0) -> Sequence[PreparedRequest]:
    """`count` request bodies; request i is the same for a given (spec, offset + i) on every run (a dataset's:
    the same for every offset)."""
    if spec.name == "dataset":
        return _dataset_requests(spec, count)
    if spec.name == "shape":
        return _shape_requests(spec, count, offset)
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
