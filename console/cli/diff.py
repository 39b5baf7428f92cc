"""`opsconsole diff A B [--json]`: how two snapshots differ (A is the baseline). Reads only the workspace.

`--json` prints one object: `{"a", "b", "same_setup", "host": [{key, a, b}], "flags": [...], "environment":
[...], "resolved": [...], "server_args": [...], "benchmarks": compare's JSON (A as the baseline) or null}`;
each change is `{key, a, b}` with null for absent.

Exit 0; 1 when a snapshot is missing or unreadable.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from console.cli.common import said, workspace_of
from console.errors import ExitCode


def run(args: argparse.Namespace, *, stdout: TextIO | None = None) -> int:
    from console.core.snapshot import SnapshotError, diff_snapshots, load_snapshot

    out = stdout or sys.stdout
    workspace = workspace_of(args)
    try:
        a, b = load_snapshot(workspace, args.a), load_snapshot(workspace, args.b)
    except (LookupError, SnapshotError) as exc:
        print(f"opsconsole diff: {said(exc)}", file=sys.stderr)
        return ExitCode.FAILED
    diff = diff_snapshots(a, b)
    if args.json:
        print(json.dumps(diff.to_json(), default=str), file=out)
    else:
        print(f"--- {a.name} ({a.host.label}, frozen {a.frozen_at:%Y-%m-%d %H:%M})", file=out)
        print(f"+++ {b.name} ({b.host.label}, frozen {b.frozen_at:%Y-%m-%d %H:%M})", file=out)
        for line in diff.lines():
            print(line, file=out)
    return ExitCode.OK
