"""The nvidia-smi stand-in prints exactly what the real tool prints (real H200 captures as reference)."""

from __future__ import annotations

import calendar
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from console.sim.gpus import GpuProcess, GpuState, HostGpus, follow, idle_gpus, read_state, write_state
from console.sim.nvidia_smi import UsageError, render
from console.sim.perf import PerfModel
from console.sim.profiles import DEFAULT_PROFILE, get_profile

# Copies of the real H200 captures (shared/fixtures/gpu), so a fresh clone has them.
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gpu"

Q = (
    "index,uuid,name,pci.bus_id,driver_version,pstate,utilization.gpu,utilization.memory,memory.total,"
    "memory.used,memory.free,temperature.gpu,temperature.memory,power.draw,power.limit,clocks.sm,clocks.mem,"
    "clocks.max.sm,pcie.link.gen.current,pcie.link.width.current,fan.speed,"
    "ecc.errors.uncorrected.volatile.total,clocks_throttle_reasons.active"
)


def h200(**changes: object) -> GpuState:
    base = GpuState(
        index=0,
        uuid="GPU-caedbb52-a7ac-b6fb-867b-b909a3c8cf20",
        name="NVIDIA H200",
        bus_id="00000000:00:06.0",
        memory_total_mib=143771,
        memory_used_mib=0,
        power_limit_w=700.0,
        power_draw_w=126.59,
        util_gpu=0,
        util_mem=0,
        temperature_c=40,
        memory_temperature_c=40,
        sm_clock_mhz=1980,
        mem_clock_mhz=3201,
        max_sm_clock_mhz=1980,
        throttle_reasons=1,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


BUSY = dict(
    util_gpu=100,
    util_mem=23,
    memory_used_mib=31731,
    temperature_c=60,
    memory_temperature_c=48,
    power_draw_w=692.89,
    sm_clock_mhz=1530,
    throttle_reasons=4,
    memory_reserved_mib=614,  # the capture's used + free is 1 MiB off the idle one
)


def fixture_lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines(keepends=True)


def test_query_gpu_csv_with_units_matches_real_capture() -> None:
    lines = fixture_lines("h200-query-idle.csv")
    assert render([f"--query-gpu={Q}", "--format=csv"], HostGpus([h200()])) == "".join(lines[:2])


def test_query_gpu_noheader_nounits_matches_real_capture() -> None:
    expected = fixture_lines("h200-query-idle.csv")[2]
    got = render(["--query-gpu", Q, "--format=csv,noheader,nounits"], HostGpus([h200(power_draw_w=126.60)]))
    assert got == expected


def test_busy_query_and_compute_apps_match_real_capture() -> None:
    lines = fixture_lines("h200-busy-query-apps-smi.txt")
    busy = h200(**BUSY, processes=(GpuProcess(429, "python3", 31722),))  # type: ignore[arg-type]
    host = HostGpus([busy])
    assert render([f"--query-gpu={Q}", "--format=csv"], host) == "".join(lines[:2])
    apps = render(["--query-compute-apps=pid,process_name,used_memory", "--format=csv"], host)
    assert apps == "".join(lines[2:4])


def _fixture_time(stamp_line: str) -> float:
    # The capture's clock line is local time of the GPU machine; render with that exact moment.
    return calendar.timegm(time.strptime(stamp_line.strip(), "%a %b %d %H:%M:%S %Y")) + time.timezone


def test_plain_table_idle_matches_real_capture_byte_for_byte() -> None:
    lines = fixture_lines("h200-nvidia-smi-idle.txt")
    table_lines = lines[:-1]  # the last line is `nvidia-smi -L`
    got = render([], HostGpus([h200()]), now=_fixture_time(lines[0]))
    assert got == "".join(table_lines)
    assert render(["-L"], HostGpus([h200()])) == lines[-1]


def test_plain_table_busy_with_process_matches_real_capture() -> None:
    lines = fixture_lines("h200-busy-query-apps-smi.txt")[4:]
    busy = h200(**{**BUSY, "power_draw_w": 689.4}, processes=(GpuProcess(429, "python3", 31722),))  # type: ignore[arg-type]
    assert render([], HostGpus([busy]), now=_fixture_time(lines[0])) == "".join(lines)


def real_invocations() -> list[tuple[list[str], int, str]]:
    """(argv, exit status, stdout) of real nvidia-smi calls on an H200 (`cat -A` capture, idle GPU)."""
    out = []
    for block in (FIXTURES / "h200-smi-variants.txt").read_text().split("=== nvidia-smi")[1:]:
        head, rest = block.split("\n", 1)
        status = int(rest.split("\n", 1)[0].removeprefix("rc="))
        stdout = rest.split("--- stdout\n", 1)[1].split("--- stderr", 1)[0]
        out.append((head.split(), status, stdout.replace("$\n", "\n")))
    return out


def stand_in(argv: list[str]) -> tuple[int, str]:
    try:
        return 0, render(argv, HostGpus([h200()]))
    except UsageError as e:
        return e.exit_status, e.output


def test_refusals_match_the_real_tool_text_and_exit_status() -> None:
    checked = 0
    for argv, status, stdout in real_invocations():
        if status != 0:
            assert stand_in(argv) == (status, stdout), argv
            checked += 1
    assert checked == 5


def test_headers_and_empty_answers_match_the_real_tool() -> None:
    for argv, status, stdout in real_invocations():
        if status != 0 or argv == ["-i", "0"] or argv == ["-L"]:
            continue
        got_status, got = stand_in(argv)
        assert got_status == 0
        # Values differ (another board, another moment); the header line and the row count must not.
        assert got.splitlines()[:1] == stdout.splitlines()[:1] or "noheader" in " ".join(argv), argv
        assert len(got.splitlines()) == len(stdout.splitlines()), argv


def test_multi_gpu_table_keeps_the_layout() -> None:
    class Spec:
        name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        memory_mib = 97887
        power_limit_w = 600.0
        idle_power_w = 35.0
        max_sm_clock_mhz = 2617
        mem_clock_mhz = 13365

    out = render([], HostGpus(idle_gpus(Spec, 4, "p")))
    body = out.splitlines()[1:]
    assert all(len(line) == 91 for line in body if line)
    assert "NVIDIA RTX PRO 6000 Blac..." in out


def test_state_file_round_trip_and_dead_simulator_shows_idle(tmp_path: Path) -> None:
    busy = h200(**BUSY, processes=(GpuProcess(os.getpid(), "python3", 31722),))  # type: ignore[arg-type]
    write_state(tmp_path, pid=os.getpid(), profile="p", gpus=[busy])
    assert (tmp_path / "gpus.json").stat().st_mode & 0o777 == 0o644
    assert read_state(tmp_path, list).gpus == [busy]
    # A PID that cannot exist: the boards stay, the load goes.
    write_state(tmp_path, pid=2**22 + 1, profile="p", gpus=[busy])
    idle = read_state(tmp_path, list).gpus[0]
    assert idle.util_gpu == 0 and idle.memory_used_mib == 0 and idle.processes == ()


def test_temperature_approaches_the_loaded_value_every_half_second_tick() -> None:
    gpu = h200(temperature_c=30, memory_temperature_c=30)
    load = replace(
        PerfModel(get_profile("tiny-test"), {}).gpu_load(64, busy=True)[0], temperature_c=70, memory_used_mib=0
    )
    for _ in range(240):  # 2 minutes of the simulator's 0.5 s refreshes: six 20 s time constants
        gpu = follow(gpu, load, processes=(), dt_s=0.5)
    assert gpu.temperature_c == 70  # from the rounded figure alone it stalled 20 degrees short
    for _ in range(240):
        gpu = follow(gpu, replace(load, temperature_c=30), processes=(), dt_s=0.5)
    assert gpu.temperature_c == 30


@pytest.mark.system
def test_command_line_reads_the_state_dir(tmp_path: Path) -> None:
    write_state(tmp_path, pid=os.getpid(), profile="p", gpus=[h200(**BUSY)])  # type: ignore[arg-type]
    env = {**os.environ, "OPSCONSOLE_SIM_STATE_DIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "console.sim.nvidia_smi", "--query-gpu=index,utilization.gpu,power.draw"]
    done = subprocess.run([*cmd, "--format=csv,noheader,nounits"], env=env, capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stdout == "0, 100, 692.89\n"
    bad = subprocess.run([*cmd, "--format=xml"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2
    nothing_written = {**env, "OPSCONSOLE_SIM_STATE_DIR": str(tmp_path / "none")}  # no simulator has run
    idle = subprocess.run([*cmd, "--format=csv,noheader,nounits"], env=nothing_written, capture_output=True, text=True)
    profile = get_profile(DEFAULT_PROFILE)
    assert [line.split(", ")[:2] for line in idle.stdout.splitlines()] == [
        [str(i), "0"] for i in range(profile.gpu_count)
    ]
