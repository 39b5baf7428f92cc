"""Production traces in Mooncake's published format, replayed on their own clock (pure apart from reading the file;
standard library only: the prompt builders also run in the load generator on a GPU host, console.bench.agent).

    sample = sample_dataset(Path("trace.jsonl"), size=10**9, trace_window=(600.0, 1200.0))  # console.bench.datasets

The format (kvcache-ai/Mooncake, FAST'25 traces; SGLang's bench_serving reads it as `--dataset-name mooncake`): JSONL,
one request a line: `timestamp` (ms; requests with equal values arrive together), `input_length` and `output_length`
(tokens), `hash_ids` (one id per block of BLOCK_TOKENS prompt tokens; requests whose leading ids are equal share that
prefix). A JSONL file whose first record has `timestamp` and `hash_ids` or `input_length` is a trace.

- Arrivals: the trace's timestamps from the first one's (sorted, as bench_serving sorts them), divided by the level's
  speed (`--trace-speed 2`: twice as fast); `window` (seconds from the trace's start, `--trace-window 10m` or
  `20m-30m`) takes a slice, whose first request arrives at the level's start. `limit`: at most the window's first N.
- Prompts, `tokens` (the default): what the trace says, in token ids on /generate (exact lengths on any model):
  `input_length` tokens, block i the same BLOCK_TOKENS ids wherever hash id hash_ids[i] appears (so a radix cache
  matches exactly the blocks the trace shares), the last block cut at input_length, tokens past the blocks the
  request's own; the output forced to `output_length`.
- Prompts, `bench-serving`: the text bench_serving's mooncake mode builds (sglang 0.5.6.post2-0.5.17,
  get_mooncake_request_over_time): "Round 1: " then, per hash id, the id followed by 128 times "hi", then "Tell me a
  story based on this context.", sent as one user message to the chat API (the server applies the model's chat
  template, as bench_serving does before it sends); input_length is not used, as there. For figures beside a
  published bench_serving mooncake run.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

BLOCK_TOKENS = 512  # Mooncake's hash_ids block
BENCH_SERVING_HI = 128  # bench_serving's "hi" words per hash id (its comment: "Shorter for multi-round")
TRACE_FORMAT = "mooncake-trace"
TRACE_PROMPTS = ("tokens", "bench-serving")
EXPECTED = '{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]} a line'


def is_trace_record(record: Any) -> bool:
    return isinstance(record, dict) and "timestamp" in record and ("hash_ids" in record or "input_length" in record)


class TraceProblem(ValueError):
    """What is wrong with one line of a trace: the JSON path in it and the problem (the caller adds file and line)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


def _whole(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TraceProblem(f".{name}", f"{value!r} is not a whole number ≥ {minimum}")
    return value


def trace_entry(record: Any) -> tuple[float, int, int, tuple[int, ...]]:
    """(timestamp ms, input_length, output_length, hash_ids) of one line; TraceProblem says what is wrong."""
    if not isinstance(record, dict):
        raise TraceProblem("", "not an object")
    stamp = record.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or stamp < 0:
        raise TraceProblem(".timestamp", f"{stamp!r} is not a time in ms ≥ 0")
    if "output_length" not in record:
        raise TraceProblem("", 'no "output_length"')
    output = _whole(record["output_length"], "output_length", 1)
    ids = record.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise TraceProblem(".hash_ids", "not a list of whole numbers")
    if "input_length" in record:
        length = _whole(record["input_length"], "input_length", 1)
    elif ids:
        length = BLOCK_TOKENS * len(ids)
    else:
        raise TraceProblem("", 'no "input_length" nor "hash_ids"')
    return float(stamp), length, output, tuple(ids)


def in_window(stamps: Sequence[float], window: tuple[float, float | None] | None) -> list[int]:
    """Indices of the requests inside the window (seconds from the first timestamp; end excluded)."""
    if not stamps:
        return []
    first = min(stamps)
    start, end = window if window is not None else (0.0, None)
    return [
        i for i, t in enumerate(stamps) if (t - first) / 1000 >= start and (end is None or (t - first) / 1000 < end)
    ]


# --- prompts from hash ids ------------------------------------------------------------------------------------


def block_ids(hash_id: int, id_range: tuple[int, int]) -> list[int]:
    """The BLOCK_TOKENS token ids of a hash id's block: the same for the same id in every request and every run."""
    lo, hi = id_range
    seed = int.from_bytes(hashlib.blake2b(str(hash_id).encode(), digest_size=8).digest(), "big")
    rng = random.Random(seed)
    return [rng.randrange(lo, hi) for _ in range(BLOCK_TOKENS)]


def trace_prompt_ids(
    hash_ids: Sequence[int], input_length: int, own_seed: int, id_range: tuple[int, int], cache: dict[int, list[int]]
) -> list[int]:
    """A request's prompt as token ids (`tokens` prompts, see the module's doc). `cache`: blocks already made."""
    ids: list[int] = []
    for hash_id in hash_ids:
        if len(ids) >= input_length:
            break
        block = cache.get(hash_id)
        if block is None:
            if len(cache) > 4096:
                cache.clear()  # a long trace's blocks are made again rather than held
            block = cache[hash_id] = block_ids(hash_id, id_range)
        ids += block
    del ids[input_length:]
    if len(ids) < input_length:
        lo, hi = id_range
        rng = random.Random(own_seed)
        ids += [rng.randrange(lo, hi) for _ in range(input_length - len(ids))]
    return ids


def bench_serving_text(hash_ids: Sequence[int]) -> str:
    """The user message bench_serving's mooncake mode builds for a request (round 1; see the module's doc)."""
    base = "".join(f"{hash_id}" + " ".join(["hi"] * BENCH_SERVING_HI) for hash_id in hash_ids)
    return "Round 1: " + base + "Tell me a story based on this context."
