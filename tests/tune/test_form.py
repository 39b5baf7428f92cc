"""The Tune screen's form (console/core/tune/form.py) and its live board (console/tui/presenters/tune_board.py),
pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console.bench.events import Level, LevelStarted, RunningFigures
from console.cli.tune import AXIS_OPTIONS
from console.core.change import ApplyState
from console.core.events import PhaseChanged, StepChanged
from console.core.phases import PhaseTracker
from console.core.tune import (
    Cell,
    LevelProgress,
    Space,
    SpaceRequest,
    StageStarted,
    TrialApplied,
    TrialApplyEvent,
    TrialBenchEvent,
    TrialBenchmarked,
    TrialFailed,
    TrialRef,
    TrialSkipped,
    TrialStarted,
    TuneFinished,
    TuneStarted,
    build_space,
    unit_speculation,
)
from console.core.tune.form import (
    AXES,
    FIELD_LABELS,
    FormError,
    afterwards,
    best_at_problem,
    dataset_sampling,
    estimate,
    form_defaults,
    request_from_form,
)
from console.tui.presenters.tune_board import TuneBoard
from tests.tune.test_space import KIMI_PLAIN, QWEN_MTP

AT = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def test_the_form_opens_with_the_clis_defaults_and_the_units_algorithm_and_spec_v2() -> None:
    values = form_defaults(unit_speculation(QWEN_MTP, "0.5.9"))
    assert values["algorithm"] == "NEXTN" and values["spec_v2"] == "off"
    assert (values["steps"], values["topk"], values["draft_tokens"]) == ("1,2,3", "1", "auto")
    request = request_from_form(values, unit_speculation(QWEN_MTP, "0.5.9"))
    assert request.space == SpaceRequest(algorithms=("NEXTN",), steps=(1, 2, 3), spec_v2=(False,))
    assert request.concurrencies == (1, 8, 32, 64) and request.workloads == ("random",)
    assert request.budget_s is None and request.duration_s == 60.0 and request.repeats == 2
    assert (values["strategy"], values["apply_best"], values["best_at"]) == ("halving", "no", "")
    assert (request.strategy, request.apply_best, request.best_at) == ("halving", False, None)
    assert afterwards(request) == "the original unit goes back"


def test_what_the_operator_types_becomes_the_request() -> None:
    unit = unit_speculation(QWEN_MTP, "0.5.9")
    values = form_defaults(unit) | {"steps": "2", "topk": "1,2", "spec_v2": "on,off", "concurrency": "1,48",
                                    "workload": "random,chat", "budget": "30", "duration": "20"}  # fmt: skip
    request = request_from_form(values, unit)
    assert request.space.topks == (1, 2) and request.space.spec_v2 == (True, False)
    assert request.concurrencies == (1, 48) and request.workloads == ("random", "chat")
    assert request.budget_s == 1800 and request.duration_s == 20.0
    request = request_from_form(values | {"strategy": "grid", "apply_best": "yes"}, unit)
    assert (request.strategy, request.apply_best, request.best_at) == ("grid", True, None)
    assert afterwards(request) == "the recommended setup stays (the one that wins the most levels)"
    request = request_from_form(values | {"apply_best": "yes", "best_at": "48"}, unit)
    assert (request.apply_best, request.best_at) == (True, 48)
    assert afterwards(request) == "the setup that wins at C=48 stays"


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ("steps", "1,two", "steps: takes comma-separated whole numbers"),
        ("topk", "0", "topk: values must be at least 1"),
        ("spec_v2", "maybe", "spec v2: takes on and/or off"),
        ("draft_tokens", "x", "or auto"),
        ("concurrency", "1,0", "concurrency levels: must be whole numbers ≥ 1"),
        ("workload", "soak", "workloads: random, chat and/or dataset"),
        ("budget", "-5", "budget (minutes): must be more than 0"),
        ("repeats", "1.5", "repeats: a whole number"),
        ("duration", "soon", "seconds per level: a number"),
        ("strategy", "fast", "strategy: halving, grid or predict (got 'fast')"),
        ("apply_best", "maybe", "apply best: no or yes (got 'maybe')"),
        ("best_at", "two", "best at level: a whole number"),
        ("best_at", "8", "best at level: works only with apply best = yes"),  # as the CLI's --best-at
    ],
)
def test_a_field_it_cannot_take_is_named_with_what_to_write(field: str, text: str, message: str) -> None:
    unit = unit_speculation(QWEN_MTP, "0.5.9")
    with pytest.raises(FormError) as caught:
        request_from_form(form_defaults(unit) | {field: text}, unit)
    assert caught.value.field == field
    assert message in str(caught.value)


def test_every_axis_has_an_option_name_and_a_form_field() -> None:
    """space_from_axes says its problems with the caller's names: the CLI's options, the form's labels."""
    assert set(AXIS_OPTIONS) == set(AXES) and set(AXES) <= set(FIELD_LABELS)
    assert all(option.startswith("--") for option in AXIS_OPTIONS.values())
    assert not [label for label in FIELD_LABELS.values() if label.startswith("-")]


