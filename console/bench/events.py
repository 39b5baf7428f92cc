"""Structured progress of a sweep. The CLI renders these as a progress bar, the TUI as live panes.

The engine calls `on_event(event)` synchronously from its event loop; a handler must be quick.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.bench.metrics import RequestResult


@dataclass(frozen=True)
class Level:
    """One point of a sweep: closed loop at `concurrency`, or open loop at `request_rate` (requests/s),
    optionally capped at `concurrency` requests in flight, or a trace replayed on its own clock at `trace_speed`
    times its pace (console.bench.traces)."""

    concurrency: int | None = None
    request_rate: float | None = None
    trace_speed: float | None = None

    @property
    def label(self) -> str:
        if self.trace_speed is not None:
            return f"trace ×{self.trace_speed:g}"
        if self.request_rate is not None:
            cap = f", max C={self.concurrency}" if self.concurrency else ""
            return f"rate={self.request_rate:g}/s{cap}"
        return f"C={self.concurrency}"


@dataclass(frozen=True)
class ClientPlaced:
    """Where the load generator runs, and why: said before the sweep starts (console.core.bench).

    location: `console` (this machine, through the SSH port forward), `host` (carried to the GPU host over the
    SSH connection and run there), `on-host` (the console itself runs on the host), `direct` (--url)."""

    location: str
    round_trip_ms: float | None  # the link's round trip as measured just before; None without a link
    python: str | None  # the host's interpreter that runs it (`host` only), with its version
    reason: str


@dataclass(frozen=True)
class SweepStarted:
    levels: list[Level]
    repeat: int
    server_version: str | None
    model: str


@dataclass(frozen=True)
class LevelStarted:
    level: Level
    repeat_index: int
    planned_requests: int | None  # None when the level runs for a duration
    planned_duration: float | None


@dataclass(frozen=True)
class RequestDone:
    level: Level
    result: RequestResult
    completed: int
    failed: int


@dataclass(frozen=True)
class RunningFigures:
    """Emitted about twice a second while a level runs."""

    level: Level
    elapsed: float
    completed: int
    failed: int
    in_flight: int
    output_throughput: float
    mean_ttft_ms: float


@dataclass(frozen=True)
class LevelDone:
    level: Level
    repeat_index: int
    metrics: dict[str, Any]
    telemetry: dict[str, Any]
    stopped: str | None  # why the level stopped early, if it did


@dataclass(frozen=True)
class SweepDone:
    levels_done: int
    stopped: str | None = None


BenchEvent = ClientPlaced | SweepStarted | LevelStarted | RequestDone | RunningFigures | LevelDone | SweepDone
