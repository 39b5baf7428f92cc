"""`bench --dataset` on a 1 GB JSONL file: the console's extra peak memory and the time to its first request.

Writes a prompt JSONL file of about 1 GB (prompts of 50 to 1,500 words, an output_len each) in a temporary
folder, then in a fresh interpreter: imports what `bench` imports, notes the peak resident memory (VmHWM), samples
`--dataset-sample` requests with a seed (console.bench.datasets.sample_dataset) and builds the first level's
request bodies (console.bench.workloads.build_requests), and prints the time from the start of the sampling to
the first request body ready to send, and how much the peak memory grew (the file's sha256, which the records
carry, is read in a thread beside it, as console.core.bench does: its time is printed too).
The issue's bounds: ≤ 3 s, ≤ 300 MB.
The file is read once just before (a freshly written file is in the page cache; a cold disk adds its read time).

Run: .venv/bin/python benchmarks/bench_dataset_sample.py [--size-gb 1] [--sample 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
from pathlib import Path
import console.cli.bench  # what the command imports before it reads a dataset
import threading
from console.bench.datasets import file_sha256, sample_dataset
from console.bench.workloads import WorkloadSpec, build_requests

def peak_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0

path, size = Path(sys.argv[1]), int(sys.argv[2])
before = peak_kib()
t0 = time.perf_counter()
sample = sample_dataset(path, size=size, seed=1, hash_large=False)
# As console.core.bench does: the file's sha256 is read beside the benchmark, which does not wait for it.
hashed = {}
hasher = threading.Thread(target=lambda: hashed.setdefault("sha256", file_sha256(sample.source)))
hasher.start()
sampled = time.perf_counter()
first = build_requests(WorkloadSpec(name="dataset", dataset=sample), 1)[0]
ready = time.perf_counter()
hasher.join()
hashed_s = time.perf_counter() - t0
print(json.dumps({
    "sample_s": sampled - t0, "first_request_s": ready - t0, "peak_growth_mib": (peak_kib() - before) / 1024,
    "requests": len(sample.requests), "lines": sample.entries, "first_body_bytes": len(first.body),
    "sha256_s": hashed_s,
}))
"""

_WORD_LIST = (
    "the of and to in is was for on that with as by at from his her it an are were which this be or has had not but "
    "its they one all their new also more first who two been can other time after over year into most only then some"
)
WORDS = tuple(_WORD_LIST.split())


def write_file(path: Path, size_bytes: int) -> int:
    """Prompt JSONL lines until the file holds size_bytes; returns the line count. Fast: 2,000 distinct prompts are
    written in turn, each line with its own number."""
    rng = random.Random(7)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(50, 1500))) for _ in range(2000)]
    written = lines = 0
    with path.open("w", encoding="utf-8") as f:
        while written < size_bytes:
            batch = []
            for prompt in prompts:
                batch.append(json.dumps({"prompt": f"{lines} {prompt}", "output_len": 16 + lines % 1000}) + "\n")
                lines += 1
            text = "".join(batch)
            f.write(text)
            written += len(text)
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--sample", type=int, default=1000)
    parser.add_argument("--keep", metavar="DIR", help="write the file here and keep it (default: a temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dataset-bench-") as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "traffic.jsonl"
        t = time.perf_counter()
        lines = write_file(path, int(args.size_gb * 1024**3))
        size = path.stat().st_size
        print(f"wrote {path} ({size / 1024**3:.2f} GiB, {lines:,} lines) in {time.perf_counter() - t:.0f} s")
        with path.open("rb") as f:  # into the page cache, as a file just written or just copied is
            while f.read(64 * 1024 * 1024):
                pass
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(args.sample)],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            check=False,
        )
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        got = json.loads(done.stdout)
    print(
        f"sampled {got['requests']:,} requests (about {got['lines']:,} lines in the file): first request ready after "
        f"{got['first_request_s']:.2f} s, peak memory +{got['peak_growth_mib']:.0f} MiB "
        f"(the sha256 for the records, read beside it, took {got['sha256_s']:.2f} s)"
    )
    ok = got["first_request_s"] <= 3.0 and got["peak_growth_mib"] <= 300
    print("within the issue's bounds (≤ 3 s, ≤ 300 MB)" if ok else "OUTSIDE the issue's bounds (≤ 3 s, ≤ 300 MB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
