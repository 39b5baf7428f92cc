"""A sweep's validation speaks neither the CLI's nor the form's language: SweepConfig.problems() says what is wrong
per config field, `opsconsole bench` says it with its options, the console's form beside its fields."""

from __future__ import annotations

import pytest

from console.bench.engine import SWEEP_FIELDS, SweepConfig, say_problems
from console.bench.workloads import WorkloadSpec
from console.cli import build_parser
from console.cli.bench import OPTIONS, config_from_args
from console.core.bench.queue import (
    FORM_FIELD,
    FORM_FIXED,
    FORM_NAMES,
    BenchForm,
    FormErrors,
    form_problems,
    plan_sweeps,
)
from console.errors import UsageError
from console.tui.screens.bench import FORM_FIELDS

# Between them these sweeps have a problem on every field (a closed loop's levels and an open loop's rates cannot
# both be wrong in one sweep: the levels of an open loop are not checked).
BAD_SWEEPS = (
    SweepConfig(
        workload=WorkloadSpec(input_len=0, output_len=0, temperature=-1),
        concurrencies=[0],
        requests=0,
        duration=-1,
        warmup=-1,
        repeat=0,
        max_error_rate=2,
    ),
    SweepConfig(workload=WorkloadSpec(), request_rates=[-1.0], duration=0),
)


def every_problem() -> dict[str, str]:
    found: dict[str, str] = {}
    for sweep in BAD_SWEEPS:
        found.update(sweep.problems())
    return found


def test_a_sweep_that_can_run_has_no_problems_and_nothing_is_raised() -> None:
    sweep = SweepConfig(workload=WorkloadSpec())
    assert sweep.problems() == {}
    sweep.validate()


def test_every_field_can_have_a_problem_and_no_text_names_a_cli_option() -> None:
    found = every_problem()
    assert set(found) == set(SWEEP_FIELDS)
    assert not [text for text in found.values() if "--" in text]


def test_every_field_problem_has_an_option_name_and_a_form_field() -> None:
    assert set(OPTIONS) == set(SWEEP_FIELDS)
    on_the_form = {name for name, _title, _hint in FORM_FIELDS}
    assert set(FORM_FIELD.values()) <= on_the_form  # each problem stands beside a field the screen has
    assert set(FORM_NAMES) == set(FORM_FIELD)
    # What the form does not ask for, it fixes to `opsconsole bench`'s defaults, which cannot be wrong.
    fixed = set(SWEEP_FIELDS) - set(FORM_FIELD)
    assert fixed <= set(FORM_FIXED)
    sweep = SweepConfig(
        workload=WorkloadSpec(temperature=FORM_FIXED["temperature"]), max_error_rate=FORM_FIXED["max_error_rate"]
    )
    assert not fixed & set(sweep.problems())
    for sweep in BAD_SWEEPS:  # every text reads in both languages: no field is left as a {placeholder}
        found = sweep.problems()
        said = say_problems(found, OPTIONS)
        assert all("{" not in text and "--" in text for text in said), said
        asked = {name: text for name, text in found.items() if name in FORM_FIELD}
        shown = form_problems(asked)
        assert all("{" not in text and "--" not in text for text in shown.values()), shown


def test_the_engine_refuses_a_sweep_with_problems_naming_the_config_fields() -> None:
    with pytest.raises(ValueError, match=r"^repeat must be ≥ 1; warmup must be ≥ 0$"):
        SweepConfig(workload=WorkloadSpec(), repeat=0, warmup=-1).validate()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--requests", "3", "--duration", "2"], "give either --requests or --duration, not both"),
        (["--requests", "0"], "--requests must be at least 1"),
        (["--duration", "0"], "--duration must be positive"),
        (["--repeat", "0"], "--repeat must be ≥ 1"),
        (["--warmup", "-1"], "--warmup must be ≥ 0"),
        (["--max-error-rate", "2"], "--max-error-rate is a fraction in (0, 1]"),
        (["--input-len", "0"], "--input-len must be at least 1"),
        (["--temperature", "-0.5"], "--temperature must be ≥ 0"),
        (["--repeat", "0", "--output-len", "0"], "--output-len must be at least 1; --repeat must be ≥ 1"),
    ],
)
def test_the_cli_says_each_problem_with_its_option(args: list[str], message: str) -> None:
    parsed = build_parser().parse_args(["bench", "--url", "http://127.0.0.1:1", *args])
    with pytest.raises(UsageError) as caught:
        config_from_args(parsed)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("form", "problems"),
    [
        (BenchForm(label="a", repeat="0"), {"repeat": "repeat must be ≥ 1"}),
        (BenchForm(label="a", warmup="-1"), {"warmup": "warmup must be ≥ 0"}),
        (BenchForm(label="a", requests="0"), {"requests": "requests must be at least 1"}),
        (BenchForm(label="a", duration="-3"), {"duration": "duration must be positive"}),
        (BenchForm(label="a", input_len="0", output_len="0"),
         {"input_len": "input length must be at least 1", "output_len": "output length must be at least 1"}),
    ],
)  # fmt: skip
def test_the_form_says_each_problem_beside_its_field(form: BenchForm, problems: dict[str, str]) -> None:
    with pytest.raises(FormErrors) as caught:
        plan_sweeps(form)
    assert caught.value.problems == problems
