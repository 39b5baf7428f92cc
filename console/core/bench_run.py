"""A benchmark as the console's form asks for it: the form's fields (kept in the workspace, so the next form opens
with the last used values), the label proposed from the running setup, the sweeps the fields make (one per
workload: random and chat can be queued, the optimistic and the realistic figure from one run) and the queue that
runs them one after the other on a host session (console.core.bench.bench_host for each).

The fields are validated the way `opsconsole bench` validates its arguments (config_from_args), field by field,
so the form can put each error beside its field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from console.bench.engine import SweepConfig
from console.bench.records import BenchRecord
from console.core.bench import ClientChoice, bench_host, config_from_args, parse_float_list, parse_int_list
from console.errors import UsageError

if TYPE_CHECKING:
    from console.core.monitor import HostView
    from console.core.session import Session

FORM_FILE = "console-bench-form.json"  # in logs/, beside the records (not a bench-*.jsonl: runs never read it)
WORKLOAD_CHOICES = ("random", "chat", "random+chat")


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
    return form if form.workload in WORKLOAD_CHOICES else replace(form, workload="random")


def save_form(logs: Path, form: BenchForm) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / FORM_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(form.remembered(), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def proposed_label(view: HostView | None, host: str) -> str:
    """The running setup's short name (`eagle3 s2 k1 d3 v2`, `no spec`), else the host's name."""
    from console.core.monitor import setup_label

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


def _int(text: str, what: str, problems: dict[str, str], field: str, *, optional: bool = False) -> int | None:
    text = text.strip()
    if not text and optional:
        return None
    try:
        value = int(text)
    except ValueError:
        problems[field] = f"{what} must be a whole number (got {text!r})"
        return None
    return value


def _float(text: str, what: str, problems: dict[str, str], field: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        problems[field] = f"{what} must be a number of seconds (got {text!r})"
        return None


def plan_sweeps(form: BenchForm) -> list[PlannedSweep]:
    """The sweeps the form asks for, one per workload (labels `LABEL random` / `LABEL chat` when both are
    queued). FormErrors names every wrong field."""
    problems: dict[str, str] = {}
    label = form.label.strip()
    if not label:
        problems["label"] = "give the run a label (compare finds it by it), e.g. eagle3 s2 k1"
    if form.workload not in WORKLOAD_CHOICES:
        problems["workload"] = f"workload is one of {', '.join(WORKLOAD_CHOICES)}"
    for field, what, parse in (
        ("concurrency", "concurrency levels", parse_int_list),
        ("request_rate", "request rates", parse_float_list),
    ):
        text = getattr(form, field)
        if field == "request_rate" and not text.strip():
            continue
        try:
            parse(text, what)
        except UsageError as exc:
            problems[field] = str(exc)
    requests = _int(form.requests, "requests per level", problems, "requests", optional=True)
    duration = _float(form.duration, "duration per level", problems, "duration")
    numbers = {
        name: _int(getattr(form, name), what, problems, name)
        for name, what in (
            ("input_len", "input length"),
            ("output_len", "output length"),
            ("repeat", "repeats"),
            ("warmup", "warm-up requests"),
        )
    }
    if requests is not None and duration is not None:
        problems["duration"] = "give requests or a duration per level, not both (empty one of them)"
    if problems:
        raise FormErrors(problems)
    out = []
    workloads = ("random", "chat") if form.workload == "random+chat" else (form.workload,)
    for workload in workloads:
        args = SimpleNamespace(
            workload=workload,
            api="generate",
            input_len=numbers["input_len"],
            output_len=numbers["output_len"],
            temperature=None,
            seed=1,
            concurrency=form.concurrency,
            request_rate=form.request_rate.strip() or None,
            requests=requests,
            duration=duration,
            warmup=numbers["warmup"],
            repeat=numbers["repeat"],
            request_timeout=600.0,
            max_error_rate=0.5,
            time_cap=3600.0,
        )
        try:
            config = config_from_args(args)
        except UsageError as exc:
            raise FormErrors({_field_of(str(exc)): str(exc).replace("--", "")}) from None
        out.append(PlannedSweep(f"{label} {workload}" if len(workloads) > 1 else label, workload, config))
    return out


def _field_of(message: str) -> str:
    """The form field a config_from_args message is about (it names the CLI's option)."""
    for option, field in (
        ("--input-len", "input_len"),
        ("--output-len", "output_len"),
        ("--requests", "requests"),
        ("--duration", "duration"),
        ("--repeat", "repeat"),
        ("--warmup", "repeat"),
        ("--concurrency", "concurrency"),
        ("--request-rate", "request_rate"),
        ("concurrency", "concurrency"),
        ("rates", "request_rate"),
    ):
        if option in message:
            return field
    return "label"


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
    finished are kept (bench_host)."""
    emit = on_event or (lambda _event: None)
    out = []
    for index, sweep in enumerate(sweeps):
        emit(SweepQueued(index, len(sweeps), sweep.label, sweep.workload))
        records = await bench_host(session, sweep.config, label=sweep.label, on_event=emit, client=client)
        out.append(records)
        if not records or any(r.stopped for r in records):
            break
    return out
