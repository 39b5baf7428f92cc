"""The local transport (the console on the GPU host itself): real subprocesses, same contract as SSH."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from console.host.audit import AuditLog
from console.host.base import HostError
from console.host.connect import open_host
from console.host.gpu import NvmlUnavailable, read_nvml
from console.host.local import LocalTransport
from console.host.targets import Target
from tests.support.procs import processes_with


@pytest.mark.system
async def test_run_stream_and_audit(tmp_path: Path) -> None:
    transport = LocalTransport(audit=AuditLog(tmp_path / "audit.jsonl"))
    result = await transport.run(["sh", "-c", 'cat; echo " $1"', "sh", "a b"], input="in")
    assert result.ok and result.stdout == "in a b\n"
    assert [line async for line in transport.stream(["printf", "x\\ny\\n"])] == ["x", "y"]
    missing = await transport.run(["definitely-not-a-command-opsct"])
    assert missing.exit_status == 127
    with pytest.raises(HostError, match="did not finish"):
        await transport.run(["sleep", "5"], timeout=0.1)
    entries = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [e["exit_status"] for e in entries] == [0, 0, 127, None]
    assert await transport.forward_port("127.0.0.1", 30000) == 30000
    with pytest.raises(HostError):
        await transport.forward_port("10.0.0.1", 30000)


@pytest.mark.system
async def test_a_command_given_up_on_ends_with_what_it_started() -> None:
    """Cancelled (while it starts, or once it runs) or timed out, a command's children go with it: the GPU poll is
    `sh -c` around nvidia-smi, which may hang on a wedged GPU; each poll given up on would leave one more behind."""
    transport = LocalTransport()
    for n, give_up in enumerate(("cancel while starting", "cancel", "timeout")):
        marker = f"300.{os.getpid()}{n}"  # a sleep of 300.x s, in the argv of this command's processes alone
        run = asyncio.ensure_future(
            transport.run(["sh", "-c", f"sleep {marker} & wait"], timeout=0.5 if give_up == "timeout" else None)
        )
        if give_up == "cancel while starting":
            while not processes_with(marker):
                await asyncio.sleep(0)  # one loop step at a time, until the shell is forked
            held_until = time.monotonic() + 10
            while len(processes_with(marker)) < 2 and time.monotonic() < held_until:
                time.sleep(0.001)  # the loop held (its pipes unconnected) until the shell has started its child
            run.cancel()
        elif give_up == "cancel":
            while len(processes_with(marker)) < 2:
                await asyncio.sleep(0.01)  # polls for the shell and its child
            run.cancel()
        async with asyncio.timeout(60):
            with pytest.raises((asyncio.CancelledError, HostError)):
                await run
        # signalled with the command; its child ends a moment later (without its group signalled, it ran 300 s)
        async with asyncio.timeout(30):
            while processes_with(marker):
                await asyncio.sleep(0.05)  # polls the processes' state


@pytest.mark.system
async def test_commands_that_cannot_start_are_reported_not_raised(tmp_path: Path) -> None:
    # A gpu_command or journalctl that is missing or not executable: the verbs get a result or a HostError.
    not_executable = tmp_path / "smi"
    not_executable.write_text("#!/bin/sh\n")
    not_executable.chmod(0o644)
    transport = LocalTransport()
    result = await transport.run([str(not_executable)])
    assert result.exit_status == 126 and "ermission denied" in result.stderr
    with pytest.raises(HostError, match="cannot run definitely-not-a-command-opsct"):
        [line async for line in transport.stream(["definitely-not-a-command-opsct"])]


HAS_GPU = Path("/dev/nvidiactl").exists()


def test_nvml_reads_gpus_or_says_why_not() -> None:
    if HAS_GPU:  # the H200 machine: every GPU with its name, memory and power
        snapshot = read_nvml()
        assert snapshot.source == "nvml" and snapshot.gpus
        assert all(g.name and g.memory_total_mib and g.power_limit_w for g in snapshot.gpus)
        return
    # No NVIDIA driver (CI): NVML must fail cleanly so that the caller falls back to nvidia-smi.
    with pytest.raises(NvmlUnavailable, match="NVML"):
        read_nvml()


@pytest.mark.system
async def test_local_session_falls_back_to_nvidia_smi(tmp_path: Path) -> None:
    session = await open_host(Target(label="local", transport="local"), logs_dir=tmp_path)
    try:
        snapshot = await session.gpus()
    finally:
        await session.close()
    if HAS_GPU:
        assert snapshot.source == "nvml" and snapshot.gpus and snapshot.error is None
    else:
        assert snapshot.source == "nvidia-smi" and snapshot.gpus == []
        assert snapshot.error is not None and "nvidia-smi" in snapshot.error


@pytest.mark.system
async def test_demo_target_reads_the_simulated_gpus_and_explains_a_stopped_demo(tmp_path: Path) -> None:
    from console.sim.plugin import register

    register()  # as the verbs do: console.sim provides the demo transport
    session = await open_host(Target(label="demo", transport="demo", control=str(tmp_path / "missing.sock")))
    try:
        snapshot = await session.gpus()
        assert snapshot.error is None and snapshot.gpus
        assert all(g.memory_total_mib and g.power_limit_w for g in snapshot.gpus)
        with pytest.raises(HostError, match="opsconsole demo"):
            await session.service.state()
    finally:
        await session.close()


def test_a_gpu_nvml_cannot_open_means_nvml_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    # A unit test with a stand-in pynvml: GPU 0 is lost after NVML started (no real GPU can be made to do
    # that). The caller must get NvmlUnavailable, so that it falls back to nvidia-smi instead of crashing.
    import types

    class NVMLError(Exception):
        pass

    def handle(index: int) -> int:
        raise NVMLError(f"GPU {index} is lost")

    shutdowns: list[bool] = []
    fake = types.SimpleNamespace(
        NVMLError=NVMLError,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: shutdowns.append(True),
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=handle,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with pytest.raises(NvmlUnavailable, match="GPU 0 is lost"):
        read_nvml()
    assert shutdowns == [True]
