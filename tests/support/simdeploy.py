"""Deployments of stand-in processes for tests: the ranks of one multi-node model, a prefill + decode pair, and the
real smg in front (all on loopback, each process stopped by its PID).

    with running_ranks(2) as ranks:                      # rank 0 serves the API, rank 1 a dummy health server
        httpx.post(ranks[0].url + "/generate", ...)
    with running_pd_pair() as (prefill, decode):
        ...
    with running_smg(["--pd-disaggregation", "--prefill", prefill.url, str(prefill.bootstrap_port), ...]) as smg:
        httpx.post(smg.url + "/generate", ...)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tests.support.simproc import FAST, SimProcess, free_port, http_status, start_sim


def rank_args(nnodes: int, rank: int, dist_port: int, *extra: str, tp: int | None = None) -> list[str]:
    return [
        *FAST, "--tp-size", str(tp or nnodes), "--nnodes", str(nnodes), "--node-rank", str(rank),
        "--dist-init-addr", f"127.0.0.1:{dist_port}", *extra,
    ]  # fmt: skip


def wait_until(condition: object, timeout: float, what: str, poll_s: float = 0.02) -> None:
    """Poll `condition()` until it holds (a condition, not a fixed sleep); AssertionError naming `what` after."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(poll_s)
    raise AssertionError(f"not within {timeout}s: {what}")


def ended(proc: SimProcess, timeout: float) -> int:
    """Its exit status once it exits by itself (AssertionError with its output if it does not within `timeout`)."""
    try:
        return proc.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {timeout}s:\n{proc.output()[-3000:]}") from None


def stop_ranks(ranks: Sequence[SimProcess]) -> None:
    """Rank 0 first (its ShutdownReq stops the others, which ignore SIGTERM), then whatever is left, by PID."""
    for sim in ranks:
        if sim.proc.poll() is None:
            os.kill(sim.proc.pid, signal.SIGTERM)
            try:
                sim.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(sim.proc.pid, signal.SIGKILL)
                sim.proc.wait()
        if sim.owns_state_dir:
            shutil.rmtree(sim.state_dir, ignore_errors=True)


@contextlib.contextmanager
def running_ranks(nnodes: int, *extra: str, healthy: bool = True) -> Iterator[list[SimProcess]]:
    """`nnodes` ranks of one deployment (rank 0 first in the list), started highest rank first."""
    dist = free_port()
    ranks: list[SimProcess] = []
    try:
        for rank in reversed(range(nnodes)):
            ranks.insert(0, start_sim(rank_args(nnodes, rank, dist, *extra)))
        if healthy:
            ranks[0].wait_healthy()
        yield ranks
    finally:
        stop_ranks(ranks)


# --- PD -------------------------------------------------------------------------------------------------------


@dataclass
class PdMember:
    sim: SimProcess
    bootstrap_port: int | None = None

    @property
    def url(self) -> str:
        return self.sim.url


def start_prefill(*extra: str, bootstrap_port: int | None = None, env: dict[str, str] | None = None) -> PdMember:
    port = bootstrap_port or free_port()
    args = [*FAST, "--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", str(port), *extra]
    return PdMember(start_sim(args, env=env), port)


def start_decode(*extra: str, env: dict[str, str] | None = None) -> PdMember:
    port = free_port()  # its own bootstrap port: what a null bootstrap_port in a request stands for
    args = [*FAST, "--disaggregation-mode", "decode", "--disaggregation-bootstrap-port", str(port), *extra]
    return PdMember(start_sim(args, env=env), port)


@contextlib.contextmanager
def running_pd_pair(
    prefill_args: Sequence[str] = (), decode_args: Sequence[str] = (), env: dict[str, str] | None = None
) -> Iterator[tuple[PdMember, PdMember]]:
    members: list[PdMember] = []
    try:
        members.append(start_prefill(*prefill_args, env=env))
        members.append(start_decode(*decode_args, env=env))
        for member in members:
            member.sim.wait_healthy()
        yield members[0], members[1]
    finally:
        for member in members:
            member.sim.stop()


# --- the real smg ----------------------------------------------------------------------------------------------


@dataclass
class SmgProcess:
    proc: subprocess.Popen[str]
    port: int
    lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return "\n".join(self.lines)


def smg_command() -> list[str]:
    """smg's own CLI from its wheel, as a module: the `smg` console script is not always smg's, since sglang-router
    0.3 installs one of the same name (whichever wheel pip installs last owns bin/smg)."""
    return [sys.executable, "-m", "smg", "launch"]


@contextlib.contextmanager
def running_smg(args: Sequence[str], *, ready_timeout: float = 60.0) -> Iterator[SmgProcess]:
    """`smg launch ARGS` on a free port, its Prometheus on another, until its /readiness answers 200."""
    port = free_port()
    argv = [
        *smg_command(), "--host", "127.0.0.1", "--port", str(port), "--prometheus-port", str(free_port()),
        "--prometheus-host", "127.0.0.1", *args,
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    smg = SmgProcess(proc, port)

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            smg.lines.append(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + ready_timeout
        while http_status(smg.url + "/readiness") != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"smg not ready (exit {proc.poll()}):\n{smg.output()[-4000:]}")
            time.sleep(0.05)
        yield smg
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # its own graceful stop waits a 5 s settle window for nothing here
            proc.wait()
