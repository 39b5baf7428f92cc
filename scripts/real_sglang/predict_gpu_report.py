"""Issue 46's table from a predict_gpu_session.py output (or its fixture, tests/sim/fixtures/real-0.5.17/predict-gpu/):
this code's prediction from the records the session had at each step, held to what the restarts measured.

    python3 scripts/real_sglang/predict_gpu_report.py [DIR] [--json]

Two predictions, each from the records alone (the running setup is steps 1, the one the session started with):
  one setup   the first benchmark (steps 1 at C = 1, 16, 64, two runs) predicts steps 2, 3 and the topk-2 tree;
  two setups  that benchmark and steps 3's (after its restart) predict steps 2 and the tree.
Per setup and level: predicted output tok/s with its band, the runs measured in each launch of that setup, the error
of the prediction against their median, whether each run falls inside the band, and the verdict against steps 1.
Then the accept lengths the same way, the round times (the server GPU-bound), and the warm-up after each restart.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from console.bench.records import BenchRecord  # noqa: E402
from console.core.predict import Evidence, Measured, Predictor, SetupForecast  # noqa: E402
from console.sglang.setup import SpecSetup  # noqa: E402

FIXTURE = REPO / "tests/sim/fixtures/real-0.5.17/predict-gpu"
LEVELS = (1, 16, 64)
# the session's labels: each setup's launches, in order
LAUNCHES = {"s1": ("s1", "s1b"), "s2": ("s2", "s2b"), "s3": ("s3", "s3b"), "tree": ("tree",)}


@dataclass
class Cell:
    setup: str
    concurrency: int
    predicted: float
    low: float
    high: float
    runs: dict[str, list[float]]  # launch label -> its runs' tok/s
    accept: tuple[float, float, float] | None  # predicted accept length (value, low, high)
    accepts: dict[str, list[float]] = field(default_factory=dict)
    verdict: str | None = None

    @property
    def measured(self) -> float:
        return statistics.median(v for runs in self.runs.values() for v in runs)

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0

    def inside(self) -> tuple[int, int]:
        values = [v for runs in self.runs.values() for v in runs]
        return sum(self.low <= v <= self.high for v in values), len(values)

    def accept_inside(self) -> tuple[int, int]:
        if self.accept is None:
            return 0, 0
        values = [v for runs in self.accepts.values() for v in runs]
        return sum(self.accept[1] <= v <= self.accept[2] for v in values), len(values)


def load(folder: Path) -> dict[str, list[BenchRecord]]:
    path = folder / "bench.jsonl.gz"
    opener = gzip.open if path.exists() else open
    source = path if path.exists() else next((folder / "bench" / "logs").glob("bench-*.jsonl"))
    by_label: dict[str, list[BenchRecord]] = {}
    with opener(source, "rt") as f:  # type: ignore[operator]
        for line in f:
            if line.strip():
                record = BenchRecord.model_validate_json(line)
                by_label.setdefault(record.label, []).append(record)
    return by_label


def accept_of(m: Measured) -> float:
    return 1.0 + (m.mean_accepted or 0.0)


def predict(
    records: dict[str, list[BenchRecord]], known: list[str], targets: list[str]
) -> tuple[Predictor, list[Cell]]:
    """Predict `targets` (setup names of LAUNCHES) from the records of the `known` labels, steps 1 running; each
    target held to its launches that are not among the known (a measured setup: its next launch only)."""
    evidence = Evidence.from_records([r for label in known for r in records[label]])
    running = Evidence.from_records(records["s1"]).levels[0]
    predictor = Predictor(evidence, evidence.workloads()[0], incumbent=running.setup, incumbent_overlap=running.overlap)
    cells = []
    for name in targets:
        launches = {
            label: Evidence.from_records(records[label]).levels
            for label in LAUNCHES[name]
            if label in records and label not in known
        }
        if not launches:
            continue
        first = next(iter(launches.values()))[0]
        forecast: SetupForecast = predictor.forecast(first.setup, first.overlap, list(LEVELS))
        for level in forecast.levels:
            c = level.concurrency
            runs = {label: [m.output_tok_s for m in levels if m.concurrency == c] for label, levels in launches.items()}
            accepts = {
                label: [accept_of(m) for m in levels if m.concurrency == c] for label, levels in launches.items()
            }
            figure, accept = level.output_tok_s, level.accept_length
            cells.append(Cell(
                name, c, figure.value, figure.low, figure.high, runs,
                (accept.value, accept.low, accept.high) if accept else None, accepts,
                forecast.verdict.per_level.get(c),
            ))  # fmt: skip
    return predictor, cells


def rounds(records: dict[str, list[BenchRecord]]) -> dict[str, dict[int, tuple[float, float, float | None]]]:
    """Per launch and level: the mean decode round (ms), the decode batch and the GPU's busy share."""
    out: dict[str, dict[int, tuple[float, float, float | None]]] = {}
    for label, rs in records.items():
        for c in LEVELS:
            here = [r for r in rs if r.max_concurrency == c]
            if here:
                util = [r.mean_util_pct for r in here if r.mean_util_pct is not None]
                out.setdefault(label, {})[c] = (
                    statistics.median(r.round_time_ms or 0.0 for r in here),
                    statistics.median(r.decode_batch or 0.0 for r in here),
                    statistics.median(util) if util else None,
                )
    return out


