"""A benchmark as the console's form asks for it: the form's fields (kept in the workspace, so the next form opens
with the last used values), the label proposed from the running setup, the sweeps the fields make (one per
workload: random and chat can be queued, the optimistic and the realistic figure from one run) and the queue that
runs them one after the other on a host session (console.core.bench.bench_host for each).

Each field's text is read here (what cannot be read is said beside that field); the sweep they make is checked
by SweepConfig.problems(), whose problems are keyed by the config's own fields: FORM_FIELD says beside which form
field each one stands, FORM_NAMES how the form's text calls it.

The operator's own traffic (issue 23): the workload `dataset` sends a file of the workspace's datasets/ (picked from
dataset_files(); sampled with the form's sample size and seed, as `bench --dataset` does: the file is read when the
form is started, and what is wrong with it is said beside the dataset field, nothing sent), the SLO field holds each
level to a latency SLO (goodput and a verdict per level; empty: the profile's [slo], if any) and find capacity
searches the request rate at which the SLO stops being met instead of running the levels. A Mooncake-format trace
picked as the dataset is replayed whole on its own clock (one level, at its own pace; `bench --dataset` has the speed
and window options), so it refuses request rates and find capacity beside their fields.

The production shape (`bench --shape-from-server WINDOW --rate-scale X,Y`): a shape window watches the server's own
/metrics that long when the sweep starts, then runs requests drawn from that traffic at its rate times each rate
scale (traffic_shape.py: ShapeObserving and ShapeObserved go to on_event, the shape line before anything
is sent). The shape makes the workload and the rates, so it is refused beside its field with another workload than
random or with request rates typed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from console.bench.datasets import DatasetError, sample_dataset
from console.bench.engine import SweepConfig, SweepField, say_problems
from console.bench.records import BenchRecord
from console.bench.slo import EXAMPLE, parse_slo
from console.bench.workloads import DatasetSample, WorkloadSpec
from console.core.bench.host import ClientChoice, bench_host, parse_float_list, parse_int_list
from console.core.bench.traffic_shape import ShapeAsk, shape_the_sweep
from console.errors import UsageError
from console.sglang.traffic_shape import parse_window

if TYPE_CHECKING:
    from console.core.session import Session
    from console.core.status import HostView

T = TypeVar("T")
FORM_FILE = "console-bench-form.json"  # in logs/, beside the records (not a bench-*.jsonl: runs never read it)
WORKLOAD_CHOICES = ("random", "chat", "random+chat", "dataset")
CAPACITY_CHOICES = ("no", "yes")  # find capacity: the levels as given, or the search over request rates
DATASET_SUFFIXES = (".json", ".jsonl")  # what the dataset picker lists of datasets/ (the formats datasets reads)
DEFAULT_OUTPUT_LEN = 256  # the synthetic workloads' (a dataset's own lengths are capped by the field, when given)
# Beside which form field a problem of the sweep stands (SweepConfig.problems), and how its text names the fields.
FORM_FIELD: dict[SweepField, str] = {
    "concurrencies": "concurrency",
    "request_rates": "request_rate",
    "requests": "requests",
    "duration": "duration",
    "warmup": "warmup",
    "repeat": "repeat",
    "input_len": "input_len",
    "output_len": "output_len",
}
FORM_NAMES: dict[SweepField, str] = {
    "concurrencies": "concurrency levels",
    "request_rates": "request rates",
    "requests": "requests",
    "duration": "duration",
    "warmup": "warmup",
    "repeat": "repeat",
    "input_len": "input length",
    "output_len": "output length",
}
# What the form does not ask for: `opsconsole bench`'s defaults, which pass SweepConfig.problems (a test holds it).
FORM_FIXED: dict[str, Any] = {
    "api": "generate",
    "temperature": None,
    "request_timeout": 600.0,
    "long_prompts": "skip",  # a dataset's prompts longer than the server's context: left out and counted
    "max_error_rate": 0.5,
    "time_cap": 3600.0,
}


@dataclass(frozen=True)
class BenchForm:
    """The form's fields as typed (text), with `opsconsole bench`'s defaults."""

    label: str = ""
    concurrency: str = "1,8,32"
    request_rate: str = ""  # open loop at these rates instead (requests/s)
    requests: str = ""  # per level; empty: max(16, 4 × C)
    duration: str = ""  # seconds per level, instead of requests
    workload: str = "random"  # random | chat | random+chat
    input_len: str = "1024"
    output_len: str = "256"
    repeat: str = "1"
    warmup: str = "2"
    dataset: str = ""  # a file of the workspace's datasets/ (the workload `dataset` sends it)
    dataset_sample: str = "1000"  # requests drawn from it (bench_serving's --num-prompts default)
    seed: str = "1"  # the same requests in the same order for every run with the same file, sample and seed
    shape_window: str = ""  # watch the server's traffic this long (10m, 90s), then run its shape (empty: off)
    rate_scale: str = "1"  # with a shape window: the levels' rates as multiples of the rate seen
    slo: str = ""  # e.g. ttft_p95=800ms,tpot_p95=60ms (empty: the profile's [slo], if any)
    find_capacity: str = "no"  # yes: search the request rate at which the SLO stops being met

    def remembered(self) -> dict[str, str]:
        """What is kept for the next form: everything but the label (proposed anew from the running setup)."""
        out = asdict(self)
        out.pop("label")
        return out


def load_form(logs: Path) -> BenchForm:
    """The last used values (the defaults where none were kept, or the file cannot be read)."""
    try:
        kept = json.loads((logs / FORM_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return BenchForm()
    if not isinstance(kept, dict):
        return BenchForm()
    known = {f.name for f in fields(BenchForm)} - {"label"}
    values = {k: str(v) for k, v in kept.items() if k in known and isinstance(v, str | int | float)}
    form = replace(BenchForm(), **values)
    if form.find_capacity not in CAPACITY_CHOICES:
        form = replace(form, find_capacity="no")
    return form if form.workload in WORKLOAD_CHOICES else replace(form, workload="random")


def dataset_files(folder: Path) -> list[str]:
    """The files the dataset picker offers: datasets/'s JSON and JSONL files, by name ([] without the folder)."""
    try:
        found = [p.name for p in folder.iterdir() if p.is_file() and p.suffix in DATASET_SUFFIXES]
    except OSError:
        return []
    return sorted(found)


