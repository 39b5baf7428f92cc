"""The fleet's overview at scale: 200 hosts read from Prometheus at a 5 s refresh. Aims (issue 21): at most 10 % of
a core and 150 MB resident for the console, key → frame p95 at most 50 ms with 200 rows.

Real parts: 200 simulated hosts in one process (`python -m console.sim.fleet`, 8 GPUs each: SGLang's and
dcgm-exporter's /metrics on ports of their own) and Debian's `prometheus` scraping all 400 targets every 5 s.
The CPU and memory figures are the real `opsconsole connect @fleet --refresh 5` in a 120×40 pseudo-terminal
(utime + stime from /proc over the window after warm-up; VmRSS at the end); the key figures run the same app in this
process (Textual's Pilot): Down/Up on the 200-row table, from the key to the first frame with the cursor moved.

    .venv/bin/python benchmarks/fleet_overview.py [--hosts 200] [--seconds 60] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.console_load import FrameLog, cpu_seconds  # noqa: E402
from tests.support.prometheus import running_prometheus, sim_fleet, wait_scraped  # noqa: E402

REFRESH_S = 5.0


def workspace(root: Path, hosts: list[str], prometheus: str) -> Path:
    (root / "profiles").mkdir(parents=True)
    for host in hosts:  # never opened here: nothing needs to listen
        (root / "profiles" / f"{host}.toml").write_text('[host]\nssh = "ops@127.0.0.1:9"\n')
    (root / "profiles" / "groups.toml").write_text('fleet = ["gpu-*"]\n')
    (root / "console.toml").write_text(
        f'refresh_s = {REFRESH_S}\n\n[fleet]\nprometheus = "{prometheus}"\nlabel = "host"\nscrape_interval_s = 5\n'
    )
    return root


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def console_in_terminal(ws: Path, warmup: float, seconds: float) -> tuple[float, float, float]:
    """(CPU % of a core over the window, bytes/s to the terminal, resident MiB at the end)."""
    argv = [str(Path(sys.executable).with_name("opsconsole")), "--workspace", str(ws), "connect", "@fleet"]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"TERM": "xterm-256color"}
    child = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    received = [0]
    done = threading.Event()

    def read_terminal() -> None:
        while not done.is_set():
            if select.select([master], [], [], 0.2)[0]:
                try:
                    received[0] += len(os.read(master, 65536))
                except OSError:
                    return

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        time.sleep(warmup)
        cpu0, bytes0, t0 = cpu_seconds(child.pid), received[0], time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - t0
        cpu = 100.0 * (cpu_seconds(child.pid) - cpu0) / elapsed
        return cpu, (received[0] - bytes0) / elapsed, rss_mib(child.pid)
    finally:
        child.terminate()
        child.wait(timeout=30)
        done.set()
        reader.join(timeout=5)
        os.close(master)


async def key_latencies(ws: Path, hosts: int, presses: int) -> list[float]:
    from textual import events

    from console.cli.connect import build_app, settle
    from console.tui.widgets.fleet_overview import FleetTable

    args = argparse.Namespace(workspace=str(ws), ssh_config=None, refresh=None, read_only=True,
                              targets=["@fleet"], prometheus=None)  # fmt: skip
    app = build_app(args, ["@fleet"])
    settle()
    app.animation_level = "none"
    async with app.run_test(size=(120, 40)) as pilot:
        while app.fleet_view is None or len(app.fleet_view.hosts) < hosts:
            await pilot.pause(0.1)
        await pilot.pause(0.5)
        table = app.query_one(FleetTable)
        table.focus()
        frames = FrameLog(app)
        frames.shows = lambda: table.cursor_row
        latencies = []
        for i in range(presses):
            await pilot.pause(0.1)  # a typing pace
            key = "down" if (i // 50) % 2 == 0 else "up"  # down the 200 rows in stretches, and back
            latencies.append(await frames.key_to_change(events.Key(key, None)))
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--presses", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        folder = Path(tmp)
        with (
            sim_fleet(folder, args.hosts, gpus=8) as sims,
            running_prometheus(folder / "prom", sims.hosts, interval_s=REFRESH_S) as prometheus,
        ):
            wait_scraped(prometheus, 2 * args.hosts, timeout=180)
            ws = workspace(folder / "ws", [h["host"] for h in sims.hosts], prometheus.url)
            cpu, bytes_per_s, rss = console_in_terminal(ws, warmup=3 * REFRESH_S, seconds=args.seconds)
            latencies = asyncio.run(key_latencies(ws, args.hosts, args.presses))
    p95 = statistics.quantiles(latencies, n=20)[18]
    figures = {
        "hosts": args.hosts,
        "refresh_s": REFRESH_S,
        "cpu_pct_of_core": round(cpu, 1),
        "terminal_bytes_per_s": round(bytes_per_s),
        "rss_mib": round(rss, 1),
        "key_to_frame_ms_p50": round(statistics.median(latencies), 1),
        "key_to_frame_ms_p95": round(p95, 1),
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{args.hosts} hosts from Prometheus, refresh {REFRESH_S:.0f} s, 120x40 terminal")
        print(f"  CPU            {cpu:5.1f} % of a core over {args.seconds:.0f} s   (aim <= 10 %)")
        print(f"  memory         {rss:5.1f} MiB resident                  (aim <= 150 MB)")
        print(f"  terminal       {bytes_per_s / 1024:5.1f} KiB/s written")
        print(f"  key -> frame   p50 {statistics.median(latencies):.1f} ms, p95 {p95:.1f} ms over {len(latencies)} "
              f"presses   (aim p95 <= 50 ms)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
