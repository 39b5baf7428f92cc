"""The console over a long link: a testbed GPU host (real systemd + sshd, the SGLang stand-in) reached directly and
through a ProxyCommand that adds 150 ms each way (tests/support/delayproxy.py: a 300 ms round trip, no loss).

Figures, each for the plain link and the 300 ms one, the two runs alternating:
- `bench TARGET --concurrency 8 --requests 32 --input-len 128 --output-len 64`: output tok/s and mean TTFT with the
  load generated here through the forward (`--client console`) and on the host (`--client host`; `auto` picks it);
- `status TARGET --json` one-shot (connect included): refresh_ms and the command's wall time;
- a steady refresh on an open session: round trips (console.host.linkmeter) and wall time;
- `apply TARGET --set speculative-num-steps=3 --set speculative-num-draft-tokens=4 --yes`: wall time, the server's
  own start (restart to healthy, from the apply's history) and, in-process, the round trips outside that start.
With `--baseline DIR` (a checkout of the code before, e.g. `git worktree add --detach /tmp/base 8ba976c`), the
one-shot status, bench through the forward and apply are also run with that code, side by side.
`--apply-only`: only the apply, `--rounds` times for each code on each link, the codes alternating (which goes first
changes every round), and its overhead over the long link in round trips: (wall over 300 ms − wall plain) / the
link's round trip, the medians of each; with the in-process count of round trips outside the server's start.

Needs root (the testbed). Usage: .venv/bin/python benchmarks/long_link.py [--rounds 3] [--baseline DIR] [--apply-only]
[--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH = ["--concurrency", "8", "--requests", "32", "--input-len", "128", "--output-len", "64", "--json"]
APPLY = ["--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4", "--yes", "--json"]


def cli(host: Any, code: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess[str], float]:
    """`opsconsole ARGS` run with the code in `code` (this checkout or the baseline), timed."""
    runner = f"import sys; sys.path.insert(0, {str(code)!r}); from console.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", runner, "--workspace", str(host.workspace), *args]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=host.client_env(), cwd=host.home, timeout=timeout)
    return done, time.monotonic() - started


def bench(host: Any, code: Path, target: str, client: str | None) -> dict[str, float]:
    args = ["bench", target, *BENCH] + (["--client", client] if client else [])
    done, _ = cli(host, code, *args)
    if done.returncode != 0:
        raise SystemExit(f"bench {target} failed: {done.stderr[-2000:]}")
    (record,) = json.loads(done.stdout)
    return {"tok_s": record["output_throughput"], "ttft_ms": record["mean_ttft_ms"], "failed": record["failed"]}


def status(host: Any, code: Path, target: str) -> dict[str, float]:
    done, wall = cli(host, code, "status", target, "--json")
    data = json.loads(done.stdout)
    return {"refresh_ms": data["refresh_ms"], "wall_s": wall}


def apply(host: Any, code: Path, target: str) -> dict[str, float]:
    done, wall = cli(host, code, "apply", target, *APPLY, "--timeout", "120")
    result = json.loads(done.stdout)
    if not result["ok"]:
        raise SystemExit(f"apply {target} failed: {result['error']}")
    at = {t["state"]: datetime.fromisoformat(t["at"]) for t in result["history"]}
    start_s = (at["healthy"] - at["restarting"]).total_seconds()
    host.restore()
    return {"wall_s": wall, "server_start_s": start_s}


async def in_process_round_trips(host: Any, target: str) -> dict[str, float]:
    """Round trips of a steady refresh and of an apply (outside the server's start), counted by the meter."""
    from console.core.apply import edits_by_version, plan_apply
    from console.core.change import ApplyState
    from console.core.events import ApplyEvent, StepChanged
    from console.core.session import open_session
    from console.core.status import read_status
    from console.host.ssh import SshTransport
    from console.workspace import Workspace

    async with open_session(target, Workspace(host.workspace), ssh_config=str(host.ssh_config)) as session:
        transport = session.host.transport
        assert isinstance(transport, SshTransport)
        meter = transport.meter
        await read_status(session)
        depths, walls = [], []
        for _ in range(5):
            before, started = meter.reading(), time.monotonic()
            await read_status(session, light=True)
            walls.append(time.monotonic() - started)
            depths.append((meter.reading() - before).depth)
        marks: dict[str, Any] = {}

        def on_event(event: ApplyEvent) -> None:
            if isinstance(event, StepChanged) and event.state in (ApplyState.STARTING, ApplyState.HEALTHY):
                marks[event.state.value] = meter.reading()

        start = meter.reading()
        edits = edits_by_version(["speculative-num-steps=3", "speculative-num-draft-tokens=4"])  # as the CLI does
        async with await plan_apply(session, edits, timeout_s=120) as pending:
            result = await pending.execute(on_event=on_event)
        end = meter.reading()
    host.restore()
    if not result.ok:
        raise SystemExit(f"apply in process failed: {result.error}")
    outside = (marks["starting"] - start).depth + (end - marks["healthy"]).depth
    return {"refresh_round_trips": max(depths), "refresh_ms": statistics.median(walls) * 1000, "apply_outside": outside}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a checkout of the code before, run side by side")
    parser.add_argument("--apply-only", action="store_true", help="only the apply, its overhead in round trips")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    from console.sim.plugin import register

    register()  # a composition root: the demo host's transport and the stand-in's units (console/sim/plugin.py)
    if opts.apply_only:
        return apply_only(opts.rounds, opts.baseline, opts.json)
    from tests.support.farlink import add_far_alias
    from tests.testbed.host import GpuHost

    host = GpuHost.boot("gpu1")
    rows: dict[str, list[dict[str, float]]] = {}

    def add(name: str, figures: dict[str, float]) -> None:
        rows.setdefault(name, []).append(figures)

    try:
        near, far = host.alias, add_far_alias(host, delay_ms=150)
        codes = {"now": ROOT} | ({"before": opts.baseline.resolve()} if opts.baseline else {})
        for _ in range(opts.rounds):
            for link, target in (("plain", near), ("300 ms", far)):
                add(f"bench console {link}", bench(host, ROOT, target, "console"))
                add(f"bench host {link}", bench(host, ROOT, target, "host"))
                for who, code in codes.items():
                    add(f"status {link} {who}", status(host, code, target))
                    if who == "before":
                        add(f"bench console {link} before", bench(host, code, target, None))
        for link, target in (("plain", near), ("300 ms", far)):
            for who, code in codes.items():
                add(f"apply {link} {who}", apply(host, code, target))
            add(f"round trips {link}", asyncio.run(in_process_round_trips(host, target)))
    finally:
        host.teardown()
    summary = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in rows.items()}
    if opts.json:
        print(json.dumps(summary, indent=2))
        return 0
    for name, figures in summary.items():
        shown = "  ".join(f"{k} {v:,.1f}" for k, v in figures.items())
        print(f"{name:<28} {shown}   (median of {len(rows[name])})")
    plain, far_host = summary["bench console plain"], summary["bench host 300 ms"]
    far_console = summary["bench console 300 ms"]
    print(
        f"\nbench over 300 ms vs plain: on the host {far_host['tok_s'] / plain['tok_s'] - 1:+.1%} tok/s, "
        f"through the forward {far_console['tok_s'] / plain['tok_s'] - 1:+.1%} tok/s "
        f"(TTFT {plain['ttft_ms']:.0f} -> {far_host['ttft_ms']:.0f} / {far_console['ttft_ms']:.0f} ms)"
    )
    return 0


