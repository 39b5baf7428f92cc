"""A dataset's lengths in the model's own tokens, counted before the sweep (console.bench.datasets samples with them).

    config = await count_lengths(config, base_url, api_key=key, workspace=ws, host=HostTokenizer(...), on_event=say)

Where the counts come from, first that answers:
1. the server's `/tokenize` (SGLang 0.5.4 on: `{"prompt": [texts]}` -> `{"count": [...]}`, its tokenizer's
   encode with the model's special tokens, as bench_serving's tokenizer.encode counts), a batch per request;
2. the tokenizer files at the unit's `--tokenizer-path` (else `--model-path`), read on the host by the unit's own
   Python (ExecStart's interpreter, which has transformers where SGLang runs), a batch of texts per command over the
   open SSH connection (stdin in, counts out; offline: nothing is downloaded on the host);
3. whitespace words, said as such (LengthsCounted.unit == "words", the record's `length_unit`).
The counts are kept in the workspace (cache/lengths/), keyed by (model, the file's sha256, sample size, seed): a
second run with the same ones reads them back and tokenizes nothing. What is kept is each counter call's answers in
order; the sampler asks the same questions for the same file, size and seed, and a call that differs (another
version of the sampler) falls back to counting.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import posixpath
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from console.bench.client import BenchClient
from console.bench.datasets import DatasetError, LengthCounter, file_sha256, sample_dataset
from console.bench.engine import SweepConfig, fetch_server_info
from console.bench.remote import python_candidates
from console.bench.workloads import DatasetSample
from console.workspace import Workspace

AsyncCounter = Callable[[Sequence[str]], Coroutine[Any, Any, list[int]]]
# /tokenize bodies: at most this many texts or characters each (a 10,000-request sample is a few requests).
TOKENIZE_BATCH = 1000
TOKENIZE_CHARS = 8 * 1024 * 1024
CACHE_FORMAT = 1  # bumped when the sampler's questions change
HOST_COUNT_TIMEOUT_S = 600.0
# The unit's environment that says where a hub model's files are on the host (no token: secrets stay off argv).
HUB_ENV = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_ENDPOINT")

# Runs on the host with the unit's Python: JSON list of texts on stdin, JSON list of counts on stdout. Counts as
# bench_serving's tokenizer.encode(text) does (special tokens included). Without transformers, the tokenizers
# library on the folder's tokenizer.json.
HOST_SCRIPT = r"""
import json, os, sys
texts = json.load(sys.stdin)
path, trust = sys.argv[1], sys.argv[2] == "1"
try:
    from transformers import AutoTokenizer
except ImportError:
    from tokenizers import Tokenizer
    encoded = Tokenizer.from_file(os.path.join(path, "tokenizer.json")).encode_batch(texts)
    counts = [len(e.ids) for e in encoded]
else:
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust)
    counts = [len(ids) for ids in tokenizer(texts)["input_ids"]] if texts else []
