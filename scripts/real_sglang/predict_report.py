"""The table of predict_session.py's outcome: each prediction from the steps-3 benchmark beside what the restarts
measured, and the spread between two launches of steps 3.

    python3 scripts/real_sglang/predict_report.py OUTDIR [--json FILE]

Accept length: the predicted tokens per round against the measured mean (1 + drafts accepted per round, from the
records' pooled histograms, over both repeats), aim within 3 %. Throughput: the prediction against the measured
median, held to the spread of the launches of one setup (steps 3 at the start and steps 3 again at the end: at each
level (max - min) / median over their four runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def records(out: Path, label: str) -> list[dict[str, Any]]:
    path = out / f"bench-{label}.json"
    return json.loads(path.read_text()) if path.exists() and path.read_text().strip() else []


def accepted(rows: list[dict[str, Any]]) -> float | None:
    histograms = [r["spec_accept_histogram"] for r in rows if r.get("spec_accept_histogram")]
    if not histograms:
        return None
    rounds = sum(sum(h) for h in histograms)
    return 1 + sum(i * n for h in histograms for i, n in enumerate(h)) / rounds


def report(out: Path) -> dict[str, Any]:
    predicted = json.loads((out / "predict.json").read_text())
    base, again = records(out, "steps3-base"), records(out, "steps3")
    result: dict[str, Any] = {"levels": {}, "setups": {}}
    for c in (1, 16):
        launches = [r["output_throughput"] for r in base + again if r["max_concurrency"] == c]
        if launches:
            result["levels"][c] = {
                "steps3_runs": launches,
                "launch_spread": (max(launches) - min(launches)) / statistics.median(launches),
            }
    for setup in predicted["setups"]:
        steps = setup["speculative_num_steps"]
        rows = records(out, f"steps{steps}") if steps != 3 else base
        for level in setup["levels"]:
            c = level["concurrency"]
            mine = [r for r in rows if r["max_concurrency"] == c]
            if not mine:
                continue
            measured_tok_s = statistics.median(r["output_throughput"] for r in mine)
            measured_accept = accepted(mine)
            spread = result["levels"].get(c, {}).get("launch_spread")
            error = level["output_throughput"] / measured_tok_s - 1
            result["setups"][f"steps {steps} C={c}"] = {
                "predicted_accept": level["accept_length"],
                "measured_accept": measured_accept,
                "accept_error": level["accept_length"] / measured_accept - 1 if measured_accept else None,
                "predicted_tok_s": level["output_throughput"],
                "band": [level["output_throughput_low"], level["output_throughput_high"]],
                "measured_tok_s": measured_tok_s,
                "tok_s_error": error,
                "within_launch_spread": spread is not None and abs(error) <= spread,
                "verdict": setup["verdict_text"],
            }
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    result = report(args.out)
    for c, level in result["levels"].items():
        runs = ", ".join(f"{v:,.0f}" for v in level["steps3_runs"])
        print(f"C={c}: steps 3 over two launches {runs} tok/s: spread {level['launch_spread']:.0%}")
    print(f"{'':14} {'accept pred':>11} {'measured':>9} {'err':>6}   {'tok/s pred':>10} {'measured':>9} {'err':>6}  ok")
    for name, row in result["setups"].items():
        accept = f"{row['measured_accept']:.3f}" if row["measured_accept"] else "-"
        accept_err = f"{row['accept_error']:+.1%}" if row["accept_error"] is not None else "-"
        print(f"{name:14} {row['predicted_accept']:>11.3f} {accept:>9} {accept_err:>6}   "
              f"{row['predicted_tok_s']:>10,.0f} {row['measured_tok_s']:>9,.0f} {row['tok_s_error']:>+6.1%}  "
              f"{'yes' if row['within_launch_spread'] else 'no'}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