def apply_only(rounds: int, baseline: Path | None, as_json: bool) -> int:
    from tests.support.farlink import add_far_alias
    from tests.testbed.host import GpuHost

    host = GpuHost.boot("gpu1")
    walls: dict[str, list[float]] = {}
    try:
        near, far = host.alias, add_far_alias(host, delay_ms=150)
        rtt = asyncio.run(_round_trip(host, far))
        codes = [("now", ROOT)] + ([("before", baseline.resolve())] if baseline else [])
        for turn in range(rounds):
            for who, code in codes if turn % 2 == 0 else codes[::-1]:
                for link, target in (("plain", near), ("300 ms", far)):
                    walls.setdefault(f"{who} {link}", []).append(apply(host, code, target)["wall_s"])
        counted = asyncio.run(in_process_round_trips(host, far))["apply_outside"]
    finally:
        host.teardown()
    summary: dict[str, float] = {name: statistics.median(values) for name, values in walls.items()}
    for who, _code in codes:
        summary[f"{who} overhead round trips"] = (summary[f"{who} 300 ms"] - summary[f"{who} plain"]) / rtt
    summary["round trip s"] = rtt
    summary["now: round trips outside the server's start, counted"] = counted
    if as_json:
        print(json.dumps({"summary": summary, "walls": walls}, indent=2))
        return 0
    for name, values in walls.items():
        print(f"apply {name:<16} median {statistics.median(values):5.2f} s   ({', '.join(f'{v:.2f}' for v in values)})")
    for who, _code in codes:
        print(f"{who}: {summary[f'{who} overhead round trips']:.1f} round trips of overhead over {rtt * 1000:.0f} ms")
    print(f"now: {counted:.0f} round trips outside the server's start (counted in process, + at most 2 to notice it)")
    return 0


async def _round_trip(host: Any, target: str) -> float:
    """The long link's round trip as a ping of the command shell measures it (the median of 5)."""
    from console.core.session import open_session
    from console.workspace import Workspace

    async with open_session(target, Workspace(host.workspace), ssh_config=str(host.ssh_config)) as session:
        measured = await session.measure_round_trip(5)
    assert measured is not None
    return measured


if __name__ == "__main__":
    sys.exit(main())
