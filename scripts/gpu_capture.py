"""Capture real GPU telemetry on an NVIDIA host, idle and under a matmul load, for the parser fixtures.

Run on a GPU machine (needs nvidia-smi, nvidia-ml-py and, for the load, PyTorch):

    python3 scripts/gpu_capture.py OUTDIR

It writes, for the states "idle" and "busy":
  STATE-query.csv            nvidia-smi --query-gpu=FIELDS --format=csv
  STATE-query-nounits.csv    the same with --format=csv,noheader,nounits
  STATE-apps.csv             nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
  STATE-apps-nounits.csv     the same with noheader,nounits
  STATE-smi.txt              plain nvidia-smi
and pairs.json: NVML snapshots each taken right after an nvidia-smi --format=csv,noheader,nounits sample,
so a test can check the nvidia-smi parser and the NVML reader against each other on live output.
If console/ is importable (the repo is on sys.path), it also runs opsconsole's own NVML reader and
nvidia-smi parser live and records what they returned (console-check.json).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

QUERY_FIELDS = (
    "index,uuid,name,pci.bus_id,driver_version,pstate,utilization.gpu,utilization.memory,memory.total,"
    "memory.used,memory.free,temperature.gpu,temperature.memory,power.draw,power.limit,clocks.sm,clocks.mem,"
    "clocks.max.sm,pcie.link.gen.current,pcie.link.width.current,fan.speed,"
    "ecc.errors.uncorrected.volatile.total,clocks_throttle_reasons.active"
)
APPS_FIELDS = "pid,process_name,used_memory"

LOAD_PROGRAM = """
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(int(24e9) // 2, device="cuda", dtype=torch.bfloat16)  # ~24 GB resident
end = time.time() + float(__import__("sys").argv[1])
while time.time() < end:
    for _ in range(50):
        c = a @ b
    torch.cuda.synchronize()
"""


def smi(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, check=True).stdout


def nvml_snapshot() -> list[dict[str, Any]]:
    import pynvml

    def attempt(fn: Any, *a: Any) -> Any:
        try:
            return fn(*a)
        except pynvml.NVMLError as error:
            return f"ERR {type(error).__name__}"

    gpus = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        util = attempt(pynvml.nvmlDeviceGetUtilizationRates, h)
        mem = attempt(pynvml.nvmlDeviceGetMemoryInfo, h)
        gpus.append(
            {
                "index": i,
                "name": attempt(pynvml.nvmlDeviceGetName, h),
                "uuid": attempt(pynvml.nvmlDeviceGetUUID, h),
                "util_gpu": getattr(util, "gpu", util),
                "util_mem": getattr(util, "memory", util),
                "mem_total_mib": mem.total // 2**20 if not isinstance(mem, str) else mem,
                "mem_used_mib": mem.used // 2**20 if not isinstance(mem, str) else mem,
                "power_mw": attempt(pynvml.nvmlDeviceGetPowerUsage, h),
                "power_limit_mw": attempt(pynvml.nvmlDeviceGetEnforcedPowerLimit, h),
                "temperature_c": attempt(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
                "sm_clock_mhz": attempt(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
                "mem_clock_mhz": attempt(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM),
                "pstate": attempt(pynvml.nvmlDeviceGetPerformanceState, h),
                "throttle_reasons": attempt(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, h),
                "fan": attempt(pynvml.nvmlDeviceGetFanSpeed, h),
            }
        )
    return gpus


def capture_state(out: Path, state: str) -> None:
    (out / f"{state}-query.csv").write_text(smi(f"--query-gpu={QUERY_FIELDS}", "--format=csv"))
    (out / f"{state}-query-nounits.csv").write_text(
        smi(f"--query-gpu={QUERY_FIELDS}", "--format=csv,noheader,nounits")
    )
    (out / f"{state}-apps.csv").write_text(smi(f"--query-compute-apps={APPS_FIELDS}", "--format=csv"))
    (out / f"{state}-apps-nounits.csv").write_text(
        smi(f"--query-compute-apps={APPS_FIELDS}", "--format=csv,noheader,nounits")
    )
    (out / f"{state}-smi.txt").write_text(smi())


def paired_samples(state: str, count: int) -> list[dict[str, Any]]:
    pairs = []
    for _ in range(count):
        line = smi(f"--query-gpu={QUERY_FIELDS}", "--format=csv,noheader,nounits")
        pairs.append({"state": state, "time": time.time(), "nvidia_smi": line, "nvml": nvml_snapshot()})
        time.sleep(0.3)
    return pairs


def console_check() -> dict[str, Any]:
    """Run opsconsole's own readers live, if the package is importable here."""
    try:
        from console.host import gpu  # type: ignore[import-not-found]
    except Exception as error:  # the capture still works without the repo
        return {"skipped": repr(error)}
    result: dict[str, Any] = {}
    for name in ("read_nvml", "nvml_samples", "sample_nvml"):
        reader = getattr(gpu, name, None)
        if reader is not None:
            try:
                result["nvml"] = [s.model_dump() if hasattr(s, "model_dump") else repr(s) for s in reader()]
            except Exception as error:
                result["nvml_error"] = repr(error)
            break
    return result


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    import pynvml

    pynvml.nvmlInit()
    capture_state(out, "idle")
    pairs = paired_samples("idle", 3)
    idle_check = console_check()

    load = subprocess.Popen([sys.executable, "-c", LOAD_PROGRAM, "45"])
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            snapshot = nvml_snapshot()[0]
            if isinstance(snapshot["util_gpu"], int) and snapshot["util_gpu"] >= 95 and snapshot["mem_used_mib"] > 20000:
                break
            time.sleep(0.2)
        time.sleep(2.0)  # let power and clocks settle under load
        capture_state(out, "busy")
        pairs += paired_samples("busy", 8)
        busy_check = console_check()
    finally:
        load.terminate()
        load.wait(timeout=30)
    (out / "pairs.json").write_text(json.dumps(pairs, indent=1))
    (out / "console-check.json").write_text(json.dumps({"idle": idle_check, "busy": busy_check}, indent=1))
    print(smi("-L"))
    print(json.dumps(pairs[-1]["nvml"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
