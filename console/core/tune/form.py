"""The tune's request as the console's Tune screen asks for it: one text field per option, as the CLI's options
(comma-separated lists), with the defaults the CLI takes from the running unit. Pure: no I/O.

    fields = form_defaults(unit_speculation(unit_text, version))   # field key -> text
    request = request_from_form(edited, unit)                      # FormError(field, message) on bad input

A field with `choices` takes one of them (the console shows it as a list to pick from: --strategy, --apply-best,
--objective). The dataset field names a file of the workspace's datasets/ (the console lists them); the console reads
its sample (console.bench.datasets, as `tune --dataset` does) and hands it in, or what is wrong with the file.

Shared with `opsconsole tune` (console/cli/tune.py), so that both take and refuse the same: `space_from_axes` (the
axes asked for, with the missing ones taken from the unit as it is: its algorithm and its spec-v2 setting; steps
1,2,3, topk 1, draft tokens auto) and `best_at_problem` (--best-at only with --apply-best, at one of the levels).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from console.bench.datasets import DEFAULT_SAMPLE as DEFAULT_DATASET_SAMPLE
from console.bench.slo import EXAMPLE, parse_slo
from console.bench.workloads import DatasetSample
from console.core.apply import RestartCost, cost_text, duration_text
from console.core.bench import parse_int_list
from console.core.tune.report import Objective
from console.core.tune.run import TuneRequest
from console.core.tune.search import Strategy
from console.core.tune.space import SpaceRequest, UnitSpeculation, parse_axis
from console.errors import UsageError
from console.sglang.setup import AXES  # the space's axes, as space_from_axes takes them as text


@dataclass(frozen=True)
class FormField:
    key: str
    label: str
    hint: str  # what it takes: the placeholder (of a field with choices: its tooltip)
    group: str
    choices: tuple[tuple[str, str], ...] = ()  # (value, what it means) of a field that takes one of a few values


FIELDS: tuple[FormField, ...] = (
    FormField("algorithm", "algorithm", "EAGLE, EAGLE3, NEXTN, STANDALONE, none (comma-separated)", "the space"),
    FormField("steps", "steps", "e.g. 1,2,3", "the space"),
    FormField("topk", "topk", "e.g. 1,2,4", "the space"),
    FormField("draft_tokens", "draft tokens", "numbers or auto, e.g. auto,4", "the space"),
    FormField("spec_v2", "spec v2", "on and/or off", "the space"),
    FormField("draft_model_path", "draft model path", "for EAGLE3/STANDALONE (empty: the unit's)", "the space"),
    FormField("concurrency", "concurrency levels", "e.g. 1,8,32,64", "the benchmark"),
    FormField("workload", "workloads", "random, chat and/or dataset", "the benchmark"),
    FormField("dataset", "dataset", "your prompts: a file of datasets/ (the workload dataset)", "the benchmark"),
    FormField("dataset_sample", "dataset sample", "requests drawn from the dataset, e.g. 1000", "the benchmark"),
    FormField("seed", "seed", "same seed, same requests in the same order for every setup", "the benchmark"),
    FormField("duration", "seconds per level", "of a full run; screening runs an eighth of it", "the benchmark"),
    FormField("repeats", "repeats", "full runs per level (2+ measure the noise)", "the benchmark"),
    FormField("input_len", "input tokens", "per request", "the benchmark"),
    FormField("output_len", "output tokens", "per request", "the benchmark"),
    FormField("budget", "budget (minutes)", "empty: no budget", "the benchmark"),
    FormField(
        "strategy",
        "strategy",
        "halving, grid or predict",
        "the search and what stays",
        choices=(
            ("halving", "short runs for all, then full runs for the setups that can still win"),
            ("grid", "every setup in full runs, at every level"),
            ("predict", "the running setup measured, then a restart only for setups predicted to be able to win"),
        ),
    ),
    FormField(
        "objective",
        "objective",
        "what ranks each level's setups",
        "the search and what stays",
        choices=(
            ("throughput", "output tokens/s"),
            ("goodput", "requests/s whose own TTFT, TPOT and E2E meet the SLO"),
            ("capacity", "requests/s carried while the level meets the SLO"),
        ),
    ),
    FormField("slo", "SLO", f"e.g. {EXAMPLE} (goodput and capacity need one)", "the search and what stays"),
    FormField(
        "apply_best",
        "apply best",
        "no or yes: what the host runs after the tune",
        "the search and what stays",
        choices=(("no", "the original unit goes back"), ("yes", "the recommended setup stays")),
    ),
    FormField(
        "best_at",
        "best at level",
        "with apply best: the winner at this C stays (empty: the most levels won)",
        "the search and what stays",
    ),
)
FIELD_LABELS = {f.key: f.label for f in FIELDS}
FIELDS_BY_KEY = {f.key: f for f in FIELDS}


class FormError(UsageError):
    """A field the tune cannot take, with what to write instead."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{FIELD_LABELS.get(field, field)}: {message}")
        self.field = field
        self.reason = message


