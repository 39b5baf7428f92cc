"""What the production snapshot costs a status refresh (the console asks it every second per host).

A workspace with N snapshot files (several hosts, each with benchmark records); `production_of_host` is what
read_status calls. Measures, side by side in one run: the first call (every file parsed), the later calls (files
unchanged: a directory listing and a stat per file), and parsing every file each time (what it would cost
without the cache). Prints medians in ms and the ratio. Usage:

    .venv/bin/python benchmarks/production_drift_cost.py [--snapshots 40] [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.core.snapshot import (  # noqa: E402
    Snapshot,
    production_of_host,
    save_snapshot,
    snapshots_dir,
)
from console.core.snapshot import store as snapshot_store  # noqa: E402
from console.workspace import Workspace  # noqa: E402
from tests.support import snapshots as snaps  # noqa: E402


class Running:
    """What status hands over: the server's resolved values (SglangStatus's fields)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--snapshots", type=int, default=40)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        workspace = Workspace(Path(root))
        text = snaps.unit_text()
        records = [snaps.record(unit=text, concurrency=c, throughput=100.0 * c) for c in (1, 8, 32, 64)]
        for i in range(args.snapshots):
            snap = snaps.snapshot(
                f"v{i}", label=f"gpu{i % 8}", frozen_at=snaps.AT + timedelta(minutes=i), records=records
            )
            save_snapshot(workspace, snap)
        size = sum(p.stat().st_size for p in snapshots_dir(workspace).iterdir())
        running = Running({**snaps.snapshot().resolved, "version": "0.5.9", "speculative_num_steps": 3})

        def call() -> float:
            started = time.perf_counter()
            production_of_host(workspace, "gpu1", "sglang.service", running)
            return (time.perf_counter() - started) * 1000

        def parse_all() -> float:
            started = time.perf_counter()
            for path in snapshots_dir(workspace).iterdir():
                Snapshot.from_toml(path.read_text(), where=str(path))
            return (time.perf_counter() - started) * 1000

        snapshot_store._cache.clear()
        first = call()
        cached = [call() for _ in range(args.runs)]
        uncached = [parse_all() for _ in range(max(5, args.runs // 20))]
    cached_ms, uncached_ms = statistics.median(cached), statistics.median(uncached)
    print(f"{args.snapshots} snapshot files, {size / 1024:.0f} KiB in all")
    print(f"first call (parses every file):     {first:8.2f} ms")
    print(f"later calls (cached; median):       {cached_ms:8.3f} ms  (max {max(cached):.3f})")
    print(f"parsing every file each time:       {uncached_ms:8.2f} ms")
    print(f"cache saves a factor of {uncached_ms / cached_ms:.0f} per refresh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
