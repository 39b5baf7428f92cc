"""Fixtures: the known-schedule server (tests/bench/schedule_server.py) as a real process on a real port."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
START_DEADLINE_S = 20.0


@dataclass
class ScheduleServer:
    url: str
    ttft_ms: float
    interval_ms: float
    tokens_per_chunk: int
    process: subprocess.Popen[str]

    def truth(self, output_len: int) -> dict[str, float]:
        """What an exact client must measure for one request of `output_len` tokens."""
        chunks = -(-output_len // self.tokens_per_chunk)
        latency_ms = self.ttft_ms + (chunks - 1) * self.interval_ms
        return {
            "latency_ms": latency_ms,
            "ttft_ms": self.ttft_ms,
            "tpot_ms": (latency_ms - self.ttft_ms) / (output_len - 1),
            # ITL entries cover every token after the first chunk; a short last chunk makes them uneven.
            "itl_ms": (chunks - 1) * self.interval_ms / (output_len - min(self.tokens_per_chunk, output_len)),
            "accept_length": output_len / chunks,
        }


def start_schedule_server(*args: str, cpu: int | None = None) -> tuple[subprocess.Popen[str], int]:
    """Start the server; return it and its port once it printed LISTENING (or fail with its stderr)."""
    cmd = [sys.executable, "-m", "tests.bench.schedule_server", "--port", "0", *args]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            line = proc.stdout.readline()
            if line.startswith("LISTENING"):
                return proc, int(line.split()[1])
            if not line:
                break
    stop_process(proc)
    raise RuntimeError(f"schedule server did not start: {proc.stderr.read() if proc.stderr else ''}")


def stop_process(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()


@pytest.fixture
def schedule_server() -> Iterator[Callable[..., ScheduleServer]]:
    """Factory: schedule_server(ttft_ms=, interval_ms=, tokens_per_chunk=, spec=, fail_every=)."""
    started: list[subprocess.Popen[str]] = []

    def make(
        ttft_ms: float = 50.0,
        interval_ms: float = 20.0,
        tokens_per_chunk: int = 1,
        spec: bool = False,
        fail_every: int = 0,
        cold_requests: int = 0,
        cold_factor: float = 1.0,
    ) -> ScheduleServer:
        args = ["--ttft-ms", str(ttft_ms), "--interval-ms", str(interval_ms)]
        args += ["--tokens-per-chunk", str(tokens_per_chunk), "--fail-every", str(fail_every)]
        args += ["--cold-requests", str(cold_requests), "--cold-factor", str(cold_factor)]
        if spec:
            args.append("--spec")
        # On the 2-core CI machine the server gets its own core so its timers are not delayed by the client.
        cpu = 1 if len(os.sched_getaffinity(0)) > 1 else None
        proc, port = start_schedule_server(*args, cpu=cpu)
        started.append(proc)
        return ScheduleServer(f"http://127.0.0.1:{port}", ttft_ms, interval_ms, tokens_per_chunk, proc)

    yield make
    for proc in started:
        stop_process(proc)