def form_defaults(unit: UnitSpeculation) -> dict[str, str]:
    """The form as it opens: the CLI's defaults, the algorithm and spec v2 the unit runs now."""
    return {
        "algorithm": unit.algorithm.upper() if unit.algorithm else "",
        "steps": "1,2,3",
        "topk": "1",
        "draft_tokens": "auto",
        "spec_v2": "" if unit.spec_v2 is None else ("on" if unit.spec_v2 else "off"),
        "draft_model_path": "",
        "concurrency": "1,8,32,64",
        "workload": "random",
        "dataset": "",
        "dataset_sample": str(DEFAULT_DATASET_SAMPLE),
        "seed": "1",
        "duration": "60",
        "repeats": "2",
        "input_len": "1024",
        "output_len": "256",
        "budget": "",
        "strategy": "halving",
        "objective": "throughput",
        "slo": "",
        "apply_best": "no",
        "best_at": "",
    }


def space_from_axes(
    base: SpaceRequest, unit: UnitSpeculation | None, texts: Mapping[str, str | None], *, names: Mapping[str, str]
) -> SpaceRequest:
    """The space from the axes given as text (AXES -> text; they win over `base`, a --space file's); the missing
    axes from the unit as it is. `names` says how each axis (AXES) is called where it was typed: the CLI's --steps,
    the form's steps. UsageError on bad input, and when the unit runs no speculation and no algorithm was asked for."""
    what = {key: names[key] for key in AXES}
    given = {axis: text for axis, text in texts.items() if text and axis != "draft_model_path"}
    values = {axis: parse_axis(axis, text, what[axis]) for axis, text in given.items()}
    algorithms = values.get("algorithm", base.algorithms)
    switches = values.get("spec_v2", base.spec_v2)
    if unit is not None:
        if not algorithms and base.include_grid:
            if unit.algorithm is None:
                raise UsageError(
                    f"the unit runs no speculative decoding: say what to try with {what['algorithm']} "
                    f"(e.g. none,EAGLE3) and {what['draft_model_path']} for a draft model"
                )
            algorithms = (unit.algorithm.upper(),)
        if not switches:
            switches = (bool(unit.spec_v2),)
    request = base.with_axes({**values, "algorithm": algorithms, "spec_v2": switches or (True,)})
    return replace(
        request,
        draft_model_path=texts.get("draft_model_path") or base.draft_model_path,
        include_grid=base.include_grid or "algorithm" in given,
    )


def best_at_problem(
    best_at: int | None, *, apply_best: bool, concurrencies: Sequence[int], names: Mapping[str, str]
) -> str | None:
    """Why the level whose winner apply-best leaves on the host cannot be taken (None: it can). Without apply-best
    it would be ignored, and at a level the tune does not run no setup wins: the original unit would stay,
    silently. `names` says how "apply_best" and "concurrency" are called where they were typed (the CLI's
    --apply-best and "the levels of --concurrency", the form's labels)."""
    if best_at is None:
        return None
    if not apply_best:
        return f"works only with {names['apply_best']} (it says which level's winner stays on the host)"
    if best_at not in concurrencies:
        levels = ",".join(str(c) for c in concurrencies)
        return f"{best_at} is not one of {names['concurrency']} ({levels}): the winner at one of them stays"
    return None


