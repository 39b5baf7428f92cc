"""What the SSH port forward costs a benchmark: the same sweep at C = 64 from the console (through the
forward on the SSH connection) and from the GPU host itself (straight to 127.0.0.1), on the nspawn testbed
(real sshd, real systemd, the simulator as sglang.service). Alternates the two, twice each, and prints
output throughput and mean TTFT with the forward's cost in %.

Run (root, testbed tools installed): .venv/bin/python benchmarks/bench_forward_cost.py [--requests 128]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.e2e.cli import opsconsole  # noqa: E402
from tests.testbed import cache  # noqa: E402
from tests.testbed.host import GpuHost  # noqa: E402

CONCURRENCY = 64
ON_HOST_PYTHONPATH = "PYTHONPATH=/opt/opsconsole:/opt/opsconsole-site"


def sweep_args(requests: int, output_len: int) -> list[str]:
    return ["--concurrency", str(CONCURRENCY), "--requests", str(requests), "--input-len", "256",
            "--output-len", str(output_len), "--warmup", "4", "--json"]  # fmt: skip


def through_forward(host: GpuHost, requests: int, output_len: int) -> dict[str, float]:
    done = opsconsole(host, "bench", host.name, *sweep_args(requests, output_len), "--label", "forward", timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout)[0]  # type: ignore[no-any-return]


def on_host(host: GpuHost, requests: int, output_len: int) -> dict[str, float]:
    url = f"http://127.0.0.1:{host.sglang_port}"
    argv = ["env", ON_HOST_PYTHONPATH, "python3", "-m", "console.cli", "--workspace", "/tmp/bench-ws", "bench",
            "--url", url, *sweep_args(requests, output_len), "--label", "on-host"]  # fmt: skip
    done = host.root_run(argv, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout)[0]  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cache.ensure_tree()
    cache.ensure_site()
    host = GpuHost.boot("benchfwd")
    try:
        fwd: list[dict[str, float]] = []
        direct: list[dict[str, float]] = []
        for _ in range(args.rounds):
            fwd.append(through_forward(host, args.requests, args.output_len))
            direct.append(on_host(host, args.requests, args.output_len))
        for name, runs in (("through the SSH forward", fwd), ("on the host, direct", direct)):
            tput = [r["output_throughput"] for r in runs]
            ttft = [r["mean_ttft_ms"] for r in runs]
            print(f"{name:<24}: output {statistics.median(tput):8.1f} tok/s {tput}  mean TTFT "
                  f"{statistics.median(ttft):7.1f} ms {[round(t, 1) for t in ttft]}")  # fmt: skip
        cost = 1 - statistics.median(r["output_throughput"] for r in fwd) / statistics.median(
            r["output_throughput"] for r in direct
        )
        ttft_cost = statistics.median(r["mean_ttft_ms"] for r in fwd) - statistics.median(
            r["mean_ttft_ms"] for r in direct
        )
        print(f"forward cost at C={CONCURRENCY}: {cost:+.1%} throughput, {ttft_cost:+.1f} ms mean TTFT")
        print(json.dumps({"forward_throughput_cost": cost, "forward_ttft_cost_ms": ttft_cost}))
    except subprocess.TimeoutExpired as exc:
        print(f"timed out: {exc}")
    finally:
        host.teardown()


if __name__ == "__main__":
    main()