def test_best_at_names_one_of_the_levels_in_the_form_as_in_the_cli() -> None:
    """At a level the tune does not run no setup wins: --apply-best would leave the original unit, silently."""
    unit = unit_speculation(QWEN_MTP, "0.5.9")
    with pytest.raises(FormError) as caught:
        request_from_form(form_defaults(unit) | {"apply_best": "yes", "best_at": "16"}, unit)
    assert caught.value.field == "best_at"
    assert str(caught.value) == (
        "best at level: 16 is not one of the concurrency levels (1,8,32,64): the winner at one of them stays"
    )
    # the same rule in the CLI's words (console/cli/tune.py check_args names the options)
    cli = {"apply_best": "--apply-best", "concurrency": "the levels of --concurrency"}
    assert best_at_problem(8, apply_best=False, concurrencies=(1, 8), names=cli) == (
        "works only with --apply-best (it says which level's winner stays on the host)"
    )
    assert best_at_problem(16, apply_best=True, concurrencies=(1, 8), names=cli) == (
        "16 is not one of the levels of --concurrency (1,8): the winner at one of them stays"
    )
    assert best_at_problem(8, apply_best=True, concurrencies=(1, 8), names=cli) is None
    assert best_at_problem(None, apply_best=False, concurrencies=(1, 8), names=cli) is None


def test_a_unit_without_speculation_needs_an_algorithm_to_try() -> None:
    unit = unit_speculation(KIMI_PLAIN, "0.5.9")
    values = form_defaults(unit)
    assert values["algorithm"] == "" and values["spec_v2"] == ""
    with pytest.raises(FormError) as caught:
        request_from_form(values, unit)
    assert caught.value.field == "algorithm" and "runs no speculative decoding" in str(caught.value)
    request = request_from_form(values | {"algorithm": "none,EAGLE3", "draft_model_path": "/m/d"}, unit)
    assert request.space.algorithms == (None, "EAGLE3") and request.space.draft_model_path == "/m/d"


def test_the_estimate_splits_benchmark_time_from_the_number_of_starts() -> None:
    parts = estimate(lambda restart_s: 600.0 + 7 * restart_s)
    assert (parts.bench_s, parts.starts) == (600.0, 7)


def _events(space: Space) -> list[object]:
    """A short tune: two setups screened at C=1, the second failing to start the first time round."""
    cell = Cell("random", 1)
    one, three = space.candidate("eagle-s1-k1-n2-v1"), space.candidate("eagle-s3-k1-n4-v1")
    first = TrialRef(1, one.key, one.name, 1, "screen", (cell,))
    second = TrialRef(2, three.key, three.name, 1, "screen", (cell,))
    tracker = PhaseTracker.for_start(speculative=True)
    tracker.feed("[2026-11-30 11:58:01 TP0] Load weight begin. avail mem=139.01 GB", AT)
    phases = tuple(tracker.phases)
    level = Level(concurrency=1)
    return [
        TuneStarted(space, (cell,), "halving", False, AT),  # type: ignore[arg-type]
        StageStarted(1, "screen", (one.name, three.name), (cell,), None, AT),
        TrialStarted(first, AT),
        TrialApplied(first, ApplyState.UNCHANGED, False, AT),
        TrialBenchEvent(first, "random", LevelStarted(level, 0, None, 2.0)),
        TrialBenchEvent(first, "random", RunningFigures(level, 1.0, 3, 0, 1, 123.0, 20.0)),
        TrialBenchmarked(first, ((cell, 120.5),), ("t/steps1",), AT),
        LevelProgress(
            cell, ((one.name, 120.5, 117.0, 124.0, "screen"),), (one.name, three.name), one.name, None, True, False
        ),
        TrialStarted(second, AT),
        TrialApplyEvent(second, StepChanged(ApplyState.RESTARTING, "", AT)),
        TrialApplyEvent(second, PhaseChanged("started", "load_weights", AT, "", 0.1, phases)),
    ]