def dataset_sampling(values: Mapping[str, str]) -> tuple[int, int]:
    """The dataset's sample size and seed as `tune --dataset-sample N --seed S` take them (the seed also seeds the
    random workload); FormError beside the field that cannot be read."""
    size_text = values.get("dataset_sample", str(DEFAULT_DATASET_SAMPLE)).strip()
    size = int(_number("dataset_sample", size_text, whole=True, positive=True))
    seed_text = values.get("seed", "1").strip()
    seed = int(_number("seed", seed_text, whole=True, positive=False))
    if seed < 0:
        raise FormError("seed", f"0 or more (got {seed_text!r})")
    return size, seed


def request_from_form(
    values: Mapping[str, str],
    unit: UnitSpeculation,
    *,
    dataset: DatasetSample | str | None = None,
    profile_slo: bool = False,
) -> TuneRequest:
    """The tune the form asks for. FormError names the first field it cannot take and says why. `dataset`: the
    sample of the picked file, or what is wrong with it (said beside the dataset field); `profile_slo`: the host's
    profile has an [slo], which the tune takes when the SLO field is empty (console.core.tune.run.checked_request)."""

    def text(key: str) -> str:
        return values.get(key, "").strip()

    axes = AXES[:-1]  # the draft model path is a path: nothing to check on its own
    for key in axes:  # each axis on its own first, so that the error names its field
        if not text(key):
            continue
        try:
            space_from_axes(SpaceRequest(), None, {key: text(key)}, names=FIELD_LABELS)
        except UsageError as exc:
            raise FormError(key, _without_field(str(exc), key)) from None
    try:
        space = space_from_axes(SpaceRequest(), unit, {key: text(key) or None for key in AXES}, names=FIELD_LABELS)
    except UsageError as exc:
        raise FormError("algorithm", str(exc)) from None
    try:
        concurrencies = tuple(parse_int_list(text("concurrency"), FIELD_LABELS["concurrency"]))
    except UsageError as exc:
        raise FormError("concurrency", _without_field(str(exc), "concurrency")) from None
    workloads = tuple(dict.fromkeys(w.strip() for w in text("workload").split(",") if w.strip()))
    if not workloads or any(w not in ("random", "chat", "dataset") for w in workloads):
        raise FormError("workload", f"random, chat and/or dataset (got {text('workload')!r})")
    _size, seed = dataset_sampling(values)  # before the file: a sample that cannot be read is not read from it
    if isinstance(dataset, str):
        raise FormError("dataset", dataset)
    if "dataset" in workloads and dataset is None:
        raise FormError("dataset", "the workload dataset sends a file: pick one of datasets/ (put yours there)")
    if dataset is not None and "dataset" not in workloads:
        raise FormError("workload", "add dataset to send the picked file (or pick no file)")
    duration = _number("duration", text("duration"), positive=True)
    repeats = int(_number("repeats", text("repeats"), whole=True, positive=True))
    input_len = int(_number("input_len", text("input_len"), whole=True, positive=True))
    output_len = int(_number("output_len", text("output_len"), whole=True, positive=True))
    budget = _number("budget", text("budget"), positive=True) if text("budget") else None
    strategy, apply_best = _choice("strategy", text("strategy")), _choice("apply_best", text("apply_best")) == "yes"
    best_at = int(_number("best_at", text("best_at"), whole=True, positive=True)) if text("best_at") else None
    objective = cast(Objective, _choice("objective", text("objective") or "throughput"))
    slo = None
    if text("slo"):
        try:
            slo = parse_slo(text("slo"))
        except ValueError as exc:
            raise FormError("slo", f"{exc} (e.g. {EXAMPLE})") from None
    if objective != "throughput" and slo is None and not profile_slo:
        raise FormError("slo", f"the objective {objective} counts requests against an SLO: give one, e.g. {EXAMPLE}")
    if strategy == "predict" and objective != "throughput":  # as the core refuses it (run.checked_request)
        raise FormError("strategy", "predict ranks setups by the output tok/s it predicts: objective throughput, "
                                    "or the strategy halving for goodput or capacity")  # fmt: skip
    names = {"apply_best": "apply best = yes", "concurrency": "the concurrency levels"}
    problem = best_at_problem(best_at, apply_best=apply_best, concurrencies=concurrencies, names=names)
    if problem is not None:
        raise FormError("best_at", problem)
    return TuneRequest(
        space=space,
        concurrencies=concurrencies,
        workloads=workloads,
        duration_s=duration,
        repeats=repeats,
        input_len=input_len,
        output_len=output_len,
        budget_s=budget * 60 if budget is not None else None,
        strategy=cast(Strategy, strategy),
        apply_best=apply_best,
        best_at=best_at,
        objective=objective,
        slo=slo.to_json() if slo is not None else None,
        dataset=dataset,
        seed=dataset.seed if dataset is not None else seed,
        api="chat" if dataset is not None and dataset.format == "chat-jsonl" else "generate",
    )


