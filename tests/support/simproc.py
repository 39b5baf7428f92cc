"""Start the SGLang stand-in (`python -m console.sim`) as a real subprocess for tests and benchmarks.

    with running_sim(["--sim-profile", "tiny-test"]) as sim:
        httpx.get(sim.url + "/health")

The port is a free ephemeral one; readiness is polled (GET /health == 200) with a deadline; the
process is stopped by its PID (SIGTERM, then SIGKILL) and its output is kept in `sim.output()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_status(url: str, timeout: float = 2.0, headers: dict[str, str] | None = None) -> int | None:
    """Status code of a GET, or None when the connection is refused/reset."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None


@dataclass
class SimProcess:
    proc: subprocess.Popen[str]
    port: int
    state_dir: Path
    owns_state_dir: bool = False  # created for this process: removed by stop()
    lines: list[str] = field(default_factory=list)
    address: str = "127.0.0.1"  # where it listens (its --host, when given one)
    arrived: list[float] = field(default_factory=list)  # time.monotonic() at which each line was read

    def arrival_of(self, text: str) -> float:
        """When the first line holding `text` was read (KeyError if none was)."""
        for line, at in zip(list(self.lines), list(self.arrived), strict=False):
            if text in line:
                return at
        raise KeyError(text)

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, predicate_text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(predicate_text in line for line in self.lines):
                return
            if self.proc.poll() is not None and not any(predicate_text in line for line in self.lines):
                raise AssertionError(
                    f"simulator exited ({self.proc.returncode}) before {predicate_text!r}:\n{self.output()}"
                )
            time.sleep(0.01)
        raise AssertionError(f"no {predicate_text!r} in the simulator's output within {timeout}s:\n{self.output()}")

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if http_status(self.url + "/health", timeout=5.0) == 200:  # 0.5.17's /health takes a second
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"simulator exited with {self.proc.returncode}:\n{self.output()}")
            time.sleep(0.02)
        raise AssertionError(f"simulator not healthy within {timeout}s:\n{self.output()}")

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.owns_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        return int(self.proc.returncode)


def start_sim(
    args: Sequence[str],
    *,
    port: int | None = None,
    state_dir: Path | None = None,
    env: dict[str, str] | None = None,
    cpu: int | None = None,
) -> SimProcess:
    """Spawn the simulator (not waiting for it). `cpu` pins it to one core (taskset) for benchmarks."""
    port = port or free_port()
    state = state_dir or Path(tempfile.mkdtemp(prefix="sim-state-"))
    argv = [sys.executable, "-u", "-m", "console.sim", "--port", str(port), "--sim-state-dir", str(state), *args]
    if not any(a.startswith("--model") for a in args):
        argv += ["--model-path", "sim/test-model"]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu), *argv]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=Path(__file__).resolve().parents[2],
    )
    address = args[list(args).index("--host") + 1] if "--host" in args else "127.0.0.1"
    sim = SimProcess(proc, port, state, owns_state_dir=state_dir is None, address=address)

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            sim.arrived.append(time.monotonic())
            sim.lines.append(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return sim


@contextlib.contextmanager
def running_sim(args: Sequence[str], *, healthy: bool = True, **kwargs: object) -> Iterator[SimProcess]:
    sim = start_sim(args, **kwargs)  # type: ignore[arg-type]
    try:
        if healthy:
            sim.wait_healthy()
        yield sim
    finally:
        sim.stop()


# Shared launch flags for simulator tests and benchmarks.
FAST = ["--sim-profile", "tiny-test", "--sim-time-scale", "0.05"]  # tiny model, startup in a blink


def eagle_args(steps: int, topk: int = 1, draft_tokens: int | None = None) -> list[str]:
    """EAGLE flags for `steps` draft steps; draft tokens default to steps + 1 (SGLang's topk = 1 chain)."""
    return [
        "--speculative-algorithm", "EAGLE",
        "--speculative-num-steps", str(steps),
        "--speculative-eagle-topk", str(topk),
        "--speculative-num-draft-tokens", str(draft_tokens if draft_tokens is not None else steps + 1),
    ]  # fmt: skip
