"""A rolling apply behind smg 1.13 against the same roll behind sglang-router 0.3.2, side by side on the same three
testbed hosts (real systemd + sshd, the stand-in as sglang.service; needs root), under load with both routers'
retries off, as the issue measured them (21.0 s behind smg against 6.3 s behind sglang-router, #44).

Both routers stand in front of the same three hosts, each named by a group of its own; each run rolls a change
(`apply @GROUP --rolling`, alternating speculative-num-steps 2/3 and 3/4) behind one router, then behind the other
(which goes first alternates), while 4 threads send requests through that router. Printed: each roll's seconds,
requests sent and failed; the medians and their ratio (smg / sglang-router); where a roll's time goes per host,
from its report's router steps (removed, drained, added: each line says how long it took) and the rest (the host's
own apply: write, restart, health, verify).

`--before REV` also rolls behind smg with the console of that git revision (its `console/` from `git archive`, run
with this venv), e.g. `--before main`: the time before the roll took smg's drain settle out.

    .venv/bin/python benchmarks/roll_behind_routers.py [--runs 3] [--before main]
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.cli import OPSCONSOLE  # noqa: E402
from tests.e2e.test_rolling import WORKER_UNIT, worker_url  # noqa: E402
from tests.support.cli_run import run_cli  # noqa: E402
from tests.support.routers import KINDS, Load, RouterKind, RouterProcess, start_router, wait_until  # noqa: E402
from tests.testbed import cache, resources  # noqa: E402
from tests.testbed.host import GpuHost  # noqa: E402

ALIASES = ("rb1", "rb2", "rb3")
GROUPS: dict[RouterKind, str] = {"sglang-router": "via-sgr", "smg": "via-smg"}
STEPS = {0: ("2", "3"), 1: ("3", "4")}  # speculative-num-steps, -draft-tokens: each roll changes every host
STEP_NAMES = ("removed", "drained", "added", "apply")
_TOOK = re.compile(r"^(removed|drained|added): .* in ([0-9.]+) s$")


class Bench:
    def __init__(self, hosts: list[GpuHost], temp: Path, routers: dict[RouterKind, RouterProcess]) -> None:
        self.hosts, self.temp, self.routers = hosts, temp, routers
        self.home, self.workspace = temp / "home", temp / "workspace"
        self.rolls = 1  # the hosts boot with 2/3: the first roll sets 3/4

    def env(self) -> dict[str, str]:
        env = self.hosts[0].client_env()
        env["HOME"] = str(self.home)
        env["OPSCONSOLE_WORKSPACE"] = str(self.workspace)
        return env

    def roll(self, kind: RouterKind, console: Path | None = None) -> dict[str, Any]:
        """One rolling apply behind `kind` under load: its seconds, requests, failures, per-host step seconds."""
        steps, drafts = STEPS[self.rolls % 2]
        self.rolls += 1
        args = ["--workspace", str(self.workspace), "apply", f"@{GROUPS[kind]}", "--rolling", "--set",
                f"speculative-num-steps={steps}", "--set", f"speculative-num-draft-tokens={drafts}", "--yes", "--json",
                "--timeout", "120"]  # fmt: skip
        argv = [str(OPSCONSOLE), *args] if console is None else [sys.executable, "-m", "console", *args]
        router = self.routers[kind]
        wait_until(lambda: router.routable() == sorted(worker_url(h) for h in self.hosts), 60, f"{kind}: all ready")
        with Load(router.url) as load:
            load.wait_for(20)
            sent_before = load.sent
            started = time.monotonic()
            done = run_cli(argv, timeout=300, env=self.env(), cwd=console or self.home)
            seconds = time.monotonic() - started
            during, failed = load.sent - sent_before, list(load.failed)
        if done.returncode != 0:
            raise SystemExit(f"the roll behind {kind} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        report = json.loads(done.stdout)
        outcomes = {h["host"]: h["outcome"] for h in report["hosts"]}
        if set(outcomes.values()) != {"done"}:
            raise SystemExit(f"the roll behind {kind} did not change every host: {outcomes}")
        steps_s: dict[str, list[float]] = {step: [] for step in STEP_NAMES}
        for host in report["hosts"]:
            took = {m.group(1): float(m.group(2)) for line in host["router"] if (m := _TOOK.match(line))}
            for step, value in took.items():
                steps_s[step].append(value)
            if host.get("seconds") is not None and len(took) == 3:
                steps_s["apply"].append(host["seconds"] - sum(took.values()))
        return {"seconds": seconds, "during": during, "failed": failed, "steps": steps_s}


def setup(temp: Path) -> Bench:
    hosts = [GpuHost.boot(alias, unit_text=WORKER_UNIT) for alias in ALIASES]
    urls = [worker_url(h) for h in hosts]
    routers = {kind: start_router(kind, urls, log_dir=temp) for kind in KINDS}
    bench = Bench(hosts, temp, routers)
    (bench.home / ".ssh").mkdir(parents=True, mode=0o700)
    (bench.home / ".ssh" / "config").write_text("".join(h.ssh_config.read_text() for h in hosts))
    (bench.workspace / "profiles").mkdir(parents=True)
    (bench.workspace / "logs").mkdir()
    for host in hosts:
        profile = (host.workspace / "profiles" / f"{host.alias}.toml").read_text()
        (bench.workspace / "profiles" / f"{host.alias}.toml").write_text(profile)
    members = json.dumps(list(ALIASES))
    groups = [f'[{GROUPS[kind]}]\nmembers = {members}\nrouter = "{routers[kind].url}"\n' for kind in KINDS]
    (bench.workspace / "profiles" / "groups.toml").write_text("".join(groups))
    return bench


def console_of(revision: str, temp: Path) -> Path:
    """`console/` of a git revision, unpacked where `python -m console` finds it before this checkout's."""
    where = temp / f"console-{re.sub(r'[^A-Za-z0-9._-]', '_', revision)}"
    where.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "console"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(where)  # our own repository's files
    return where


