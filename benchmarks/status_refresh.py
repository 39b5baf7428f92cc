"""A full `status` refresh over the open SSH connection vs the naive way (a new `ssh host CMD` per read).

Against a real OpenSSH sshd on loopback (tests/host/sshd_lab.py: a clean non-root user), the SGLang
simulator on the "host" and an nvidia-smi stand-in. The refresh reads everything `opsconsole status`
shows: systemctl show, both nvidia-smi queries, /health, /server_info, /model_info, /v1/loads, /metrics.
The naive way runs the same reads one after another, each with a fresh `ssh -F cfg lab CMD` (the real
OpenSSH client; SGLang reached with curl on the host). Needs root (creates the test user) and sshd.

    .venv/bin/python benchmarks/status_refresh.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.core.session import open_session
from console.core.status import read_status
from console.host.gpu import gpu_poll_argv
from console.host.systemd import SHOW_PROPERTIES
from console.host.targets import resolve_target
from console.workspace import Workspace
from tests.host.sshd_lab import install_gpu_stub, simulator, sshd_lab, write_client


def naive_commands(sim_port: int, stub: Path) -> list[list[str]]:
    api = f"http://127.0.0.1:{sim_port}"
    curls = [["curl", "-s", f"{api}{path}"] for path in ("/health", "/server_info", "/model_info", "/v1/loads")]
    return [
        ["systemctl", "show", "sglang.service", "-p", ",".join(SHOW_PROPERTIES)],
        gpu_poll_argv([str(stub)]),
        *curls,
        ["curl", "-s", f"{api}/metrics"],
    ]


def naive_refresh(config: Path, commands: list[list[str]]) -> float:
    started = time.perf_counter()
    for argv in commands:
        subprocess.run(["ssh", "-F", str(config), "lab", shlex.join(argv)], capture_output=True, check=False)
    return time.perf_counter() - started


async def open_refreshes(workspace: Path, config: Path, rounds: int) -> tuple[float, list[float]]:
    target = resolve_target("labgpu", profiles_dir=workspace / "profiles", ssh_config=str(config))
    started = time.perf_counter()
    async with open_session(target, Workspace(workspace)) as session:
        first = await read_status(session)  # includes opening the port forward
        connect_s = time.perf_counter() - started
        assert first.sglang.healthy, first
        timings = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            await read_status(session)
            timings.append(time.perf_counter() - t0)
        return connect_s, timings


async def readiness_delays(config: Path, trials: int) -> list[float]:
    """Seconds from /health turning 200 (a server on the host) to wait_until_healthy() returning, via the forward."""
    from aiohttp import web

    ready_at: list[float] = []

    async def health(request: web.Request) -> web.Response:
        return web.Response(status=200 if ready_at else 503)

    app = web.Application()
    app.add_routes([web.get("/health", health)])
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    target = resolve_target("lab", profiles_dir=config.parent / "profiles", ssh_config=str(config))
    from console.host.connect import open_host

    session = await open_host(target)
    delays = []
    try:
        url = f"http://127.0.0.1:{await session.transport.forward_port('127.0.0.1', port)}"
        from console.sglang.client import SglangClient

        async with SglangClient(url) as client:
            for trial in range(trials):
                ready_at.clear()
                waiter = asyncio.create_task(client.wait_until_healthy(30))
                await asyncio.sleep(0.3 + 0.037 * trial)  # flip at varying phases of the poll interval
                ready_at.append(time.perf_counter())
                assert await waiter
                delays.append(time.perf_counter() - ready_at[0])
    finally:
        await session.close()
        await runner.cleanup()
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    from console.sim.plugin import register

    register()  # a composition root: the demo host's transport and the stand-in's units (console/sim/plugin.py)
    with sshd_lab() as server, simulator() as sim_port, tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        client = write_client(directory, server)
        stub = install_gpu_stub(server)
        (directory / "profiles").mkdir()
        (directory / "profiles" / "labgpu.toml").write_text(
            f'[host]\nssh = "lab"\ngpu_command = ["{stub}"]\n[sglang]\nport = {sim_port}\n'
        )
        connect_s, open_timings = asyncio.run(open_refreshes(directory, client.config, args.rounds))
        commands = naive_commands(sim_port, stub)
        naive_timings = [naive_refresh(client.config, commands) for _ in range(max(3, args.rounds // 4))]
        delays = asyncio.run(readiness_delays(client.config, 10))
    open_ms = statistics.median(open_timings) * 1000
    naive_ms = statistics.median(naive_timings) * 1000
    print(f"status refresh, open connection  : {open_ms:7.1f} ms (median of {len(open_timings)})")
    print(f"  first refresh incl. SSH connect : {connect_s * 1000:7.1f} ms")
    print(
        f"status refresh, naive ssh per read: {naive_ms:7.1f} ms (median of {len(naive_timings)}, {len(commands)} ssh)"
    )
    print(f"speed-up: {naive_ms / open_ms:.1f}x (aim >= 20x)")
    print(
        f"readiness noticed after /health turned 200 (through the forward): median "
        f"{statistics.median(delays) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms of {len(delays)} (aim < 500 ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
