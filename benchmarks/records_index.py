"""The editor's first prediction with 10,000 records on disk: reading logs/ every time (as before issue 46) against
the records index (console/bench/index.py), built once and then kept.

The workspace: 20 hosts x 50 days x 10 records a day, each record a real one (SGLang 0.5.17's tune grid on the H200,
tests/sim/fixtures/real-0.5.17/tune2: some 17 KB a line, /server_info's 465 arguments in each), retargeted and
re-dated; the editor's host runs EAGLE steps 2 topk 1 and has 150 records of two setups in the last 14 days.
"The editor's first prediction" is what the console does as the editor opens (console.core.tune.predict.foresight
without the host's /server_info): the host's records read, their evidence, the predictor fitted, one setup
forecast. Each figure is the median of --runs (min, max), in one process.

Run: .venv/bin/python benchmarks/records_index.py [--runs 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from console.bench.index import INDEX_DIR  # noqa: E402
from console.bench.records import BenchRecord  # noqa: E402
from console.bench.runs import list_runs  # noqa: E402
from console.core.predict import Evidence, Predictor, overlap_of, workload_key  # noqa: E402
from console.core.tune.predict import records_for  # noqa: E402
from console.sglang.setup import SpecSetup  # noqa: E402

GRID = REPO_ROOT / "tests/sim/fixtures/real-0.5.17/tune2/bench-2026-12-01.jsonl.gz"
HOSTS, DAYS, PER_DAY = 20, 50, 10
EDITOR = "gpu-00"
VERSION = "0.5.17"
AIM_MS = 50.0


def workspace(logs: Path) -> tuple[SpecSetup, bool]:
    """Write the 10,000 records; return the editor host's running setup."""
    with gzip.open(GRID, "rt") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    random_chains = [
        d
        for d in lines
        if d["workload"].get("name") == "random" and d["server_args"].get("speculative_eagle_topk") == 1
    ]
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    logs.mkdir(parents=True)
    n = 0
    for day in range(DAYS):
        started = today - timedelta(days=day)
        with (logs / f"bench-{started:%Y-%m-%d}.jsonl").open("w") as f:
            for host in range(HOSTS):
                for i in range(PER_DAY):
                    data = dict(random_chains[(host + i) % len(random_chains)])
                    at = started + timedelta(minutes=host * PER_DAY + i)
                    data.update(target=f"gpu-{host:02d}", run_id=f"r{n // 4}", started_at=at.isoformat(),
                                ended_at=at.isoformat())  # fmt: skip
                    f.write(json.dumps(data) + "\n")
                    n += 1
    assert n == HOSTS * DAYS * PER_DAY
    newest = [d for d in random_chains if d["server_args"].get("speculative_num_steps") == 2]
    record = BenchRecord.model_validate(newest[0])
    return SpecSetup.from_server_args(record.server_args, record.spec_mode), overlap_of(
        record.server_args, record.spec_mode
    )


def first_prediction(read: Callable[[], list[BenchRecord]], running: SpecSetup, overlap: bool) -> int:
    records = read()
    mine = [r for r in records if SpecSetup.from_server_args(r.server_args, r.spec_mode) == running]
    workload = workload_key(max(mine, key=lambda r: r.started_at).workload)
    predictor = Predictor(Evidence.from_records(records), workload, incumbent=running, incumbent_overlap=overlap,
                          host=EDITOR)  # fmt: skip
    predictor.forecast(SpecSetup(running.algorithm, 3, 1, 4, running.spec_v2, running.draft_model_path), overlap,
                       [1, 8, 32])  # fmt: skip
    return len(records)


def before(logs: Path) -> list[BenchRecord]:
    """What foresight read before the index: every run of logs/, then this host's records of the last 14 days."""
    runs, _problems = list_runs(logs)
    since = datetime.now(UTC) - timedelta(days=14)
    return [r for run in runs for r in run.records if r.target == EDITOR and r.sglang_version == VERSION
            and r.started_at >= since]  # fmt: skip


def timed(runs: int, work: Callable[[], Any], before_each: Callable[[], None] = lambda: None) -> list[float]:
    times = []
    for _ in range(runs):
        before_each()
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000.0)
    return times


def line(name: str, times: list[float], aim: float | None = None) -> str:
    text = f"  {name:<44} {statistics.median(times):8.1f} ms (min {min(times):.1f}, max {max(times):.1f})"
    if aim is not None:
        text += f"  aim <= {aim:.0f} ms: {statistics.median(times) / aim:.2f} of it"
    return text


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--keep", type=Path, help="write the workspace here and keep it")
    args = p.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="records-index-"))
    logs = root / "logs"
    try:
        started = time.perf_counter()
        running, overlap = workspace(logs)
        size = sum(f.stat().st_size for f in logs.glob("bench-*.jsonl"))
        wrote = time.perf_counter() - started
        print(f"{HOSTS * DAYS * PER_DAY:,} records in {DAYS} files, {size / 1e6:,.0f} MB on disk (written in "
              f"{wrote:.1f} s); the editor's host {EDITOR}, {running.name()}")  # fmt: skip

        def indexed() -> list[BenchRecord]:
            return records_for(logs, EDITOR, VERSION, 14.0, running=running, model=None, peers=())

        def drop_index() -> None:
            shutil.rmtree(logs / INDEX_DIR, ignore_errors=True)

        count = first_prediction(indexed, running, overlap)
        print(f"the editor's host: {count} records in the last 14 days\n")
        print("the editor's first prediction (read, evidence, fit, one setup):")
        old = timed(max(1, args.runs // 2), lambda: first_prediction(lambda: before(logs), running, overlap))
        print(line("reading every file (before)", old))
        built = timed(max(1, args.runs // 2), lambda: first_prediction(indexed, running, overlap), drop_index)
        print(line("the index built (the first time after a change)", built))
        first_prediction(indexed, running, overlap)
        kept = timed(args.runs, lambda: first_prediction(indexed, running, overlap))
        print(line("the index kept", kept, AIM_MS))
        reads = timed(args.runs, indexed)
        print(line("  of which reading the records", reads))
        print(f"\nratio before / kept: {statistics.median(old) / statistics.median(kept):.0f}x")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
