"""What the console costs: CPU idle on an 8-GPU host at 1 Hz, 16 hosts at 1 Hz, key press → screen updated while
the journal streams 100 lines/s, and resident memory over an hour's worth of journal.

The host is the demo (`opsconsole demo --no-ui` with the Kimi profile: 8 simulated GPUs), reached the way
`opsconsole connect demo` reaches it. The console runs headless in its own process for the CPU figures
(utime + stime from /proc over a window after warm-up, so the demo and the simulator are not counted), and
in this process (Textual's Pilot) for the key and memory figures. Usage:

    .venv/bin/python benchmarks/console_load.py [--seconds 30] [--hosts 16] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KIMI = "kimi-k2.5-int4-8x-rtxpro6000-pcie"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

CONSOLE_CHILD = """
import argparse, sys
from console.cli.connect import build_app
targets = sys.argv[2:]
args = argparse.Namespace(workspace=sys.argv[1], ssh_config=None, refresh=1.0, read_only=False, targets=targets)
app = build_app(args, targets)
app.run(headless=True, size=(120, 40))
"""


@contextlib.contextmanager
def demo_host(workspace: Path) -> Iterator[None]:
    opsconsole = Path(sys.executable).with_name("opsconsole")
    proc = subprocess.Popen(
        [str(opsconsole), "--workspace", str(workspace), "demo", "--no-ui", "--profile", KIMI, "--time-scale", "0.001"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "Ctrl-C stops the demo host." in line:
                break
        else:
            raise SystemExit("the demo host did not come up")
        yield
    finally:
        os.killpg(proc.pid, 2)
        proc.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def console_cpu(workspace: Path, targets: list[str], warmup: float, seconds: float) -> float:
    """% of one core the console process uses over `seconds`, after `warmup`."""
    child = subprocess.Popen(
        [sys.executable, "-c", CONSOLE_CHILD, str(workspace), *targets],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(warmup)  # let every host connect and fill its first refreshes before the window opens
        start_cpu, start = cpu_seconds(child.pid), time.monotonic()
        time.sleep(seconds)  # the measuring window itself
        used = cpu_seconds(child.pid) - start_cpu
        return 100.0 * used / (time.monotonic() - start)
    finally:
        child.terminate()
        child.wait(timeout=30)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def keys_and_memory(
    workspace: Path, presses: int, hour_lines: int
) -> tuple[list[float], list[tuple[int, float]]]:
    from console.cli.connect import build_app
    from console.host.base import JournalEntry
    from console.tui.app import JournalArrived
    from console.tui.screens.help import HelpScreen

    args = argparse.Namespace(workspace=str(workspace), ssh_config=None, refresh=1.0, read_only=False, targets=["demo"])
    app = build_app(args, ["demo"])
    base = datetime.now(UTC)
    counter = 0

    def batch(n: int) -> list[JournalEntry]:
        nonlocal counter
        lines = []
        for _ in range(n):
            counter += 1
            lines.append(
                JournalEntry(
                    cursor=f"bench-{counter}",
                    timestamp=base + timedelta(milliseconds=10 * counter),
                    message=f"[2026-11-30 12:00:00 TP0] Decode batch, #running-req: 64, #token: {counter}, "
                    "token usage: 0.41, accept len: 2.61, gen throughput (token/s): 1523.02, #queue-req: 0",
                )
            )
        return lines

    async with app.run_test(size=(120, 40)) as pilot:
        while "SGLang" not in "".join(s.text for s in app.screen._compositor.render_strips()):
            await pilot.pause(0.1)

        async def stream() -> None:  # 100 lines/s, in the batches the watcher sends (one per 50 ms)
            while True:
                app.post_message(JournalArrived("demo", batch(5)))
                await asyncio.sleep(0.05)

        streamer = asyncio.create_task(stream())
        latencies = []
        for _ in range(presses):
            started = time.perf_counter()
            await pilot.press("question_mark")
            while not isinstance(app.screen, HelpScreen):
                await pilot.pause(0)
            await pilot.pause(0)  # the frame with the help screen drawn
            latencies.append((time.perf_counter() - started) * 1000)
            await pilot.press("escape")
            while isinstance(app.screen, HelpScreen):
                await pilot.pause(0)
        streamer.cancel()

        memory = [(0, rss_mib())]
        fed = 0
        step = hour_lines // 6
        while fed < hour_lines:
            for _ in range(step // 500):
                app.post_message(JournalArrived("demo", batch(500)))
                await pilot.pause(0)
            fed += step
            await pilot.pause(0.05)
            memory.append((fed, rss_mib()))
    return latencies, memory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    workspace = Path(tempfile.mkdtemp(prefix="console-load-"))
    try:
        with demo_host(workspace):
            profile = (workspace / "profiles" / "demo.toml").read_text()
            many = [f"host-{i:02d}" for i in range(1, opts.hosts + 1)]
            for name in many:  # the same demo host under 16 names: 16 sessions, 16 refresh loops
                (workspace / "profiles" / f"{name}.toml").write_text(profile)
            idle = console_cpu(workspace, ["demo"], warmup=8.0, seconds=opts.seconds)
            sixteen = console_cpu(workspace, many, warmup=15.0, seconds=opts.seconds)
            latencies, memory = asyncio.run(keys_and_memory(workspace, opts.presses, 360_000))
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    p95 = statistics.quantiles(latencies, n=20)[18]
    figures = {
        "idle_cpu_pct_8_gpus_1hz": round(idle, 2),
        f"cpu_pct_{opts.hosts}_hosts_1hz": round(sixteen, 2),
        "key_to_screen_ms_p50": round(statistics.median(latencies), 1),
        "key_to_screen_ms_p95": round(p95, 1),
        "rss_mib_by_journal_lines": {str(n): round(m, 1) for n, m in memory},
    }
    if opts.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"console CPU, dashboard idle, 8 GPUs at 1 Hz:   {idle:5.2f} % of a core   (aim <= 2 %)")
    print(f"console CPU, {opts.hosts} hosts at 1 Hz:              {sixteen:5.2f} % of a core   (aim <= 15 %)")
    print(
        f"key press -> screen updated, journal at 100 lines/s: p50 {statistics.median(latencies):.1f} ms, "
        f"p95 {p95:.1f} ms over {len(latencies)} presses   (aim p95 <= 50 ms)"
    )
    print("resident memory while an hour of journal (360,000 lines) streams in:")
    for lines, mib in memory:
        print(f"  after {lines:>7,} lines: {mib:6.1f} MiB")
    growth = memory[-1][1] - memory[2][1]
    print(f"  growth over the last 240,000 lines: {growth:+.1f} MiB (the journal keeps 5,000 lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