def line(label: str, roll: dict[str, Any]) -> str:
    failed = roll["failed"]
    first = f"; first: {failed[0][:100]}" if failed else ""
    return f"  {label:28s} {roll['seconds']:5.1f} s, {len(failed)} of {roll['during']} requests failed{first}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="also roll behind smg with the console of this git revision (e.g. main)")
    args = parser.parse_args()
    resources.cleanup_leftovers()
    cache.ensure_tree()
    cache.ensure_site()
    temp = Path(tempfile.mkdtemp(prefix="opsconsole-roll-bench-"))
    bench: Bench | None = None
    results: dict[str, list[dict[str, Any]]] = {"sglang-router": [], "smg": [], "before": []}
    try:
        bench = setup(temp)
        for router in bench.routers.values():
            wait_until(lambda r=router: r.routable() == sorted(worker_url(h) for h in bench.hosts), 60, "routers")  # type: ignore[misc]
        before = console_of(args.before, temp) if args.before else None
        for run in range(args.runs):
            print(f"run {run + 1}:")
            order = KINDS if run % 2 == 0 else tuple(reversed(KINDS))
            for kind in order:
                results[kind].append(bench.roll(kind))
                print(line(f"behind {kind}", results[kind][-1]), flush=True)
            if before is not None:
                results["before"].append(bench.roll("smg", console=before))
                print(line(f"behind smg, console {args.before}", results["before"][-1]), flush=True)
    finally:
        if bench is not None:
            for router in bench.routers.values():
                router.stop()
            for host in bench.hosts:
                host.teardown()
        shutil.rmtree(temp, ignore_errors=True)
    medians = {k: statistics.median(r["seconds"] for r in v) for k, v in results.items() if v}
    print(f"\nmedians of {args.runs} rolls over 3 hosts under load (retries off):")
    for kind, rolls in results.items():
        if rolls:
            failed = sum(len(r["failed"]) for r in rolls)
            sent = sum(r["during"] for r in rolls)
            label = f"behind smg, console {args.before}" if kind == "before" else f"behind {kind}"
            spread = f"min {min(r['seconds'] for r in rolls):.1f}, max {max(r['seconds'] for r in rolls):.1f}"
            print(f"  {label:28s} {medians[kind]:5.1f} s ({spread}); {failed} of {sent} requests failed")
    ratio = medians["smg"] / medians["sglang-router"]
    print(f"  smg / sglang-router: {ratio:.2f}x" + (
        f"; before ({args.before}) / sglang-router: {medians['before'] / medians['sglang-router']:.2f}x"
        if "before" in medians else ""))  # fmt: skip
    print("\nwhere a host's time goes (median seconds per host: router steps from the report, the rest its apply):")
    for kind in KINDS:
        steps = {step: [v for r in results[kind] for v in r["steps"][step]] for step in STEP_NAMES}
        cells = ", ".join(f"{step} {statistics.median(vals):.2f}" for step, vals in steps.items() if vals)
        print(f"  behind {kind:14s} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
