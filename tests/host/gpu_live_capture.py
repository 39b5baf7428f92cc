"""Run on a real NVIDIA GPU machine: capture console.host.gpu's own poll command and NVML, idle and busy.

    python3 tests/host/gpu_live_capture.py OUTDIR [LOAD_PYTHON]

Writes OUTDIR/live-gpu.json: for "idle" and "busy" (a bf16 matmul loop started with LOAD_PYTHON, which
needs PyTorch), the exact stdout/stderr/exit status of `gpu_poll_argv()` (both nvidia-smi queries on one
channel, as over SSH) and an NVML reading taken right after it with raw pynvml calls. When console/ and
its dependencies import there, also what console's parser and NVML reader returned live.
tests/host/test_gpu_live_replay.py replays the capture through the parser and checks it against NVML.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

LOAD = """
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(int(20e9) // 2, device="cuda", dtype=torch.bfloat16)
while True:
    for _ in range(50):
        c = a @ b
    torch.cuda.synchronize()
"""


def poll_argv() -> list[str]:
    try:
        from console.host.gpu import gpu_poll_argv

        return gpu_poll_argv()
    except ImportError as exc:  # pydantic missing on that machine: same command, written out
        raise SystemExit(f"cannot import console.host.gpu: {exc}") from exc


def nvml_raw() -> list[dict[str, Any]]:
    import pynvml as n

    n.nvmlInit()
    try:
        out = []
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            util = n.nvmlDeviceGetUtilizationRates(h)
            mem = n.nvmlDeviceGetMemoryInfo(h)
            out.append(
                {
                    "index": i,
                    "name": n.nvmlDeviceGetName(h),
                    "uuid": n.nvmlDeviceGetUUID(h),
                    "util_gpu": util.gpu,
                    "mem_total_mib": mem.total // 2**20,
                    "mem_used_mib": mem.used // 2**20,
                    "power_w": n.nvmlDeviceGetPowerUsage(h) / 1000,
                    "power_limit_w": n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000,
                    "temperature_c": n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
                    "sm_clock_mhz": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                    "throttle": n.nvmlDeviceGetCurrentClocksThrottleReasons(h),
                }
            )
        return out
    finally:
        n.nvmlShutdown()


def console_live() -> dict[str, Any]:
    try:
        from console.host.gpu import parse_snapshot, read_nvml

        proc = subprocess.run(poll_argv(), capture_output=True, text=True)
        return {
            "parsed": parse_snapshot(proc.stdout, proc.stderr, proc.returncode).model_dump(),
            "nvml": read_nvml().model_dump(),
        }
    except Exception as exc:
        return {"skipped": repr(exc)}


def capture(state: str) -> dict[str, Any]:
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        proc = subprocess.run(poll_argv(), capture_output=True, text=True)
        wall_ms = (time.perf_counter() - started) * 1000
        samples.append(
            {
                "stdout": proc.stdout,
                "stderr": proc.stderr,
                "exit_status": proc.returncode,
                "poll_ms": round(wall_ms, 1),
                "nvml": nvml_raw(),
            }
        )
        time.sleep(0.5)
    return {"state": state, "samples": samples, "console": console_live()}


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    load_python = sys.argv[2] if len(sys.argv) > 2 else sys.executable
    result = {"idle": capture("idle")}
    load = subprocess.Popen([load_python, "-c", LOAD])
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # busy = NVML sees the matmul loop at full utilization
            if nvml_raw()[0]["util_gpu"] >= 90 and nvml_raw()[0]["mem_used_mib"] > 15000:
                break
            time.sleep(0.2)
        time.sleep(2)  # let power and clocks settle under load
        result["busy"] = capture("busy")
    finally:
        load.kill()
        load.wait()
    (out / "live-gpu.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v["console"] for k, v in result.items()}, indent=1)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
