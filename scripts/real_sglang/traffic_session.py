"""Issue 23 on the GPU machine: `bench --dataset` next to bench_serving's sharegpt mode on one file, and
`bench --shape-from-server` against the length distributions of load that was sent, on a real SGLang 0.5.17.

    python3 scripts/real_sglang/traffic_session.py OUTDIR [--models /opt/sgm] [--url URL] [--rounds 2]

Opt-in: the test suite never runs it. run.sh's `traffic` mode stages the bundle, builds the tiny target and runs this.
Without --url it starts the server itself (the tiny Llama, no speculation, the short-start options of
tune_session.py) and stops it at the end; with --url (a stand-in here, to check the script) it only uses it.

1. pair: bench_pair.py --sharegpt on an open-chat ShareGPT file made by console.sim.datasets (no download): the
   two clients alternate round by round (ABBA) on the same seeded sample; OUTDIR/pair.json.
2. tokens (issue 38; `run.sh tokens` runs this part alone): the same as pair with the lengths in the model's tokens
   (`bench --dataset` now counts them with the server's /tokenize) and the issue's verdicts: the same requests (our
   sample, counted by the server's /tokenize, against bench_serving's own sample_sharegpt_requests with the tiny
   Llama's tokenizer, prompt by prompt), total output tokens within 1 % and output tok/s within 3 % (the median of
   the rounds' ratios; each round ABBA); OUTDIR/tokens.json (the figures and `verdicts`), printed.
3. shape: the load of tests/bench/test_shape_from_server.py (prompts 100..2000 tokens, half from one shared
   sequence, outputs 100..500, closed loop) runs while `bench --shape-from-server WINDOW` watches /metrics; what the
   server finished inside the window (noted per request) against the shape's rate, p50/p95 and cache hit share;
   OUTDIR/shape.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from tune_session import START_OPTIONS  # noqa: E402

from tests.support.known_load import KnownLoad  # noqa: E402


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def launch(models: Path, out: Path) -> tuple[subprocess.Popen[bytes], str]:
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(models / "tiny-llama"),
            "--host", "127.0.0.1", "--port", "30000", "--enable-metrics", "--mem-fraction-static", "0.3",
            "--attention-backend", "triton"]  # fmt: skip
    for flag, value in START_OPTIONS:
        argv += [flag] if value is None else [flag, value]
    with open(out / "server.log", "wb") as log_file:  # the child keeps its own descriptor
        server = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    return server, "http://127.0.0.1:30000"


def wait_healthy(url: str, server: subprocess.Popen[bytes] | None, timeout: float = 240.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if server is not None and server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode} (see server.log)")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                if answer.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"no /health 200 within {timeout:.0f} s")


def console(ws: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "console", "--workspace", str(ws), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def pair(url: str, models: Path, out: Path, ws: Path, rounds: int, requests: int) -> dict[str, Any]:
    from console.sim.datasets import write_datasets

    files = write_datasets(out / "datasets", count=max(400, requests * 2), seed=1)
    chat = next(p for p in files if p.suffix == ".json")
    argv = [sys.executable, str(HERE / "bench_pair.py"), url, str(models / "tiny-llama"), str(out / "pair.json"),
            "--workspace", str(ws), "--rounds", str(rounds), "--requests", str(requests), "--concurrency", "16",
            "--sharegpt", str(chat)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=420, cwd=REPO)
    (out / "pair.log").write_text(done.stdout + done.stderr)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
    log(f"pair rc={done.returncode}: {last}")
    if not (out / "pair.json").exists():
        return {"error": done.stderr[-2000:]}
    return json.loads((out / "pair.json").read_text())


def same_requests(url: str, models: Path, chat: Path, requests: int) -> dict[str, Any]:
    """Our sample in the model's tokens (the server's /tokenize, as `bench --dataset` counts) against bench_serving's
    own sharegpt sampler with the model's tokenizer: the same prompts in the same order with the same lengths?"""
    import asyncio
    import random

    from console.bench.datasets import sample_dataset
    from console.bench.engine import SweepConfig
    from console.bench.workloads import WorkloadSpec
    from console.core.bench.tokens import count_lengths

    words = sample_dataset(chat, size=requests, seed=1)
    said: list[Any] = []
    config = asyncio.run(count_lengths(SweepConfig(WorkloadSpec(name="dataset", dataset=words)), url,
                                       on_event=said.append))  # fmt: skip
    ours_rows = [(r.prompt, r.prompt_len, r.output_len) for r in config.workload.dataset.requests]  # type: ignore[union-attr]
    from sglang.benchmark.datasets.sharegpt import sample_sharegpt_requests
    from transformers import AutoTokenizer

    random.seed(1)  # as bench_serving's run_benchmark seeds it before sampling
    rows = sample_sharegpt_requests(str(chat), requests, AutoTokenizer.from_pretrained(str(models / "tiny-llama")))
    theirs_rows = [(r.prompt, r.prompt_len, r.output_len) for r in rows]
    differ = [i for i, (a, b) in enumerate(zip(ours_rows, theirs_rows)) if a != b]
    return {
        "counted_by": said[0].counter if said else None,
        "requests": [len(ours_rows), len(theirs_rows)],
        "same_prompts": [r[0] for r in ours_rows] == [r[0] for r in theirs_rows],
        "same_lengths": not differ and len(ours_rows) == len(theirs_rows),
        "first_differences": [{"i": i, "ours": ours_rows[i][1:], "theirs": theirs_rows[i][1:]} for i in differ[:5]],
        "output_tokens": [sum(r[2] or 0 for r in ours_rows), sum(r[2] for r in theirs_rows)],
        "output_words": sum(r.output_len or 0 for r in words.requests),
    }


