"""`opsconsole snapshots [TARGET] [--json]`: the production snapshots in profiles/snapshots/, newest last.

Reads only the workspace (no host is contacted). `*` marks each host's production snapshot: its latest freeze
(console/core/snapshot/model.py). `--json` prints one object:

    snapshots[]   name, production (bool), host (the TARGET the freeze used), hostname, unit, frozen_at, frozen_by,
                  sglang_version, model, setup (one line), resolved {DEST: value}, document (path on the host),
                  forced (reason or null), previous, benchmarks (records kept), best_output_throughput, note, path
    production[]  {host, unit, snapshot}: which snapshot is production for each host
    problems[]    snapshot files that could not be read, and why

Exit 0; 1 when a file could not be read (the others are still listed).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from console import hints
from console.cli.common import workspace_of
from console.errors import ExitCode


def snapshot_json(snapshot: Any, *, production: bool, path: str) -> dict[str, Any]:
    from console.core.snapshot import best_throughput, setup_text

    return {
        "name": snapshot.name,
        "production": production,
        "host": snapshot.host.label,
        "hostname": snapshot.host.hostname,
        "unit": snapshot.host.unit,
        "frozen_at": snapshot.frozen_at.isoformat(),
        "frozen_by": snapshot.frozen_by,
        "sglang_version": snapshot.server.version,
        "model": snapshot.server.resolved.get("model_path"),
        "setup": setup_text(snapshot.server.resolved, snapshot.server.version),
        "resolved": snapshot.server.resolved,
        "document": snapshot.host.document,
        "forced": snapshot.forced.reason if snapshot.forced else None,
        "previous": snapshot.previous,
        "benchmarks": len(snapshot.benchmarks),
        "best_output_throughput": best_throughput(snapshot),
        "note": snapshot.note,
        "path": path,
    }


def listing(workspace: Any, target: str | None) -> dict[str, Any]:
    from console.core.snapshot import load_snapshots, production_names, production_of, snapshot_path

    snapshots, problems = load_snapshots(workspace)
    if target is not None:
        snapshots = [s for s in snapshots if s.host.label == target]
    current = production_names(snapshots)
    hosts = sorted({(s.host.label, s.host.unit) for s in snapshots})
    production = []
    for label, unit in hosts:
        found = production_of(snapshots, label, unit)
        if found is not None:
            production.append({"host": label, "unit": unit, "snapshot": found.name})
    rows = [
        snapshot_json(s, production=s.name in current, path=str(snapshot_path(workspace, s.name))) for s in snapshots
    ]
    return {"snapshots": rows, "production": production, "problems": problems}


def render_text(data: dict[str, Any], out: TextIO) -> None:
    rows = data["snapshots"]
    if not rows:
        print(f"no snapshots yet ({hints.FREEZE.line()} makes one)", file=out)
    else:
        header = ("", "NAME", "HOST", "FROZEN (UTC)", "SGLANG", "SETUP", "BEST TOK/S", "NOTE")
        table = [header]
        for r in rows:
            best = r["best_output_throughput"]
            table.append(
                (
                    "*" if r["production"] else "",
                    r["name"],
                    f"{r['host']} ({r['unit']})",
                    r["frozen_at"][:16].replace("T", " "),
                    r["sglang_version"] or "?",
                    r["setup"],
                    "-" if best is None else f"{best:,.0f}",
                    (r["note"] or "").splitlines()[0][:40] if r["note"] else "",
                )
            )
        widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
        for row in table:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
        print("* production: the host's latest freeze", file=out)
    for problem in data["problems"]:
        print(f"unreadable: {problem}", file=out)


def run(args: argparse.Namespace, *, stdout: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    data = listing(workspace_of(args), args.target)
    if args.json:
        print(json.dumps(data, default=str), file=out)
    else:
        render_text(data, out)
    return ExitCode.FAILED if data["problems"] else ExitCode.OK
