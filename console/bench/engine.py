"""The load engine: closed-loop concurrency sweeps and open-loop Poisson rates against a streaming SGLang API.

No UI: progress goes out as events (console.bench.events); results come back as LevelResult, which
console.bench.records turns into log records. Standard library only (with the default HTTP client), and
Python 3.10 compatible: console.bench.agent runs this engine on a GPU host with the Python it has.
Protocol per level (the benchmark methodology in docs/bench.md):
1. warm-up requests, excluded from every figure: in waves of the level's own concurrency (a batch size the server has
   not run since its start pays its first-use costs there, not in the measurement), at least `warmup` requests; with
   `warmup_settle` (right after a start) the first repeat of each level sends waves until the round time of two
   in a row agrees within WARMUP_SETTLE_TOLERANCE (at most WARMUP_MAX_WAVES): the record says which and how many;
2. POST /flush_cache (so the KV/radix cache and the server's accept-length counters start clean);
3. the measured requests, from a fixed number or for a duration; GPU telemetry sampled meanwhile;
4. metrics with bench_serving's definitions; acceptance length from these requests' own meta_info
   (Σ completion_tokens / Σ spec_verify_ct), else from /server_info right after the level — valid
   only because the cache was flushed just before (source recorded either way).
With an SLO each level also gets its goodput and verdict (console.bench.slo); with find_capacity the levels are not
given but searched: open-loop request rates, doubling then bisecting, until the highest rate that meets the SLO is
bracketed (CapacitySearch; its summary comes back in SweepResult.capacity).
Guard rails: per-request timeout, a stop when the error rate passes a threshold, a hard cap on the whole
sweep. A failed request is counted and kept, never dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal, Protocol, get_args

from console.bench import telemetry
from console.bench.client import WAIT_TIMEOUTS, BenchClient
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
from console.bench.metrics import RequestResult, compute_metrics, decode_rounds
from console.bench.slo import CapacitySearch, Slo, judge_level
from console.bench.workloads import PreparedRequest, WorkloadSpec, build_requests

LongPrompts = Literal["skip", "error"]

# datetime.UTC is 3.11+; this module also runs under a GPU host's Python 3.10 (console.bench.agent).
_UTC = timezone.utc  # noqa: UP017

# Below this many finished requests the error rate is too noisy to stop on (unless all of them failed).
ERROR_RATE_MIN_SAMPLE = 10
# In duration mode the prompts are built ahead in a pool of this many per level and cycled.
DURATION_POOL = 1024
RUNNING_FIGURES_INTERVAL_S = 0.5
# --find-capacity without --request-rate: the search starts here (requests/s) and doubles.
CAPACITY_START_RATE = 1.0
# At a level's end the GPU poll in flight gets this long to finish before it is cancelled.
TELEMETRY_FINISH_S = 10.0
# Warm-up until settled: two waves in a row whose round times agree within this share, at most this many waves. On
# SGLang 0.5.17 (an 8B-shaped Llama on an H100, issue 46) the first C = 16 run after a restart ran 5-17 % slower than
# the second when its warm-up was 8 requests: the wave at the level's own concurrency is what the batch needs.
WARMUP_SETTLE_TOLERANCE = 0.03
WARMUP_MAX_WAVES = 6

# What a sweep's problems are about (SweepConfig.problems): the config's own fields and its workload's.
SweepField = Literal[
    "concurrencies",
    "request_rates",
    "requests",
    "duration",
    "warmup",
    "repeat",
    "max_error_rate",
    "input_len",
    "output_len",
    "temperature",
]
SWEEP_FIELDS: tuple[SweepField, ...] = get_args(SweepField)


# Levels running now in this process (two hosts' queues in one console can overlap), and the thresholds they found:
# full collections are held from the first one's start to the last one's end.
_levels_measuring = 0
_thresholds_before: tuple[int, ...] = ()
# gen-1 collections between two full ones while levels run: never, in practice (a C int).
_FULL_COLLECTIONS_HELD = 2**30


@contextlib.contextmanager
def full_collections_held() -> Iterator[None]:
    """While a level's requests run, the garbage collector collects the young generations only.

    Why: a full collection walks every object of the process and holds every coroutine meanwhile. The load
    generator shares its process with the console, a Textual app of a few hundred thousand objects: in the
    suite's workers such a collection took 0.8-1.1 s on a 2-core machine (timed with a gc callback), and one
    inside a level delays the sends and the reads, so the throughput falls and TTFT and ITL grow by what the
    server never spent (benchmarks/bench_gc_pause.py). The young collections go on, so the garbage a level makes
    and drops is still freed; what lives longer waits for the first full collection after the level. This
    changes only the third threshold, and puts it back: the console's own gc.freeze() and thresholds stay."""
    global _levels_measuring, _thresholds_before
    if _levels_measuring == 0:
        _thresholds_before = gc.get_threshold()
        young, middle = _thresholds_before[:2]
        gc.set_threshold(young, middle, _FULL_COLLECTIONS_HELD)
    _levels_measuring += 1
    try:
        yield
    finally:
        _levels_measuring -= 1
        if _levels_measuring == 0:
            gc.set_threshold(*_thresholds_before)