def test_the_board_follows_each_trial_from_pending_to_done_or_failed() -> None:
    unit = unit_speculation(QWEN_MTP, "0.5.9")
    space = build_space(
        request_from_form(form_defaults(unit) | {"steps": "1,3", "topk": "1,2", "spec_v2": "on,off"}, unit).space,
        QWEN_MTP,
        unit_name="sglang.service",
        version="0.5.9",
    )
    board = TuneBoard.planned(space)
    states = {r.name: r.state for r in board.rows}
    assert states["steps 1 topk 1"] == "pending" and list(states.values()).count("pruned") == 2
    pruned = next(r for r in board.rows if r.state == "pruned")
    assert "Spec v2 currently only supports topk = 1" in pruned.detail
    events = _events(space)
    for event in events[:6]:
        board.feed(event)  # type: ignore[arg-type]
    row = board.row("eagle-s1-k1-n2-v1")
    assert row is not None and row.state_text == "benchmarking C=1"
    assert board.current is not None and board.current.throughput == 123.0 and board.current.level == "random C=1"
    for event in events[6:]:
        board.feed(event)  # type: ignore[arg-type]
    assert row.state == "done" and row.figures == {Cell("random", 1): 120.5}
    assert board.current is not None and board.current.trial.name == "steps 3 topk 1"
    assert board.current.phase == "loading weights" and board.row("eagle-s3-k1-n4-v1").state == "starting"  # type: ignore[union-attr]
    board.feed(TrialFailed(board.current.trial, "exit-code", True, ("OSError: gone",), AT))
    assert board.row("eagle-s3-k1-n4-v1").state_text == "failed, skipped"  # type: ignore[union-attr]
    board.feed(TrialSkipped(TrialRef(3, row.key, "steps 1 topk 1", 2, "full", ()), "the time budget is spent", AT))
    assert row.state == "done" and "budget" in row.detail  # what it measured still counts
    board.feed(TuneFinished("original", True, "budget", AT + timedelta(seconds=75)))
    assert board.finished is not None and board.elapsed_s(AT + timedelta(hours=1)) == 75.0


def test_the_objective_the_slo_and_the_dataset_are_taken_and_refused_as_the_cli_takes_them(tmp_path: Path) -> None:
    """Goodput and capacity need an SLO (the field's, else the profile's); the workload dataset sends the picked
    file's sample, which the console reads (what is wrong with the file stands beside the dataset field)."""
    from console.bench.datasets import sample_dataset
    from console.sim.datasets import write_datasets

    unit = unit_speculation(QWEN_MTP, "0.5.9")
    values = form_defaults(unit) | {"steps": "2"}
    assert (values["objective"], values["slo"], values["dataset"]) == ("throughput", "", "")
    with pytest.raises(FormError) as caught:
        request_from_form(values | {"objective": "goodput"}, unit)
    assert caught.value.field == "slo" and "e.g. ttft_p95=800ms" in str(caught.value)
    assert request_from_form(values | {"objective": "capacity"}, unit, profile_slo=True).slo is None
    request = request_from_form(values | {"objective": "goodput", "slo": "ttft_p95=1s,tpot_p95=60ms"}, unit)
    assert (request.objective, request.slo) == ("goodput", {"ttft_p95": 1000.0, "tpot_p95": 60.0})
    with pytest.raises(FormError) as caught:  # as the core refuses it: said beside the strategy, not on ctrl+s
        request_from_form(values | {"objective": "goodput", "slo": "ttft_p95=1s", "strategy": "predict"}, unit)
    assert caught.value.field == "strategy" and "predict ranks setups by the output tok/s" in str(caught.value)
    assert request_from_form(values | {"strategy": "predict"}, unit).strategy == "predict"
    for field, text in (("objective", "latency"), ("slo", "ttft=5")):
        with pytest.raises(FormError) as caught:
            request_from_form(values | {field: text}, unit)
        assert caught.value.field == field
    _chat, code = write_datasets(tmp_path, count=20)
    sample = sample_dataset(code, size=10, seed=1)
    request = request_from_form(values | {"workload": "random,dataset"}, unit, dataset=sample)
    assert request.workloads == ("random", "dataset") and request.dataset is sample and request.api == "generate"
    problems = [
        ({"workload": "dataset"}, None, "dataset", "pick one of datasets/"),
        ({"workload": "random"}, sample, "workload", "add dataset"),
        ({"workload": "dataset"}, f"{code}, line 3: expected an object", "dataset", "line 3"),
    ]
    for typed, given, field, message in problems:
        with pytest.raises(FormError) as caught:
            request_from_form(values | typed, unit, dataset=given)
        assert caught.value.field == field and message in str(caught.value)


def test_the_dataset_sample_and_seed_are_read_beside_their_fields_as_the_cli_takes_them() -> None:
    unit = unit_speculation(QWEN_MTP, "0.5.9")
    values = form_defaults(unit)
    assert (values["dataset_sample"], values["seed"]) == ("1000", "1")  # `tune`'s --dataset-sample and --seed
    assert dataset_sampling(values | {"dataset_sample": " 64 ", "seed": "7"}) == (64, 7)
    assert request_from_form(values | {"seed": "7"}, unit).seed == 7  # the random workload's seed too
    for field, text, message in (
        ("dataset_sample", "0", "must be more than 0"),
        ("dataset_sample", "many", "a whole number"),
        ("seed", "-1", "0 or more"),
        ("seed", "1.5", "a whole number"),
    ):
        with pytest.raises(FormError) as caught:
            request_from_form(values | {field: text}, unit)
        assert caught.value.field == field and message in caught.value.reason, (field, text)