def coverage(candidates: list[Cell], again: list[Cell]) -> dict[str, tuple[int, int]]:
    """Runs inside their band, of all runs: the candidates' (tok/s, accept length), and with the measured setups' next
    launches too."""

    def count(cells: list[Cell], accept: bool) -> tuple[int, int]:
        pairs = [c.accept_inside() if accept else c.inside() for c in cells]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    return {
        "tok": count(candidates, False),
        "accept": count(candidates, True),
        "tok_with_next_launches": count(candidates + again, False),
        "accept_with_next_launches": count(candidates + again, True),
    }


def report(folder: Path) -> dict[str, Any]:
    records = load(folder)
    one, cells_one = predict(records, ["s1"], ["s2", "s3", "tree"])
    two, cells_two = predict(records, ["s1", "s3"], ["s2", "tree"])
    # the measured setups' own next launches, against the same predictions
    _, again_one = predict(records, ["s1"], ["s1"])
    _, again_two = predict(records, ["s1", "s3"], ["s1", "s3"])
    split = one.split([(m.setup, m.overlap) for label in ("s1", "s2", "s3", "tree")
                       for m in Evidence.from_records(records[label]).levels[:1]], list(LEVELS))  # fmt: skip

    def rows(cells: list[Cell]) -> list[dict[str, Any]]:
        return [
            {
                "setup": c.setup, "concurrency": c.concurrency, "predicted": round(c.predicted, 1),
                "low": round(c.low, 1), "high": round(c.high, 1), "band": round((c.high - c.low) / 2 / c.predicted, 4),
                "runs": {k: [round(v, 1) for v in vs] for k, vs in c.runs.items()}, "error": round(c.error, 4),
                "inside": c.inside(), "verdict": c.verdict,
                "accept": [round(a, 4) for a in c.accept] if c.accept else None,
                "accepts": {k: [round(v, 4) for v in vs] for k, vs in c.accepts.items()},
                "accept_inside": c.accept_inside(),
            }
            for c in cells
        ]  # fmt: skip

    return {
        "one_setup": {
            "rows": rows(cells_one),
            "again": rows(again_one),
            "coverage": coverage(cells_one, again_one),
            "rests_on": one.measured_setups_text(),
            "split": split.text if split else None,
        },
        "two_setups": {
            "rows": rows(cells_two),
            "again": rows(again_two),
            "coverage": coverage(cells_two, again_two),
            "rests_on": two.measured_setups_text(),
        },
        "rounds": {k: {str(c): v for c, v in levels.items()} for k, levels in rounds(records).items()},
        "warmup": {
            label: [
                (
                    r.max_concurrency,
                    r.repeat_index,
                    round(r.output_throughput, 1),
                    r.warmup_mode,
                    r.warmup_waves,
                    r.warmup_round_ms,
                )
                for r in rs
            ]
            for label, rs in records.items()
        },  # fmt: skip
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", nargs="?", type=Path, default=FIXTURE)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    doc = report(args.folder)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    for part in ("one_setup", "two_setups"):
        print(f"\n{part.replace('_', ' ')}: {doc[part]['rests_on']}")
        print(
            "| setup | C | predicted tok/s (band) | measured: launch 1 / launch 2 | error | inside | verdict "
            "| accept: predicted (band) / measured |"
        )
        for r in doc[part]["rows"] + doc[part]["again"]:
            runs = " / ".join(", ".join(f"{v:,.0f}" for v in vs) for vs in r["runs"].values())
            accepts = " / ".join(", ".join(f"{v:.2f}" for v in vs) for vs in r["accepts"].values())
            a = r["accept"]
            print(f"| {r['setup']} | {r['concurrency']} | {r['predicted']:,.0f} ({r['low']:,.0f}-{r['high']:,.0f}) "
                  f"| {runs} | {r['error']:+.1%} | {r['inside'][0]}/{r['inside'][1]} | {r['verdict']} "
                  f"| {a[0]:.2f} ({a[1]:.2f}-{a[2]:.2f}) / {accepts} |")  # fmt: skip
        if doc[part].get("split"):
            print(doc[part]["split"])
        print("inside their bands: " + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in doc[part]["coverage"].items()))
    print("\nround ms / decode batch / GPU busy %:")
    for label, levels in doc["rounds"].items():
        print(
            f"  {label}: "
            + "; ".join(f"C={c} {v[0]:.2f} ms at {v[1]:.1f}, {v[2] or 0:.0f} %" for c, v in levels.items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
