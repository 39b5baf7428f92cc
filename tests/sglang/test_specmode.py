"""console.sglang.specmode: one verdict on the spec-v2 worker and the overlap scheduler (issue 22, item 1).

The verdict from a server's resolved values must be the one check-args gives from the rules for the same launch:
then the dashboard, the records and check-args cannot disagree about a server that answers."""

from __future__ import annotations

import itertools

import pytest

from console.sglang.flags import SUPPORTED_VERSIONS
from console.sglang.rules import check_launch
from console.sglang.specmode import SpecMode, server_answered, setup_short, spec_mode, spec_v2_worker

M = ["--model-path", "Qwen/Qwen3-8B"]
TRIPLE = ["--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"]
EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 2, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 3}  # fmt: skip


@pytest.mark.parametrize(
    ("version", "algorithm", "env", "disable"),
    list(
        itertools.product(
            SUPPORTED_VERSIONS,
            ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"),
            (None, "True", "False"),
            (False, True),
        )
    ),
)
def test_the_servers_values_give_the_verdict_the_rules_give(
    version: str, algorithm: str, env: str | None, disable: bool
) -> None:
    """For every version, algorithm, SGLANG_ENABLE_SPEC_V2 and --disable-overlap-schedule: what the rules say
    (check-args) equals what spec_mode makes of the values the server would resolve."""
    argv = [*M, "--speculative-algorithm", algorithm, "--speculative-draft-model-path", "d"]
    argv += TRIPLE if algorithm != "NGRAM" else []
    argv += ["--disable-overlap-schedule"] if disable else []
    report = check_launch(argv, {"SGLANG_ENABLE_SPEC_V2": env} if env else {}, version)
    from_server = spec_mode(version, report.resolved)
    rules = report.spec_mode
    assert rules is not None and from_server is not None
    assert (from_server.spec_v2, from_server.overlap) == (rules.spec_v2, rules.overlap)
    assert from_server.source == "server" and rules.source == "rules"


def test_the_issues_setup_spec_v1_without_overlap_on_0_5_9() -> None:
    """The demo's Qwen unit after `apply --set speculative-num-steps=2 --set speculative-num-draft-tokens=3`."""
    argv = [*M, "--speculative-algorithm", "NEXTN", *TRIPLE]
    report = check_launch(argv, {"SGLANG_ENABLE_SPEC_V2": "False"}, "0.5.9")
    assert report.spec_mode == SpecMode(False, False, "rules")
    assert report.spec_mode.describe() == "spec v2 worker: no; overlap scheduler: off"
    server = {**report.resolved, "disable_overlap_schedule": True}
    assert spec_mode("0.5.9", server) == SpecMode(False, False, "server")


def test_the_server_decides_where_it_answers_and_the_rules_otherwise() -> None:
    wrong_rules = SpecMode(True, True, "rules")  # e.g. the unit read with another version's rules
    answered = {**EAGLE3, "disable_overlap_schedule": True}
    assert spec_mode("0.5.9", answered, rules=wrong_rules) == SpecMode(False, False, "server")
    assert spec_mode("0.5.14", answered, rules=wrong_rules) == SpecMode(True, False, "server")
    # no answer: no version, no resolved values, or no overlap value (a server that did not say)
    assert spec_mode(None, answered, rules=wrong_rules) is wrong_rules
    assert spec_mode("0.5.9", None, rules=wrong_rules) is wrong_rules
    assert spec_mode("0.5.9", EAGLE3, rules=wrong_rules) is wrong_rules
    assert spec_mode("not a version", answered, rules=wrong_rules) is wrong_rules
    # the server answered without speculation: nothing to say, whatever the unit asked
    assert (
        spec_mode("0.5.9", {"speculative_algorithm": None, "disable_overlap_schedule": False}, rules=wrong_rules)
        is None
    )
    assert server_answered("0.5.9", answered) and not server_answered("0.5.9", EAGLE3)


def test_the_worker_by_version() -> None:
    assert [spec_v2_worker(v, "EAGLE3", True) for v in ("0.5.6", "0.5.9", "0.5.12", "0.5.14")] == [
        False, True, True, True,
    ]  # fmt: skip
    assert [spec_v2_worker(v, "EAGLE3", False) for v in ("0.5.9", "0.5.12", "0.5.14", "0.5.23")] == [
        False, False, True, True,
    ]  # fmt: skip
    assert spec_v2_worker("0.5.6", "EAGLE", True) is True and spec_v2_worker("0.5.6", "NEXTN", True) is True
    assert spec_v2_worker("0.5.12", "NGRAM", False) is False and spec_v2_worker("0.5.14", "NGRAM", False) is True
    assert spec_v2_worker("0.5.23", "DFLASH", True) is None and spec_v2_worker("0.5.9", None, True) is None


def test_one_short_form_for_the_dashboard_the_label_and_the_runs_table() -> None:
    assert setup_short(EAGLE3, SpecMode(True, True, "server")) == "eagle3 s2 k1 d3 v2"
    assert setup_short(EAGLE3, SpecMode(True, False, "server")) == "eagle3 s2 k1 d3 v2 no-overlap"
    # spec v1: its overlap is off by SGLang's own rule (0.5.9+), said once by the missing v2
    assert setup_short({**EAGLE3, "disable_overlap_schedule": True}, SpecMode(False, False, "server")) == (
        "eagle3 s2 k1 d3"
    )
    # nothing known of the worker: the overlap the server reported is all there is
    assert setup_short({**EAGLE3, "disable_overlap_schedule": True}, None) == "eagle3 s2 k1 d3 no-overlap"
    assert setup_short({"speculative_algorithm": "NONE"}, None) == "no spec"