def meaning(key: str, value: str) -> str:
    """What a choice of a field means (its value itself where it has none)."""
    return dict(FIELDS_BY_KEY[key].choices).get(value, value)


def afterwards(request: TuneRequest) -> str:
    """What the host runs once the tune is over (unless it is aborted: then the original unit, always)."""
    if not request.apply_best:
        return "the original unit goes back"
    if request.best_at is not None:
        return f"the setup that wins at C={request.best_at} stays"
    return "the recommended setup stays (the one that wins the most levels)"


def _without_field(message: str, key: str) -> str:
    prefix = FIELD_LABELS[key] + " "
    return message.removeprefix(prefix)


def _choice(key: str, value: str) -> str:
    """One of the field's choices, else FormError naming them."""
    allowed = [choice for choice, _meaning in FIELDS_BY_KEY[key].choices]
    if value not in allowed:
        listed = " or ".join(allowed) if len(allowed) < 3 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
        raise FormError(key, f"{listed} (got {value!r})")
    return value


def _number(key: str, value: str, *, whole: bool = False, positive: bool = False) -> float:
    kind = "a whole number" if whole else "a number"
    try:
        number = float(int(value)) if whole else float(value)
    except ValueError:
        raise FormError(key, f"{kind}, e.g. {'2' if whole else '60'} (got {value!r})") from None
    if positive and number <= 0:
        raise FormError(key, f"must be more than 0 (got {value})")
    return number


@dataclass(frozen=True)
class Estimate:
    """How long a planned tune takes: benchmark time, plus how many starts of the service, each as long as the host's
    recent restarts (`restart`: console/core/apply/restarts.py; None where none is known yet)."""

    bench_s: float
    starts: int
    restart: RestartCost | None = None

    @property
    def total_s(self) -> float | None:
        """Benchmarks and starts together; None where a start's length is not known."""
        return None if self.restart is None else self.bench_s + self.starts * self.restart.median_s

    def starts_text(self, host: str) -> str:
        """ "7 starts of ~7 min 40 s each (a restart of gpu-a: median of 4; loading weights 71 %)"."""
        starts = f"{self.starts} start{'s' * (self.starts != 1)}"
        if self.restart is None:
            return f"{starts} ({cost_text(None, host)})"
        return f"{starts} of ~{duration_text(self.restart.median_s)} each ({self.restart.text()})"

    def to_json(self) -> dict[str, object]:
        total = self.total_s
        return {
            "bench_s": round(self.bench_s, 1),
            "starts": self.starts,
            "restart_cost": self.restart.to_json() if self.restart else None,
            "total_s": None if total is None else round(total, 1),
        }

    def text(self, host: str, *, at_most: bool = False) -> str:
        """ "About 12 min of benchmarks + 7 starts of ~7 min 40 s each (...): about 66 min in all"."""
        about = "At most" if at_most else "About"
        said = f"{about} {self.bench_s / 60:.0f} min of benchmarks + {self.starts_text(host)}"
        total = self.total_s
        return said if total is None else f"{said}: {about.lower()} {duration_text(total)} in all"


def estimate(estimate_s: Callable[[float], float], restart: RestartCost | None = None) -> Estimate:
    """From PendingTune.estimate_s (linear in the start's length): its benchmark part and its number of starts, and
    what a restart of the host costs (PendingTune.restart_cost)."""
    zero = estimate_s(0.0)
    return Estimate(bench_s=zero, starts=round(estimate_s(1.0) - zero), restart=restart)
