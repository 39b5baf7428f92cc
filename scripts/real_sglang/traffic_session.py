"""Issue 23 on the GPU machine: `bench --dataset` next to bench_serving's sharegpt mode on one file, and
`bench --shape-from-server` against the length distributions of load that was sent, on a real SGLang 0.5.17.

    python3 scripts/real_sglang/traffic_session.py OUTDIR [--models /opt/sgm] [--url URL] [--rounds 2]

Opt-in: the test suite never runs it. run.sh's `traffic` mode stages the bundle, builds the tiny target and runs this.
Without --url it starts the server itself (the tiny Llama, no speculation, the short-start options of
tune_session.py) and stops it at the end; with --url (a stand-in here, to check the script) it only uses it.

1. pair: bench_pair.py --sharegpt on an open-chat ShareGPT file made by console.sim.datasets (no download): the
   two clients alternate round by round (ABBA) on the same seeded sample; OUTDIR/pair.json.
2. shape: the load of tests/bench/test_shape_from_server.py (prompts 100..2000 tokens, half from one shared
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
    p.add_argument("--skip", default="", help="comma-separated parts to leave out: pair,shape")
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
        for part in ("pair", "shape"):
            if part in args.skip.split(","):
                continue
            began = time.monotonic()
            try:
                if part == "pair":
                    summary[part] = pair(url, args.models, args.out, ws, args.rounds, args.requests)
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
    shown = {k: v for k, v in summary.items() if k != "pair"}
    if isinstance(summary.get("pair"), dict):
        shown["pair"] = {k: v for k, v in summary["pair"].items() if k != "rounds"}
    print(json.dumps(shown, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
