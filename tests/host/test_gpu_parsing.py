"""nvidia-smi CSV parsing against real H200 captures, and the NA/driver-error cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.host.gpu import (
    APPS_SEPARATOR,
    clean_value,
    decode_throttle_reasons,
    gpu_poll_argv,
    parse_compute_apps,
    parse_query_gpu,
    parse_snapshot,
)

HERE = Path(__file__).parent
LIVE = HERE.parent / "fixtures" / "gpu" / "h200-live"
# The field list the captures were made with (fixtures/gpu README).
CAPTURE_QUERY = (
    "index,uuid,name,pci.bus_id,driver_version,pstate,utilization.gpu,utilization.memory,memory.total,"
    "memory.used,memory.free,temperature.gpu,temperature.memory,power.draw,power.limit,clocks.sm,clocks.mem,"
    "clocks.max.sm,pcie.link.gen.current,pcie.link.width.current,fan.speed,"
    "ecc.errors.uncorrected.volatile.total,clocks_throttle_reasons.active"
)
CAPTURE_FIELDS = CAPTURE_QUERY.split(",")


def test_busy_h200_nounits_line() -> None:
    samples, problems = parse_query_gpu((LIVE / "busy-query-nounits.csv").read_text(), CAPTURE_FIELDS)
    assert problems == []
    (gpu,) = samples
    assert gpu.index == 0 and gpu.name == "NVIDIA H200"
    assert gpu.uuid == "GPU-bc85baf0-ecd5-5da4-fbbb-2762b72465a0"
    assert (gpu.utilization_gpu, gpu.memory_used_mib, gpu.memory_total_mib) == (100, 24029, 143771)
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.temperature_gpu) == (692.56, 700.0, 60)
    assert (gpu.clocks_sm_mhz, gpu.clocks_mem_mhz, gpu.pstate) == (1485, 3201, "P0")
    assert gpu.throttle_reasons == ["sw_power_cap"]


def test_idle_with_units_and_header_lines() -> None:
    text = (HERE / "fixtures" / "h200-query-idle.csv").read_text()
    samples, problems = parse_query_gpu(text, CAPTURE_FIELDS)
    assert len(problems) == 1 and problems[0].startswith("index")  # the header is reported, not parsed
    units, nounits = samples
    assert units.model_dump() == nounits.model_dump() | {"power_draw_w": 126.59}
    assert units.utilization_gpu == 0 and units.memory_total_mib == 143771 and units.clocks_sm_mhz == 1980
    assert units.throttle_reasons == ["gpu_idle"]


def test_compute_apps_skip_the_header() -> None:
    text = (HERE / "fixtures" / "h200-busy-query-apps-smi.txt").read_text().split("+---")[0]
    apps = parse_compute_apps(text, ("pid", "process_name", "used_memory"))
    assert [(p.pid, p.process_name, p.used_memory_mib) for p in apps] == [(429, "python3", 31722)]
    live = parse_compute_apps((LIVE / "busy-apps-nounits.csv").read_text(), ("pid", "process_name", "used_memory"))
    assert live[0].pid == 538 and live[0].used_memory_mib == 24020


@pytest.mark.parametrize("raw", ["[N/A]", "[Not Supported]", " N/A ", "", "[Unknown Error]"])
def test_not_available_values_become_none(raw: str) -> None:
    assert clean_value(raw) is None


def test_missing_values_do_not_drop_the_gpu() -> None:
    line = "1, GPU-x, NVIDIA H200, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [Not Supported], [N/A], [N/A], 1980, [N/A]"
    samples, problems = parse_query_gpu(line)
    assert problems == [] and samples[0].index == 1
    assert samples[0].utilization_gpu is None and samples[0].power_draw_w is None and samples[0].throttle_reasons == []


def test_throttle_bits() -> None:
    assert decode_throttle_reasons("0x0000000000000044") == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_throttle_reasons("garbage") == []


def test_driver_failure_is_an_error_not_an_exception() -> None:
    message = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    snapshot = parse_snapshot(message + APPS_SEPARATOR + "\n", "", 9)
    assert snapshot.gpus == [] and snapshot.error is not None and "couldn't communicate" in snapshot.error


def test_no_devices_and_missing_binary() -> None:
    assert (
        parse_snapshot("No devices were found\n" + APPS_SEPARATOR, "", 6).error == "nvidia-smi: No devices were found"
    )
    missing = parse_snapshot(APPS_SEPARATOR + "\n", "sh: 1: nvidia-smi: not found\n", 127)
    assert missing.error is not None and "not installed" in missing.error


def test_one_gpu_lost_the_others_still_show() -> None:
    good = "0, GPU-a, NVIDIA H200, P0, 5, 1, 143771, 100, 40, 120.5, 700.00, 1980, 3201, 0x0000000000000000"
    text = f"{good}\nUnable to determine the device handle for GPU0000:00:07.0: Unknown Error\n{APPS_SEPARATOR}\n"
    snapshot = parse_snapshot(text, "", 0)
    assert [g.index for g in snapshot.gpus] == [0]
    assert snapshot.error is not None and "Unknown Error" in snapshot.error


def test_poll_command_runs_both_queries_on_one_channel() -> None:
    argv = gpu_poll_argv(["/opt/bin/nvidia-smi"])
    assert argv[:2] == ["sh", "-c"] and argv[-1] == "/opt/bin/nvidia-smi"
    assert "--query-gpu=" in argv[2] and "--query-compute-apps=" in argv[2]


def test_nvml_process_names_come_from_nvml_else_from_proc(tmp_path: Path) -> None:
    """On the real H200 host NVML's process list carried no names while nvidia-smi showed `sglang::scheduler`."""
    from console.host.gpu import nvml_process_name

    class FakeNvml:
        class NVMLError(Exception):
            pass

        def __init__(self, names: dict[int, object]) -> None:
            self.names = names

        def nvmlSystemGetProcessName(self, pid: int) -> object:  # NVML's own name
            if pid not in self.names:
                raise self.NVMLError("not found")
            return self.names[pid]

    (tmp_path / "750").mkdir()
    (tmp_path / "750" / "cmdline").write_bytes(b"sglang::scheduler\0\0")
    assert nvml_process_name(FakeNvml({750: b"sglang::scheduler"}), 750, tmp_path) == "sglang::scheduler"
    assert nvml_process_name(FakeNvml({}), 750, tmp_path) == "sglang::scheduler"  # NVML refused: /proc
    assert nvml_process_name(FakeNvml({}), 999, tmp_path) is None  # gone
