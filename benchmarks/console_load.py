"""What the console costs where operators run it, in a terminal: CPU idle on an 8-GPU host at 1 Hz, 16 hosts at 1 Hz,
and the bytes it writes to the terminal; key press → screen updated while the journal streams 100 lines/s, the editor's
rule report after a keystroke, and resident memory over an hour's worth of journal.

Two kinds of host: an SSH host (a real OpenSSH sshd on loopback with an 8-GPU nvidia-smi stand-in and the
SGLang stand-in behind the port forward: what `opsconsole connect gpu-host` does) and the demo host
(`opsconsole demo --no-ui` with the Kimi profile, 8 simulated GPUs; its nvidia-smi is a local Python process
the console starts every second, which an SSH host runs on the far side; its stand-in logs every HTTP request to the
journal the console follows, as real SGLang does). For the CPU figures the real `opsconsole connect` runs in a
pseudo-terminal of 120×40 that this script reads (every byte the console writes is counted, as a terminal would
receive it): utime + stime from /proc over a window after warm-up, so the hosts are not counted. The key and memory
figures run the app in this process (Textual's Pilot). Usage:

    .venv/bin/python benchmarks/console_load.py [--seconds 30] [--hosts 16] [--json]

Paired against another version (a checkout of it, e.g. `git worktree add /tmp/main main`): `--against DIR` runs
the SSH figures with both consoles, one after the other, `--rounds` times (the order alternating from one round to
the next), on the same hosts and with this checkout's Python and libraries, and prints the medians and their
ratio. Only the console's own package comes from DIR. On a machine shared with other work, the paired medians are
the figures to compare; a single run of each says little. `--ssh-only` leaves out the demo host, the keys and memory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import pty
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KIMI = "kimi-k2.5-int4-8x-rtxpro6000-pcie"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# An 8-GPU H200 host as nvidia-smi prints it (one channel per poll runs both queries).
SMI_8 = """#!/bin/sh
case "$*" in
  *--query-gpu=*) for i in 0 1 2 3 4 5 6 7; do
    echo "$i, GPU-bc85baf0-ecd5-5da4-fbbb-2762b72465a$i, NVIDIA H200, P0, 0, 0, 143771, 131000, 34, \\
115.20, 700.00, 1980, 3201, 0x0000000000000001"
  done ;;
  *--query-compute-apps=*) for i in 0 1 2 3 4 5 6 7; do
    echo "GPU-bc85baf0-ecd5-5da4-fbbb-2762b72465a$i, 4$i$i, sglang::scheduler, 130990"
  done ;;
  *) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
"""


@contextlib.contextmanager
def ssh_host(workspace: Path) -> Iterator[Path]:
    """A profile `ssh8` reaching an 8-GPU host through a real sshd on loopback; yields the ssh_config."""
    from tests.host.sshd_lab import simulator, sshd_lab, write_client

    with sshd_lab() as server, simulator() as sim_port:
        client = write_client(workspace, server)
        stub = server.root / "bin" / "nvidia-smi"
        stub.write_text(SMI_8)
        stub.chmod(0o755)
        (workspace / "profiles").mkdir(exist_ok=True)
        (workspace / "profiles" / "ssh8.toml").write_text(
            f'[host]\nssh = "lab"\ngpu_command = ["{stub}"]\n[sglang]\nport = {sim_port}\n'
        )
        yield client.config


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
        # keep reading what it prints: a full pipe would stop the demo host mid-write (and its shutdown with it)
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield
    finally:
        os.killpg(proc.pid, 2)
        proc.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


@dataclass
class TerminalFigures:
    cpu_pct: float  # of one core, over the window
    bytes_per_s: float  # written to the terminal over the window


def console_in_terminal(
    workspace: Path,
    targets: list[str],
    warmup: float,
    seconds: float,
    ssh_config: Path | None = None,
    checkout: Path = ROOT,
) -> TerminalFigures:
    """`opsconsole connect TARGETS` in a 120×40 pseudo-terminal: its CPU and the bytes it writes over `seconds`,
    after `warmup`. The terminal side is read all the time (a terminal that stops reading stalls the console).
    The console is `python -m console` of `checkout` (this one, or another version's for a paired run)."""
    argv = [sys.executable, "-m", "console", "--workspace", str(workspace), "connect", *targets]
    if ssh_config is not None:
        argv += ["--ssh-config", str(ssh_config)]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PYTHONPATH")}
    env |= {"TERM": "xterm-256color", "PYTHONPATH": str(checkout)}  # its console package before the installed one
    # The pty is the console's controlling terminal, as in a real one: should this benchmark die (killed by a
    # timeout), its end of the pty closes and the kernel hangs up the console, instead of leaving it running.
    child = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                             cwd=checkout, preexec_fn=_controlling_terminal)  # fmt: skip
    os.close(slave)
    started = time.monotonic()
    received = [0]
    done = threading.Event()
    drawn = threading.Event()  # the server panel said `healthy`: a host's first refresh is on screen

    def read_terminal() -> None:
        tail = b""
        while not done.is_set():
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the console is gone
                    return
                received[0] += len(data)
                if not drawn.is_set() and b"healthy" in tail + data:
                    drawn.set()
                tail = data[-16:]

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        # Let every host connect and fill its first refreshes before the window opens: `warmup` seconds after the
        # start, and not before the first refresh is drawn (on a busy machine the start alone can take longer).
        if not drawn.wait(timeout=120):
            raise SystemExit("the console drew no refresh within 120 s")
        time.sleep(max(0.0, warmup - (time.monotonic() - started)))
        start_cpu, start_bytes, start = cpu_seconds(child.pid), received[0], time.monotonic()
        time.sleep(seconds)  # the measuring window itself
        elapsed = time.monotonic() - start
        used = cpu_seconds(child.pid) - start_cpu
        return TerminalFigures(100.0 * used / elapsed, (received[0] - start_bytes) / elapsed)
    finally:
        child.terminate()
        child.wait(timeout=30)
        done.set()
        reader.join(timeout=5)
        os.close(master)


