"""A benchmark as the console's form asks for it: the form's fields (kept in the workspace, so the next form opens
with the last used values), the label proposed from the running setup, the sweeps the fields make (one per
workload: random and chat can be queued, the optimistic and the realistic figure from one run) and the queue that
runs them one after the other on a host session (console.core.bench.bench_host for each).

Each field's text is read here (what cannot be read is said beside that field); the sweep they make is checked
by SweepConfig.problems(), whose problems are keyed by the config's own fields: FORM_FIELD says beside which form
field each one stands, FORM_NAMES how the form's text calls it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from console.bench.engine import SweepConfig, SweepField, say_problems
from console.bench.records import BenchRecord
from console.bench.workloads import WorkloadSpec
from console.core.bench.host import ClientChoice, bench_host, parse_float_list, parse_int_list
from console.errors import UsageError

if TYPE_CHECKING:
    from console.core.monitor import HostView
    from console.core.session import Session

T = TypeVar("T")
FORM_FILE = "console-bench-form.json"  # in logs/, beside the records (not a bench-*.jsonl: runs never read it)
WORKLOAD_CHOICES = ("random", "chat", "random+chat")
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
    "seed": 1,
    "request_timeout": 600.0,
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


def plan_sweeps(form: BenchForm) -> list[PlannedSweep]:
    """The sweeps the form asks for, one per workload (labels `LABEL random` / `LABEL chat` when both are
    queued). FormErrors names every wrong field."""
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
        config = SweepConfig(
            workload=WorkloadSpec(
                name="chat" if workload == "chat" else "random",
                api=FORM_FIXED["api"],
                input_len=numbers["input_len"],
                output_len=numbers["output_len"],
                temperature=FORM_FIXED["temperature"],
                seed=FORM_FIXED["seed"],
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
        )
        found = config.problems()
        if found:
            raise FormErrors(form_problems(found))
        out.append(PlannedSweep(f"{label} {workload}" if len(workloads) > 1 else label, workload, config))
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
