"""`python -m console.sim.weight_cache --model-path M --tp-size N [--socket PATH] [--sim-profile P]`: the stand-in's
weight-cache daemon, as SGLang's standalone `python -m sglang.srt.weight_cache.daemon` is run beside a server in
`--weight-cache-mode client` (wave5-facts §6): it holds a model's weights for as long as it runs, so that the
server's restarts map them instead of reading them from disk.

It answers on a Unix socket (default SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE's, for the first simulated GPU), one JSON
line a connection: a server of the same model and layout gets {"ok": true, ...}, another {"ok": false, "mismatch": ...}
(SGLang's client then stops its start: weight_cache/ipc_loader.py:50-66). Its own load of the weights is not
simulated. SIGTERM or SIGINT ends it and removes the socket.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from console.sim.gpus import gpu_uuid
from console.sim.profiles import DEFAULT_PROFILE, get_profile
from console.sim.start_options import DEFAULT_SOCKET


def answer(asked: dict[str, Any], *, model_path: str, tp_size: int, profile: str) -> dict[str, Any]:
    """What the daemon says to a server asking for its weights (pure)."""
    mine = {"model_path": model_path, "tp_size": tp_size, "profile": profile}
    differ = [f"{key}: daemon {mine[key]!r}, engine {asked.get(key)!r}" for key in mine if asked.get(key) != mine[key]]
    if differ:
        return {"ok": False, "mismatch": "; ".join(differ)}
    return {"ok": True, "tensors": 1000 + 10 * tp_size, "pid": os.getpid()}


async def serve(path: Path, *, model_path: str, tp_size: int, profile: str) -> None:
    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            asked = json.loads(await reader.readline() or b"{}")
        except ValueError:
            asked = {}
        said = answer(asked if isinstance(asked, dict) else {}, model_path=model_path, tp_size=tp_size, profile=profile)
        writer.write(json.dumps(said).encode() + b"\n")
        await writer.drain()
        writer.close()

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = await asyncio.start_unix_server(one, path=str(path))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"weight cache daemon ready: {model_path} (tp {tp_size}) on {path}", flush=True)
    try:
        await stop.wait()
    finally:
        server.close()
        await server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m console.sim.weight_cache", description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--socket", default=None, help="default: SGLang's template for the first simulated GPU")
    parser.add_argument("--sim-profile", default=DEFAULT_PROFILE)
    args = parser.parse_args(argv)
    profile = get_profile(args.sim_profile)
    path = Path(args.socket or DEFAULT_SOCKET.format(device_uuid=gpu_uuid(profile.name, 0)))
    asyncio.run(serve(path, model_path=args.model_path, tp_size=args.tp_size, profile=profile.name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