@dataclass
class SweepConfig:
    workload: WorkloadSpec
    concurrencies: list[int] = field(default_factory=lambda: [1, 8, 32])
    request_rates: list[float] = field(default_factory=list)  # non-empty: open loop at these rates
    # non-empty (a trace dataset): replayed on the trace's own clock, at these multiples of its pace
    trace_speeds: list[float] = field(default_factory=list)
    requests: int | None = None  # per level; default a dataset's whole sample, else max(16, 4 × concurrency)
    duration: float | None = None  # seconds per level instead of a request count
    warmup: int = 2
    # Right after a start: each level's first repeat warms until its round time settles (WARMUP_SETTLE_TOLERANCE),
    # not just one wave at its concurrency.
    warmup_settle: bool = False
    repeat: int = 1
    request_timeout: float = 600.0
    max_error_rate: float = 0.5
    time_cap: float = 3600.0
    flush_cache: bool = True
    telemetry_interval: float = 1.0
    # A dataset's prompts longer than the server's context length: left out and counted, or the sweep refused.
    long_prompts: LongPrompts = "skip"
    slo: dict[str, float] | None = None  # console.bench.slo.Slo.to_json(): each level's goodput and verdict
    # Instead of the levels: search the request rate at which the SLO stops being met (console.bench.slo
    # CapacitySearch), from request_rates[0] (else CAPACITY_START_RATE), capped by a single concurrency.
    find_capacity: bool = False
    capacity_precision: float = 0.10
    capacity_max_levels: int = 12

    def levels(self) -> list[Level]:
        if self.trace_speeds:
            return [Level(trace_speed=s) for s in self.trace_speeds]
        if self.request_rates:
            cap = self.concurrencies[0] if len(self.concurrencies) == 1 else None
            return [Level(concurrency=cap, request_rate=r) for r in self.request_rates]
        return [Level(concurrency=c) for c in self.concurrencies]

    def problems(self) -> dict[SweepField, str]:
        """What must change before this sweep can run, field by field ({} when nothing). A text names the fields
        it is about as {field} placeholders, each caller writing them its own way (say_problems): the command
        line names its options (--repeat), the console's form its fields."""
        found: dict[SweepField, str] = {}
        workload = self.workload
        if workload.input_len < 1:
            found["input_len"] = "{input_len} must be at least 1"
        if workload.output_len < 1:
            found["output_len"] = "{output_len} must be at least 1"
        if workload.temperature is not None and workload.temperature < 0:
            found["temperature"] = "{temperature} must be ≥ 0"
        if self.request_rates and any(r <= 0 for r in self.request_rates):
            found["request_rates"] = "{request_rates} must be positive (requests per second)"
        if not self.request_rates and (not self.concurrencies or any(c < 1 for c in self.concurrencies)):
            found["concurrencies"] = "{concurrencies} must be whole numbers ≥ 1, e.g. 1,8,32"
        if self.requests is not None and self.duration is not None:
            found["duration"] = "give either {requests} or {duration}, not both"
        if self.requests is not None and self.requests < 1:
            found["requests"] = "{requests} must be at least 1"
        if self.duration is not None and self.duration <= 0:
            found.setdefault("duration", "{duration} must be positive")
        if self.repeat < 1:
            found["repeat"] = "{repeat} must be ≥ 1"
        if self.warmup < 0:
            found["warmup"] = "{warmup} must be ≥ 0"
        if not 0 < self.max_error_rate <= 1:
            found["max_error_rate"] = "{max_error_rate} is a fraction in (0, 1]"
        return found

    def validate(self) -> None:
        """For the engines: a sweep with problems is the caller's mistake (the CLI and the console's form ask
        problems() first and say them in their own words). Raises ValueError naming the config's fields."""
        found = self.problems()
        if found:
            raise ValueError("; ".join(say_problems(found, {f: f for f in SWEEP_FIELDS})))
        if any(speed <= 0 for speed in self.trace_speeds):  # the CLI's --trace-speed parser refuses them first
            raise ValueError(f"trace_speeds must be positive (2: twice as fast), got {self.trace_speeds}")