def tokens(url: str, models: Path, out: Path, ws: Path, rounds: int, requests: int) -> dict[str, Any]:
    """Issue 38's proof (see the module's doc): the verdicts and the figures behind them."""
    from console.sim.datasets import write_datasets

    chat = next(p for p in write_datasets(out / "datasets", count=max(400, requests * 2), seed=1) if p.suffix == ".json")
    result: dict[str, Any] = {"sample": same_requests(url, models, chat, requests)}
    result["pair"] = pair(url, models, out, ws, rounds, requests)
    counted = [r for r in result["pair"].get("rounds", []) if r.get("counted")]
    if counted:
        ours_tokens = [r["ours"]["total_output_tokens"] for r in counted]
        theirs_tokens = [r["theirs"]["total_output_tokens"] for r in counted]
        tokens_off = max(abs(a / b - 1) for a, b in zip(ours_tokens, theirs_tokens))
        ratio = statistics.median(r["ratio"] for r in counted)
        result["figures"] = {
            "total_output_tokens_ours": ours_tokens, "total_output_tokens_theirs": theirs_tokens,
            "worst_output_tokens_gap_pct": round(tokens_off * 100, 2),
            "output_tok_s_ratio_median": round(ratio, 4), "output_tok_s_ratios": [round(r["ratio"], 4) for r in counted],
            "length_unit": counted[0]["ours"].get("length_unit"), "said": counted[0]["ours"].get("said"),
        }  # fmt: skip
        sample = result["sample"]
        result["verdicts"] = {
            "same_requests": bool(sample["same_prompts"] and sample["same_lengths"]),
            "output_tokens_within_1pct": tokens_off <= 0.01,
            "output_tok_s_within_3pct": abs(ratio - 1) <= 0.03,
            "lengths_in_tokens": result["figures"]["length_unit"] == "tokens",
        }
    (out / "tokens.json").write_text(json.dumps(result, indent=1))
    log(f"tokens: {json.dumps(result.get('verdicts'))} {json.dumps(result.get('figures', {}))}")
    return result


