"""`opsconsole bench --url` next to SGLang's own bench_serving on one server, alternated round by round.

    python3 bench_pair.py URL TOKENIZER_DIR OUT_JSON --workspace WS [--rounds 5] [--requests 256]
                          [--concurrency 16] [--input-len 128] [--output-len 128] [--dataset-path FILE]

Same workload and procedure on both sides: random token ids, exact input length, forced output length
(ignore_eos), temperature 0, closed loop at one concurrency, one warm-up request, then /flush_cache, then the
measured requests (bench_serving with --flush-cache: without it the radix tree keeps every earlier run's prompts
while opsconsole's flush empties it, and the first GPU run measured bench_serving's runs 8 % slower).
The server's own speed drifts by 10-20 % over tens of seconds
on the GPU machine (its decode log shows it), so one run of each is no comparison: the two clients alternate
(ABBA order, so that neither always runs second), round 0 warms the server and is not counted, and each round's
pair is compared; bench_serving is imported once and run in this process, so a round costs no import time.
Writes OUT_JSON: {"workload", "rounds": [{"ours": {...}, "theirs": {...}, "ratio"}], "median_ratio", ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KEYS = ("output_throughput", "mean_tpot_ms", "mean_ttft_ms", "median_ttft_ms", "median_itl_ms", "completed", "total_output_tokens",
        "length_unit")


def ours(args: argparse.Namespace, label: str) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "console", "--workspace", str(args.workspace), "bench", "--url", args.url,
        "--concurrency", str(args.concurrency), "--warmup", "1", "--label", label, "--json",
    ]  # fmt: skip
    if args.sharegpt:  # the same seeded sample bench_serving's sharegpt mode draws, at the dataset's own lengths
        argv += ["--dataset", str(args.sharegpt), "--dataset-sample", str(args.requests), "--seed", "1"]
    else:
        argv += ["--requests", str(args.requests), "--input-len", str(args.input_len),
                 "--output-len", str(args.output_len)]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"opsconsole bench failed ({done.returncode}): {done.stderr[-2000:]}")
    record = json.loads(done.stdout)[0]
    said = [line for line in done.stderr.splitlines() if line.startswith(("dataset ", "lengths in "))]
    return {"wall_s": round(time.monotonic() - started, 2), "said": said, **{k: record.get(k) for k in KEYS}}


def theirs(args: argparse.Namespace, serving: Any, out_file: Path) -> dict[str, Any]:
    sys.argv = [
        "bench_serving", "--backend", "sglang", "--base-url", args.url, "--dataset-name", "random-ids",
        "--tokenizer", str(args.tokenizer), "--random-input-len", str(args.input_len),
        "--random-output-len", str(args.output_len), "--random-range-ratio", "1.0",
        "--num-prompts", str(args.requests), "--max-concurrency", str(args.concurrency),
        "--output-file", str(out_file), "--seed", "1", "--flush-cache",
    ]  # fmt: skip
    if args.sharegpt:
        sys.argv = [
            "bench_serving", "--backend", "sglang", "--base-url", args.url, "--dataset-name", "sharegpt",
            "--dataset-path", str(args.sharegpt), "--tokenizer", str(args.tokenizer),
            "--num-prompts", str(args.requests), "--max-concurrency", str(args.concurrency),
            "--output-file", str(out_file), "--seed", "1", "--flush-cache",
        ]  # fmt: skip
    elif args.dataset_path:
        sys.argv += ["--dataset-path", str(args.dataset_path)]
    started = time.monotonic()
    try:
        serving.cli_main()
    except Exception as exc:  # run in its own process instead, as `python -m sglang.bench_serving` would
        print(f"bench_serving in-process failed ({type(exc).__name__}: {exc}); running it as a process", flush=True)
        subprocess.run([sys.executable, "-m", "sglang.bench_serving", *sys.argv[1:]], check=True, timeout=300)
    record = json.loads(out_file.read_text().splitlines()[-1])
    return {"wall_s": round(time.monotonic() - started, 2), **{k: record.get(k) for k in KEYS}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("tokenizer", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=256)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--dataset-path", type=Path)
    p.add_argument("--sharegpt", type=Path, help="both sides on this ShareGPT file (bench --dataset / sharegpt mode)")
    args = p.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    import sglang.benchmark.serving as serving  # once: 15-20 s of imports

    workload = {k: getattr(args, k) for k in ("requests", "concurrency", "input_len", "output_len")}
    if args.sharegpt:
        workload = {"sharegpt": args.sharegpt.name, "requests": args.requests, "concurrency": args.concurrency}
    result: dict[str, Any] = {"workload": workload, "rounds": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds + 1):
            pair: dict[str, Any] = {"round": n, "counted": n > 0}
            order = ("ours", "theirs") if n % 2 == 0 else ("theirs", "ours")
            for side in order:
                if side == "ours":
                    pair["ours"] = ours(args, f"ours-{n}")
                else:
                    pair["theirs"] = theirs(args, serving, Path(tmp) / f"theirs-{n}.jsonl")
            pair["ratio"] = pair["ours"]["output_throughput"] / pair["theirs"]["output_throughput"]
            result["rounds"].append(pair)
            print(
                f"round {n}: ours {pair['ours']['output_throughput']:.1f} tok/s, "
                f"theirs {pair['theirs']['output_throughput']:.1f} tok/s, ratio {pair['ratio']:.4f}",
                flush=True,
            )
            args.out.write_text(json.dumps(result, indent=1))
    counted = [r for r in result["rounds"] if r["counted"]]
    ratios = [r["ratio"] for r in counted]
    result["median_ratio"] = statistics.median(ratios)
    for side in ("ours", "theirs"):
        result[f"median_output_throughput_{side}"] = statistics.median(r[side]["output_throughput"] for r in counted)
        result[f"median_mean_tpot_ms_{side}"] = statistics.median(r[side]["mean_tpot_ms"] for r in counted)
        result[f"median_ttft_ms_{side}"] = statistics.median(r[side]["median_ttft_ms"] for r in counted)
        result[f"completed_{side}"] = [r[side]["completed"] for r in counted]
    result["ratio_of_medians"] = result["median_output_throughput_ours"] / result["median_output_throughput_theirs"]
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
