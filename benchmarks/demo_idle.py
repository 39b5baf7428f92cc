"""The demo console's idle CPU where an operator first meets it, in a terminal, nobody typing:
`opsconsole demo --profile kimi-k2.5-int4-8x-rtxpro6000-pcie` in tmux at 120×40.

The console process's own CPU (utime + stime from /proc) over two windows of 20 s: early (10–30 s after the start:
the simulated server starting in the journal, the GPU histories filling) and settled (85–105 s). That process is the
console and the demo's supervisor (in-process: the unit's control socket, the journal it keeps); what the simulated
host costs beside it is shown apart: the stand-in server (a child process) and the short-lived children the console
reaps (the simulated nvidia-smi, once a refresh).

Paired: with `--against DIR` (a checkout of another version, e.g. `git worktree add --detach /tmp/main main`) both
consoles run alternately, `--rounds` times each (which goes first changes every round), with this checkout's Python
and libraries and only the console package from DIR, and the medians and their ratio are printed.

    .venv/bin/python benchmarks/demo_idle.py [--rounds 3] [--against DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIMI = "kimi-k2.5-int4-8x-rtxpro6000-pcie"
TICKS = os.sysconf("SC_CLK_TCK")
WINDOWS = {"early": (10.0, 30.0), "settled": (85.0, 105.0)}


@dataclass
class Times:
    own: float  # the console process: utime + stime
    reaped: float  # its children that ended and were waited for: cutime + cstime
    stand_in: float  # the living children (the stand-in server): utime + stime

    def __sub__(self, other: Times) -> Times:
        return Times(self.own - other.own, self.reaped - other.reaped, self.stand_in - other.stand_in)


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with open(task / "children") as text:
            found += [int(p) for p in text.read().split()]
    return found


def times(pid: int) -> Times:
    fields = _stat(pid)
    stand_in = 0.0
    queue = _children(pid)
    while queue:
        child = queue.pop()
        try:
            child_fields = _stat(child)
            queue += _children(child)
        except (FileNotFoundError, ProcessLookupError):
            continue
        stand_in += int(child_fields[11]) + int(child_fields[12])
    return Times(
        (int(fields[11]) + int(fields[12])) / TICKS, (int(fields[13]) + int(fields[14])) / TICKS, stand_in / TICKS
    )


def one_run(checkout: Path, socket_name: str) -> dict[str, dict[str, float]]:
    """`opsconsole demo` of `checkout` in a fresh tmux server at 120×40, its CPU over each window (% of a core)."""
    workspace = Path(tempfile.mkdtemp(prefix="demo-idle-"))
    tmux = ["tmux", "-L", socket_name, "-f", "/dev/null"]
    env = f"PYTHONPATH={checkout} TERM=xterm-256color"
    command = (
        f"cd {checkout} && exec env {env} {sys.executable} -m console --workspace {workspace} demo --profile {KIMI}"
    )
    subprocess.run([*tmux, "new-session", "-d", "-x", "120", "-y", "40", command], check=True)
    started = time.monotonic()
    try:
        pid = int(subprocess.run([*tmux, "display", "-p", "#{pane_pid}"], capture_output=True, text=True).stdout)
        figures: dict[str, dict[str, float]] = {}
        for name, (begin, end) in WINDOWS.items():
            time.sleep(max(0.0, begin - (time.monotonic() - started)))
            before, at = times(pid), time.monotonic()
            time.sleep(end - begin)
            used, elapsed = times(pid) - before, time.monotonic() - at
            figures[name] = {k: round(100 * v / elapsed, 2) for k, v in asdict(used).items()}
        screen = subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True).stdout
        if "healthy" not in screen:
            raise SystemExit(f"the demo's dashboard does not show a healthy server:\n{screen}")
        return figures
    finally:
        subprocess.run([*tmux, "send-keys", "q"], check=False)
        deadline = time.monotonic() + 30
        while (
            time.monotonic() < deadline and subprocess.run([*tmux, "has-session"], capture_output=True).returncode == 0
        ):
            time.sleep(0.2)
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
        shutil.rmtree(workspace, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout, run alternately with this one")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("needs tmux")
    versions = {"this": ROOT} | ({"other": opts.against.resolve()} if opts.against else {})
    runs: dict[str, list[dict[str, dict[str, float]]]] = {v: [] for v in versions}
    for round_ in range(opts.rounds):
        for version in list(versions) if round_ % 2 == 0 else list(reversed(versions)):
            got = one_run(versions[version], f"demo-idle-{os.getpid()}")
            runs[version].append(got)
            shown = "  ".join(
                f"{w} {f['own']:.2f} % (stand-in {f['stand_in']:.2f}, reaped {f['reaped']:.2f})" for w, f in got.items()
            )
            print(f"round {round_ + 1} {version:<5} {shown}", file=sys.stderr)
    summary: dict[str, dict[str, float | None]] = {}
    for window in WINDOWS:
        for what in ("own", "stand_in", "reaped"):
            medians = {v: statistics.median(r[window][what] for r in runs[v]) for v in versions}
            row: dict[str, float | None] = {f"{v}_median": m for v, m in medians.items()}
            if "other" in medians:
                row["ratio"] = round(medians["this"] / medians["other"], 3) if medians["other"] else None
            summary[f"{window}_{what}_cpu_pct"] = row
    if opts.json:
        print(json.dumps({"summary": summary, "runs": runs}, indent=2))
        return 0
    for name, row in summary.items():
        shown = "  ".join(f"{k} {v}" for k, v in row.items())
        print(f"{name:<28} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
