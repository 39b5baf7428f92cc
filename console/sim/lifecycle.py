"""The stand-in's life, as SGLang's: scheduler start (port closed), HTTP up, warm-up, serve, SIGTERM drain."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

from aiohttp import web

from console.sim import gpus as gpu_model
from console.sim import sglang_log as L
from console.sim.http_api import Api
from console.sim.server import SimConfig, SimServer


async def serve(config: SimConfig, engine: Any, bound: asyncio.Event | None = None) -> int:
    """Start like SGLang, serve until SIGTERM/SIGINT, drain, exit 0."""
    sim = SimServer(config, engine)
    tasks = [asyncio.create_task(sim.drive(), name="engine"), asyncio.create_task(sim.publish_gpus(), name="gpus")]
    await sim.start_scheduler()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    api = Api(sim)
    runner = web.AppRunner(api.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, reuse_address=True)
    await site.start()
    for message in L.uvicorn_lines(os.getpid(), config.host, config.port):
        config.log(L.line(message))
    if bound is not None:
        bound.set()
    if not config.resolved.get("skip_server_warmup"):
        warm = asyncio.create_task(sim.warm_up())
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait({warm, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    else:
        sim.status = "Up"
        sim.startup_time = time.time() - sim.started_at
        config.log(L.line(L.READY))
    await stop.wait()

    # SGLang: health turns 503, requests drain, then the process tree goes.
    sim.status = "Terminating"
    config.log(L.line(f"Gracefully exiting... Remaining number of requests {len(sim.live)}."))
    while sim.live:
        await asyncio.sleep(0.05)
    await runner.cleanup()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    _mark_gpus_idle(sim)
    return 0


def _mark_gpus_idle(sim: SimServer) -> None:
    try:
        directory = gpu_model.state_dir(sim.config.state_dir)
        path = directory / gpu_model.STATE_FILE
        if path.exists():
            path.unlink()
    except OSError:
        pass
