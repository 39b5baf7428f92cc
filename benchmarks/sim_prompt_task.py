"""What the stand-in's per-request reading of a prompt costs: console.sim.content.classify_prompt (its task: code,
math, chat, summarisation, translation) beside the word 3-gram repetition it replaced (the share of a prompt's word
3-grams seen earlier in it, over at most 8,192 words), on the same prompts, alternated in one run.

Prompts: windows of 250 to 1,000 words of this machine's Python standard library (code) and Debian license texts
(prose), the repo's generated chat and code sets, and two long prompts (8,192 random words on one line, and a
whole 40 k-word license file): the classifier reads a bounded prefix, so its cost stops growing with the prompt.
Prints the median microseconds per prompt of each and their ratio.

Run: .venv/bin/python benchmarks/sim_prompt_task.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from console.bench.workloads import _WORDS  # noqa: E402
from console.sim.content import classify_prompt  # noqa: E402
from console.sim.datasets import chat_conversations, code_prompts  # noqa: E402


def word_3gram_repetition(tokens: Sequence[Hashable]) -> float:
    """The rule it replaced (console.sim.perf before issue 38), as it ran per request."""
    head = list(tokens[:8192])
    if len(head) < 4:
        return 0.0
    grams = list(zip(head, head[1:], head[2:], strict=False))
    return round(1.0 - len(set(grams)) / len(grams), 2)


def windows(folder: Path, pattern: str, per_file: int, seed: str) -> list[str]:
    rng = random.Random(seed)
    out = []
    for path in sorted(p for p in folder.glob(pattern) if p.is_file()):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        if sum(len(line.split()) for line in lines) < 250:
            continue
        for _ in range(per_file):
            start, target, taken = rng.randrange(len(lines)), rng.randint(250, 1000), 0
            for end in range(start, len(lines)):
                taken += len(lines[end].split())
                if taken >= target:
                    out.append("".join(lines[start : end + 1]))
                    break
    return out


def per_prompt_us(fn: Callable[[str], object], prompts: list[str], repeats: int) -> list[float]:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for text in prompts:
            fn(text)
        runs.append((time.perf_counter() - t0) / len(prompts) * 1e6)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(1)
    license_file = max(Path("/usr/share/common-licenses").glob("*"), key=lambda p: p.stat().st_size)
    sets = {
        "python source windows": windows(Path("/usr/lib/python3.11"), "*.py", 2, "python-source"),
        "license windows": windows(Path("/usr/share/common-licenses"), "*", 6, "licenses"),
        "generated chat set": [c["conversations"][0]["value"] for c in chat_conversations(200)],
        "generated code set": [r["prompt"] for r in code_prompts(200)],
        "8,192 random words": [" ".join(rng.choice(_WORDS) for _ in range(8192)) for _ in range(20)],
        f"whole {license_file.name} x4": [license_file.read_text() * 4] * 5,
    }
    print(f"{'prompts':28} {'n':>4} {'words':>6} {'3-gram µs':>10} {'task µs':>8} {'task ÷ 3-gram':>13}")
    for name, prompts in sets.items():
        old: list[float] = []
        new: list[float] = []
        for _ in range(args.repeats):  # alternated, so that drift falls on both
            old += per_prompt_us(lambda t: word_3gram_repetition(t.split()), prompts, 1)
            new += per_prompt_us(classify_prompt, prompts, 1)
        words = statistics.median(len(p.split()) for p in prompts)
        o, n = statistics.median(old), statistics.median(new)
        print(f"{name:28} {len(prompts):4} {words:6.0f} {o:10.0f} {n:8.0f} {n / o:13.2f}")


if __name__ == "__main__":
    main()
