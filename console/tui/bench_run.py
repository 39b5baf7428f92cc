"""One host's benchmark queue as the console holds it (ConsoleContext.bench_runs): it outlives the screen that shows
it, so it lives here beside the protocol, and the bench screen (console/tui/screens/bench.py) shows it. No Textual:
the app's worker runs `run`, and the screen repaints from `live` on its own timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from console.bench.records import BenchRecord
from console.core.bench import PlannedSweep
from console.tui.presenters.bench_live import LiveBench

# (sweeps, on_event) -> each sweep's records: console.tui.runners.BenchRunner, its session_of and host bound
Runner = Callable[[list[PlannedSweep], Callable[[Any], None]], Awaitable[list[list[BenchRecord]]]]


class BenchRun:
    """One host's benchmark queue, held by the app so it outlives its screen: the live model, the worker, the
    records. Listeners are told when the model changed (the screen repaints on its own timer)."""

    def __init__(self, host: str, sweeps: list[PlannedSweep], runner: Runner) -> None:
        self.host = host
        self.sweeps = sweeps
        self.runner = runner
        self.live = LiveBench(host, sweeps)
        self.records: list[list[BenchRecord]] = []
        self.worker: Any = None
        self.dirty = True
        self.on_finished: Callable[[BenchRun], None] | None = None

    @property
    def running(self) -> bool:
        return self.live.state == "running"

    def feed(self, event: Any) -> None:
        self.live.feed(event)
        self.dirty = True

    async def run(self) -> None:
        try:
            self.records = await self.runner(self.sweeps, self.feed)
            self.live.finish()
        except asyncio.CancelledError:
            self.live.cancel("cancelled: the levels that finished are kept in logs/")
            raise
        except Exception as exc:  # the host, the link, the server: said on the rows, the finished levels kept
            self.live.fail(str(exc) or exc.__class__.__name__)
        finally:
            self.dirty = True
            if self.on_finished is not None:
                self.on_finished(self)

    def cancel(self) -> None:
        if self.worker is not None and self.running:
            self.worker.cancel()
