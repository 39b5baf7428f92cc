"""`opsconsole predict`: what each setup of a tune's space would do on this host's traffic, before any restart.

    plan = await plan_predict(session, request)      # the running setup, the space, the host's records
    if plan.stale:                                   # no benchmark of the running setup on that traffic yet
        plan = await bench_running(session, plan, request, on_event=...)   # one sweep, no restart
    result = predict(plan, request)                  # pure: each candidate's forecast and verdict

It reads the host's own records (logs/bench-*.jsonl of the workspace, through its index console.bench.index: this
target and the SGLang version it runs now, at most `max_age_days` old: every setup measured there, named in what the
prediction rests on) and those of the other hosts of its groups (profiles/groups.toml) that run the same model, draft
and GPU with that version (pooled, and said so); it changes nothing on the host. The one benchmark it may run is of
the setup already running, with repeats so that the noise is measured, not assumed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from console.bench.engine import SweepConfig
from console.bench.index import Entry, RecordIndex
from console.bench.records import BenchRecord, load_run
from console.bench.workloads import WorkloadSpec
from console.core.bench import bench_host
from console.core.predict import Evidence, Predictor, SetupForecast, Split, Unknown, overlap_of, workload_key
from console.core.session import Session
from console.core.tune.adaptive import AdaptiveForecast, forecast_adaptive
from console.core.tune.search import Cell
from console.core.tune.space import Candidate, Space, SpaceRequest, build_space
from console.errors import UsageError
from console.fleet.groups import load_groups
from console.sglang.setup import SpecSetup
from console.sglang.slo import Slo
from console.sglang.specmode import SpecMode, spec_mode

DEFAULT_LEVELS = (1, 8, 32)
# The running setup's own benchmark: repeats measure the noise every band carries.
BASE_REPEATS = 2
BASE_DURATION_S = 20.0


@dataclass(frozen=True)
class PredictRequest:
    space: SpaceRequest
    concurrencies: tuple[int, ...] = ()  # () = the levels the running setup was measured at (else DEFAULT_LEVELS)
    workload: WorkloadSpec | None = None  # None = the traffic the running setup was last measured on
    from_run: str | None = None  # a run (label or .jsonl) whose traffic to predict for
    slo: dict[str, float] | None = None
    max_age_days: float = 14.0
    base_duration_s: float = BASE_DURATION_S  # the running setup's benchmark, where one is needed
    adaptive: bool = False  # also predict the running draft under --speculative-adaptive (always when it runs so)


@dataclass(frozen=True)
class PredictPlan:
    """What a prediction will rest on, read from the host and the workspace; nothing changed."""

    target: str
    sglang_version: str
    model: str | None
    running: SpecSetup
    running_overlap: bool
    space: Space
    records: list[BenchRecord]
    workload: str | None  # the traffic predicted for (a record's workload, console.core.predict.workload_key)
    workload_spec: WorkloadSpec | None  # how to benchmark it, where the request says
    levels: tuple[int, ...]
    stale: str | None = None  # why the running setup needs a benchmark first (None: its records are there)
    adaptive: bool = False  # the server runs --speculative-adaptive, or the request asks about it
    # where the records are a deployment's (a PD deployment's through smg): what the prediction covers and not
    scope: tuple[str, ...] = ()


@dataclass
class PredictResult:
    plan: PredictPlan
    forecasts: list[tuple[str, SetupForecast]]  # (name, forecast), the running setup first
    noise: float | None
    model_error: float
    calibration: float
    elapsed_ms: float
    slo: Slo | None = None
    pruned: list[tuple[str, str]] = field(default_factory=list)  # (setup, SGLang's reason)
    adaptive: AdaptiveForecast | None = None  # each tier, and the tier SGLang's table settles on per level
    split: Split | None = None  # where the round rests on one setup: the benchmark that would split it
    per_side: dict[int, dict[str, Any]] = field(default_factory=dict)  # PD: the running setup's sides, per level

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "target": plan.target,
            "sglang_version": plan.sglang_version,
            "model": plan.model,
            "workload": plan.workload,
            "levels": list(plan.levels),
            "running": {"key": plan.running.key, "name": plan.running.name()},
            "records": len(plan.records),
            "noise": self.noise,
            "model_error": round(self.model_error, 4),
            "calibration": round(self.calibration, 3),
            "elapsed_ms": round(self.elapsed_ms, 1),
            "slo": self.slo.to_json() if self.slo else None,
            "setups": [_forecast_json(name, f) for name, f in self.forecasts],
            "pruned": [{"setup": setup, "reason": reason} for setup, reason in self.pruned],
            "adaptive": self.adaptive.to_json() if self.adaptive is not None else None,
            "split": _split_json(self.split),
            "scope": list(plan.scope),
            "per_side": {str(c): sides for c, sides in self.per_side.items()},
        }


def _split_json(split: Split | None) -> dict[str, Any] | None:
    if split is None:
        return None
    return {
        "key": split.setup.key,
        "name": split.setup.name(),
        "text": split.text,
        "bands_now": {str(c): round(b, 4) for c, b in split.bands_now.items()},
        "bands_after": {str(c): round(b, 4) for c, b in split.bands_after.items()},
    }


def _forecast_json(name: str, forecast: SetupForecast) -> dict[str, Any]:
    setup = forecast.setup
    return {
        "key": setup.key,
        "name": name,
        **setup.server_args(),
        "spec_v2": setup.spec_v2,
        "verdict": forecast.verdict.kind,
        "verdict_text": forecast.verdict.text,
        "settle": forecast.verdict.settle,
        "capacity": forecast.capacity(),
        "levels": [
            {
                "concurrency": lv.concurrency,
                "output_throughput": round(lv.output_tok_s.value, 2),
                "output_throughput_low": round(lv.output_tok_s.low, 2),
                "output_throughput_high": round(lv.output_tok_s.high, 2),
                "band": round(lv.output_tok_s.band, 4),
                "tpot_ms": round(lv.tpot_ms.value, 3),
                "ttft_ms": round(lv.ttft_ms, 2),
                "accept_length": round(lv.accept_length.value, 4) if lv.accept_length else None,
                "accept_length_low": round(lv.accept_length.low, 4) if lv.accept_length else None,
                "accept_length_high": round(lv.accept_length.high, 4) if lv.accept_length else None,
                "decode_batch": round(lv.decode_batch, 2),
                "measured_output_throughput": round(lv.measured.value, 2) if lv.measured else None,
                "mean_output_throughput_low": round(lv.mean.low, 2) if lv.mean else None,
                "mean_output_throughput_high": round(lv.mean.high, 2) if lv.mean else None,
                "versus_running": forecast.verdict.per_level.get(lv.concurrency),
                "slo_met": lv.slo_met,
                "request_goodput": lv.goodput_req_s,
            }
            for lv in forecast.levels
        ],
        "rests_on": forecast.rests_on,
        "assumptions": forecast.assumptions,
    }


# What a prediction of a PD deployment (its records measured through smg) covers, and what it does not: said with
# every such prediction (docs/deployments.md).
PD_SCOPE = (
    "covers the decode side: output tok/s and TPOT are the decode servers' rounds (their accept lengths and round "
    "times, as the requests through smg carry them), fitted from this deployment's records through smg",
    "TTFT is taken as measured through smg at each level (prefill, the KV transfer, decode's first round) and "
    "assumed the same for every setup; the records' per-side figures say how it splits",
    "does not cover the prefill side under another setup: an EAGLE-family prefill runs the draft's extend too, so a "
    "setup that changes the draft changes prefill's time; nor the KV transfer's",
    "does not cover a prefill that saturates: it holds the decode batch below what the levels ask (watch the prefill "
    "servers' TTFT grow with the level); with several decode servers the decode batch is the deployment's over all "
    "of them",
)


async def plan_predict(
    session: Session, request: PredictRequest, *, target: str | None = None, scope: Sequence[str] = ()
) -> PredictPlan:
    """Read the running setup (the server's resolved values), the space as tune builds it, and the host's records.
    `target`: read another target's records instead of the session's host's (a PD deployment's, measured through
    smg, with the session a decode server's: whose rounds the setup changes), without pooling a group's; `scope`: what
    such a prediction covers, said with it. Raises UsageError for a --from-run of another target, HostError when the
    host cannot be read."""
    version, _source = await session.sglang_version()
    client = await session.sglang()
    info = await client.server_info()
    model = info.get("served_model_name") or info.get("model_path")
    running = SpecSetup.from_server_args(info, spec_mode(version, info))
    running_overlap = overlap_of(info, spec_mode(version, info))
    original = await session.service.read_unit()
    space = build_space(request.space, original, unit_name=session.service.unit, version=version)
    label = target or session.label
    if target is None:
        records = host_records(session, version, request.max_age_days, running=running, model=_model_name(model))
    elif session.workspace is None:
        records = []
    else:
        records = records_for(session.workspace.logs, target, version, request.max_age_days)
    workload, spec = _workload(request, records, running, session, label)
    levels = request.concurrencies or _levels(records, running, workload) or DEFAULT_LEVELS
    plan = PredictPlan(label, version, str(model) if model else None, running, running_overlap, space,
                       records, workload, spec, tuple(levels),
                       adaptive=bool(info.get("speculative_adaptive")) or request.adaptive,
                       scope=tuple(scope))  # fmt: skip
    return replace(plan, stale=_stale(plan))


def host_records(
    session: Session, version: str, max_age_days: float, *, running: SpecSetup | None = None, model: str | None = None
) -> list[BenchRecord]:
    """The workspace's records of this target and SGLang version, at most `max_age_days` old, and with `running` the
    records of the other hosts of its groups that ran the same model (`model`, the served name), draft and GPU on that
    version (console.fleet.groups; their `target` says whose they are)."""
    if session.workspace is None:
        return []
    peers = group_peers(session) if running is not None else set()
    return records_for(session.workspace.logs, session.label, version, max_age_days, running=running, model=model,
                       peers=peers)  # fmt: skip


def records_for(
    logs: Path,
    label: str,
    version: str,
    max_age_days: float,
    *,
    running: SpecSetup | None = None,
    model: str | None = None,
    peers: Collection[str] = (),
) -> list[BenchRecord]:
    """host_records from a logs/ folder: `label`'s own records, and `peers`' that match (the same model, the running
    setup's draft, a GPU the host's own records show), through the index (console.bench.index)."""
    since = datetime.now(UTC) - timedelta(days=max_age_days)
    entries = RecordIndex(logs).entries(since=since, targets={label, *peers})
    own = [e for e in entries if e.target == label and e.sglang_version == version]
    gpus = {e.gpu for e in own if e.gpu}
    draft = running.draft_model_path if running is not None else None

    def pooled(e: Entry) -> bool:
        return (
            e.target in peers
            and e.sglang_version == version
            and (model is None or e.model == model)
            and bool(gpus) and e.gpu in gpus
            and e.draft == draft
        )  # fmt: skip

    mine = {id(e) for e in own}
    return [e.load() for e in entries if id(e) in mine or pooled(e)]


def _model_name(model: Any) -> str | None:
    return str(model) if model else None


def group_peers(session: Session) -> set[str]:
    """The other members of every group (profiles/groups.toml) this host is in; none where there is no such file or
    it cannot be read (predict goes on with the host's own records)."""
    if session.workspace is None:
        return set()
    try:
        groups = load_groups(session.workspace.profiles)
    except UsageError:
        return set()
    return {m for g in groups.values() if session.label in g.members for m in g.members} - {session.label}


def _workload(
    request: PredictRequest, records: Sequence[BenchRecord], running: SpecSetup, session: Session, label: str
) -> tuple[str | None, WorkloadSpec | None]:
    if request.from_run:
        if session.workspace is None:
            raise UsageError("{field} needs a workspace with logs/", field="from_run")
        try:
            run = load_run(request.from_run, session.workspace.logs)
        except LookupError as exc:
            raise UsageError(str(exc)) from None
        if run[0].target != label:
            raise UsageError(f"{request.from_run} measured {run[0].target}, not {label}: give a run of {label}")
        return workload_key(run[0].workload), None
    if request.workload is not None:
        return workload_key(request.workload.describe()), request.workload
    mine = [
        r for r in records if r.target == label and SpecSetup.from_server_args(r.server_args, r.spec_mode) == running
    ]
    if not mine:
        return None, None
    return workload_key(max(mine, key=lambda r: r.started_at).workload), None


def _levels(records: Sequence[BenchRecord], running: SpecSetup, workload: str | None) -> list[int]:
    return sorted(
        {
            r.max_concurrency
            for r in records
            if r.max_concurrency is not None
            and workload_key(r.workload) == workload
            and SpecSetup.from_server_args(r.server_args, r.spec_mode) == running
        }
    )


def _stale(plan: PredictPlan) -> str | None:
    if plan.workload is None:
        return f"no benchmark of the running setup ({plan.running.name()}) in logs/ yet"
    evidence = Evidence.from_records(plan.records)
    measured = {m.concurrency for m in evidence.of(plan.workload) if m.setup == plan.running}
    if not measured:
        return f"no benchmark of the running setup ({plan.running.name()}) on {plan.workload} in logs/"
    return None


def base_sweep(plan: PredictPlan, request: PredictRequest) -> SweepConfig:
    """The running setup's benchmark a prediction needs: the traffic asked for at the levels asked for, repeated."""
    workload = plan.workload_spec or request.workload or WorkloadSpec()
    return SweepConfig(
        workload=workload,
        concurrencies=list(plan.levels),
        duration=request.base_duration_s,
        repeat=BASE_REPEATS,
        slo=request.slo,
    )


# A benchmark of the running setup through another front door than the session's host (a PD deployment's smg):
# (sweep, label, on_event) -> its records, appended to logs/.
BenchFn = Callable[[SweepConfig, str, Any], Awaitable[list[BenchRecord]]]


async def bench_running(
    session: Session,
    plan: PredictPlan,
    request: PredictRequest,
    *,
    on_event: Any = None,
    label: str | None = None,
    bench: BenchFn | None = None,
) -> PredictPlan:
    """Benchmark the running setup (no restart) and plan again with its records (a plan of another target's records:
    through `bench`, that target's front door)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    sweep, name = base_sweep(plan, request), label or f"predict-base-{stamp}"
    if bench is not None:
        await bench(sweep, name, on_event)
    else:
        await bench_host(session, sweep, label=name, on_event=on_event)
    other = plan.target if plan.target != session.label else None
    return await plan_predict(session, request, target=other, scope=plan.scope)


def predict(plan: PredictPlan, request: PredictRequest) -> PredictResult:
    """Every candidate of the space (and the running setup, first) at the plan's levels. UsageError when the plan
    has no base (bench_running first)."""
    if plan.stale or plan.workload is None:
        raise UsageError("{stale}: benchmark it first (no restart), or give {field} RUN", field="from_run",
                         stale=plan.stale)  # fmt: skip
    started = time.perf_counter()
    evidence = Evidence.from_records(plan.records)
    try:
        predictor = Predictor(evidence, plan.workload, incumbent=plan.running, incumbent_overlap=plan.running_overlap,
                              host=plan.target)  # fmt: skip
    except Unknown as exc:
        raise UsageError(f"{exc}: {exc.settle}") from None
    slo = Slo.from_json(request.slo) if request.slo else None
    wanted: list[tuple[str, SpecSetup, bool]] = [
        ("running: " + plan.running.name(), plan.running, plan.running_overlap)
    ]
    for candidate in plan.space.candidates:
        setup = candidate.setup
        overlap = overlap_of(candidate.config, candidate.spec_mode)
        if (setup, overlap) != (plan.running, plan.running_overlap):
            wanted.append((candidate.name, setup, overlap))
    forecasts = [(name, predictor.forecast(setup, overlap, plan.levels, slo)) for name, setup, overlap in wanted]
    pruned = [(p.setting.describe(), p.reason) for p in plan.space.pruned]
    adaptive = None
    if plan.adaptive and plan.running.speculative:
        adaptive = forecast_adaptive(predictor, plan.running, plan.running_overlap, plan.levels)
    split = predictor.split([(setup, overlap) for _name, setup, overlap in wanted], plan.levels)
    elapsed = (time.perf_counter() - started) * 1000.0
    return PredictResult(plan, forecasts, predictor.noise, predictor.model_error, predictor.calibration, elapsed,
                         slo, pruned, adaptive, split, _running_sides(plan))  # fmt: skip


def _running_sides(plan: PredictPlan) -> dict[int, dict[str, Any]]:
    """The running setup's per-side figures on the predicted traffic (a PD deployment's records keep them), the
    newest record's at each level predicted."""
    newest: dict[int, BenchRecord] = {}
    for r in plan.records:
        if (
            r.per_side
            and r.max_concurrency in plan.levels
            and workload_key(r.workload) == plan.workload
            and SpecSetup.from_server_args(r.server_args, r.spec_mode) == plan.running
            and (r.max_concurrency not in newest or r.started_at > newest[r.max_concurrency].started_at)
        ):
            newest[r.max_concurrency] = r
    return {c: dict(newest[c].per_side or {}) for c in sorted(newest)}


# --- tune --strategy predict -----------------------------------------------------------------------------------


Forecasts = dict[str, dict[Cell, tuple[float, float, float]] | None]


def predict_untried(
    records: Sequence[BenchRecord], candidates: Sequence[Candidate], cells: Sequence[Cell], tried: Sequence[str]
) -> tuple[Forecasts, dict[str, tuple[tuple[Cell, float, float, float], ...]]]:
    """The untried candidates predicted from a tune's own records, per cell (low, value, high) of output tok/s, None
    for one the prediction cannot place (no measured base for its draft); and the same as rows for an event."""
    evidence = Evidence.from_records(records)
    predictors: dict[str, Predictor] = {}
    for workload in dict.fromkeys(cell.workload for cell in cells):
        keys = [workload_key(r.workload) for r in records if r.workload.get("name") == workload]
        if keys:
            with contextlib.suppress(Unknown):
                predictors[workload] = Predictor(evidence, keys[-1])
    forecasts: Forecasts = {}
    shown: dict[str, tuple[tuple[Cell, float, float, float], ...]] = {}
    for candidate in candidates:
        if candidate.key in tried:
            continue
        setup, overlap = candidate.setup, overlap_of(candidate.config, candidate.spec_mode)
        per_cell: dict[Cell, tuple[float, float, float]] = {}
        placed = bool(predictors)
        for workload, predictor in predictors.items():
            levels = [c.concurrency for c in cells if c.workload == workload]
            forecast = predictor.forecast(setup, overlap, levels)
            if not forecast.levels:
                placed = False
                break
            for level in forecast.levels:
                figure = level.output_tok_s
                per_cell[Cell(workload, level.concurrency)] = (figure.low, figure.value, figure.high)
        forecasts[candidate.key] = per_cell if placed else None
        if placed:
            shown[candidate.key] = tuple((cell, *values) for cell, values in per_cell.items())
    return forecasts, shown


# --- the console: predictions as the operator types ------------------------------------------------------------


@dataclass(frozen=True)
class Foresight:
    """One host's prediction for the console: fitted once from its records (in a worker: `foresight`), then asked
    for any setup as the editor's fields change (`of`: microseconds to milliseconds, pure)."""

    running: SpecSetup
    running_overlap: bool
    levels: tuple[int, ...]
    workload: str | None
    predictor: Predictor | None
    why_not: str | None = None  # what is missing for a prediction (and what would give it), when predictor is None
    evidence: Evidence | None = None  # the records it was fitted from, for a refit on other traffic (on_workload)
    host: str | None = None  # whose records are the host's own (the rest its group's, pooled)

    def on_workload(self, spec: WorkloadSpec) -> Foresight:
        """The same host's prediction on other traffic of its records (a tune's own workload, where it is not the
        traffic the running setup was measured on last); `why_not` when the running setup was never measured on it.
        A refit: a few milliseconds."""
        workload = workload_key(spec.describe())
        if workload == self.workload or self.evidence is None:
            return self
        if not any(m.setup == self.running for m in self.evidence.of(workload)):
            why = f"no benchmark of the running setup ({self.running.name()}) on {workload} in logs/"
            return replace(self, workload=workload, predictor=None, why_not=f"{why}: benchmark it (b) to predict")
        try:
            predictor = Predictor(
                self.evidence, workload, incumbent=self.running, incumbent_overlap=self.running_overlap, host=self.host
            )
        except Unknown as exc:
            return replace(self, workload=workload, predictor=None, why_not=f"{exc}: {exc.settle}")
        return replace(self, workload=workload, predictor=predictor, why_not=None)

    def of(
        self, server_args: Mapping[str, Any], mode: SpecMode | None, levels: Sequence[int] | None = None
    ) -> SetupForecast | None:
        """The forecast of the setup these resolved values run (the rules' resolved args and their spec-v2 verdict,
        as the editor's check gives them; a tune candidate's config and spec mode) at `levels` (None: the levels
        the running setup was measured at); None without a predictor."""
        if self.predictor is None:
            return None
        setup = SpecSetup.from_server_args(server_args, mode)
        return self.predictor.forecast(setup, overlap_of(server_args, mode), self.levels if levels is None else levels)

    def running_forecast(self, levels: Sequence[int] | None = None) -> SetupForecast | None:
        if self.predictor is None:
            return None
        return self.predictor.forecast(self.running, self.running_overlap, self.levels if levels is None else levels)

    def of_candidates(
        self, candidates: Sequence[Candidate], levels: Sequence[int] | None = None
    ) -> list[tuple[str, SetupForecast]]:
        """Each candidate of a tune's space, by its name, as `predict` forecasts it ([] without a predictor)."""
        if self.predictor is None:
            return []
        chosen = self.levels if levels is None else levels
        return [
            (c.name, self.predictor.forecast(c.setup, overlap_of(c.config, c.spec_mode), chosen)) for c in candidates
        ]


async def foresight(session: Session, *, levels: Sequence[int] = (), max_age_days: float = 14.0) -> Foresight:
    """The host's prediction from the workspace's records: the running setup's traffic (its newest records) at the
    levels it was measured at (or `levels`). Never raises for missing records: `why_not` says what is missing."""
    version, _source = await session.sglang_version()
    info = await (await session.sglang()).server_info()
    mode = spec_mode(version, info)
    running, overlap = SpecSetup.from_server_args(info, mode), overlap_of(info, mode)
    model = info.get("served_model_name") or info.get("model_path")
    records = host_records(session, version, max_age_days, running=running, model=_model_name(model))
    mine = [
        r
        for r in records
        if r.target == session.label and SpecSetup.from_server_args(r.server_args, r.spec_mode) == running
    ]
    if not mine:
        why = f"no benchmark of the running setup ({running.name()}) in logs/: benchmark it (b) to predict"
        return Foresight(running, overlap, tuple(levels), None, None, why)
    workload = workload_key(max(mine, key=lambda r: r.started_at).workload)
    chosen = tuple(levels) or tuple(_levels(records, running, workload))
    evidence = Evidence.from_records(records)
    try:
        predictor = Predictor(evidence, workload, incumbent=running, incumbent_overlap=overlap, host=session.label)
    except Unknown as exc:
        return Foresight(running, overlap, chosen, workload, None, f"{exc}: {exc.settle}", evidence, session.label)
    return Foresight(running, overlap, chosen, workload, predictor, None, evidence, session.label)
