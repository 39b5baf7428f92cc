"""The real routers from their wheels, as subprocesses for tests and benchmarks: smg 1.13 (`smg launch`) and
sglang-router 0.3 (`python -m sglang_router.launch_router`).

    with running_router("smg", [worker_a, worker_b]) as router:     # returns once it routes to both
        urllib.request.urlopen(router.url + "/generate", ...)
        router.metrics()                                              # its Prometheus text

Both run with their retries off (`--disable-retries`): a request that fails on a worker fails, as it would without
a router, so that "no request failed" means something (docs/fleet.md, "What the router's retries hide"). smg's
circuit breaker is left on (as its users run it); `extra` adds flags. Ports are free ephemeral ones; the process is
stopped by its PID (SIGTERM, then SIGKILL after a few seconds: smg waits up to --shutdown-grace-period-secs for
requests in flight, which the tests do not need).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tests.support.simproc import free_port

RouterKind = Literal["smg", "sglang-router"]
KINDS: tuple[RouterKind, ...] = ("smg", "sglang-router")
START_TIMEOUT_S = 60.0


@dataclass
class RouterProcess:
    kind: RouterKind
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.kind} exited ({self.proc.returncode}):\n{self.log()[-3000:]}")

    def workers(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/workers", timeout=5) as answer:
            listed = json.loads(answer.read())["workers"]
        assert isinstance(listed, list)
        return listed

    def routable(self) -> list[str] | None:
        """The URLs it routes to (smg: status ready; 0.3: healthy); None while it does not answer."""
        self.alive()
        try:
            listed = self.workers()
        except (OSError, ValueError):
            return None
        return sorted(w["url"] for w in listed if w.get("is_healthy") and w.get("status", "ready") == "ready")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as answer:
            return str(answer.read().decode())

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def router_argv(
    kind: RouterKind,
    port: int,
    metrics_port: int,
    workers: Sequence[str] = (),
    *,
    pd: tuple[Sequence[tuple[str, int | None]], Sequence[str]] | None = None,
    log_level: str = "warn",
    extra: Sequence[str] = (),
) -> list[str]:
    """The router's command line: `workers` as regular workers, or `pd` = ([(prefill URL, bootstrap port)], [decode
    URL]) in PD mode."""
    launcher = [sys.executable, "-m", "smg.launch_router"] if kind == "smg" else [
        sys.executable, "-m", "sglang_router.launch_router"]  # fmt: skip
    argv = [*launcher, "--host", "127.0.0.1", "--port", str(port), "--prometheus-port", str(metrics_port),
            "--policy", "round_robin", "--log-level", log_level, "--disable-retries"]  # fmt: skip
    if pd is not None:
        prefills, decodes = pd
        argv.append("--pd-disaggregation")
        for url, bootstrap in prefills:
            argv += ["--prefill", url, *([str(bootstrap)] if bootstrap is not None else [])]
        for url in decodes:
            argv += ["--decode", url]
    elif workers:
        argv += ["--worker-urls", *workers]
    return [*argv, *extra]


def start_router(
    kind: RouterKind,
    workers: Sequence[str] = (),
    *,
    pd: tuple[Sequence[tuple[str, int | None]], Sequence[str]] | None = None,
    log_level: str = "warn",
    extra: Sequence[str] = (),
    log_dir: Path | None = None,
) -> RouterProcess:
    port, metrics_port = free_port(), free_port()
    where = log_dir or Path(tempfile.mkdtemp(prefix=f"opsconsole-{kind}-"))
    log_path = where / f"{kind}-{port}.log"
    argv = router_argv(kind, port, metrics_port, workers, pd=pd, log_level=log_level, extra=extra)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return RouterProcess(kind, proc, port, metrics_port, log_path)


@contextlib.contextmanager
def running_router(
    kind: RouterKind,
    workers: Sequence[str] = (),
    *,
    pd: tuple[Sequence[tuple[str, int | None]], Sequence[str]] | None = None,
    log_level: str = "warn",
    extra: Sequence[str] = (),
    log_dir: Path | None = None,
) -> Iterator[RouterProcess]:
    """A router that routes to every worker given (returns once it does)."""
    router = start_router(kind, workers, pd=pd, log_level=log_level, extra=extra, log_dir=log_dir)
    expected = sorted([*workers] if pd is None else [*(u for u, _ in pd[0]), *pd[1]])
    try:
        wait_until(lambda: router.routable() == expected, START_TIMEOUT_S, f"{kind} to route to {expected}")
        yield router
    finally:
        router.stop()


def wait_until(condition: Any, timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(interval)  # polling the condition itself


def http_json(method: str, url: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
    """One request, its status and its JSON (or text) body; HTTP errors are answers, not exceptions."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            status, raw = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw or b"null")
    except ValueError:
        return status, raw.decode(errors="replace")
