"""The stand-in's life, as SGLang's: scheduler start (port closed), HTTP up, warm-up, serve, SIGTERM drain.

How it ends depends on the version. 0.5.17 (measured on an H200): SIGTERM is logged, the tokenizer's watchdog
(which looks every 5 s) logs "Gracefully exiting..." until no request is left, then kill_process_tree SIGKILLs
the children and the process itself: exit status 137 (-9), 4-6 s after the signal. 0.5.23 (its source:
kill_process_tree spares the parent, then sys.exit(0)) and older versions: drain and exit 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from typing import Any

from aiohttp import web

from console.sim import gpus as gpu_model
from console.sim import multinode, shapes
from console.sim import sglang_log as L
from console.sim.dcgm import dcgm_app
from console.sim.http_api import Api
from console.sim.server import SimConfig, SimServer
from console.sim.start_options import StartRefused

SCHEDULER_PY = "/usr/local/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py"


async def serve(config: SimConfig, engine: Any, bound: asyncio.Event | None = None) -> int:
    """Start like SGLang, serve until SIGTERM/SIGINT, drain, exit 0. A node of a multi-node deployment
    (console.sim.multinode) joins its group first; a rank >= 1 serves only the dummy health server."""
    sim = SimServer(config, engine)
    tasks = [asyncio.create_task(sim.drive(), name="engine"), asyncio.create_task(sim.publish_gpus(), name="gpus")]
    group = sim.group
    if sim.disagg is not None:
        await sim.disagg.start()  # a prefill's bootstrap server answers (503 on /route) while the weights load
    if group is not None:
        # From the rendezvous on, a lost peer ends this rank too: at the gate (rank 0 broadcasts the gate's flag every
        # second: gloo's collective fails at once), while the weights load and once it serves.
        group.watch(stop_engine=tasks[0].cancel, cleanup=lambda: _mark_gpus_idle(sim))
    try:
        await sim.start_scheduler()
        if sim.disagg is not None:
            await sim.disagg.register_ranks()
        if group is not None:
            group.load = sim.batch_now
            await group.all_loaded()
    except multinode.GroupError as e:
        assert group is not None
        multinode.die_like_sglang(
            group.log, str(e), group.spec.local_ranks[0], lambda: _mark_gpus_idle(sim), running_leader=False
        )
    except StartRefused as refused:  # the start dies as SGLang's does: its lines, a traceback, exit status 1
        for line in refused.lines:
            sim.log(line)
        sys.stderr.write("Traceback (most recent call last):\n")
        sys.stderr.write(f'  File "{SCHEDULER_PY}", in run_scheduler_process\n')
        sys.stderr.write(refused.final.rstrip("\n") + "\n")
        sys.stderr.flush()
        await _stop_tasks(sim, tasks)
        return 1
    if group is not None and not group.spec.leader:
        all_schedulers = sim.metrics is not None and config.resolved.get("enable_metrics_for_all_schedulers")
        mirrored = sim.mirrored_metrics if all_schedulers else None
        return await multinode.serve_follower(
            group, on_exit=lambda: _stop_tasks(sim, tasks), scheduler_metrics=mirrored
        )

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
    dcgm = None
    if config.dcgm_port is not None:  # dcgm-exporter beside SGLang, on its own port
        dcgm = web.AppRunner(dcgm_app(lambda: sim.gpus, socket.gethostname()), access_log=None, handle_signals=False)
        await dcgm.setup()
        await web.TCPSite(dcgm, config.host, config.dcgm_port, reuse_address=True).start()
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
    if dcgm is not None:
        await dcgm.cleanup()
    if shapes.detailed(config.version) or shapes.at_least(config.version, "0.5.23"):
        return await _shut_down_0517(sim, config, runner, tasks)

    # SGLang: health turns 503, requests drain, then the process tree goes.
    sim.status = "Terminating"
    config.log(L.line(f"Gracefully exiting... Remaining number of requests {len(sim.live)}."))
    while sim.live:
        await asyncio.sleep(0.05)
    await runner.cleanup()
    if group is not None:
        await group.shutdown()  # the ShutdownReq broadcast: every other rank stops
    if sim.disagg is not None:
        await sim.disagg.close()
    await _stop_tasks(sim, tasks)
    return 0


async def _stop_tasks(sim: SimServer, tasks: list[Any]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    _mark_gpus_idle(sim)


# What PyTorch prints (raw, to stderr) when SGLang's process tree is killed with NCCL still set up (its
# documentation link left out, as in the capture tests/sim/fixtures/real-0.5.17/capture/server.log).
NCCL_WARNING = (
    "[rank0]:[W{stamp} ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before "
    "program exit, which can leak resources. For more info, please see "
    "<PyTorch's distributed docs: link removed> (function operator())"
)
WATCHDOG_INTERVAL_S = 5.0  # TokenizerManager.sigterm_watchdog's sleep


async def _shut_down_0517(sim: SimServer, config: SimConfig, runner: web.AppRunner, tasks: list[Any]) -> int:
    """SIGTERM as SGLang 0.5.17 handles it: health 503 at once, requests drain (new ones are still taken), the
    watchdog logs what remains every 5 s (× the time scale), then kill_process_tree. 0.5.23 the same up to the end
    (tokenizer_manager.py:3508-3540, 4068-4070), where it exits 0."""
    sim.status = "Terminating"
    sim.log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...", rank="")
    tick = WATCHDOG_INTERVAL_S * config.time_scale
    since_start = time.time() - sim.started_at
    await asyncio.sleep(tick - since_start % tick if tick > 0 else 0)  # the watchdog's next look
    while True:
        rids = list(sim.live)
        remaining = f"Remaining number of requests {len(rids)}. Remaining requests remaining_rids={rids}."
        sim.log(f"Gracefully exiting... {remaining}", rank="")
        if not rids:
            break
        await asyncio.sleep(tick)
    await runner.cleanup()
    if sim.group is not None:
        await sim.group.shutdown()  # the ShutdownReq broadcast: every other rank stops
    if sim.disagg is not None:
        await sim.disagg.close()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    _mark_gpus_idle(sim)
    if not shapes.detailed(config.version):  # 0.5.23: kill_process_tree spares the parent, then sys.exit(0)
        return 0
    print(NCCL_WARNING.format(stamp=time.strftime("%m%d %H:%M:%S.000000000")), file=sys.stderr, flush=True)
    pid = os.getpid()
    sim.log(f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}", rank="")
    sys.stdout.flush()
    os.kill(pid, signal.SIGKILL)  # the process tree, itself included: exit status 137
    return 137  # not reached


def _mark_gpus_idle(sim: SimServer) -> None:
    try:
        directory = gpu_model.state_dir(sim.config.state_dir)
        path = directory / gpu_model.STATE_FILE
        if path.exists():
            path.unlink()
    except OSError:
        pass