def _controlling_terminal() -> None:
    """In the child, after setsid: its stdin (the pty) becomes its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def keys_and_memory(
    workspace: Path, presses: int, hour_lines: int
) -> tuple[list[float], list[float], list[float], list[tuple[int, float]]]:
    from textual import events

    from console.cli.connect import build_app, settle
    from console.host.base import JournalEntry
    from console.tui.app import JournalArrived
    from console.tui.screens.help import HelpScreen
    from console.tui.widgets.journal import JournalLog

    args = argparse.Namespace(workspace=str(workspace), ssh_config=None, refresh=1.0, read_only=False, targets=["demo"])
    app = build_app(args, ["demo"])
    settle()  # as `opsconsole connect` does before it runs the app
    app.animation_level = "none"  # scrolling without animation: the key's cost, not an animation's length
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
        await pilot.pause(1.0)  # a few hundred lines in
        log = app.query_one(JournalLog)
        log.focus()
        frames = FrameLog(app)
        frames.shows = lambda: log.scroll_y
        latencies = []
        for i in range(presses):  # page up and down the journal: the screen must move at each press
            await pilot.pause(0.1)  # presses at a typing pace, not queued behind each other
            key = "pageup" if i % 2 == 0 else "pagedown"
            latencies.append(await frames.key_to_change(events.Key(key, None)))
        help_open = []
        for _ in range(5):  # a whole screen composed and drawn: the heaviest key
            started = time.perf_counter()
            await pilot.press("question_mark")
            while not isinstance(app.screen, HelpScreen):
                await pilot.pause(0)
            await pilot.pause(0)
            help_open.append((time.perf_counter() - started) * 1000)
            await pilot.press("escape")
            while isinstance(app.screen, HelpScreen):
                await pilot.pause(0)
        report = await rule_report_latencies(app, frames, presses)
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
    return latencies, help_open, report, memory


class FrameLog:
    """Every frame the app hands to the terminal, with what it showed of the thing being watched (read as the
    frame is sent). A key's latency ends at the first frame that shows its effect: a frame drawn after the
    effect was noticed may come a refresh later, and one drawn before it does not show it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.frames: list[tuple[float, object]] = []
        self.shows: Callable[[], object] = lambda: None
        display = app._display

        def timed_display(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            self.frames.append((time.perf_counter(), self.shows()))

        app._display = timed_display

    async def key_to_change(self, key: Any) -> float:
        """Milliseconds from the key reaching the app (as a terminal sends it) to the first frame showing a
        different value of what is watched."""
        before, first = self.shows(), len(self.frames)
        started = time.perf_counter()
        self.app._driver.send_message(key)
        while True:
            changed = [at for at, shown in self.frames[first:] if shown is not before and shown != before]
            if changed:
                return (changed[0] - started) * 1000
            await asyncio.sleep(0.001)


async def rule_report_latencies(app: Any, frames: FrameLog, presses: int) -> list[float]:
    """`e`, then `+` and `-` on the steps field: from the key to the first frame drawn with the new rule report
    (the version's rules re-run on every keystroke)."""
    from textual import events

    from console.tui.screens.edit import EditScreen

    app.action_edit()
    while not (isinstance(app.screen, EditScreen) and app.screen.preview is not None):
        await asyncio.sleep(0.01)
    editor = app.screen
    frames.shows = lambda: editor.preview
    latencies = []
    for i in range(presses):
        await asyncio.sleep(0.1)  # a typing pace
        key = events.Key("plus" if i % 2 == 0 else "minus", "+" if i % 2 == 0 else "-")
        latencies.append(await frames.key_to_change(key))
    app.pop_screen()
    return latencies


def many_ssh_profiles(workspace: Path, hosts: int) -> list[str]:
    """`hosts` profiles naming the one SSH host (ssh8): as many sessions and refresh loops."""
    names = [f"ssh-{i:02d}" for i in range(1, hosts + 1)]
    for name in names:
        (workspace / "profiles" / f"{name}.toml").write_text((workspace / "profiles" / "ssh8.toml").read_text())
    return names


def paired(opts: argparse.Namespace, other: Path) -> int:
    """The SSH figures of this checkout and of `other`, measured alternately on the same hosts: medians, ratios."""
    if not (other / "console" / "__main__.py").is_file():
        raise SystemExit(f"--against {other}: not a checkout of opsconsole (no console/__main__.py there)")
    versions = {"this": ROOT, "other": other}
    figures = ("ssh_1_host", f"ssh_{opts.hosts}_hosts")
    runs: dict[str, dict[str, list[TerminalFigures]]] = {v: {f: [] for f in figures} for v in versions}
    workspace = Path(tempfile.mkdtemp(prefix="console-load-"))
    try:
        with ssh_host(workspace) as ssh_config:
            one, many = (8.0, 15.0) if opts.warmup is None else (opts.warmup, opts.warmup)
            targets = {figures[0]: (["ssh8"], one), figures[1]: (many_ssh_profiles(workspace, opts.hosts), many)}
            for round_ in range(opts.rounds):
                order = list(versions) if round_ % 2 == 0 else list(reversed(versions))
                for figure, (names, warmup) in targets.items():
                    for version in order:  # the two versions back to back: what the machine does, both share
                        got = console_in_terminal(workspace, names, warmup, opts.seconds, ssh_config, versions[version])
                        runs[version][figure].append(got)
                        print(f"round {round_ + 1} {figure:<14} {version:<5} {got.cpu_pct:6.2f} %  "
                              f"{got.bytes_per_s / 1024:6.1f} KiB/s", file=sys.stderr)  # fmt: skip
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    summary: dict[str, Any] = {"this": str(ROOT), "other": str(other), "rounds": opts.rounds, "warmup": opts.warmup}
    for figure in figures:
        for what, unit in (("cpu_pct", "%"), ("bytes_per_s", "B/s")):
            this = [getattr(r, what) for r in runs["this"][figure]]
            that = [getattr(r, what) for r in runs["other"][figure]]
            mine, theirs = statistics.median(this), statistics.median(that)
            summary[f"{figure}_{what}"] = {
                "this_median": round(mine, 2),
                "other_median": round(theirs, 2),
                "ratio": round(mine / theirs, 3) if theirs else None,
                "this": [round(v, 2) for v in this],
                "other": [round(v, 2) for v in that],
            }
            if not opts.json:
                ratio = f"{mine / theirs:5.2f}x" if theirs else "  -  "
                each = f"this {', '.join(f'{v:.2f}' for v in this)}; other {', '.join(f'{v:.2f}' for v in that)}"
                medians = f"this {mine:9.2f} {unit:<3} other {theirs:9.2f} {unit:<3}"
                print(f"{figure:<14} {what:<12} {medians} {ratio}  ({each})")
    if opts.json:
        print(json.dumps(summary, indent=2))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--against", metavar="DIR", help="another version's checkout: paired SSH figures")
    parser.add_argument("--rounds", type=int, default=3, help="with --against: rounds of each version")
    parser.add_argument("--ssh-only", action="store_true", help="the SSH figures only")
    parser.add_argument(
        "--warmup",
        type=float,
        help="with --against: seconds from the start to the window (default 8 with one host, 15 with many: the "
        "GPU histories still fill during the window; 75: an idle console long open, its histories full)",
    )
    opts = parser.parse_args()
    if opts.against:
        return paired(opts, Path(opts.against).resolve())
    workspace = Path(tempfile.mkdtemp(prefix="console-load-"))
    try:
        with ssh_host(workspace) as ssh_config:
            over_ssh = console_in_terminal(workspace, ["ssh8"], 8.0, opts.seconds, ssh_config)
            many_ssh = many_ssh_profiles(workspace, opts.hosts)
            sixteen_ssh = console_in_terminal(workspace, many_ssh, 15.0, opts.seconds, ssh_config)
        if opts.ssh_only:
            print(f"dashboard idle, SSH host with 8 GPUs at 1 Hz: {over_ssh.cpu_pct:5.2f} %  "
                  f"{over_ssh.bytes_per_s / 1024:6.1f} KiB/s   (aim <= 2 %)")  # fmt: skip
            print(f"{opts.hosts} SSH hosts at 1 Hz: {sixteen_ssh.cpu_pct:5.2f} %  "
                  f"{sixteen_ssh.bytes_per_s / 1024:6.1f} KiB/s   (aim <= 15 %)")  # fmt: skip
            return 0
        with demo_host(workspace):
            profile = (workspace / "profiles" / "demo.toml").read_text()
            many = [f"host-{i:02d}" for i in range(1, opts.hosts + 1)]
            for name in many:  # the same demo host under 16 names: 16 sessions, 16 refresh loops
                (workspace / "profiles" / f"{name}.toml").write_text(profile)
            idle = console_in_terminal(workspace, ["demo"], 8.0, opts.seconds)
            sixteen = console_in_terminal(workspace, many, 15.0, opts.seconds)
            latencies, help_open, report, memory = asyncio.run(keys_and_memory(workspace, opts.presses, 360_000))
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    p95 = statistics.quantiles(latencies, n=20)[18]
    report_p95 = statistics.quantiles(report, n=20)[18]
    figures = {
        "idle_cpu_pct_ssh_8_gpus_1hz": round(over_ssh.cpu_pct, 2),
        "idle_terminal_bytes_per_s_ssh_8_gpus": round(over_ssh.bytes_per_s),
        f"cpu_pct_{opts.hosts}_ssh_hosts_1hz": round(sixteen_ssh.cpu_pct, 2),
        f"terminal_bytes_per_s_{opts.hosts}_ssh_hosts": round(sixteen_ssh.bytes_per_s),
        "idle_cpu_pct_demo_8_gpus_1hz": round(idle.cpu_pct, 2),
        "idle_terminal_bytes_per_s_demo_8_gpus": round(idle.bytes_per_s),
        f"cpu_pct_{opts.hosts}_demo_hosts_1hz": round(sixteen.cpu_pct, 2),
        f"terminal_bytes_per_s_{opts.hosts}_demo_hosts": round(sixteen.bytes_per_s),
        "key_to_screen_ms_p50": round(statistics.median(latencies), 1),
        "key_to_screen_ms_p95": round(p95, 1),
        "help_open_ms_median": round(statistics.median(help_open), 1),
        "rule_report_ms_p50": round(statistics.median(report), 1),
        "rule_report_ms_p95": round(report_p95, 1),
        "rss_mib_by_journal_lines": {str(n): round(m, 1) for n, m in memory},
    }
    if opts.json:
        print(json.dumps(figures, indent=2))
        return 0
    print("the console in a 120x40 terminal (CPU of one core; bytes written to the terminal):")
    rows = (
        ("dashboard idle, SSH host with 8 GPUs at 1 Hz", over_ssh, "(aim <= 2 %)"),
        (f"{opts.hosts} SSH hosts at 1 Hz", sixteen_ssh, "(aim <= 15 %)"),
        ("dashboard idle, demo host with 8 GPUs (its server logs every request)", idle, ""),
        (f"{opts.hosts} demo hosts at 1 Hz", sixteen, ""),
    )
    for what, figures_of, aim in rows:
        print(f"  {what:<72} {figures_of.cpu_pct:5.2f} %  {figures_of.bytes_per_s / 1024:6.1f} KiB/s  {aim}")
    print(
        f"key press -> screen updated, journal at 100 lines/s: p50 {statistics.median(latencies):.1f} ms, "
        f"p95 {p95:.1f} ms over {len(latencies)} presses   (aim p95 <= 50 ms)"
    )
    print(f"`?` (a whole screen composed and drawn), same stream: median {statistics.median(help_open):.0f} ms")
    print(
        f"editor, + / - on steps -> rule report on screen: p50 {statistics.median(report):.1f} ms, "
        f"p95 {report_p95:.1f} ms over {len(report)} presses   (aim p95 <= 50 ms)"
    )
    print("resident memory while an hour of journal (360,000 lines) streams in:")
    for lines, mib in memory:
        print(f"  after {lines:>7,} lines: {mib:6.1f} MiB")
    growth = memory[-1][1] - memory[2][1]
    print(f"  growth over the last 240,000 lines: {growth:+.1f} MiB (the journal keeps 5,000 lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