def slo_text(limits: Mapping[str, float] | tuple[tuple[str, float], ...]) -> str:
    """A profile's [slo] (console.host.targets.Target.slo) as the SLO field takes it ("" without one)."""
    items = dict(limits)
    return parse_slo(",".join(f"{k}={v:g}ms" for k, v in items.items())).spec() if items else ""


def save_form(logs: Path, form: BenchForm) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / FORM_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(form.remembered(), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def proposed_label(view: HostView | None, host: str) -> str:
    """The running setup's short name (`eagle3 s2 k1 d3 v2`, `no spec`), else the host's name."""
    from console.core.status import setup_label

    text = setup_label(view) if view is not None else ""
    return text or host


class FormErrors(ValueError):
    """Which fields are wrong and what to type instead: {field: message}."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in problems.items()))
        self.problems = dict(problems)


@dataclass(frozen=True)
class PlannedSweep:
    label: str
    workload: str
    config: SweepConfig
    shape: ShapeAsk | None = None  # observe the server first; the config's rates and workload come from it


def _shape(form: BenchForm, problems: dict[str, str]) -> ShapeAsk | None:
    """The shape window and rate scales (None: no window); a problem beside each field that cannot be read, and
    beside the window when other fields ask for another workload or rates of their own."""
    window = form.shape_window.strip()
    scales_text = form.rate_scale.strip()
    if not window:
        if scales_text not in ("", "1"):
            problems["rate_scale"] = "scales the rate of a shape window: give a window, or leave 1"
        return None
    seconds = 0.0
    try:
        seconds = parse_window(window)
    except ValueError as exc:  # said in the form's words, not the option's
        said = str(exc).replace("--shape-from-server takes a window", "a window")
        problems["shape_window"] = said.replace("--shape-from-server's window", "the window") + "; empty: no shape"
    scales = _list(scales_text or "1", "rate scales", parse_float_list, problems, "rate_scale")
    if form.workload != "random" and "shape_window" not in problems:
        problems["shape_window"] = (
            "the shape makes the workload from the server's traffic: pick the workload random, or empty the window"
        )
    if form.request_rate.strip():
        problems.setdefault(
            "request_rate", "the shape's rates are the rate seen times the rate scale: empty this field"
        )
    if "shape_window" in problems or "rate_scale" in problems:
        return None
    return ShapeAsk(seconds, tuple(scales))


def _int(text: str, what: str, problems: dict[str, str], field: str) -> int:
    """The field's whole number; a problem beside the field if it is not one (then 0, never used: the form is
    refused)."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        problems[field] = f"{what} must be a whole number (got {text!r})"
        return 0


