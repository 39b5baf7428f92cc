"""Two prefill and two decode servers behind the real smg (the `smg` wheel, 1.13, PD mode, retries off), each server
its own testbed host (real systemd + sshd, the PD stand-in as its unit), load through smg the whole time.

- status: one deployment, a row per server, smg ready with every server listed ready.
- a speculative change rolled one member at a time (prefill servers first, each stopped until both decode servers
  dropped it), each out of smg, drained, restarted, verified and back before the next: zero failed requests.
- a pair with mismatched page sizes (one decode's unit changed by hand) is refused before anything restarts: every
  unit byte for byte as it was, every MainPID the same.
- the control, last: a plain restart of one decode server behind the same smg (smg not told) loses requests. Last,
  because what it loses stays behind: each lost request's prefill keeps its room waiting for the decode for 300 s
  (SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT), and a change after it would wait for those rooms to drain.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from tests.deployments.bed import (
    BOOTSTRAP_PORT,
    Bed,
    deployment_bed,
    flags_unit,
    http_ok,
    pd_flags,
)
from tests.e2e.cli import json_output
from tests.support.routers import Load
from tests.support.simdeploy import smg_command
from tests.support.simproc import free_port
from tests.testbed.host import GpuHost
from tests.testbed.system import poll_until

pytestmark = pytest.mark.testbed

NAME = "pair"
ROLES = ("prefill", "prefill", "decode", "decode")
ALIASES = ("pf0", "pf1", "dc0", "dc1")
STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")


def url_of(host: GpuHost) -> str:
    return f"http://{host.address}:{host.sglang_port}"


def server_info(host: GpuHost) -> dict[str, Any]:
    """/server_info as the server answers it on its address (independent of the console)."""
    with urllib.request.urlopen(url_of(host) + "/server_info", timeout=10) as answer:
        info: dict[str, Any] = json.loads(answer.read())
    return info


@dataclass
class Pd:
    bed: Bed
    smg: subprocess.Popen[str]
    smg_url: str
    log: list[str]

    def workers(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.smg_url}/workers", timeout=5) as answer:
            listed: list[dict[str, Any]] = json.loads(answer.read())["workers"]
        return listed

    def all_ready(self) -> bool:
        if self.smg.poll() is not None:
            raise AssertionError(f"smg exited ({self.smg.returncode}):\n" + "\n".join(self.log[-60:]))
        try:
            listed = self.workers()
        except (OSError, ValueError):
            return False
        ready = sorted(w["url"] for w in listed if w.get("status", "ready") == "ready" and w.get("is_healthy"))
        return ready == sorted(url_of(h) for h in self.bed.hosts)


@pytest.fixture(scope="module")
def pd(testbed_ready: None) -> Iterator[Pd]:
    port, metrics = free_port(), free_port()
    smg_url = f"http://127.0.0.1:{port}"

    def members(hosts: list[GpuHost]) -> str:
        out = f'[router]\nurl = "{smg_url}"\nmetrics = "http://127.0.0.1:{metrics}"\n\n'
        listed = zip(hosts, ROLES, strict=True)
        return out + "".join(f'[[member]]\nhost = "{h.alias}"\nrole = "{r}"\n\n' for h, r in listed)

    def units(hosts: list[GpuHost]) -> list[str]:
        return [flags_unit(pd_flags(role, h.address)) for role, h in zip(ROLES, hosts, strict=True)]

    ready = lambda hosts: all(http_ok(h) for h in hosts)  # noqa: E731
    with deployment_bed(NAME, ALIASES, members, units, ready=ready, listen_on_address=True) as bed:
        prefill = [a for h in bed.hosts[:2] for a in ("--prefill", url_of(h), str(BOOTSTRAP_PORT))]
        decode = [a for h in bed.hosts[2:] for a in ("--decode", url_of(h))]
        argv = [*smg_command(), "--host", "127.0.0.1", "--port", str(port), "--prometheus-port", str(metrics),
                "--prometheus-host", "127.0.0.1", "--pd-disaggregation", *prefill, *decode, "--policy", "round_robin",
                "--disable-retries", "--disable-circuit-breaker", "--worker-startup-check-interval", "1",
                "--health-check-interval-secs", "1", "--log-level", "warn"]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)  # fmt: skip
        log: list[str] = []

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.append(line.rstrip("\n"))

        threading.Thread(target=pump, daemon=True).start()
        try:
            env = Pd(bed, proc, smg_url, log)
            poll_until(env.all_ready, timeout=60, what="smg to list the four servers ready", interval=0.2)
            yield env
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_status_shows_the_pair_behind_smg(pd: Pd) -> None:
    status = pd.bed.status()
    assert status["kind"] == "pd" and status["state"] == "up", status["reason"]
    assert status["router"]["ready"] is True and status["front_door"] == pd.smg_url
    assert [(m["name"], m["role"], m["state"]) for m in status["members"]] == [
        (a, r, "up") for a, r in zip(ALIASES, ROLES, strict=True)
    ]
    assert all(m["router"]["listed"] and m["router"]["status"] == "ready" for m in status["members"])
    assert status["checks"] == [], status["checks"]


@pytest.mark.long(60)  # its measured seconds (44 on the 2-core VM): started first (tests/tiers.py)
def test_a_speculative_change_rolls_one_member_at_a_time_with_no_failed_request(pd: Pd) -> None:
    poll_until(pd.all_ready, timeout=60, what="smg to list the four servers ready", interval=0.2)
    pids = pd.bed.main_pids()
    with Load(pd.smg_url) as load:
        load.wait_for(20, timeout=60)
        started = time.monotonic()
        done = pd.bed.opsconsole("apply", NAME, *STEPS_3, "--yes", "--json", "--timeout", "120")
        took = time.monotonic() - started
        during = load.ok
        load.wait_for(during + 20, timeout=60)  # smg still serves once the change is over
    result = json_output(done)
    print(f"\nPD change behind smg (retries off): {took:.1f} s; {len(load.failed)} of {load.ok + len(load.failed)} "
          f"requests failed ({during} during it)")  # fmt: skip
    assert done.returncode == 0 and result["state"] == "verified", (result.get("error"), done.stderr[-3000:])
    assert load.failed == [], load.failed[:5]
    order = [(s["step"], s["members"][0]) for s in result["order"]]
    prefill = ("router_out", "drain", "stop", "wait_dropped", "apply", "router_in")
    decode = ("router_out", "drain", "apply", "router_in")
    assert order == [(k, m) for m in ALIASES for k in (prefill if m.startswith("pf") else decode)]
    assert all(a != b for a, b in zip(pids, pd.bed.main_pids(), strict=True))
    # One at a time: each member's restart began after the one before it was verified.
    spans = []
    for alias in ALIASES:
        history = result["members"][alias]["apply"]["history"]
        at = {h["state"]: datetime.fromisoformat(h["at"]) for h in history}
        spans.append((at["restarting"], at["verified"]))
    assert all(spans[i][0] > spans[i - 1][1] for i in range(1, len(spans))), spans
    for host in pd.bed.hosts:
        info = server_info(host)
        assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (3, 4), host.alias
    assert pd.all_ready()


def test_a_pair_with_mismatched_page_sizes_is_refused_before_anything_restarts(pd: Pd) -> None:
    decode = pd.bed.hosts[3]
    hand_made = flags_unit(pd_flags("decode", decode.address, page_size=32))
    decode.root_run(f"cat > {decode.unit_path} && systemctl daemon-reload", input=hand_made)  # on disk, not started
    try:
        shas, pids = [h.unit_sha256() for h in pd.bed.hosts], pd.bed.main_pids()
        done = pd.bed.opsconsole("apply", NAME, *STEPS_3, "--yes", "--json", "--timeout", "60")
        result = json_output(done)
        assert done.returncode == 1 and result["state"] == "refused", result
        said = " ".join(c["message"] for c in result["checks"] if c["level"] == "error")
        assert "--page-size differs (pf0, pf1, dc0: 16; dc1: 32)" in said, result["checks"]
        assert [h.unit_sha256() for h in pd.bed.hosts] == shas
        assert pd.bed.main_pids() == pids
        assert pd.bed.opsconsole("restart", NAME, "--yes", "--json").returncode == 1  # a restart is refused too
        assert pd.bed.main_pids() == pids
        status = pd.bed.status()
        assert any("--page-size differs" in c["message"] for c in status["checks"])
    finally:
        decode.install_unit(decode.unit_text, wait_healthy=False)
        poll_until(lambda: http_ok(decode), timeout=60, what="the decode server back on its unit", interval=0.1)
        poll_until(pd.all_ready, timeout=60, what="smg to route to it again", interval=0.2)


def test_the_control_a_plain_restart_of_one_decode_server_loses_requests(pd: Pd) -> None:
    decode = pd.bed.hosts[2]
    with Load(pd.smg_url) as load:
        load.wait_for(20, timeout=60)
        restarts = 0
        while not load.failed and restarts < 5:
            before = load.ok
            decode.root_run(["systemctl", "restart", decode.unit])
            restarts += 1
            poll_until(lambda: http_ok(decode), timeout=60, what="the decode server back", interval=0.1)
            poll_until(pd.all_ready, timeout=60, what="smg to route to the restarted decode again", interval=0.2)
            load.wait_for(before + 10, timeout=60)
    print(f"\ncontrol: {restarts} plain restarts of {decode.alias} behind smg (retries off) failed {len(load.failed)} "
          f"of {load.ok + len(load.failed)} requests; first: {load.failed[:1]}")  # fmt: skip
    assert load.failed, f"{restarts} plain restarts of a decode server behind smg failed no request of {load.ok}"
