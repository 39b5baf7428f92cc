"""Issue 46's proof: `predict` on a GPU-bound target (SGLang 0.5.17, a Llama of Llama-3-8B's shape with random weights
and an EAGLE draft that proposes the last token again: build_gpu_target.py), one benchmark, restarts that measure.

    python3 scripts/real_sglang/predict_gpu_session.py OUTDIR [--models DIR] [--sim] [--budget-s S] [--duration 5]

Opt-in: the suite never runs it. `run.sh predict8b` stages the bundle, builds the models, starts this script detached
and collects OUTDIR into $OUT (`run.sh wait` until it is done). `--sim` runs it against the stand-in emulating 0.5.17
(its tiny-test profile and the eagle-repeat-like draft; no GPU) to check the script before device time.

Phases (each writes OUTDIR/summary.json as it ends; the optional ones only while the budget holds one more):
 start      the unit: EAGLE with the repeat draft, steps 1, topk 1, draft tokens 2, CUDA graphs, metrics, prefill graphs
            off, sampling by torch (no flashinfer JIT), no server warm-up (the bench warms), under the supervisor.
 base       `opsconsole bench gpu` at C = 1, 16 and 64, random 128 in / 128 forced out at temperature 1 (the draft
            accepts where the target samples its token again), two repeats, each level warmed until its round time
            settles (--warmup-settle: right after a start).
 predict1   `opsconsole predict gpu --steps 1,2,3 --topk 1,2 --json` from the running setup's records alone.
 s3         `opsconsole apply` to steps 3 (a restart), the same benchmark.
 predict2   predict again: two setups measured.
 s2, tree   steps 2; steps 3 topk 2 (draft tokens 6), each a restart and the benchmark.
 s1b, s3b, s2b, treeb   (optional) each setup launched a second time and measured: the spread between launches.
 stop, journal   as tune_session.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_session import PY, REPO, Session, now  # noqa: E402
from tune_session import SERVER_KEYS, TuneSession  # noqa: E402

SETUPS = {"s1": (1, 1, 2), "s2": (2, 1, 3), "s3": (3, 1, 4), "tree": (3, 2, 6)}  # steps, topk, draft tokens
PHASES = ("start", "base", "predict1", "s3", "predict2", "s2", "tree", "s1b", "s3b", "s2b", "treeb", "stop", "journal")
OPTIONAL = ("s1b", "s3b", "s2b", "treeb")
LEVELS = "1,16,64"
APPLY_TIMEOUT_S = 420
START_TIMEOUT_S = 480
TARGET, DRAFT = "llama8b-rep", "llama8b-rep-eagle"


class PredictGpuSession(TuneSession):
    def __init__(self, args: argparse.Namespace) -> None:
        args.draft, args.reserve_s = DRAFT, 60.0
        super().__init__(args)
        self.algorithm = "EAGLE"
        self.draft = args.models / DRAFT
        self.target = args.models / TARGET
        if args.sim:  # the stand-in's draft that accepts like the H200's eagle-repeat (console/sim/profiles.py)
            self.draft, self.target = Path("sim/eagle-repeat"), args.models / "tiny-llama"
        self.measured_s: list[float] = []  # each restart + benchmark, for whether one more fits

    def unit_text(self) -> str:
        steps, topk, draft_tokens = SETUPS["s1"]
        if self.sim:
            launcher = f"{PY} -m console.sim"
            extra = [("--sim-sglang-version", "0.5.17"), ("--sim-profile", "tiny-test")]
            extra += [("--sim-time-scale", str(self.args.sim_time_scale))]
            extra.append(("--sim-state-dir", str(self.work / "sim-state")))
            pythonpath = str(REPO)
        else:
            import os

            launcher, extra, pythonpath = f"{PY} -m sglang.launch_server", [], os.environ.get("PYTHONPATH", "")
        flags = [
            ("--model-path", str(self.target)),
            ("--host", "127.0.0.1"),
            ("--port", "30000"),
            ("--enable-metrics", None),
            ("--mem-fraction-static", "0.8"),
            ("--attention-backend", "triton"),
            ("--disable-prefill-cuda-graph", None),
            ("--skip-server-warmup", None),
            ("--sampling-backend", "pytorch"),
            ("--speculative-algorithm", self.algorithm),
            ("--speculative-draft-model-path", str(self.draft)),
            ("--speculative-num-steps", str(steps)),
            ("--speculative-eagle-topk", str(topk)),
            ("--speculative-num-draft-tokens", str(draft_tokens)),
        ]
        lines = [launcher] + [f if v is None else f"{f} {v}" for f, v in [*flags, *extra]]
        exec_start = " \\\n    ".join(lines)
        return (
            "[Unit]\nDescription=SGLang 0.5.17 (an 8B-shaped Llama + the repeat EAGLE draft) on the GPU machine\n\n"
            f'[Service]\nType=simple\nEnvironment="PYTHONPATH={pythonpath}" "HF_HUB_OFFLINE=1" '
            '"TRANSFORMERS_OFFLINE=1" "HF_DATASETS_OFFLINE=1"\n'
            f"ExecStart={exec_start}\nTimeoutStopSec=60\nRestart=no\n\n[Install]\nWantedBy=multi-user.target\n"
        )

    def start(self) -> dict[str, Any]:
        if self.sim:  # the stand-in checks only that local model paths exist
            self.target.mkdir(parents=True, exist_ok=True)
        started = now()
        result = Session.start(self)  # the unit, the profile, the supervisor; healthy within START_TIMEOUT_S
        if result["healthy_after_s"] is None:
            result["healthy_after_s"] = self.wait_healthy(START_TIMEOUT_S - (now() - started))
        result["journal_tail"] = [r["message"] for r in self.journal_rows()[-30:]]
        self.original = {"text": self.unit_path.read_text()}
        try:
            info = self.get_json("/server_info")
            self.original["server"] = {k: info.get(k) for k in SERVER_KEYS}
            (self.out / "server_info-start.json").write_text(json.dumps(info))
        except Exception as exc:  # recorded
            self.original["server_error"] = f"{type(exc).__name__}: {exc}"
        result["server"] = self.original.get("server")
        if result["healthy_after_s"] is None:
            raise RuntimeError("the server did not come up: " + " | ".join(result["journal_tail"][-5:]))
        return result

    def bench_now(self, label: str) -> dict[str, Any]:
        a = self.args
        return self.console(
            f"bench {label}", "bench", "gpu", "--concurrency", LEVELS, "--duration", str(a.duration), "--repeat", "2",
            "--input-len", "128", "--output-len", str(a.output_len), "--temperature", "1", "--warmup", "2",
            "--warmup-settle", "--label", label, "--json", timeout=900, save=f"bench-{label}.json",
        )  # fmt: skip

    def base(self) -> dict[str, Any]:
        return {"bench": self.bench_now("s1")}

    def predict_now(self, name: str) -> dict[str, Any]:
        done = self.console(
            name, "predict", "gpu", "--algorithm", "EAGLE", "--steps", "1,2,3", "--topk", "1,2",
            "--draft-model-path", str(self.draft), "--concurrency", LEVELS, "--json", timeout=300,
            save=f"{name}.json",
        )  # fmt: skip
        return {"cli": done}

    def predict1(self) -> dict[str, Any]:
        return self.predict_now("predict1")

    def predict2(self) -> dict[str, Any]:
        return self.predict_now("predict2")

    def measure(self, name: str, label: str) -> dict[str, Any]:
        steps, topk, draft_tokens = SETUPS[name]
        started = now()
        applied = self.console(
            f"apply {label}", "apply", "gpu", "--set", f"speculative-num-steps={steps}", "--set",
            f"speculative-eagle-topk={topk}", "--set", f"speculative-num-draft-tokens={draft_tokens}", "--yes",
            "--json", "--timeout", str(APPLY_TIMEOUT_S), timeout=APPLY_TIMEOUT_S + 120, save=f"apply-{label}.json",
        )  # fmt: skip
        out: dict[str, Any] = {"apply": applied}
        try:
            info = self.get_json("/server_info")
            out["server"] = {k: info.get(k) for k in SERVER_KEYS}
        except Exception as exc:
            out["server_error"] = f"{type(exc).__name__}: {exc}"
        if applied["rc"] != 0:
            out["error"] = f"apply {label} rc={applied['rc']}"
            return out
        out["bench"] = self.bench_now(label)
        self.measured_s.append(now() - started)
        return out

    def optional(self, name: str) -> dict[str, Any]:
        need = statistics.median(self.measured_s) if self.measured_s else 200.0
        if need + self.args.reserve_s > self.left():
            return {"skipped": f"needs about {need:.0f} s, {self.left():.0f} s left"}
        return self.measure(name[:-1], name)

    def s3(self) -> dict[str, Any]:
        return self.measure("s3", "s3")

    def s2(self) -> dict[str, Any]:
        return self.measure("s2", "s2")

    def tree(self) -> dict[str, Any]:
        return self.measure("tree", "tree")

    def s1b(self) -> dict[str, Any]:
        return self.optional("s1b")

    def s3b(self) -> dict[str, Any]:
        return self.optional("s3b")

    def s2b(self) -> dict[str, Any]:
        return self.optional("s2b")

    def treeb(self) -> dict[str, Any]:
        return self.optional("treeb")

    def journal(self) -> dict[str, Any]:
        out = super().journal()
        rows = [json.loads(line) for line in (self.out / "journal.jsonl").read_text().splitlines() if line]
        from tune_session import start_times

        out["starts"] = start_times(rows)
        return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--models", type=Path, default=Path("/opt/sgm"))
    p.add_argument("--sim", action="store_true", help="against the stand-in emulating 0.5.17 (checks the script)")
    p.add_argument("--sim-time-scale", type=float, default=0.05)
    p.add_argument("--budget-s", type=float, default=900.0, help="wall seconds for the whole session")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per level")
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--phases", default=",".join(PHASES))
    args = p.parse_args()
    from console.sim.plugin import register

    register()  # the demo host's transport and the stand-in's units (console/sim/plugin.py)
    args.out, args.models = args.out.resolve(), args.models.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    # what TuneSession reads and this session does not use
    args.steps, args.topk, args.workloads, args.concurrency, args.repeat = "1", "1", "random", LEVELS, 2
    args.input_len, args.warmup, args.start_timeout = 128, 2, float(START_TIMEOUT_S)
    args.restart_prior_s = 2.0 if args.sim else 90.0
    session = PredictGpuSession(args)
    wanted = args.phases.split(",")
    try:
        for name in PHASES:
            if name in wanted or name in ("start", "stop", "journal"):
                session.step(name, getattr(session, name))
            if name == "start" and session.summary["steps"]["start"].get("error"):
                break  # no server: stop and journal still run below
    finally:
        for name in ("stop", "journal"):
            if name not in session.summary["steps"]:
                session.step(name, getattr(session, name))
        session.finish()
    print(json.dumps({k: v.get("error") or v.get("skipped") or "done" for k, v in session.summary["steps"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
