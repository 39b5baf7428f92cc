"""Freeze, restore and a reboot on a testbed GPU host (real sshd + systemd, persistent disk; needs root).

Times, with the real CLI as a subprocess: `freeze --yes --json` (plan under the lock: unit, /proc, /server_info,
GPUs and driver, the logs; then document, enable, verification, snapshot) of a setup an apply made, `restore` of
the snapshot taken before (a validated apply that changes two flags: write, restart, wait for health, verify),
and a clean halt + boot of the host until the restored service answers /health by itself. Prints each run and
the medians. Usage:

    .venv/bin/python benchmarks/freeze_testbed.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.cli import json_output, opsconsole  # noqa: E402
from tests.testbed import cache, resources  # noqa: E402
from tests.testbed.host import GpuHost  # noqa: E402


def timed(host: GpuHost, *args: str) -> tuple[float, dict[str, object]]:
    started = time.monotonic()
    done = opsconsole(host, *args)
    seconds = time.monotonic() - started
    result = json_output(done)
    assert done.returncode == 0, (args, done.stderr)
    return seconds, result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    resources.cleanup_leftovers()
    cache.ensure_tree()
    cache.ensure_site()
    host = GpuHost.boot("gpu5", persistent=True)
    freezes, restores, reboots = [], [], []
    try:
        timed(host, "freeze", host.name, "--name", "base", "--yes", "--json")  # steps 2, as the host booted
        for run in range(args.runs):
            steps = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
            timed(host, "apply", host.name, *steps, "--yes", "--json", "--timeout", "120")
            seconds, _ = timed(host, "freeze", host.name, "--name", f"f{run}", "--yes", "--json")
            freezes.append(seconds)
            seconds, result = timed(host, "restore", host.name, "base", "--yes", "--json", "--timeout", "120")
            assert result["state"] == "verified", result
            restores.append(seconds)
            started = time.monotonic()
            host.reboot()
            host.wait_healthy(timeout=60)
            reboots.append(time.monotonic() - started)
            print(f"run {run + 1}: freeze {freezes[-1]:.2f} s, restore {restores[-1]:.2f} s, "
                  f"halt + boot until healthy by itself {reboots[-1]:.2f} s")  # fmt: skip
    finally:
        host.teardown()
    for label, values in (("freeze", freezes), ("restore", restores), ("halt + boot -> healthy", reboots)):
        print(f"{label:24s} median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