sys.stdout.write(json.dumps(counts))
"""


class TokenizerUnavailable(Exception):
    """This way of counting tokens cannot be used here; the message says why (shown when falling back)."""


@dataclass(frozen=True)
class LengthsCounted:
    """How the dataset's lengths were counted: said before the sweep (the CLI prints `sample`'s line)."""

    unit: Literal["tokens", "words"]
    counter: str  # e.g. "the server's /tokenize", "words (the server has no /tokenize ...)"
    sample: DatasetSample
    cached: bool = False
    seconds: float = 0.0

    def text(self) -> str:
        how = self.counter + (" (read back from the workspace's cache)" if self.cached else "")
        return f"lengths in {self.unit}: {how}"


@dataclass(frozen=True)
class HostTokenizer:
    """What counting on the host needs: the open connection's transport and the unit's text."""

    transport: Any  # console.host.base.Transport
    unit_text: str


def unit_tokenizer(unit_text: str) -> tuple[str, str, bool, dict[str, str]] | None:
    """(interpreter, tokenizer path, trust_remote_code, hub environment) from the unit: ExecStart's Python and its
    --tokenizer-path, else --model-path (--model); None when the unit names neither."""
    from console.sglang.unit import UnitFile

    try:
        unit = UnitFile.parse(unit_text)
        argv = unit.exec_argv()
        flags = unit.flags()
        env = unit.environment()
    except Exception:
        return None
    found: dict[str, str] = {}
    trust = False
    for i, word in enumerate(flags):
        name, sep, value = word.partition("=")
        if name == "--trust-remote-code":
            trust = True
        if name in ("--tokenizer-path", "--model-path", "--model"):
            if not sep:
                value = flags[i + 1] if i + 1 < len(flags) else ""
            if value:
                found.setdefault("tokenizer" if name == "--tokenizer-path" else "model", value)
    path = found.get("tokenizer") or found.get("model")
    if not path:
        return None
    hub = {k: v for k, v in env.items() if k in HUB_ENV}
    return python_candidates(argv)[0], path, trust, hub


def server_counter(client: BenchClient) -> AsyncCounter:
    async def count(texts: Sequence[str]) -> list[int]:
        out: list[int] = []
        start = 0
        while start < len(texts):
            end, size = start, 0
            while end < len(texts) and end - start < TOKENIZE_BATCH and (size < TOKENIZE_CHARS or end == start):
                size += len(texts[end])
                end += 1
            status, answer = await client.post_json("/tokenize", {"prompt": list(texts[start:end])}, timeout=300.0)
            if status == 404:
                raise TokenizerUnavailable("the server has no /tokenize (SGLang before 0.5.4)")
            counts = answer.get("count") if isinstance(answer, dict) else None
            if status != 200 or not isinstance(counts, list) or len(counts) != end - start:
                raise TokenizerUnavailable(f"the server's /tokenize answered HTTP {status}: {str(answer)[:200]}")
            out += [int(n) for n in counts]
            start = end
        return out

    return count


def host_counter(host: HostTokenizer) -> tuple[AsyncCounter, str, str]:
    """The host's tokenizer files as a counter, what it is called in the output, and the model it counts for."""
    found = unit_tokenizer(host.unit_text)
    if found is None:
        raise TokenizerUnavailable("the unit names no --model-path or --tokenizer-path")
    python, path, trust, hub = found
    argv = ["env", *(f"{k}={v}" for k, v in hub.items()), "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"]
    argv += ["TRANSFORMERS_VERBOSITY=error", python, "-c", HOST_SCRIPT, path, "1" if trust else "0"]

    async def count(texts: Sequence[str]) -> list[int]:
        try:
            result = await host.transport.run(argv, input=json.dumps(list(texts)), timeout=HOST_COUNT_TIMEOUT_S)
        except Exception as exc:  # a host error: fall back to words rather than lose the run
            raise TokenizerUnavailable(f"the host's tokenizer could not run: {exc}") from None
        try:
            counts = json.loads(result.stdout) if result.ok else None
        except ValueError:
            counts = None
        if not isinstance(counts, list) or len(counts) != len(texts):
            tail = (result.stderr or result.stdout or "").strip().splitlines()[-1:] or ["no output"]
            raise TokenizerUnavailable(f"{python} could not read the tokenizer at {path}: {tail[0][:200]}")
        return [int(n) for n in counts]

    return count, f"the tokenizer at {path} on the host ({posixpath.basename(python)})", path


class _CacheMismatch(Exception):
    pass


