"""The seeds' own question, answered on the Kimi demo: "worth checking topk = 2?" (they froze EAGLE3 topk 1 + spec v2
rather than spend another 10-minute restart to find out).

On a demo host set up as the Kimi seeds' (tests/tune/simhost.py: 8 GPUs, EAGLE3 chain of 2 with spec v2 on SGLang
0.5.9), with the seeds' workload (1024 in, 1024 forced out, temperature 0): the running setup and no speculation are
benchmarked (C = 1 and 48, two repeats), `opsconsole predict` answers for topk 2 on spec v1 (0.5.9 refuses topk 2 with
spec v2), and then a restart into topk 2 measures it. Figures are the profile's own tok/s: the stand-in runs
--speedup times faster, and every figure is divided by it.

Run: .venv/bin/python benchmarks/predict_seeds.py [--speedup 20] [--duration 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.support.demo import Demo, running_demo  # noqa: E402
from tests.tune.simhost import KIMI, install, seed_unit  # noqa: E402

WORKLOAD = ("--input-len", "1024", "--output-len", "1024")


def kimi(speedup: float, **flags: str) -> Any:
    spec_v2 = flags.pop("spec_v2", None)
    speculative = [(f"--{k.replace('_', '-')}", v) for k, v in flags.items()]
    return lambda text: seed_unit(text, profile=KIMI, version="0.5.9", speculative=speculative,
                                  spec_v2=None if spec_v2 is None else spec_v2 == "on", speedup=speedup)  # fmt: skip


def eagle3(speedup: float, topk: int, draft: int, spec_v2: str) -> Any:
    return kimi(speedup, speculative_algorithm="EAGLE3", speculative_num_steps="2", speculative_eagle_topk=str(topk),
                speculative_num_draft_tokens=str(draft), speculative_draft_model_path="sim/kimi-k2.5-eagle3",
                spec_v2=spec_v2)  # fmt: skip


def bench(demo: Demo, label: str, duration: float) -> dict[int, float]:
    done = demo.run("bench", "demo", "--concurrency", "1,48", "--duration", f"{duration:g}", "--repeat", "2",
                    *WORKLOAD, "--label", label, "--json")  # fmt: skip
    if done.returncode:
        raise SystemExit(done.stderr)
    rows = json.loads(done.stdout)
    return {c: statistics.median(r["output_throughput"] for r in rows if r["max_concurrency"] == c) for c in (1, 48)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speedup", type=float, default=20.0)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per level (wall)")
    args = parser.parse_args()
    from console.sim.plugin import register

    register()  # a composition root: the demo host's transport and the stand-in's units (console/sim/plugin.py)
    s = args.speedup
    with tempfile.TemporaryDirectory() as tmp, running_demo(Path(tmp) / "ws") as demo:
        asyncio.run(install(demo, kimi(s)))
        nospec = bench(demo, "no speculation", args.duration)
        asyncio.run(install(demo, eagle3(s, 1, 3, "on")))
        running = bench(demo, "running", args.duration)
        done = demo.run("predict", "demo", "--algorithm", "EAGLE3", "--steps", "2", "--topk", "2",
                        "--spec-v2", "off", "--concurrency", "1,48", "--json")  # fmt: skip
        if done.returncode:
            raise SystemExit(done.stderr)
        doc = json.loads(done.stdout)
        topk2 = next(x for x in doc["setups"] if x["key"] == "eagle3-s2-k2-n4-v1")
        asyncio.run(install(demo, eagle3(s, 2, 4, "off")))
        measured = bench(demo, "topk 2", args.duration)
    levels = {lv["concurrency"]: lv for lv in topk2["levels"]}
    print(f"no speculation measured: C=1 {nospec[1] / s:.1f}, C=48 {nospec[48] / s:.0f} tok/s")
    print(f"running EAGLE3 topk 1 + spec v2 measured: C=1 {running[1] / s:.1f}, C=48 {running[48] / s:.0f} tok/s")
    for c in (1, 48):
        lv = levels[c]
        low, high = lv["output_throughput_low"] / s, lv["output_throughput_high"] / s
        print(f"topk 2 on spec v1, C={c}: predicted {lv['output_throughput'] / s:.1f} ({low:.1f}-{high:.1f}), "
              f"measured after the restart {measured[c] / s:.1f} tok/s")  # fmt: skip
    print(f"verdict: {topk2['verdict_text']}")
    for line in topk2["assumptions"]:
        print(f"  assumes: {line}")
    print(f"prediction: {doc['elapsed_ms']:.0f} ms from {doc['records']} records")
    print(f"speedup {s:g}, {args.duration:g} s levels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
