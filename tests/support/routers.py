"""The real routers from their wheels, as subprocesses for tests and benchmarks: smg 1.13 (`smg launch`) and
sglang-router 0.3 (`python -m sglang_router.launch_router`).

    with running_router("smg", [worker_a, worker_b]) as router:     # returns once it routes to both
        with Load(router.url) as load:                                # requests through it from 4 threads
            ...
        load.ok, load.failed
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
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
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


@dataclass
class Load:
    """Requests through a router (`/generate`, 32 tokens) from `concurrency` threads until stopped, bounded in count
    (`max_requests`) and time (`max_s`): what succeeded, and every failure in words."""

    url: str
    concurrency: int = 4
    max_requests: int = 20_000
    max_s: float = 300.0
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Load:
        started = time.monotonic()
        for _ in range(self.concurrency):
            thread = threading.Thread(target=self._loop, args=(started,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    @property
    def sent(self) -> int:
        return self.ok + len(self.failed)

    def _loop(self, started: float) -> None:
        body = json.dumps({"text": "roll me", "sampling_params": {"max_new_tokens": 32}}).encode()
        while not self._stop.is_set() and time.monotonic() - started < self.max_s:
            with self._lock:
                if self.sent >= self.max_requests:
                    return
            request = urllib.request.Request(
                f"{self.url}/generate", data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    done = answer.status == 200 and "text" in json.loads(answer.read())
                    error = "" if done else f"HTTP {answer.status}"
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code}: {exc.read()[:200]!r}"
            except (OSError, ValueError) as exc:
                error = repr(exc)
            with self._lock:
                if error:
                    self.failed.append(error)
                else:
                    self.ok += 1

    def wait_for(self, requests: int, timeout: float = 30.0) -> None:
        """Until `requests` have succeeded in all."""
        wait_until(lambda: self.ok >= requests, timeout, f"{requests} requests through {self.url}")