class _Recorder:
    """A sync LengthCounter for the sampler's thread: each call answered on the event loop by `count` (or from the
    cache's answers), every answer kept for the cache."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, count: AsyncCounter | None, replay: list[list[int]] | None
    ) -> None:
        self.loop = loop
        self.count = count
        self.replay = list(replay) if replay is not None else None
        self.calls: list[list[int]] = []

    def __call__(self, texts: Sequence[str]) -> list[int]:
        if self.replay is not None:
            if not self.replay or len(self.replay[0]) != len(texts):
                raise _CacheMismatch
            answer = self.replay.pop(0)
        else:
            assert self.count is not None
            answer = asyncio.run_coroutine_threadsafe(self.count(texts), self.loop).result()
        self.calls.append(answer)
        return answer


def cache_file(workspace: Workspace, model: str, sha256: str, size: int, seed: int) -> Path:
    key = json.dumps([CACHE_FORMAT, model, sha256, size, seed])
    return workspace.root / "cache" / "lengths" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _read_cache(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    calls = data.get("calls") if isinstance(data, dict) else None
    if not isinstance(calls, list) or not all(isinstance(c, list) for c in calls):
        return None
    return data


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only workspace costs the next run a count, never this run


async def _sample(sample: DatasetSample, counter: LengthCounter) -> DatasetSample:
    return await asyncio.to_thread(
        sample_dataset,
        Path(sample.source),
        size=sample.sample,
        seed=sample.seed,
        output_len_cap=sample.output_len_cap,
        hash_large=False,
        count=counter,
    )


async def counted_sample(
    sample: DatasetSample,
    candidates: Sequence[Callable[[], Awaitable[tuple[AsyncCounter, str, str]]]],
    workspace: Workspace | None,
) -> LengthsCounted:
    """The sample again, its lengths counted by the first candidate that answers (each makes a counter, its name
    and the model it counts for), from the cache when it holds them; in words when none answers."""
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    why: list[str] = []
    sha = sample.sha256 or await asyncio.to_thread(file_sha256, sample.source)
    for make in candidates:
        try:
            count, name, model = await make()
        except TokenizerUnavailable as exc:
            why.append(str(exc))
            continue
        path = cache_file(workspace, model, sha, sample.sample, sample.seed) if workspace is not None else None
        kept = _read_cache(path) if path is not None else None
        if kept is not None:
            try:
                counted = await _sample(sample, _Recorder(loop, None, kept["calls"]))
                counted = replace(counted, sha256=counted.sha256 or sha, length_counter=kept.get("counter", name))
                return LengthsCounted("tokens", counted.length_counter, counted, True, time.perf_counter() - started)
            except _CacheMismatch:
                pass
        recorder = _Recorder(loop, count, None)
        try:
            counted = await _sample(sample, recorder)
        except TokenizerUnavailable as exc:
            why.append(str(exc))
            continue
        except DatasetError:
            raise
        counted = replace(counted, sha256=counted.sha256 or sha, length_counter=name)
        if path is not None:
            _write_cache(path, {"model": model, "sha256": sha, "sample": sample.sample, "seed": sample.seed,
                                "counter": name, "calls": recorder.calls})  # fmt: skip
        return LengthsCounted("tokens", name, counted, False, time.perf_counter() - started)
    words = "words" + (f" ({'; '.join(why)})" if why else "")
    return LengthsCounted("words", words, replace(sample, length_counter=words), False, time.perf_counter() - started)


async def count_lengths(
    config: SweepConfig,
    base_url: str,
    *,
    api_key: str | None = None,
    workspace: Workspace | None = None,
    host: HostTokenizer | None = None,
    on_event: Callable[[Any], None] | None = None,
) -> SweepConfig:
    """The sweep with its dataset's lengths in the model's tokens (see the module's doc); the sweep as given when
    it has no dataset or its sample was already counted. LengthsCounted goes to `on_event` before the sweep."""
    sample = config.workload.dataset
    if sample is None:
        return config
    if not sample.source or sample.length_counter:  # counted already (a trace's lengths are its own tokens)
        if on_event is not None:
            unit: Literal["tokens", "words"] = "tokens" if sample.length_unit == "tokens" else "words"
            on_event(LengthsCounted(unit, sample.length_counter or "words", sample))
        return config
    async with BenchClient(base_url, api_key=api_key) as client:
        server = await fetch_server_info(client)
        model = str(server.server_args.get("tokenizer_path") or server.server_args.get("model_path") or server.model)

        async def from_server() -> tuple[AsyncCounter, str, str]:
            counter = server_counter(client)
            await counter(["opsconsole"])  # one small request: is /tokenize there?
            return counter, "the server's /tokenize", model

        candidates: list[Callable[[], Awaitable[tuple[AsyncCounter, str, str]]]] = [from_server]
        if host is not None:

            async def from_host() -> tuple[AsyncCounter, str, str]:
                return host_counter(host)

            candidates.append(from_host)
        counted = await counted_sample(sample, candidates, workspace)
    if on_event is not None:
        on_event(counted)
    return replace(config, workload=replace(config.workload, dataset=counted.sample))
