"""What counting a dataset's lengths in the model's tokens costs `bench --dataset`: a 10,000-request ShareGPT sample.

Writes a ShareGPT file of made-up open chat (console.sim.datasets, 12,000 records, a little more than the sample),
starts the stand-in (its /tokenize, its tokenizer folder), then times, side by side in one run, each way a sample's
lengths are had (console.core.bench.tokens), `--repeat` times each (medians):
- words: the sample read and counted in whitespace words (what `bench` did before; the baseline);
- server: the same sample counted by the server's /tokenize (batches of 1,000 texts a request);
- host: counted by the tokenizer folder read with a Python that has transformers, as over SSH, here through the local
  transport (one command for the batch: the interpreter's start, transformers' import and the tokenizer's load
  included; over SSH the link's round trip adds to that once a batch);
- cache: the counts read back from the workspace (a second run with the same model, file, sample and seed).
Prints each time, its ratio to the words baseline and the texts counted.

Run: .venv/bin/python benchmarks/bench_token_count.py [--sample 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from console.bench.client import BenchClient  # noqa: E402
from console.bench.datasets import sample_dataset  # noqa: E402
from console.core.bench.tokens import (  # noqa: E402
    AsyncCounter,
    HostTokenizer,
    counted_sample,
    host_counter,
    server_counter,
)
from console.host.local import LocalTransport  # noqa: E402
from console.sim.datasets import chat_conversations  # noqa: E402
from console.workspace import Workspace  # noqa: E402
from tests.support.simproc import FAST, running_sim  # noqa: E402


class Counting:
    """A counter that counts the texts it was asked for."""

    def __init__(self, count: AsyncCounter) -> None:
        self.inner = count
        self.texts = 0
        self.calls = 0

    async def __call__(self, texts: object) -> list[int]:
        self.calls += 1
        self.texts += len(texts)  # type: ignore[arg-type]
        return await self.inner(texts)  # type: ignore[arg-type]


async def timed(run: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await run()
    return time.perf_counter() - started


async def main_async(sample_size: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-tokens-") as tmp:
        path = Path(tmp) / "chat.json"
        path.write_text(json.dumps(chat_conversations(int(sample_size * 1.2), seed=1)))
        print(f"{path.stat().st_size / 2**20:.1f} MiB ShareGPT file, sample {sample_size:,}, {repeat} repeats")
        words = sample_dataset(path, size=sample_size, seed=1)
        with running_sim(FAST) as sim:
            tokenizer = sim.state_dir / "tokenizer"
            unit = f"[Service]\nExecStart={sys.executable} -m sglang.launch_server --model-path {tokenizer}\n"
            transport = LocalTransport()
            results: dict[str, list[float]] = {"words": [], "server": [], "host": [], "cache": []}
            counted: dict[str, tuple[int, int]] = {}
            async with BenchClient(sim.url) as client:
                for _ in range(repeat):
                    results["words"].append(
                        await timed(lambda: asyncio.to_thread(sample_dataset, path, size=sample_size, seed=1))
                    )
                    server = Counting(server_counter(client))
                    results["server"].append(
                        await timed(lambda s=server: counted_sample(words, [lambda: _way(s, "server")], None))
                    )
                    counted["server"] = (server.calls, server.texts)
                    count, _name, _model = host_counter(HostTokenizer(transport, unit))
                    host = Counting(count)
                    results["host"].append(
                        await timed(lambda h=host: counted_sample(words, [lambda: _way(h, "host")], None))
                    )
                    counted["host"] = (host.calls, host.texts)
                    with tempfile.TemporaryDirectory(prefix="ws-") as ws:
                        workspace = Workspace(Path(ws))
                        first = Counting(server_counter(client))
                        await counted_sample(words, [lambda f=first: _way(f, "server")], workspace)
                        again = Counting(server_counter(client))
                        results["cache"].append(
                            await timed(
                                lambda a=again, w=workspace: counted_sample(words, [lambda: _way(a, "server")], w)
                            )
                        )
                        counted["cache"] = (again.calls, again.texts)
            await transport.close()
        base = statistics.median(results["words"])
        print(f"{'way':<8} {'median s':>9} {'min s':>7} {'x words':>8}  counter calls / texts")
        for name, times in results.items():
            calls, texts = counted.get(name, (0, 0))
            print(
                f"{name:<8} {statistics.median(times):>9.2f} {min(times):>7.2f} {statistics.median(times) / base:>8.1f}"
                f"  {calls} / {texts:,}"
            )


async def _way(counter: Counting, model: str) -> tuple[AsyncCounter, str, str]:
    return counter, model, model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main_async(args.sample, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
