"""Write the made-up traffic datasets (console.sim.datasets): open chat as ShareGPT JSON and code as prompt JSONL, for
`opsconsole bench --dataset` and `opsconsole tune --dataset` on the demo, and a trace in Mooncake's format
(trace.jsonl) for `opsconsole bench --dataset trace.jsonl`. Nothing is downloaded.

Run: .venv/bin/python scripts/make_datasets.py [--out datasets] [--count 200] [--seed 1] [--trace-rate 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.sim.datasets import write_datasets, write_trace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="datasets", help="folder to write chat.json and code.jsonl in")
    parser.add_argument("--count", type=int, default=200, help="records in each file")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trace-rate", type=float, default=2.0, help="the trace's mean arrivals per second")
    args = parser.parse_args()
    if args.count < 1:
        parser.error("--count must be at least 1")
    for path in write_datasets(Path(args.out), count=args.count, seed=args.seed):
        print(path)
    print(write_trace(Path(args.out) / "trace.jsonl", count=args.count, seed=args.seed, rate=args.trace_rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
