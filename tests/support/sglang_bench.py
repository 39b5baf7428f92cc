"""Run SGLang's own benchmark client (`bench_serving.py` from the released sglang wheel) against a URL.

    result = run_bench_serving("http://127.0.0.1:30000", backend="sglang", num_prompts=16, max_concurrency=4)
    result.record["output_throughput"], result.record["accept_length"], result.stdout

Where the script comes from: $SGLANG_BENCH_SERVING (a path to bench_serving.py), else a cached copy in
$OPSCONSOLE_CACHE (default ~/.cache/opsconsole)/sglang-<ver>/bench_serving.py, else it is extracted from the
wheel that `pip download sglang==<ver> --no-deps` fetches (once).

What it needs to run: aiohttp, numpy, requests, tqdm, pillow and transformers (AutoTokenizer only, no
torch) in the running interpreter. Its top-level imports of datasets and pybase64 serve datasets we do not
use (sharegpt, images); small stand-ins for those two are put first on its PYTHONPATH so that the heavy
datasets package (pyarrow, pandas) need not be installed. The tokenizer is the simulator's own, written
as a Hugging Face folder (console.sim.tokenizer.write_model_dir), so bench_serving counts exactly the
tokens the server counts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.sim.tokenizer import write_model_dir
from tests.support.budget import describe, inner_timeout

SGLANG_VERSION = "0.5.6.post2"
NEEDED = ("aiohttp", "numpy", "requests", "tqdm", "transformers", "PIL")

_SHIMS = {
    "datasets.py": "def load_dataset(*args, **kwargs):\n"
    "    raise RuntimeError('datasets is not installed: use --dataset-name random-ids')\n",
    "pybase64.py": "from base64 import b64decode, b64encode  # noqa: F401\n",
}


class BenchUnavailable(RuntimeError):
    """bench_serving cannot run here; the message says what to install or set."""


def cache_root() -> Path:
    return Path(os.environ.get("OPSCONSOLE_CACHE") or Path.home() / ".cache" / "opsconsole")


def bench_serving_script(version: str = SGLANG_VERSION) -> Path:
    explicit = os.environ.get("SGLANG_BENCH_SERVING")
    if explicit:
        return Path(explicit)
    target = cache_root() / f"sglang-{version}" / "bench_serving.py"
    if target.exists():
        return target
    hint = "; set SGLANG_BENCH_SERVING=/path/to/bench_serving.py"
    with sglang_wheel(version, "to get bench_serving.py", hint=hint) as wheel:
        names = [n for n in wheel.namelist() if n.endswith("sglang/bench_serving.py")]
        if not names:
            raise BenchUnavailable(f"{Path(str(wheel.filename)).name} has no sglang/bench_serving.py")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(wheel.read(names[0]))
    return target


@contextlib.contextmanager
def sglang_wheel(version: str, purpose: str, *, hint: str = "") -> Iterator[zipfile.ZipFile]:
    """The released sglang `version` wheel (no dependencies, by `pip download` from the machine's own index), open as
    long as it is read; BenchUnavailable with `purpose` and pip's words when it cannot be had."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", f"sglang=={version}", "--no-deps", "-q", "-d", tmp],
            capture_output=True,
            text=True,
            timeout=600,
        )
        wheels = list(Path(tmp).glob("sglang-*.whl"))
        if done.returncode != 0 or not wheels:
            said = done.stderr.strip()[-400:]
            raise BenchUnavailable(f"could not download the sglang {version} wheel {purpose} (pip said: {said}){hint}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            yield wheel


SAMPLE_SHAREGPT = """
import json, random, sys, importlib.util
from transformers import AutoTokenizer
spec = importlib.util.spec_from_file_location("bench_serving", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
tokenizer = AutoTokenizer.from_pretrained(sys.argv[2])
random.seed(int(sys.argv[5]))
rows = bench.sample_sharegpt_requests(sys.argv[3], int(sys.argv[4]), tokenizer)
print(json.dumps([[row.prompt, row.prompt_len, row.output_len] for row in rows]))
"""


# bench_serving's mooncake mode (--backend sglang, its trace on its own clock) fails after its replay in every release
# checked: 0.5.6.post2's calculate_metrics reads `.prompt_len` of its rows, which are the trace's dicts there
# (AttributeError: 'dict' object has no attribute 'prompt_len'); 0.5.9 to 0.5.17 fail before the first request
# (`input_requests[0].prompt` on a dict); 0.5.23 mended both, but its benchmark package needs the whole of sglang (its
# serving.py imports sglang.srt). So this runs 0.5.6.post2 as its own __main__ does, with one change: its rows get the
# attributes calculate_metrics reads (the trace's input_length; only its "total input tokens" figure uses them). The
# replay itself (arrival times, prompts from hash_ids, requests) is its own code, untouched.
MOONCAKE_RUNNER = """
import sys
path = sys.argv.pop(1)
source = open(path).read()
head, sep, main = source.partition('\\nif __name__ == "__main__":')
namespace = {"__name__": "bench_serving", "__file__": path}
exec(compile(head, path, "exec"), namespace)

class Row(dict):
    prompt_len = property(lambda self: int(self.get("input_length", 0)))
    text_prompt_len = prompt_len
    vision_prompt_len = 0

get_dataset = namespace["get_dataset"]
namespace["get_dataset"] = lambda *a, **k: [Row(r) if isinstance(r, dict) else r for r in get_dataset(*a, **k)]
namespace["__name__"] = "__main__"
exec(compile("\\n" * (head.count("\\n") + 1) + sep.lstrip("\\n") + main, path, "exec"), namespace)
"""


def bench_serving_sharegpt_sample(path: Path, num_prompts: int, seed: int = 1) -> list[tuple[str, int, int]]:
    """The requests bench_serving's sharegpt mode sends for this file, --num-prompts and --seed, in its order: its
    own sample_sharegpt_requests after random.seed(seed), as its run_benchmark calls it: (prompt, tokens, output
    tokens), counted with the simulator's tokenizer."""
    check_requirements()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim_dir()), os.environ.get("PYTHONPATH", "")])}
    env.update(TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    argv = [sys.executable, "-c", SAMPLE_SHAREGPT, str(bench_serving_script()), str(tokenizer_dir())]
    done = subprocess.run(
        [*argv, str(path), str(num_prompts), str(seed)], capture_output=True, text=True, timeout=inner_timeout(120),
        env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise BenchUnavailable(f"bench_serving's sample_sharegpt_requests failed: {done.stderr[-2000:]}")
    return [(str(p), int(n), int(m)) for p, n, m in json.loads(done.stdout.strip().splitlines()[-1])]


def shim_dir() -> Path:
    root = cache_root() / "bench-shims"
    for name, text in _SHIMS.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return root


def check_requirements() -> None:
    # bench_serving runs in this same interpreter: finding the modules is enough, and cheap (importing
    # transformers in a subprocess per module took ~2 s a run).
    missing = [module for module in NEEDED if importlib.util.find_spec(module) is None]
    if missing:
        raise BenchUnavailable(f"bench_serving needs {', '.join(missing)}: .venv/bin/pip install {' '.join(missing)}")


def tokenizer_dir(architecture: str = "LlamaForCausalLM", context_length: int = 32768) -> Path:
    """The simulator's tokenizer as a Hugging Face folder (cached; identical for every profile)."""
    return write_model_dir(
        cache_root() / "sim-tokenizer",
        architecture=architecture,
        context_length=context_length,
        served_model_name="opsconsole-sim",
    )


@dataclass
class BenchResult:
    returncode: int
    stdout: str
    stderr: str
    record: dict[str, Any]  # the JSONL record bench_serving appended (its own field names)

    @property
    def accept_length(self) -> float | None:
        value = self.record.get("accept_length")
        return float(value) if value is not None else None


def run_bench_serving(
    base_url: str,
    *,
    backend: str = "sglang",
    num_prompts: int = 16,
    input_len: int = 64,
    output_len: int = 64,
    max_concurrency: int | None = None,
    model: str | None = None,
    extra_args: list[str] | None = None,
    api_key: str | None = None,
    tokenizer: Path | None = None,
    timeout: float = 300.0,
    sharegpt: Path | None = None,
    dataset: tuple[str, Path] | None = None,
) -> BenchResult:
    """Run bench_serving (dataset random-ids, exact lengths; or `sharegpt`, a ShareGPT file, its sharegpt mode with
    the file's own lengths; or `dataset`, any of its file datasets by name, e.g. ("mooncake", trace)) and return its
    printed report and JSONL record.

    `tokenizer`: a Hugging Face tokenizer folder; default the simulator's (the same one a running simulator
    writes to <state dir>/tokenizer)."""
    check_requirements()
    script = bench_serving_script()
    if sharegpt is not None:
        dataset = ("sharegpt", sharegpt)
    if dataset is not None:  # (its --dataset-name, its file): sharegpt, mooncake (a trace, on its own clock)
        dataset_args = ["--dataset-name", dataset[0], "--dataset-path", str(dataset[1])]
    else:
        dataset_args = ["--dataset-name", "random-ids", "--random-input-len", str(input_len)]
        dataset_args += ["--random-output-len", str(output_len), "--random-range-ratio", "1.0"]
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        out_file = Path(tmp) / "result.jsonl"
        runner = ["-c", MOONCAKE_RUNNER] if dataset is not None and dataset[0] == "mooncake" else []
        argv = [
            sys.executable,
            *runner,
            str(script),
            "--backend",
            backend,
            "--base-url",
            base_url,
            *dataset_args,
            "--tokenizer",
            str(tokenizer or tokenizer_dir()),
            "--num-prompts",
            str(num_prompts),
            "--output-file",
            str(out_file),
            "--seed",
            "1",
        ]
        if model:
            argv += ["--model", model]
        if max_concurrency:
            argv += ["--max-concurrency", str(max_concurrency)]
        argv += extra_args or []
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim_dir()), os.environ.get("PYTHONPATH", "")])}
        env.pop("OPENAI_API_KEY", None)
        env.pop("API_KEY", None)
        if api_key:
            env["OPENAI_API_KEY"] = api_key  # sent as "Authorization: Bearer <key>"
        env["TRANSFORMERS_VERBOSITY"] = "error"
        # It looks the served model name up on the Hub (config, processor); nothing is fetched from there.
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
        try:  # within the running test's own time (tests/support/budget.py), and saying what it printed if not
            wait_s = inner_timeout(timeout)
            done = subprocess.run(argv, capture_output=True, text=True, timeout=wait_s, env=env, cwd=tmp)
        except subprocess.TimeoutExpired as expired:
            said = [_text(expired.stdout)[-3000:], _text(expired.stderr)[-3000:]]
            raise AssertionError(
                f"bench_serving did not end within {wait_s:.0f} s ({describe()}); its stdout, then stderr, so far:\n"
                + "\n---\n".join(said)
            ) from None
        record: dict[str, Any] = {}
        if out_file.exists():
            lines = out_file.read_text().strip().splitlines()
            if lines:
                record = json.loads(lines[-1])
        return BenchResult(done.returncode, done.stdout, done.stderr, record)


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
