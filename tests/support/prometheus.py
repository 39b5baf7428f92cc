"""Real parts for the fleet tests and benchmark: many simulated hosts in one process (`python -m console.sim.fleet`)
and Debian's `prometheus` scraping them, each started here by PID on free ports with a generated scrape config and
a temporary storage folder, and stopped (by that PID) when done."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.simproc import free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


@dataclass
class SimFleet:
    proc: subprocess.Popen[bytes]
    hosts: list[dict[str, Any]]  # {"host", "sglang", "dcgm"} as the manifest says

    def stop_host(self, host: str) -> None:
        """The host goes away (both of its ports close), as if it lost power."""
        entry = next(h for h in self.hosts if h["host"] == host)
        address = entry.get("address", "127.0.0.1")
        httpx.post(f"http://{address}:{entry['sglang']}/sim/stop", timeout=10).raise_for_status()


@contextlib.contextmanager
def sim_fleet(folder: Path, hosts: int, *, gpus: int = 2, distinct_addresses: bool = False) -> Iterator[SimFleet]:
    """`distinct_addresses`: each host on a loopback address of its own (127.0.0.2, ...), else all on 127.0.0.1."""
    manifest = folder / "fleet.json"
    argv = [sys.executable, "-m", "console.sim.fleet", "--hosts", str(hosts), "--gpus", str(gpus),
            "--manifest", str(manifest), *(["--distinct-addresses"] if distinct_addresses else [])]  # fmt: skip
    with open(folder / "fleet.log", "wb") as log:  # a file, not a pipe that nobody reads could fill
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        _wait(lambda: manifest.is_file() or proc.poll() is not None, "the fleet's manifest", 60)
        assert proc.poll() is None, (folder / "fleet.log").read_text()[-2000:]
        yield SimFleet(proc, json.loads(manifest.read_text()))
    finally:
        _stop(proc)


@dataclass
class Prometheus:
    proc: subprocess.Popen[bytes]
    url: str
    config: Path

    def query(self, expr: str, at: float, *, label: str = "host") -> dict[str, float]:
        """An instant query answered per value of `label` (what the tests compare the console with)."""
        answer = httpx.post(f"{self.url}/api/v1/query", data={"query": expr, "time": f"{at:.3f}"}, timeout=10)
        answer.raise_for_status()
        return {r["metric"].get(label, ""): float(r["value"][1]) for r in answer.json()["data"]["result"]}

    def kill(self) -> None:
        _stop(self.proc)


def scrape_config(
    hosts: Sequence[dict[str, Any]], *, interval_s: float, extra_targets: dict[str, Sequence[str]] | None = None
) -> str:
    """Two jobs (sglang, dcgm: a host without a "dcgm" port has none), each target labelled with its host's name as
    `host` (and, as Prometheus does by itself, with the address it scrapes as `instance`); `extra_targets`: more
    jobs, job name -> addresses (a router's metrics port)."""

    def job(name: str, port_key: str) -> dict[str, Any]:
        return {
            "job_name": name,
            "static_configs": [
                {"targets": [f"{h.get('address', '127.0.0.1')}:{h[port_key]}"], "labels": {"host": h["host"]}}
                for h in hosts
                if port_key in h
            ],
        }

    interval = f"{int(interval_s * 1000)}ms"
    jobs = [job("sglang", "sglang"), job("dcgm", "dcgm")]
    jobs += [{"job_name": name, "static_configs": [{"targets": list(targets)}]}
             for name, targets in (extra_targets or {}).items()]  # fmt: skip
    config = {"global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
              "scrape_configs": jobs}  # fmt: skip
    return json.dumps(config, indent=1)  # JSON is YAML


@contextlib.contextmanager
def running_prometheus(
    folder: Path,
    hosts: Sequence[dict[str, Any]],
    *,
    interval_s: float = 1.0,
    extra_targets: dict[str, Sequence[str]] | None = None,
) -> Iterator[Prometheus]:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    config.write_text(scrape_config(hosts, interval_s=interval_s, extra_targets=extra_targets))
    port = free_port()
    argv = [PROMETHEUS, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={folder / 'data'}", "--log.level=warn"]  # fmt: skip
    with open(folder / "prometheus.log", "wb") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: _ready(url) or proc.poll() is not None, "Prometheus to be ready", 60)
        assert proc.poll() is None, (folder / "prometheus.log").read_text()[-2000:]
        yield Prometheus(proc, url, config)
    finally:
        _stop(proc)


def wait_scraped(prometheus: Prometheus, count: int, timeout: float = 60) -> None:
    """Until every target has been scraped successfully and the latency rates have two samples to work with."""

    def scraped() -> bool:
        try:
            up = prometheus.query("sum(up)", time.time())
            rates = prometheus.query("count(rate(sglang:time_to_first_token_seconds_count[1m]) > 0)", time.time())
        except httpx.HTTPError:
            return False
        return up.get("", 0) >= count and rates.get("", 0) >= count / 2  # count: both jobs' targets

    _wait(scraped, f"{count} targets scraped", timeout)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(condition: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