def say_problems(found: Mapping[SweepField, str], names: Mapping[SweepField, str]) -> list[str]:
    """The problems as sentences, each field written as `names` has it (KeyError for a field it lacks)."""
    words = {str(name): word for name, word in names.items()}
    return [text.format_map(words) for text in found.values()]


@dataclass
class ServerInfo:
    """What the server said about itself before the sweep (provenance)."""

    version: str | None = None
    model: str = "default"
    server_args: dict[str, Any] = field(default_factory=dict)
    speculative: bool = False
    context_length: int | None = None  # /v1/models' max_model_len, else what /server_info says
    # the running-request cap the scheduler uses (internal_states' effective_max_running_requests_per_dp: the memory's
    # limit where it is below --max-running-requests)
    effective_max_running_requests: int | None = None


class SweepRefused(ValueError):
    """The sweep cannot start as asked (e.g. a dataset's prompts too long for the server); nothing was sent."""


def fit_dataset(workload: WorkloadSpec, server: ServerInfo, long_prompts: LongPrompts) -> WorkloadSpec:
    """The workload without the dataset requests whose prompt is longer than the server's context length;
    SweepRefused when there are some and long_prompts is "error", or when none is left."""
    sample = workload.dataset
    if sample is None:
        return workload
    fitted = sample.within_context(server.context_length)
    dropped = fitted.too_long - sample.too_long
    if dropped and long_prompts == "error":
        raise SweepRefused(
            f"{dropped} of the {len(sample.requests)} requests sampled from {sample.file} have a prompt longer than "
            f"the server's context length ({server.context_length} tokens, counted in {sample.length_unit}); nothing "
            "was sent (leave out --long-prompts error to skip them)"
        )
    if not fitted.requests:
        raise SweepRefused(
            f"every request sampled from {sample.file} has a prompt longer than the server's context length "
            f"({server.context_length}); nothing was sent"
        )
    return replace(workload, dataset=fitted)


class LevelProbe(Protocol):
    """Something read around each level's measured requests (after its warm-up, so that they alone are in it): `start`
    before them, `finish` after, its answer kept in the level's record as `per_side` (a PD deployment's figures side by
    side: console.core.bench.deployment). A probe that fails leaves the record without it, never the level."""

    async def start(self) -> Any: ...

    async def finish(self, started: Any) -> dict[str, Any] | None: ...


