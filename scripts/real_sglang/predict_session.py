"""Issue 37's proof on real data: one benchmark of SGLang 0.5.17 at steps 3 predicts steps 2 and 1, then restarts
measure them (the GPU machine, the tiny Llama and the EAGLE draft that repeats the last token: eagle-repeat, which
accepts in runs as real drafts do).

    python3 scripts/real_sglang/predict_session.py OUTDIR [--models DIR] [--sim] [--budget-s S] [--duration 3]

Opt-in: the suite never runs it. `run.sh predict` stages the bundle, builds the tiny target and the drafts
(build_drafts.py), starts this script detached and collects OUTDIR into $OUT (`run.sh wait` until it is done).
`--sim` runs it against the stand-in emulating 0.5.17 with its eagle-repeat-like draft (no GPU).

Phases (each writes OUTDIR/summary.json as it ends):
 start    the unit: EAGLE with eagle-repeat, steps 3, topk 1, draft tokens 4, CUDA graphs, metrics (tune_session.py's
          start options), under the supervisor, workspace profile `gpu`.
 base     `opsconsole bench gpu` at C = 1 and 16, random 128 in / 64 forced out, temperature 0, two repeats: the
          records keep each level's pooled spec_accept_histogram.
 predict  `opsconsole predict gpu --steps 1,2,3 --json` from those records only.
 steps2, steps1, steps3   `opsconsole apply` to that setup (a restart), then the same benchmark: the measurements the
          predictions are held to; steps 3 again for the spread between launches of one setup.
 stop, journal   as tune_session.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from tune_session import TuneSession  # noqa: E402

PHASES = ("start", "base", "predict", "steps2", "steps1", "steps3", "stop", "journal")
APPLY_TIMEOUT_S = 300


class PredictSession(TuneSession):
    def __init__(self, args: argparse.Namespace) -> None:
        args.draft, args.reserve_s = "eagle-repeat", 60.0
        super().__init__(args)
        self.algorithm = "EAGLE"
        self.draft = args.models / ("eagle-repeat" if not args.sim else "sim-eagle-repeat")
        if args.sim:  # the stand-in's draft that accepts like the H200's eagle-repeat (console/sim/profiles.py)
            self.draft = Path("sim/eagle-repeat")

    def unit_text(self) -> str:
        text = super().unit_text()
        return text.replace("--speculative-num-steps 2", "--speculative-num-steps 3").replace(
            "--speculative-num-draft-tokens 3", "--speculative-num-draft-tokens 4"
        )

    def bench_now(self, label: str) -> dict[str, Any]:
        a = self.args
        return self.console(
            f"bench {label}", "bench", "gpu", "--concurrency", "1,16", "--duration", str(a.duration), "--repeat", "2",
            "--input-len", "128", "--output-len", "64", "--temperature", "0", "--warmup", "8", "--label", label,
            "--json", timeout=600, save=f"bench-{label}.json",
        )  # fmt: skip

    def base(self) -> dict[str, Any]:
        return {"bench": self.bench_now("steps3-base")}

    def predict(self) -> dict[str, Any]:
        done = self.console(
            "predict", "predict", "gpu", "--algorithm", "EAGLE", "--steps", "1,2,3", "--topk", "1",
            "--draft-model-path", str(self.draft), "--concurrency", "1,16", "--json", timeout=300, save="predict.json",
        )  # fmt: skip
        return {"cli": done}

    def measure(self, steps: int) -> dict[str, Any]:
        applied = self.console(
            f"apply steps {steps}", "apply", "gpu", "--set", f"speculative-num-steps={steps}", "--set",
            f"speculative-num-draft-tokens={steps + 1}", "--yes", "--json", "--timeout", str(APPLY_TIMEOUT_S),
            timeout=APPLY_TIMEOUT_S + 120, save=f"apply-steps{steps}.json",
        )  # fmt: skip
        return {"apply": applied, "bench": self.bench_now(f"steps{steps}")}

    def steps2(self) -> dict[str, Any]:
        return self.measure(2)

    def steps1(self) -> dict[str, Any]:
        return self.measure(1)

    def steps3(self) -> dict[str, Any]:
        return self.measure(3)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--models", type=Path, default=Path("/opt/sgm"))
    p.add_argument("--sim", action="store_true", help="against the stand-in emulating 0.5.17 (checks the script)")
    p.add_argument("--sim-time-scale", type=float, default=0.05)
    p.add_argument("--budget-s", type=float, default=1000.0, help="wall seconds for the whole session")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per level")
    p.add_argument("--phases", default=",".join(PHASES))
    args = p.parse_args()
    args.out, args.models = args.out.resolve(), args.models.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    # what TuneSession reads and this session does not use
    args.steps, args.topk, args.workloads, args.concurrency, args.repeat = "3", "1", "random", "1,16", 2
    args.input_len, args.output_len, args.warmup, args.start_timeout = 128, 64, 2, 150.0
    args.restart_prior_s = 2.0 if args.sim else 60.0
    session = PredictSession(args)
    wanted = args.phases.split(",")
    try:
        for name in PHASES:
            if name in wanted or name in ("start", "stop", "journal"):
                session.step(name, getattr(session, name))
    finally:
        session.finish()
    print(json.dumps({k: v.get("error") or "done" for k, v in session.summary["steps"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
