"""The operators' comparison (the calibration table in docs/demo.md), on the simulator: baseline (no speculation) vs
EAGLE topk 1 + spec v2 vs EAGLE topk 4, at C = 1, 30, 64, each level repeated; then `compare`'s table and plot.

Each configuration is a fresh simulator (`python -m console.sim`, the default Qwen3.5-122B profile) started
with those launch flags; the sweep runs through the same code as `opsconsole bench`, and the records go to a
temporary workspace's logs/. `--speedup` runs the simulated model faster than real time (same shape).

Run: .venv/bin/python benchmarks/bench_operator_comparison.py [--speedup 4] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from rich.console import Console  # noqa: E402

from console.bench.comparison import compare_runs  # noqa: E402
from console.bench.engine import SweepConfig  # noqa: E402
from console.bench.workloads import WorkloadSpec  # noqa: E402
from console.cli.compare import render  # noqa: E402
from console.core.bench import run_bench  # noqa: E402
from console.workspace import Workspace  # noqa: E402
from tests.support.simproc import running_sim  # noqa: E402

EAGLE = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "sim/draft"]
CONFIGS: list[tuple[str, list[str], dict[str, str]]] = [
    ("baseline", [], {}),
    ("topk1+v2", [*EAGLE, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                  "--speculative-num-draft-tokens", "4"], {"SGLANG_ENABLE_SPEC_V2": "1"}),
    ("topk4", [*EAGLE, "--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
               "--speculative-num-draft-tokens", "8"], {}),
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speedup", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--output-len", type=int, default=128)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="operator-compare-") as tmp:
        workspace = Workspace(Path(tmp)).ensure()
        runs = []
        for label, flags, env in CONFIGS:
            sim_args = [*flags, "--sim-time-scale", "0.001", "--sim-speedup", str(args.speedup)]
            with running_sim(sim_args, env=env) as sim:
                config = SweepConfig(
                    WorkloadSpec(input_len=512, output_len=args.output_len),
                    concurrencies=[1, 30, 64],
                    requests=64,
                    repeat=args.repeat,
                )
                records = asyncio.run(run_bench(sim.url, config, label=label, target=label, workspace=workspace))
            runs.append(records)
            print(f"{label}: " + ", ".join(f"{r.level} {r.output_throughput:,.0f} tok/s" for r in records))
        Console(width=140).print(render(compare_runs(runs)))


if __name__ == "__main__":
    main()
