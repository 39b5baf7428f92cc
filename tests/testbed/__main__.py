"""Start and stop testbed GPU hosts by hand, and measure them.

scripts/testbed up [--alias gpu1] [--untrusted] [--trivial] [--persistent]   # boot, print how to reach it, wait for ^C
scripts/testbed build [--cold]                                # the cached tree (--cold: from scratch, timed)
scripts/testbed measure [--runs N]                            # boot-to-ssh, to-healthy and teardown times
scripts/testbed cleanup                                       # remove hosts left by crashed runs
"""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from tests.testbed import cache, recipe, resources
from tests.testbed.host import TRIVIAL_EXEC_START, GpuHost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/testbed", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="boot a host and keep it until ^C")
    up.add_argument("--alias", default="gpu1", help="ssh_config alias and profile name (default gpu1)")
    up.add_argument("--untrusted", action="store_true", help="leave known_hosts empty (unknown host key)")
    up.add_argument("--trivial", action="store_true", help="a trivial HTTP server instead of the simulator")
    up.add_argument("--persistent", action="store_true", help="a disk of its own that survives a halt")
    build = sub.add_parser("build", help="build (or find) the cached tree and site packages")
    build.add_argument("--cold", action="store_true", help="build from scratch in a temp cache and time it")
    measure = sub.add_parser("measure", help="time boot and teardown")
    measure.add_argument("--runs", type=int, default=3)
    measure.add_argument("--trivial", action="store_true", help="a trivial HTTP server instead of the simulator")
    sub.add_parser("cleanup", help="remove hosts of crashed runs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "cleanup":
        print("removed:", ", ".join(resources.cleanup_leftovers()) or "nothing")
        return 0
    if args.command == "build":
        return _build(cold=args.cold)
    unit = recipe.sglang_unit(TRIVIAL_EXEC_START, description="trivial") if args.trivial else None
    if args.command == "measure":
        return _measure(args.runs, unit)
    return _up(args.alias, unit, trusted=not args.untrusted, persistent=args.persistent)


def _build(*, cold: bool) -> int:
    if not cold:
        for report in (cache.ensure_tree(), cache.ensure_site()):
            print(f"{report.path}: " + (f"built in {report.seconds:.1f} s" if report.built else "cached"))
        return 0
    with tempfile.TemporaryDirectory(prefix="opsconsole-testbed-cold-", dir="/var/tmp") as root:
        tree = cache.ensure_tree(Path(root))
        site = cache.ensure_site(Path(root))
        print(f"cold tree build: {tree.seconds:.1f} s; site packages: {site.seconds:.1f} s")
    return 0


def _measure(runs: int, unit: str | None) -> int:
    resources.cleanup_leftovers()
    cache.ensure_tree()
    cache.ensure_site()
    to_ssh, to_running, to_healthy, down = [], [], [], []
    for _ in range(runs):
        host = GpuHost.boot("gpu1", unit_text=unit)
        assert host.timings is not None
        to_ssh.append(host.timings.to_ssh_s)
        to_running.append(host.timings.to_system_running_s)
        to_healthy.append(host.timings.to_service_healthy_s)
        down.append(host.teardown())
    for label, values in [("boot -> sshd banner", to_ssh), ("boot -> system running", to_running),
                          ("boot -> sglang /health 200", to_healthy), ("teardown", down)]:  # fmt: skip
        print(f"{label:28s} median {statistics.median(values):.2f} s  (min {min(values):.2f}, max {max(values):.2f})")
    return 0


def _up(alias: str, unit: str | None, *, trusted: bool, persistent: bool = False) -> int:
    resources.cleanup_leftovers()
    host = GpuHost.boot(alias, unit_text=unit, trusted=trusted, persistent=persistent)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        env = f"HOME={shlex.quote(str(host.home))}"
        print(f"\n{alias} is up: {host.machine} at {host.address} (boot {host.timings})")
        print(f"  ssh:        {env} ssh {alias}")
        print(f"  opsconsole: {env} opsconsole --workspace {host.workspace} status {alias}")
        print(f"  as root:    nsenter --target {host.leader_pid()} --mount --uts --ipc --net --pid")
        print("^C to tear it down")
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    finally:
        print(f"teardown: {host.teardown():.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
