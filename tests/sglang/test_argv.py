"""The argv parser against argparse's own behaviour and messages (Python 3.11 argparse)."""

import pytest

from console.sglang.argv import parse_argv
from console.sglang.flags import flag_table

M = ["--model-path", "m"]


def parse(argv: list[str], version: str = "0.5.23"):  # type: ignore[no-untyped-def]
    return parse_argv(argv, flag_table(version))


def test_value_forms_aliases_prefixes_and_lists() -> None:
    p = parse(
        [
            "--model",
            "m",
            "--speculative-algo",
            "EAGLE",
            "--speculative-num-steps=3",
            "--tp",
            "4",
            "--cuda-graph-bs-decode",
            "1",
            "2",
            "4",
            "--enable-metrics",
            "--chunked-prefill-size",
            "-1",
            "--mem-fraction-static",
            "0.85",
        ]
    )
    assert p.problems == []
    assert p.values["model_path"] == "m"
    assert p.values["speculative_algorithm"] == "EAGLE"
    assert p.values["speculative_num_steps"] == 3
    assert p.values["tp_size"] == 4
    assert p.values["cuda_graph_bs_decode"] == [1, 2, 4]
    assert p.values["enable_metrics"] is True
    assert p.values["chunked_prefill_size"] == -1
    assert p.values["mem_fraction_static"] == 0.85
    assert p.explicit == {
        "model_path",
        "speculative_algorithm",
        "speculative_num_steps",
        "tp_size",
        "cuda_graph_bs_decode",
        "enable_metrics",
        "chunked_prefill_size",
        "mem_fraction_static",
    }
    assert p.spelled["speculative_algorithm"] == "--speculative-algorithm"
    assert p.values["port"] == 30000 and "port" not in p.explicit  # defaults fill every dest


def test_last_occurrence_wins() -> None:
    p = parse([*M, "--port", "1", "--port", "2"])
    assert p.values["port"] == 2


def test_unknown_flags_are_collected_with_their_values() -> None:
    p = parse([*M, "--foo", "bar", "--port", "1", "--baz"])
    assert [x.message for x in p.problems] == ["unrecognized arguments: --foo bar --baz"]
    assert p.problems[0].flags == ("--foo", "--baz")


def test_ambiguous_prefix_comes_first() -> None:
    p = parse([*M, "--port", "x", "--cuda-graph-max-bs", "8"])
    assert p.problems[0].code == "ambiguous-prefix"
    assert p.problems[0].message == (
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )
    assert p.problems[1].message == "argument --port: invalid int value: 'x'"
    assert len(p.problems) == 2  # the 8 belongs to the ambiguous flag, not to "unrecognized arguments"


def test_type_and_choice_errors_use_argparse_text() -> None:
    p = parse([*M, "--tp-size", "four", "--kv-cache-dtype", "fp9"], "0.5.6")
    assert p.problems[0].message == "argument --tensor-parallel-size/--tp-size: invalid int value: 'four'"
    assert p.problems[1].message.startswith("argument --kv-cache-dtype: invalid choice: 'fp9' (choose from 'auto', ")
    assert p.problems[1].code == "invalid-choice"


def test_choices_of_the_algorithm_in_0_5_9() -> None:
    p = parse([*M, "--speculative-algorithm", "eagle"], "0.5.9")
    assert p.problems[0].message == (
        "argument --speculative-algorithm: invalid choice: 'eagle' "
        "(choose from 'EAGLE', 'EAGLE3', 'NEXTN', 'STANDALONE', 'NGRAM')"
    )


def test_missing_values_and_explicit_args_on_booleans() -> None:
    p = parse([*M, "--port", "--enable-metrics=yes", "--cuda-graph-bs-decode"])
    assert [x.message for x in p.problems] == [
        "argument --port: expected one argument",
        "argument --enable-metrics: ignored explicit argument 'yes'",
        "argument --cuda-graph-bs-decode: expected at least one argument",
    ]


def test_required_model_path() -> None:
    p = parse(["--port", "1"])
    assert p.problems[-1].message == "the following arguments are required: --model-path/--model"


def test_equals_form_takes_one_value_only() -> None:
    p = parse([*M, "--cuda-graph-bs-decode=1", "2"])
    assert p.values["cuda_graph_bs_decode"] == [1]
    assert p.problems[0].message == "unrecognized arguments: 2"


def test_boolean_optional_negation() -> None:
    p = parse([*M, "--no-lora-strict-loading"])
    assert p.values["lora_strict_loading"] is False and "lora_strict_loading" in p.explicit


def test_everything_after_double_dash_is_unrecognized() -> None:
    p = parse([*M, "--", "--port", "1"])
    assert p.problems[0].message == "unrecognized arguments: --port 1"


@pytest.mark.parametrize("version", ["0.5.6", "0.5.9", "0.5.12", "0.5.14", "0.5.23"])
def test_defaults_parse_clean_in_every_version(version: str) -> None:
    p = parse(M, version)
    assert p.problems == [] and p.explicit == {"model_path"}
    assert p.values["disable_overlap_schedule"] is False
    assert p.values["max_running_requests"] is None
