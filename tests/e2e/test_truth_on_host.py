"""The truth tests with the load generated on the GPU host: the known-schedule server (tests/bench/schedule_server.py)
runs on the testbed host, the console's engine is carried there over SSH (console.bench.remote) and judged against
the server's schedule and against SGLang's own bench_serving, as tests/bench/test_agrees_with_bench_serving.py
judges the engine run here. Over the plain link and over a 300 ms one (tests/support/delayproxy.py): on the host the
link does not reach the figures."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import pytest

from console.bench.engine import SweepConfig
from console.bench.remote import HostSweep
from console.bench.workloads import WorkloadSpec
from console.core.session import open_session
from console.host.ssh import SshTransport
from console.workspace import Workspace
from tests.bench.conftest import ScheduleServer
from tests.bench.test_agrees_with_bench_serving import (
    AGREEMENT,
    OURS_REL,
    OVERHEAD_ALLOWANCE_S,
    TPOT_REL,
    TRUTH,
    Workload,
    ours_within_truth,
    theirs,
    truth_throughput,
)
from tests.support.farlink import add_far_alias
from tests.testbed import recipe
from tests.testbed.host import GpuHost

pytestmark = [pytest.mark.testbed, pytest.mark.alone]

PORT = 31000
UNIT = "opsconsole-schedule-test"
HOST_PYTHON = "/usr/bin/python3"  # the host's own interpreter; the agent needs nothing else


@contextlib.contextmanager
def schedule_server_on(host: GpuHost, w: Workload) -> Iterator[ScheduleServer]:
    """The known-schedule server on the host, as a transient unit, listening on all its addresses (bench_serving
    reaches it from here over the testbed's network; the agent on the host's loopback)."""
    args = ["--host", "0.0.0.0", "--port", str(PORT), "--ttft-ms", str(w.ttft_ms), "--interval-ms", str(w.interval_ms)]
    args += ["--tokens-per-chunk", str(w.tokens_per_chunk), "--spec"]
    env = [f"--setenv=PYTHONPATH={recipe.PYTHONPATH}", "--setenv=PYTHONDONTWRITEBYTECODE=1"]
    host.root_run(["systemd-run", f"--unit={UNIT}", *env, f"--working-directory={recipe.REPO_MOUNT}",
                   HOST_PYTHON, "-m", "tests.bench.schedule_server", *args])  # fmt: skip
    try:
        host.root_run(["python3", "-c", _READY_PROBE.format(port=PORT)], timeout=40)
        server = ScheduleServer(f"http://{host.address}:{PORT}", w.ttft_ms, w.interval_ms, w.tokens_per_chunk,
                                process=cast(Any, None))  # fmt: skip
        yield server
    finally:
        host.root_run(["systemctl", "stop", UNIT], check=False)
        host.root_run(["systemctl", "reset-failed", UNIT], check=False)


_READY_PROBE = """
import time, urllib.request
deadline = time.monotonic() + 30
while True:
    try:
        urllib.request.urlopen("http://127.0.0.1:{port}/health", timeout=1)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
"""


@contextlib.asynccontextmanager
async def transport_to(host: GpuHost, alias: str) -> AsyncIterator[SshTransport]:
    async with open_session(alias, Workspace(host.workspace), ssh_config=str(host.ssh_config)) as session:
        transport = session.host.transport
        assert isinstance(transport, SshTransport)
        yield transport


async def ours_on_host(transport: SshTransport, api: str, w: Workload) -> dict[str, Any]:
    config = SweepConfig(
        WorkloadSpec(api=api, input_len=w.input_len, output_len=w.output_len),  # type: ignore[arg-type]
        concurrencies=[w.concurrency],
        requests=w.prompts,
        warmup=0,
    )
    sweep = HostSweep(transport.interact, HOST_PYTHON, f"http://127.0.0.1:{PORT}", config, gpu_command=None)
    metrics = (await sweep.run()).levels[0].metrics
    assert metrics["completed"] == w.prompts and metrics["failed"] == 0
    assert metrics["total_output_tokens"] == w.prompts * w.output_len
    return metrics


@pytest.fixture
def no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.mark.parametrize("api", ["generate", "chat"])
@pytest.mark.parametrize("link", ["plain", "300 ms"])
async def test_on_the_host_the_engine_measures_the_known_schedule(
    gpu_host: GpuHost, no_agent: None, api: str, link: str
) -> None:
    host = gpu_host
    alias = host.name if link == "plain" else add_far_alias(host, delay_ms=150)
    with schedule_server_on(host, TRUTH) as server:
        async with transport_to(host, alias) as transport:
            mine = await ours_on_host(transport, api, TRUTH)
    truth = server.truth(TRUTH.output_len)
    expected = truth_throughput(server, TRUTH)
    assert ours_within_truth(mine["output_throughput"], server, TRUTH), (mine["output_throughput"], expected)
    assert mine["mean_tpot_ms"] == pytest.approx(truth["tpot_ms"], rel=OURS_REL)
    assert mine["mean_ttft_ms"] == pytest.approx(truth["ttft_ms"], abs=5.0)  # no round trip of the link in it


@pytest.mark.parametrize(("backend", "api"), [("sglang", "generate"), ("sglang-oai-chat", "chat")])
async def test_on_the_host_the_engine_agrees_with_bench_serving(
    gpu_host: GpuHost, no_agent: None, backend: str, api: str
) -> None:
    """Ours on the host over the 300 ms link, bench_serving from this machine over the testbed's plain network."""
    host = gpu_host
    alias = add_far_alias(host, delay_ms=150)
    with schedule_server_on(host, AGREEMENT) as server:
        record = theirs(server, backend, AGREEMENT)
        async with transport_to(host, alias) as transport:
            mine = await ours_on_host(transport, api, AGREEMENT)
    latency_s = server.truth(AGREEMENT.output_len)["latency_ms"] / 1000
    throughput_rel = OVERHEAD_ALLOWANCE_S / latency_s + OURS_REL
    assert mine["output_throughput"] == pytest.approx(record["output_throughput"], rel=throughput_rel), (
        mine["output_throughput"],
        record["output_throughput"],
    )
    assert mine["mean_tpot_ms"] == pytest.approx(record["mean_tpot_ms"], rel=TPOT_REL)
    assert mine["total_output_tokens"] == record["total_output_tokens"]