@dataclass
class LevelResult:
    level: Level
    repeat_index: int
    started_at: datetime
    ended_at: datetime
    metrics: dict[str, Any]
    telemetry: dict[str, Any]
    results: list[RequestResult]
    accept_length_source: str | None
    cache_flushed: bool
    stopped: str | None = None
    warmup: Warmup | None = None
    per_side: dict[str, Any] | None = None  # the sweep's LevelProbe's answer for this level


@dataclass(frozen=True)
class Warmup:
    """How a level was warmed: `level` (waves at its own concurrency, at least `warmup` requests) or `settle` (waves
    until the round time of two in a row agreed, or WARMUP_MAX_WAVES), with each wave's mean round time."""

    mode: str
    requests: int
    waves: int
    wave_size: int
    round_ms: tuple[float, ...]
    settled: bool | None  # settle mode: whether two waves agreed before the cap (None in level mode)

    def to_record(self) -> dict[str, Any]:
        return {
            "warmup_mode": self.mode,
            "warmup_requests": self.requests,
            "warmup_waves": self.waves,
            "warmup_round_ms": [round(r, 3) for r in self.round_ms],
            "warmup_settled": self.settled,
        }


def wave_round_ms(results: Sequence[RequestResult]) -> float | None:
    """A warm-up wave's mean decode round (console.bench.metrics.decode_rounds), None without a decoded request."""
    value = decode_rounds(results)["round_time_ms"]
    return float(value) if value else None


def settled(rounds_ms: Sequence[float | None], tolerance: float = WARMUP_SETTLE_TOLERANCE) -> bool:
    """The last two waves' round times agree within `tolerance` (of the later one)."""
    if len(rounds_ms) < 2:
        return False
    before, last = rounds_ms[-2], rounds_ms[-1]
    if before is None or last is None or last <= 0:
        return False
    return abs(before - last) / last <= tolerance


@dataclass
class SweepResult:
    server: ServerInfo
    levels: list[LevelResult]
    gpus: list[dict[str, Any]]
    driver_version: str | None
    stopped: str | None = None
    capacity: dict[str, Any] | None = None  # --find-capacity: CapacitySearch.summary()


class _Stop(Exception):
    pass


@dataclass
class _LevelState:
    next: int = 0
    failed: int = 0
    in_flight: int = 0
    out_tokens: int = 0
    ttft_sum: float = 0.0


async def _get_server_info(client: BenchClient) -> dict[str, Any]:
    """/server_info (older servers: the deprecated /get_server_info), a PD router's per-role wrapping
    undone; {} when neither answers with a JSON object."""
    for path in ("/server_info", "/get_server_info"):
        try:
            got = await client.get_json(path)
        except Exception:
            continue
        if isinstance(got, dict):
            decode = got.get("decode")
            if isinstance(decode, list) and decode and isinstance(decode[0], dict):
                return decode[0]
            return got
    return {}


async def fetch_server_info(client: BenchClient) -> ServerInfo:
    info = ServerInfo()
    raw = await _get_server_info(client)
    if raw:
        info.version = str(raw["version"]) if raw.get("version") else None
        info.server_args = {
            k: v for k, v in raw.items() if k not in ("internal_states", "version", "kv_events", "launch_command")
        }
        info.speculative = bool(raw.get("speculative_algorithm"))
        served = raw.get("served_model_name") or raw.get("model_path")
        if served:
            info.model = str(served)
        info.context_length = _positive_int(raw.get("context_length"))
        states = raw.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            info.effective_max_running_requests = _positive_int(states[0].get("effective_max_running_requests_per_dp"))
        limit = _positive_int(raw.get("max_req_input_len"))
        if info.context_length is None and limit is not None:
            info.context_length = limit + 1
    try:
        models = await client.get_json("/v1/models")
        card = models["data"][0]
        info.model = str(card["id"])
        info.context_length = _positive_int(card.get("max_model_len")) or info.context_length
    except Exception:
        pass
    return info


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


