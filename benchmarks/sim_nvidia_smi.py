"""The demo's nvidia-smi stand-in: CPU and wall time of one poll's process (`python -m console.sim.nvidia_smi`).

The console polls the GPUs at every refresh with two nvidia-smi calls (the GPUs, then their processes); on the demo
host each is a Python process, and the suite's demo hosts start about 1,700 of them in one run. This runs the
console's own query against a state file the simulator wrote, N times, and with `--against DIR` alternates with
the same command in another checkout (a `git worktree` of an older commit), so that machine noise hits both alike.
Reports the medians and the ratio. Usage:

    .venv/bin/python benchmarks/sim_nvidia_smi.py [--runs 40] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.host.gpu import QUERY_FIELDS  # noqa: E402  (the console's own poll)
from console.sim.gpus import idle_gpus, write_state  # noqa: E402
from console.sim.profiles import DEFAULT_PROFILE, get_profile  # noqa: E402


def one_call(checkout: Path, state: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one stand-in process run from `checkout`."""
    argv = [sys.executable, "-m", "console.sim.nvidia_smi", "--sim-state-dir", str(state)]
    argv += [f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}  # as make runs it
    done = subprocess.run(argv, cwd=checkout, env={**env, "PYTHONPATH": str(checkout)}, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not done.stdout:
        raise SystemExit(f"{checkout}: the stand-in failed: {done.stderr.decode()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--against", type=Path, help="another checkout, run alternately with this one")
    args = parser.parse_args()
    checkouts = {"this": ROOT} | ({"against": args.against.resolve()} if args.against else {})
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        profile = get_profile(DEFAULT_PROFILE)
        write_state(state, pid=os.getpid(), profile=profile.name, gpus=idle_gpus(profile.gpu, 8, profile.name))
        for checkout in checkouts.values():
            one_call(checkout, state)  # compiled once, as every later poll finds it
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in checkouts}
        for _ in range(args.runs):
            for name, checkout in checkouts.items():
                figures[name].append(one_call(checkout, state))
    medians = {}
    for name, runs in figures.items():
        wall = statistics.median(w for w, _ in runs) * 1000
        cpu = statistics.median(c for _, c in runs) * 1000
        medians[name] = (wall, cpu)
        print(f"{name:>8} ({checkouts[name]}): median {wall:.1f} ms wall, {cpu:.1f} ms CPU per poll process")
    if "against" in medians:
        wall_ratio = medians["this"][0] / medians["against"][0]
        cpu_ratio = medians["this"][1] / medians["against"][1]
        print(f"   ratio this/against: wall {wall_ratio:.2f}x, CPU {cpu_ratio:.2f}x")


if __name__ == "__main__":
    main()