def _float(text: str, what: str, problems: dict[str, str], field: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        problems[field] = f"{what} must be a number of seconds (got {text!r})"
        return None


def _list(text: str, what: str, parse: Callable[[str, str], list[T]], problems: dict[str, str], field: str) -> list[T]:
    """The field's comma-separated list; a problem beside the field if it cannot be read (then [])."""
    try:
        return parse(text, what)
    except UsageError as exc:
        problems[field] = str(exc)
        return []


def form_problems(found: Mapping[SweepField, str]) -> dict[str, str]:
    """A sweep's problems (SweepConfig.problems) as the form shows them: {form field: text in the form's words}."""
    return dict(zip((FORM_FIELD[name] for name in found), say_problems(found, FORM_NAMES), strict=True))


def _dataset(
    form: BenchForm, folder: Path | None, output_len: int | None, problems: dict[str, str]
) -> DatasetSample | None:
    """The sample of the picked file (read here: DatasetError names the file, the line and what was expected,
    beside the dataset field); None without the workload `dataset`, or with a problem."""
    name = form.dataset.strip()
    if form.workload != "dataset":
        if name:
            problems["dataset"] = "sent by the workload dataset only: pick that workload, or no file"
        return None
    where = f" ({folder})" if folder is not None else ""
    if not name:
        problems["dataset"] = f"pick a file of the workspace's datasets/{where}: put your JSON or JSONL file there"
        return None
    own: dict[str, str] = {}  # the sample's own fields: the file is read whatever else is wrong with the form
    size = _int(form.dataset_sample, "the sample size", own, "dataset_sample")
    seed = _int(form.seed, "the seed", own, "seed")
    if size < 1:
        own.setdefault("dataset_sample", "the sample size must be at least 1 request")
    if seed < 0:
        own.setdefault("seed", "the seed must be 0 or more")
    problems.update(own)
    if own or "output_len" in problems:
        return None
    path = Path(name).expanduser()
    if not path.is_absolute() and folder is not None:
        path = folder / path
    try:
        return sample_dataset(path, size=size, seed=seed, output_len_cap=output_len, hash_large=False)
    except DatasetError as exc:
        problems["dataset"] = f"{exc}; nothing was sent"
        return None


def plan_sweeps(form: BenchForm, *, datasets: Path | None = None, profile_slo: bool = False) -> list[PlannedSweep]:
    """The sweeps the form asks for, one per workload (labels `LABEL random` / `LABEL chat` when both are
    queued). The workload `dataset` reads its file from `datasets` (the workspace's datasets/, where a relative
    name is looked for); `profile_slo`: the host's profile has an [slo], which holds the levels when the SLO field
    is empty (find capacity needs one or the other). FormErrors names every wrong field."""
    problems: dict[str, str] = {}
    label = form.label.strip()
    if not label:
        problems["label"] = "give the run a label (compare finds it by it), e.g. eagle3 s2 k1"
    if form.workload not in WORKLOAD_CHOICES:
        problems["workload"] = f"workload is one of {', '.join(WORKLOAD_CHOICES)}"
    concurrencies = _list(form.concurrency, "concurrency levels", parse_int_list, problems, "concurrency")
    rates = form.request_rate.strip()
    request_rates = _list(rates, "request rates", parse_float_list, problems, "request_rate") if rates else []
    requests = _int(form.requests, "requests per level", problems, "requests") if form.requests.strip() else None
    duration = _float(form.duration, "duration per level", problems, "duration")
    on_dataset = form.workload == "dataset"
    numbered = [("input_len", "input length"), ("repeat", "repeats"), ("warmup", "warm-up requests")]
    if not (on_dataset and not form.output_len.strip()):  # a dataset's own lengths when the field is empty
        numbered.append(("output_len", "output length"))
    if not on_dataset:
        numbered.append(("seed", "the seed"))
    numbers = {name: _int(getattr(form, name), what, problems, name) for name, what in numbered}
    if numbers.get("seed", 0) < 0:
        problems["seed"] = "the seed must be 0 or more"
    if requests is not None and duration is not None:
        problems["duration"] = "give requests or a duration per level, not both (empty one of them)"
    slo = None
    if form.slo.strip():
        try:
            slo = parse_slo(form.slo)
        except ValueError as exc:
            problems["slo"] = f"{exc} (e.g. {EXAMPLE})"
    if form.find_capacity not in CAPACITY_CHOICES:
        problems["find_capacity"] = f"find capacity is {' or '.join(CAPACITY_CHOICES)}"
    find_capacity = form.find_capacity == "yes"
    if find_capacity and slo is None and not profile_slo and "slo" not in problems:
        problems["slo"] = f"find capacity holds each rate to an SLO: give one, e.g. {EXAMPLE} (or [slo] in the profile)"
    cap = numbers.get("output_len") if on_dataset else None
    sample = _dataset(form, datasets, cap, problems)
    if sample is not None and sample.is_trace:  # a trace sets its own arrivals (console.bench.traces)
        if find_capacity:
            problems["find_capacity"] = "a trace is replayed on its own clock: set find capacity to no"
        if rates:
            problems["request_rate"] = "a trace is replayed on its own clock: clear the request rates"
    shape = _shape(form, problems)
    if problems:
        raise FormErrors(problems)
    out = []
    workloads = ("random", "chat") if form.workload == "random+chat" else (form.workload,)
    for workload in workloads:
        api = FORM_FIXED["api"]
        if sample is not None and sample.format == "chat-jsonl":
            api = "chat"  # chat messages go to the chat API, as `bench --dataset` sends them
        config = SweepConfig(
            workload=WorkloadSpec(
                name="dataset" if workload == "dataset" else "chat" if workload == "chat" else "random",
                api=api,
                input_len=numbers["input_len"],
                output_len=numbers.get("output_len", DEFAULT_OUTPUT_LEN),
                temperature=FORM_FIXED["temperature"],
                seed=sample.seed if sample is not None else numbers["seed"],
                dataset=sample,
            ),
            concurrencies=concurrencies,
            request_rates=request_rates,
            requests=requests,
            duration=duration,
            warmup=numbers["warmup"],
            repeat=numbers["repeat"],
            request_timeout=FORM_FIXED["request_timeout"],
            max_error_rate=FORM_FIXED["max_error_rate"],
            time_cap=FORM_FIXED["time_cap"],
            long_prompts=FORM_FIXED["long_prompts"],
            slo=slo.to_json() if slo is not None else None,
            find_capacity=find_capacity,
            # a trace (console.bench.traces) is replayed whole on its own clock: its one level, at its own pace
            trace_speeds=[1.0] if sample is not None and sample.is_trace else [],
        )
        found = config.problems()
        if found:
            raise FormErrors(form_problems(found))
        out.append(PlannedSweep(f"{label} {workload}" if len(workloads) > 1 else label, workload, config, shape))
    return out


@dataclass(frozen=True)
class SweepQueued:
    """The queue's next sweep starts (before its ClientPlaced, SweepStarted ... events)."""

    index: int
    total: int
    label: str
    workload: str


async def bench_queue(
    session: Session,
    sweeps: list[PlannedSweep],
    *,
    on_event: Callable[[Any], None] | None = None,
    client: ClientChoice = "auto",
) -> list[list[BenchRecord]]:
    """Run the sweeps one after the other on the session's host; each sweep's records go to logs/ as its levels
    finish. A sweep that stops early (the error rate, the time cap) ends the queue: what made it stop would spoil
    the next one too. A sweep that fails (HostError, OSError) ends it with its error; cancelled, the levels that
    finished are kept (bench_host). A sweep with a shape watches the server's traffic first (ShapeObserving,
    ShapeObserved); ShapeUnavailable (nothing sent) ends the queue with what is missing."""
    emit = on_event or (lambda _event: None)
    out = []
    for index, sweep in enumerate(sweeps):
        emit(SweepQueued(index, len(sweeps), sweep.label, sweep.workload))
        config = sweep.config
        if sweep.shape is not None:
            base_url, api_key = await session.sglang_url(), await session.api_key()
            config = await shape_the_sweep(base_url, config, sweep.shape, api_key=api_key, on_event=emit)
        records = await bench_host(session, config, label=sweep.label, on_event=emit, client=client)
        out.append(records)
        if not records or any(r.stopped for r in records):
            break
    return out