async def _server_accept_length(client: BenchClient) -> float | None:
    """The server's lifetime mean accept length (internal_states[0], as `status` reads it)."""
    states = (await _get_server_info(client)).get("internal_states")
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    value = state.get("avg_spec_accept_length")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def poisson_gaps(rate: float, seed: int) -> Iterator[float]:
    """Seconds between arrivals of a Poisson process at `rate` per second (exponential gaps, mean 1/rate), the same
    sequence for the same seed: every setup compared gets the same arrival times."""
    rng = random.Random(seed)
    while True:
        yield rng.expovariate(rate)


class BenchEngine:
    def __init__(
        self,
        client: BenchClient,
        config: SweepConfig,
        on_event: Callable[[BenchEvent], None] | None = None,
        gpu_sampler: telemetry.GpuSampler | None = None,
        on_level: Callable[[LevelResult], None] | None = None,
        level_probe: LevelProbe | None = None,
    ) -> None:
        config.validate()
        self.level_probe = level_probe
        self.client = client
        self.config = config
        self._emit = on_event or (lambda _e: None)
        self._on_level = on_level or (lambda _level: None)  # each finished level, as it finishes
        self.gpu_sampler = gpu_sampler
        self._sweep_deadline = 0.0
        self._gpu_identity: list[Any] = []
        self._server = ServerInfo()
        self._done: list[LevelResult] = []
        self._search: CapacitySearch | None = None

    async def run(self) -> SweepResult:
        cfg = self.config
        self._sweep_deadline = time.perf_counter() + cfg.time_cap
        server = self._server = await fetch_server_info(self.client)
        workload = fit_dataset(cfg.workload, server, cfg.long_prompts)  # before anything is sent
        if workload.api == "chat" and workload.model == "default":
            workload = replace(workload, model=server.model)
        search = self._search = self._capacity_search()
        levels = cfg.levels() if search is None else [self._rate_level(search.start)]
        self._emit(SweepStarted(levels=levels, repeat=cfg.repeat, server_version=server.version, model=server.model))
        stopped = None
        index = 0
        try:
            while True:
                if search is not None:
                    rate = search.next_rate()
                    if rate is None:
                        break
                    level = self._rate_level(rate)
                elif index < len(levels):
                    level = levels[index]
                else:
                    break
                repeats = []
                for repeat_index in range(cfg.repeat):
                    result = await self._run_level(workload, level, index, repeat_index, server)
                    repeats.append(result)
                    self._done.append(result)
                    self._on_level(result)
                    if result.stopped:
                        stopped = result.stopped
                        raise _Stop
                if search is not None:
                    assert level.request_rate is not None
                    search.record(level.request_rate, all(r.metrics.get("slo_met") for r in repeats))
                index += 1
        except _Stop:
            pass
        self._emit(SweepDone(levels_done=len(self._done), stopped=stopped))
        return self.result_so_far(stopped)

    def _capacity_search(self) -> CapacitySearch | None:
        cfg = self.config
        if not cfg.find_capacity:
            return None
        if not cfg.slo:
            raise SweepRefused(
                "--find-capacity needs an SLO to hold the levels to: give --slo (or [slo] in the profile)"
            )
        start = cfg.request_rates[0] if cfg.request_rates else CAPACITY_START_RATE
        return CapacitySearch(start=start, precision=cfg.capacity_precision, max_levels=cfg.capacity_max_levels)

    def _rate_level(self, rate: float) -> Level:
        """A level of the capacity search: open loop at `rate` (4 significant digits), capped as the sweep's levels."""
        cfg = self.config
        cap = cfg.concurrencies[0] if len(cfg.concurrencies) == 1 else None
        return Level(concurrency=cap, request_rate=float(f"{rate:.4g}"))

    @property
    def server(self) -> ServerInfo:
        """What the server said about itself (filled in once run() started)."""
        return self._server

    def result_so_far(self, stopped: str | None = None) -> SweepResult:
        """The levels finished until now: the whole sweep once run() returned, the finished part of one
        that was cancelled (Ctrl-C)."""
        gpus, driver = telemetry.describe_gpus(self._gpu_identity)
        capacity = self._search.summary() if self._search is not None else None
        return SweepResult(self._server, list(self._done), gpus, driver, stopped, capacity)

    def _planned_requests(self, level: Level, workload: WorkloadSpec) -> int | None:
        cfg = self.config
        if cfg.duration is not None:
            return None
        if cfg.requests is not None:
            return cfg.requests
        if workload.dataset is not None:  # the sample drawn, each request once, as bench_serving's --num-prompts
            return len(workload.dataset.requests)
        if level.request_rate is not None:
            return max(16, round(level.request_rate * 30))
        return max(16, 4 * (level.concurrency or 1))

    async def _run_level(
        self, workload: WorkloadSpec, level: Level, index: int, repeat_index: int, server: ServerInfo
    ) -> LevelResult:
        cfg = self.config
        planned = self._planned_requests(level, workload)
        # Same prompts for the same level of every run (fair A/B), different ones per level and repeat.
        offset = index * 10_000_000 + repeat_index * 1_000_000
        pool_size = DURATION_POOL if workload.dataset is None else max(DURATION_POOL, len(workload.dataset.requests))
        pool = build_requests(workload, planned if planned is not None else pool_size, offset)
        warm_results, warmup = await self._warm_up(workload, level, repeat_index, offset)
        if warm_results and not any(r.success for r in warm_results):
            errors = sorted({r.error for r in warm_results})
            started = datetime.now(_UTC)
            return LevelResult(
                # the failed warm-up requests are the level's only requests: count them, don't show 0 failed
                level, repeat_index, started, started, compute_metrics(warm_results, 0.0), {},
                [], None, False, stopped=f"every warm-up request failed: {'; '.join(errors)[:300]}", warmup=warmup,
            )  # fmt: skip
        # After the warm-up (like bench_serving): the measured requests start on an empty cache, and the
        # server's accept-length counters cover them only.
        flushed = await self.client.flush_cache() if cfg.flush_cache else False

        probed = await self._probe_start()
        self._emit(LevelStarted(level, repeat_index, planned, cfg.duration))
        polls: list[list[Any]] = []
        sampling_done = asyncio.Event()
        sampler_task = asyncio.create_task(self._sample(polls, sampling_done)) if self.gpu_sampler else None
        started_at = datetime.now(_UTC)
        level_start = time.perf_counter()
        results: list[RequestResult] = []
        try:
            with full_collections_held():
                stopped = await self._drive(workload, level, pool, planned, results, level_start)
        except BaseException:
            # The level cancelled (Ctrl-C, an abort, the console closing): its poller goes with it, rather than
            # polling the host's GPUs for as long as the process lives.
            if sampler_task:
                sampler_task.cancel()
                await asyncio.gather(sampler_task, return_exceptions=True)
            raise
        duration = (
            max(r.start + r.latency for r in results) - level_start if results else time.perf_counter() - level_start
        )
        if sampler_task:
            # The poll in flight finishes rather than being cancelled: a level shorter than one poll still
            # gets its sample, and a cancelled nvidia-smi would be left running.
            sampling_done.set()
            with contextlib.suppress(*WAIT_TIMEOUTS):
                await asyncio.wait_for(sampler_task, TELEMETRY_FINISH_S)
        slo = Slo.from_json(cfg.slo) if cfg.slo else None
        metrics = compute_metrics(results, duration, level_start, slo.per_request_ms() if slo else None)
        if slo is not None:
            metrics.update(judge_level(metrics, slo))
        source = "requests" if metrics["accept_length"] is not None else None
        if source is None and server.speculative and flushed:
            metrics["accept_length"] = await _server_accept_length(self.client)
            source = "server_after_flush" if metrics["accept_length"] is not None else None
        tele = telemetry.aggregate(polls, metrics["total_output_tokens"], duration)
        per_side = await self._probe_finish(probed)
        self._emit(LevelDone(level, repeat_index, metrics, tele, stopped))
        return LevelResult(
            level,
            repeat_index,
            started_at,
            datetime.now(_UTC),
            metrics,
            tele,
            results,
            source,
            flushed,
            stopped,
            warmup,
            per_side,
        )

    async def _probe_start(self) -> Any:
        if self.level_probe is None:
            return None
        try:
            return await self.level_probe.start()
        except Exception:  # the figures beside the level are best effort: the level runs without them
            return None

    async def _probe_finish(self, started: Any) -> dict[str, Any] | None:
        if self.level_probe is None or started is None:
            return None
        try:
            return await self.level_probe.finish(started)
        except Exception:
            return None

    async def _warm_up(
        self, workload: WorkloadSpec, level: Level, repeat_index: int, offset: int
    ) -> tuple[list[RequestResult], Warmup | None]:
        """The level's warm-up (the module's doc): waves of its concurrency (an open-loop or trace level: of
        `warmup`), at least `warmup` requests; with warmup_settle on the first repeat, until the round settles."""
        cfg = self.config
        if cfg.warmup <= 0:
            return [], None
        size = max(1, level.concurrency or cfg.warmup)
        settle = cfg.warmup_settle and repeat_index == 0
        waves = max(1, -(-cfg.warmup // size))
        most = max(waves, WARMUP_MAX_WAVES) if settle else waves
        # Built as needed (a trace's requests are made when taken: TraceRequests has no slices)
        pool = build_requests(workload, most * size, offset + 900_000)
        results: list[RequestResult] = []
        rounds: list[float | None] = []
        sent = 0
        while len(rounds) < most:
            wave = [pool[i] for i in range(sent, sent + size)]
            sent += size
            got = list(await asyncio.gather(*(self._send(workload, req) for req in wave)))
            results.extend(got)
            rounds.append(wave_round_ms(got))
            if not any(r.success for r in got):
                break
            if len(rounds) >= waves and (not settle or settled(rounds)):
                break
        done = Warmup(
            mode="settle" if settle else "level",
            requests=sent,
            waves=len(rounds),
            wave_size=size,
            round_ms=tuple(r for r in rounds if r is not None),
            settled=settled(rounds) if settle else None,
        )
        return results, done

    async def _sample(self, polls: list[list[Any]], done: asyncio.Event) -> None:
        assert self.gpu_sampler is not None
        while not done.is_set():
            try:
                sample = list(await self.gpu_sampler())
                if sample:  # a poll that saw no GPU (nvidia-smi failed) is no sample
                    polls.append(sample)
                    self._gpu_identity = self._gpu_identity or sample
            except Exception:
                pass  # a missed telemetry poll must not fail the benchmark
            with contextlib.suppress(*WAIT_TIMEOUTS):
                await asyncio.wait_for(done.wait(), self.config.telemetry_interval)

    async def _send(self, workload: WorkloadSpec, req: PreparedRequest) -> RequestResult:
        timeout = min(self.config.request_timeout, max(0.001, self._sweep_deadline - time.perf_counter()))
        result = await self.client.stream(workload.api, req.body, req.prompt_len, timeout)
        if not result.success and time.perf_counter() >= self._sweep_deadline:
            result.error = f"cut by the hard time cap of {self.config.time_cap:g} s"
        return result

    async def _drive(
        self,
        workload: WorkloadSpec,
        level: Level,
        pool: Sequence[PreparedRequest],
        planned: int | None,
        results: list[RequestResult],
        level_start: float,
    ) -> str | None:
        """Run the level's requests; return why it stopped early, or None."""
        cfg = self.config
        state = _LevelState()
        stop_reason: list[str] = []
        level_deadline = level_start + cfg.duration if cfg.duration is not None else None
        last_figures = level_start

        def take() -> PreparedRequest | None:
            if stop_reason:
                return None
            now = time.perf_counter()
            if now >= self._sweep_deadline:
                stop_reason.append(f"hard time cap of {cfg.time_cap:g} s reached")
                return None
            if planned is not None and state.next >= planned:
                return None
            if level_deadline is not None and now >= level_deadline:
                return None
            req = pool[state.next % len(pool)]
            state.next += 1
            return req

        def record(result: RequestResult) -> None:
            nonlocal last_figures
            results.append(result)
            if not result.success:
                state.failed += 1
            else:
                state.out_tokens += result.output_len
                state.ttft_sum += result.ttft
            completed = len(results) - state.failed
            self._emit(RequestDone(level, result, completed, state.failed))
            finished = len(results)
            if not stop_reason and time.perf_counter() >= self._sweep_deadline:
                stop_reason.append(f"hard time cap of {cfg.time_cap:g} s reached")
            if state.failed and not stop_reason:
                rate = state.failed / finished
                if rate > cfg.max_error_rate and (finished >= ERROR_RATE_MIN_SAMPLE or rate == 1.0):
                    stop_reason.append(
                        f"error rate {rate:.0%} over --max-error-rate {cfg.max_error_rate:.0%} "
                        f"after {finished} requests (last error: {result.error})"
                    )
            now = time.perf_counter()
            if now - last_figures >= RUNNING_FIGURES_INTERVAL_S:
                last_figures = now
                elapsed = now - level_start
                self._emit(
                    RunningFigures(
                        level,
                        elapsed,
                        completed,
                        state.failed,
                        state.in_flight,
                        state.out_tokens / elapsed if elapsed > 0 else 0.0,
                        state.ttft_sum / completed * 1000.0 if completed else 0.0,
                    )
                )

        async def one(req: PreparedRequest) -> None:
            state.in_flight += 1
            try:
                result = await self._send(workload, req)
            finally:
                state.in_flight -= 1
            record(result)

        if level.trace_speed is not None:
            assert workload.dataset is not None
            await self._trace_loop(level.trace_speed, workload.dataset.arrivals_s(), take, one)
        elif level.request_rate is None:

            async def worker() -> None:
                while (req := take()) is not None:
                    await one(req)

            await asyncio.gather(*(worker() for _ in range(level.concurrency or 1)))
        else:
            await self._open_loop(level, take, one)
        return stop_reason[0] if stop_reason else None

    async def _trace_loop(
        self,
        speed: float,
        arrivals: list[float],
        take: Callable[[], PreparedRequest | None],
        one: Callable[[PreparedRequest], Any],
    ) -> None:
        """A trace on its own clock: request i sent at its arrival time / speed from the level's start (past the
        trace's last request, it goes round again one mean gap later), however many are in flight, as bench_serving's
        mooncake replay sends them."""
        span = max(arrivals, default=0.0)
        period = span + (span / (len(arrivals) - 1) if len(arrivals) > 1 else 1.0)
        tasks: set[asyncio.Task[None]] = set()
        start = time.perf_counter()
        sent = 0
        while (req := take()) is not None:  # the body made before the wait: the send is on time
            due = start + (arrivals[sent % len(arrivals)] + (sent // len(arrivals)) * period) / speed
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(one(req))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += 1
        if tasks:
            await asyncio.gather(*tasks)

    async def _open_loop(
        self,
        level: Level,
        take: Callable[[], PreparedRequest | None],
        one: Callable[[PreparedRequest], Any],
    ) -> None:
        """Poisson arrivals (exponential gaps, seeded) at level.request_rate; optional cap on in-flight."""
        assert level.request_rate is not None
        gaps = poisson_gaps(level.request_rate, self.config.workload.seed)
        cap = asyncio.Semaphore(level.concurrency) if level.concurrency else None
        tasks: set[asyncio.Task[None]] = set()

        async def capped(req: PreparedRequest) -> None:
            if cap is None:
                await one(req)
                return
            async with cap:
                await one(req)

        next_at = time.perf_counter()
        while (req := take()) is not None:
            task = asyncio.create_task(capped(req))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            next_at += next(gaps)
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        if tasks:
            await asyncio.gather(*tasks)
