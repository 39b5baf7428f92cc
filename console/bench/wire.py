"""The benchmark on the wire: a sweep's config, its events and its results as JSON, both ways (pure).

The load generator can run on the GPU host (console.bench.agent) while the console shows its progress and
writes its records: the config goes to the host as one JSON line, the events and finished levels come back as
JSON lines, and are turned back here into the very objects the engine makes locally (console.bench.events,
LevelResult, SweepResult), so that renderers and console.bench.records cannot tell where the load came from.

What does not travel: a RequestDone carries its request's figures but not its per-token gaps (the level's
metrics, computed on the host from all of them, arrive with LevelDone), and a LevelResult comes without its
per-request results (records are made from the level's metrics). Standard library only, Python 3.10.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from console.bench.engine import LevelResult, ServerInfo, SweepConfig, SweepResult, Warmup
from console.bench.events import (
    BenchEvent,
    Level,
    LevelDone,
    LevelStarted,
    RequestDone,
    RunningFigures,
    SweepDone,
    SweepStarted,
)
from console.bench.metrics import RequestResult
from console.bench.shape import ShapeSpec
from console.bench.workloads import DatasetRequest, DatasetSample, WorkloadSpec

PROTOCOL = 1  # bumped when a message changes shape; the agent refuses a console that speaks another


class WireError(ValueError):
    """A message that is not what the protocol says (another version of opsconsole on the other end?)."""


# -- the config -----------------------------------------------------------------------------------------


def config_to_json(config: SweepConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def config_from_json(data: dict[str, Any]) -> SweepConfig:
    try:
        fields = dict(data)
        workload = dict(fields["workload"])
        if workload.get("dataset") is not None:
            workload["dataset"] = _dataset_from_json(workload["dataset"])
        if workload.get("shape") is not None:
            shape = dict(workload["shape"])
            workload["shape"] = ShapeSpec(
                **{**shape, "prompt_buckets": _buckets(shape["prompt_buckets"]),
                   "output_buckets": _buckets(shape["output_buckets"])}
            )  # fmt: skip
        fields["workload"] = WorkloadSpec(**workload)
        return SweepConfig(**fields)
    except (KeyError, TypeError) as exc:
        raise WireError(f"not a sweep config: {exc}") from None


def _buckets(rows: Any) -> tuple[tuple[float, float], ...]:
    return tuple((float(le), float(count)) for le, count in rows)


def _dataset_from_json(data: dict[str, Any]) -> DatasetSample:
    fields = dict(data)
    fields["requests"] = tuple(
        DatasetRequest(**{**r, "messages": tuple(r.get("messages") or ()), "hash_ids": tuple(r.get("hash_ids") or ())})
        for r in fields.get("requests", ())
    )
    if fields.get("trace_window") is not None:
        fields["trace_window"] = tuple(fields["trace_window"])
    fields["skipped"] = tuple((str(why), int(n)) for why, n in fields.get("skipped", ()))
    return DatasetSample(**fields)


# -- events ---------------------------------------------------------------------------------------------


def _level(data: dict[str, Any]) -> Level:
    return Level(
        concurrency=data.get("concurrency"), request_rate=data.get("request_rate"), trace_speed=data.get("trace_speed")
    )


def _slim_result(result: RequestResult) -> dict[str, Any]:
    data = dataclasses.asdict(result)
    data["itl"] = []  # thousands of floats per level: the level's metrics carry what they add up to
    return data


def event_to_json(event: BenchEvent) -> dict[str, Any]:
    if isinstance(event, RequestDone):
        data: dict[str, Any] = {
            "level": dataclasses.asdict(event.level),
            "result": _slim_result(event.result),
            "completed": event.completed,
            "failed": event.failed,
        }
    else:
        data = dataclasses.asdict(event)
    return {"type": type(event).__name__, **data}


def event_from_json(data: dict[str, Any]) -> BenchEvent:
    kind = data.get("type")
    try:
        if kind == "SweepStarted":
            return SweepStarted(
                [_level(x) for x in data["levels"]], data["repeat"], data["server_version"], data["model"]
            )
        if kind == "LevelStarted":
            return LevelStarted(
                _level(data["level"]), data["repeat_index"], data["planned_requests"], data["planned_duration"]
            )
        if kind == "RequestDone":
            return RequestDone(
                _level(data["level"]), RequestResult(**data["result"]), data["completed"], data["failed"]
            )
        if kind == "RunningFigures":
            fields = {f.name: data[f.name] for f in dataclasses.fields(RunningFigures) if f.name != "level"}
            return RunningFigures(level=_level(data["level"]), **fields)
        if kind == "LevelDone":
            return LevelDone(
                _level(data["level"]), data["repeat_index"], data["metrics"], data["telemetry"], data["stopped"]
            )
        if kind == "SweepDone":
            return SweepDone(data["levels_done"], data["stopped"])
    except (KeyError, TypeError) as exc:
        raise WireError(f"not a {kind} event: {exc}") from None
    raise WireError(f"unknown event type {kind!r}")


# -- results --------------------------------------------------------------------------------------------


def level_to_json(level: LevelResult) -> dict[str, Any]:
    return {
        "level": dataclasses.asdict(level.level),
        "repeat_index": level.repeat_index,
        "started_at": level.started_at.isoformat(),
        "ended_at": level.ended_at.isoformat(),
        "metrics": level.metrics,
        "telemetry": level.telemetry,
        "accept_length_source": level.accept_length_source,
        "cache_flushed": level.cache_flushed,
        "stopped": level.stopped,
        "warmup": dataclasses.asdict(level.warmup) if level.warmup else None,
    }


def level_from_json(data: dict[str, Any]) -> LevelResult:
    try:
        return LevelResult(
            level=_level(data["level"]),
            repeat_index=data["repeat_index"],
            started_at=datetime.fromisoformat(data["started_at"]),
            ended_at=datetime.fromisoformat(data["ended_at"]),
            metrics=data["metrics"],
            telemetry=data["telemetry"],
            results=[],
            accept_length_source=data["accept_length_source"],
            cache_flushed=data["cache_flushed"],
            stopped=data["stopped"],
            warmup=_warmup(data.get("warmup")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"not a level result: {exc}") from None


def _warmup(data: dict[str, Any] | None) -> Warmup | None:
    if data is None:
        return None
    return Warmup(**{**data, "round_ms": tuple(data.get("round_ms") or ())})


def server_to_json(server: ServerInfo) -> dict[str, Any]:
    return dataclasses.asdict(server)


def server_from_json(data: dict[str, Any]) -> ServerInfo:
    try:
        return ServerInfo(**data)
    except TypeError as exc:
        raise WireError(f"not a server description: {exc}") from None


def sweep_summary_to_json(sweep: SweepResult) -> dict[str, Any]:
    """A finished (or stopped) sweep without its levels, which went out one by one as they finished."""
    return {
        "server": server_to_json(sweep.server),
        "gpus": sweep.gpus,
        "driver_version": sweep.driver_version,
        "stopped": sweep.stopped,
        "capacity": sweep.capacity,
    }


def sweep_from_parts(
    summary: dict[str, Any] | None, server: ServerInfo | None, levels: list[LevelResult]
) -> SweepResult:
    """The sweep as the console puts it back together: the summary when it came, else what arrived before the
    link or the load generator went away."""
    if summary is None:
        return SweepResult(server or ServerInfo(), levels, [], None, None)
    try:
        return SweepResult(
            server_from_json(summary["server"]),
            levels,
            summary["gpus"],
            summary["driver_version"],
            summary["stopped"],
            summary.get("capacity"),
        )
    except (KeyError, TypeError) as exc:
        raise WireError(f"not a sweep summary: {exc}") from None
