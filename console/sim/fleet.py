"""`python -m console.sim.fleet --hosts N`: many simulated GPU hosts in one process, for the fleet's tests and
benchmark (200 fit on a 2-core machine). Each host serves, on ports of its own, SGLang's /metrics (the stand-in's
`sglang:` families, console.sim.metrics) and dcgm-exporter's /metrics for its GPUs (console.sim.dcgm), as a
real host runs SGLang and the exporter side by side. No engine runs: each host's load takes a seeded random walk
once a second, which moves its gauges, its GPUs and its latency histograms.

The manifest (--manifest FILE, written once every port listens; else printed) lists the hosts:
    [{"host": "gpu-001", "address": "127.0.0.1", "sglang": 41234, "dcgm": 41235}, ...]
With --distinct-addresses each host listens on a loopback address of its own (gpu-001 on 127.0.0.2, gpu-002 on
127.0.0.3, ...: Linux routes all of 127.0.0.0/8 to lo), so that Prometheus's instance label tells the hosts apart by
address, as it does on a network.
`POST /sim/stop` on either port of a host closes both (the host is gone, as if it lost power).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import random
import signal
from dataclasses import dataclass, field, replace
from pathlib import Path

from console.sim.dcgm import CONTENT_TYPE, render_dcgm
from console.sim.gpus import GpuState, idle_gpus
from console.sim.metrics import SimMetrics
from console.sim.profiles import DEFAULT_PROFILE, get_profile

TICK_S = 1.0


@dataclass
class FleetHost:
    name: str
    metrics: SimMetrics
    gpus: list[GpuState]
    rng: random.Random
    address: str = "127.0.0.1"
    load: float = 0.5  # 0..1, the random walk
    servers: list[asyncio.Server] = field(default_factory=list)

    def tick(self) -> None:
        self.load = min(1.0, max(0.0, self.load + self.rng.uniform(-0.1, 0.1)))
        running = round(self.load * 64)
        self.metrics.on_window(
            running=running,
            queued=max(0, running - 48),
            used_tokens=running * 2000,
            token_usage=round(self.load * 0.9, 3),
            gen_throughput=round(running * 38.5 * (1.2 - self.load * 0.4), 1),
            accept_length=round(2.2 + self.rng.uniform(0, 1.2), 2),
            accept_rate=0.6,
            max_total_num_tokens=200_000,
        )
        for _ in range(max(1, running // 8)):
            ttft = self.rng.lognormvariate(-1.5 + self.load, 0.5)
            self.metrics.on_finish(256, ttft, ttft + 255 * self.rng.uniform(0.01, 0.03 + self.load * 0.02))
        self.gpus = [
            replace(
                g,
                util_gpu=min(100, round(self.load * 95 + self.rng.uniform(0, 5))),
                power_draw_w=round(g.power_limit_w * (0.2 + 0.7 * self.load), 1),
                temperature_c=round(35 + 40 * self.load),
                memory_used_mib=int(g.memory_total_mib * 0.88),
            )
            for g in self.gpus
        ]

    def stop(self) -> None:
        for server in self.servers:
            server.close()


async def _serve(host: FleetHost, kind: str) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, path = head.split(b" ", 2)[:2]
            if path == b"/metrics":
                if kind == "sglang":
                    body, ctype = host.metrics.render()
                else:
                    body, ctype = render_dcgm(host.gpus, host.name).encode(), CONTENT_TYPE
                status = b"200 OK"
            elif method == b"POST" and path == b"/sim/stop":
                body, ctype, status = b"stopped\n", "text/plain", b"200 OK"
                asyncio.get_running_loop().call_soon(host.stop)
            else:
                body, ctype, status = b"not found\n", "text/plain", b"404 Not Found"
            head_out = f"\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            writer.write(b"HTTP/1.1 " + status + head_out.encode() + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host.address, 0)


async def run_fleet(
    count: int, *, gpus: int, profile_name: str, seed: int, manifest: Path | None, distinct_addresses: bool = False
) -> None:
    profile = get_profile(profile_name)
    hosts = [
        FleetHost(
            name=f"gpu-{i:03d}",
            metrics=SimMetrics(profile.served_model),
            gpus=idle_gpus(profile.gpu, gpus, f"gpu-{i:03d}"),
            rng=random.Random(seed * 100_003 + i),
            address=str(ipaddress.IPv4Address("127.0.0.1") + i) if distinct_addresses else "127.0.0.1",
        )
        for i in range(1, count + 1)
    ]
    entries = []
    for host in hosts:
        host.tick()
        sglang, dcgm = await _serve(host, "sglang"), await _serve(host, "dcgm")
        host.servers = [sglang, dcgm]
        entries.append({"host": host.name, "address": host.address, "sglang": _port(sglang), "dcgm": _port(dcgm)})
    text = json.dumps(entries)
    if manifest is not None:
        part = manifest.with_suffix(".part")
        part.write_text(text)
        part.replace(manifest)  # whole or absent: a reader never sees half of it
    else:
        print(text, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), TICK_S)
        except TimeoutError:
            for host in hosts:
                if any(s.is_serving() for s in host.servers):
                    host.tick()


def _port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m console.sim.fleet", description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=3, metavar="N")
    p.add_argument("--gpus", type=int, default=8, metavar="N", help="GPUs per host (default 8)")
    p.add_argument("--profile", default=DEFAULT_PROFILE, metavar="NAME")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--manifest", type=Path, metavar="FILE")
    p.add_argument("--distinct-addresses", action="store_true", help="each host on a loopback address of its own")
    args = p.parse_args(argv)
    if not 1 <= args.hosts <= 2000 or not 1 <= args.gpus <= 64:
        p.error("--hosts from 1 to 2000, --gpus from 1 to 64")
    asyncio.run(run_fleet(args.hosts, gpus=args.gpus, profile_name=args.profile, seed=args.seed,
                          manifest=args.manifest, distinct_addresses=args.distinct_addresses))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
