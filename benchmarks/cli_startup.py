"""Whole-process wall time of `opsconsole check-args ...` next to `python -c pass`.

Also `check-args --unit` on the demo's unit (the SGLang stand-in as launcher: the simulator's registration
runs on that path).

Runs each command N times alternately (so machine noise hits both alike), reports the median and the ratio,
and checks that check-args stays off textual, asyncssh, httpx, pydantic and rich. Usage:

    .venv/bin/python benchmarks/cli_startup.py [--runs 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECK_ARGS = [
    "check-args",
    "--sglang-version",
    "0.5.9",
    "--env",
    "SGLANG_ENABLE_SPEC_V2=1",
    "--",
    "--model-path",
    "Qwen/Qwen3-8B",
    "--speculative-algorithm",
    "EAGLE",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "2",
    "--speculative-num-draft-tokens",
    "6",
]


def opsconsole_command() -> list[str]:
    script = Path(sys.executable).parent / "opsconsole"
    if script.exists():
        return [str(script)]
    found = shutil.which("opsconsole")
    return [found] if found else [sys.executable, "-m", "console"]


def demo_unit() -> str:
    from console.sim.demo import unit_text

    return unit_text(
        python=sys.executable, port=30000, profile="tiny-test", time_scale=0.02, state_dir=ROOT, workdir=ROOT
    )


def wall_time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, check=False)
    return time.perf_counter() - start


def heavy_imports(argv: list[str]) -> list[str]:
    """Top-level packages among textual/asyncssh/httpx/pydantic/rich that `python -m console ARGV` imports."""
    command = [sys.executable, "-X", "importtime", "-m", "console", *argv]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    modules = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in result.stderr.splitlines()[1:]}
    return sorted(modules & {"textual", "asyncssh", "httpx", "pydantic", "rich"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    check = [*opsconsole_command(), *CHECK_ARGS]
    baseline = [sys.executable, "-c", "pass"]
    help_cmd = [*opsconsole_command(), "--help"]
    wall_time(check), wall_time(baseline)  # warm the file cache
    unit_file = Path(tempfile.mkdtemp(prefix="cli-startup-")) / "sglang-demo.service"
    unit_file.write_text(demo_unit())
    unit_args = ["check-args", "--unit", str(unit_file)]
    check_unit = [*opsconsole_command(), *unit_args]
    times: dict[str, list[float]] = {
        "python -c pass": [],
        "opsconsole check-args": [],
        "check-args --unit (demo)": [],
        "opsconsole --help": [],
    }
    for _ in range(args.runs):
        times["python -c pass"].append(wall_time(baseline))
        times["opsconsole check-args"].append(wall_time(check))
        times["check-args --unit (demo)"].append(wall_time(check_unit))
        times["opsconsole --help"].append(wall_time(help_cmd))
    medians = {name: statistics.median(values) * 1000 for name, values in times.items()}
    result = {
        "runs": args.runs,
        "median_ms": {k: round(v, 1) for k, v in medians.items()},
        "ratio_check_args_to_python": round(medians["opsconsole check-args"] / medians["python -c pass"], 2),
        "heavy_imports_in_check_args": heavy_imports(CHECK_ARGS),
        "heavy_imports_in_check_args_unit": heavy_imports(unit_args),
    }
    unit_file.unlink()
    unit_file.parent.rmdir()
    if args.json:
        print(json.dumps(result))
    else:
        print(f"whole-process wall time, median of {args.runs} runs")
        for name, value in medians.items():
            print(f"  {name:<24} {value:7.1f} ms")
        print(f"  check-args / python -c pass: {result['ratio_check_args_to_python']}x")
        print(f"  heavy packages imported by check-args: {result['heavy_imports_in_check_args'] or 'none'}")
        print(f"  ... by check-args --unit (demo): {result['heavy_imports_in_check_args_unit'] or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