def quantile(values: list[int], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def shape(url: str, ws: Path, window: str) -> dict[str, Any]:
    from console.sglang.histograms import Histogram

    with KnownLoad(url) as load:
        while len(load.done) < 20:  # running before the window opens
            time.sleep(0.05)
        cli = subprocess.Popen(
            [sys.executable, "-m", "console", "--workspace", str(ws), "bench", "--url", url, "--shape-from-server",
             window, "--requests", "24", "--warmup", "0", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        )  # fmt: skip
        assert cli.stderr is not None
        lines: list[str] = []
        opened = closed = 0.0
        for line in cli.stderr:
            lines.append(line)
            if line.startswith("watching the server's /metrics"):
                opened = time.monotonic()
            if line.startswith("shape: "):
                closed = time.monotonic()
                break
    out, err = cli.communicate(timeout=300)
    result: dict[str, Any] = {"rc": cli.returncode, "said": "".join(lines), "stderr_tail": err[-2000:]}
    if cli.returncode != 0 or not opened or not closed:
        return result
    in_window = [d for d in load.done if opened <= d[0] <= closed]
    seen = json.loads(out)[0]["workload"]["shape"]
    sent: dict[str, Any] = {"requests": len(in_window), "rate": len(in_window) / (closed - opened)}
    rows = []
    for name, values in (("prompt", [d[1] for d in in_window]), ("output", [d[2] for d in in_window])):
        hist = Histogram(tuple((float(le), c) for le, c in seen[f"{name}_buckets"]))
        for q in (0.5, 0.95):
            truth, got = quantile(values, q), hist.quantile(q)
            rows.append({"series": name, "q": q, "sent": truth, "shape": got,
                         "error_pct": None if got is None else round((got / truth - 1) * 100, 1)})  # fmt: skip
    sent["cache_hit"] = sum(d[3] for d in in_window) / max(1, sum(d[1] for d in in_window))
    result.update(sent=sent, seen={k: seen.get(k) for k in ("requests", "rate", "cache_hit", "window_s")},
                  quantiles=rows, load_errors=len(load.errors))  # fmt: skip
    result["rate_error_pct"] = round((seen["rate"] / sent["rate"] - 1) * 100, 1)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--models", type=Path, default=Path("/opt/sgm"))
    p.add_argument("--url", help="use this server (a stand-in, to check the script); default: start SGLang")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--window", default="20s")
    p.add_argument("--skip", default="", help="comma-separated parts to leave out: pair,tokens,shape")
    p.add_argument("--only", default="", help="comma-separated parts to run (default all): pair,tokens,shape")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    ws = args.out / "ws"
    summary: dict[str, Any] = {}
    server = None
    url = args.url
    try:
        if url is None:
            server, url = launch(args.models, args.out)
        summary["healthy_after_s"] = round(wait_healthy(url, server), 1)
        log(f"server healthy after {summary['healthy_after_s']} s")
        for part in ("pair", "tokens", "shape"):
            if part in args.skip.split(",") or (args.only and part not in args.only.split(",")):
                continue
            began = time.monotonic()
            try:
                if part == "pair":
                    summary[part] = pair(url, args.models, args.out, ws, args.rounds, args.requests)
                elif part == "tokens":
                    summary[part] = tokens(url, args.models, args.out, ws, args.rounds, args.requests)
                else:
                    summary[part] = shape(url, ws, args.window)
            except Exception as exc:  # one part failing leaves the other its chance
                summary[part] = {"error": f"{type(exc).__name__}: {exc}"}
            summary[f"{part}_s"] = round(time.monotonic() - began, 1)
            log(f"{part} done in {summary[f'{part}_s']} s")
            (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, 9)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    shown = {k: v for k, v in summary.items() if k not in ("pair", "tokens")}
    if isinstance(summary.get("pair"), dict):
        shown["pair"] = {k: v for k, v in summary["pair"].items() if k != "rounds"}
    if isinstance(summary.get("tokens"), dict):
        shown["tokens"] = {k: v for k, v in summary["tokens"].items() if k != "pair"}
    print(json.dumps(shown, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
