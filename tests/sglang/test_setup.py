"""One speculative setup, typed (console/sglang/setup.py): its names, description, server args and edits. Pure. That
its edits make each version run it: tests/tune/test_space.py."""

from __future__ import annotations

from console.core.tune.form import FIELDS
from console.sglang.setup import AXES, SetupEdits, SpecSetup

KIMI = SpecSetup("EAGLE3", 2, 1, 3, True, "/m/eagle3")
TREE = SpecSetup("EAGLE3", 2, 4, 8, False, "/m/eagle3")


def test_the_axes_are_its_fields_and_the_tune_forms_first_fields() -> None:
    assert AXES == ("algorithm", "steps", "topk", "draft_tokens", "spec_v2", "draft_model_path")
    assert tuple(f.key for f in FIELDS[: len(AXES)]) == AXES


def test_names_say_every_axis_or_only_those_asked_for() -> None:
    assert KIMI.name() == "EAGLE3 steps 2 topk 1 + spec v2"
    assert TREE.name() == "EAGLE3 steps 2 topk 4 draft 8"
    assert KIMI.name({"topk", "spec_v2"}) == "topk 1 + spec v2"
    assert KIMI.name({"algorithm", "steps"}) == "EAGLE3 steps 2"
    # only spec v2 tells them apart: the algorithm is said, never an empty name
    assert KIMI.name({"spec_v2"}) == "EAGLE3 + spec v2" and TREE.name({"spec_v2"}) == "EAGLE3"
    assert SpecSetup(None).name(AXES) == "no speculation"


def test_a_description_says_every_axis_and_details_the_numbers_and_the_draft_model() -> None:
    assert TREE.describe() == "EAGLE3 steps 2 topk 4 draft tokens 8 spec v2 off"
    assert KIMI.details() == (("steps", "2"), ("topk", "1"), ("draft tokens", "3"), ("draft model", "/m/eagle3"))
    assert SpecSetup(None).describe() == "no speculation" and SpecSetup(None).details() == ()
    assert SpecSetup("EAGLE", 3, 1, 4).key == "eagle-s3-k1-n4-v1" and SpecSetup(None).key == "nospec"


def test_server_args_are_sglangs_names_for_its_own_values() -> None:
    assert TREE.server_args() == {
        "speculative_algorithm": "EAGLE3",
        "speculative_num_steps": 2,
        "speculative_eagle_topk": 4,
        "speculative_num_draft_tokens": 8,
    }
    assert set(SpecSetup(None).server_args().values()) == {None}


def test_draft_tokens_implied_by_the_steps_and_topk() -> None:
    assert SpecSetup.auto_draft_tokens(3, 1) == 4 and SpecSetup.auto_draft_tokens(2, 4) == 8
    assert KIMI.draft_implied and TREE.draft_implied and not SpecSetup("EAGLE3", 2, 4, 5).draft_implied


def test_no_speculation_unsets_every_speculative_flag_and_the_variable() -> None:
    edits = SpecSetup(None).edits("0.5.9")
    assert edits == SetupEdits(
        unset_flags=(
            "--speculative-algorithm",
            "--speculative-num-steps",
            "--speculative-eagle-topk",
            "--speculative-num-draft-tokens",
            "--speculative-draft-model-path",
            "--disable-overlap-schedule",
        ),
        unset_env=("SGLANG_ENABLE_SPEC_V2",),
    )


def test_spec_v2_is_the_variable_up_to_0_5_12_and_the_overlap_from_0_5_14() -> None:
    assert KIMI.edits("0.5.12").set_env == (("SGLANG_ENABLE_SPEC_V2", "True"),)
    assert TREE.edits("0.5.12").set_env == (("SGLANG_ENABLE_SPEC_V2", "False"),)
    assert KIMI.edits("0.5.14").set_env == () and "--disable-overlap-schedule" in KIMI.edits("0.5.14").unset_flags
    assert ("--disable-overlap-schedule", True) in TREE.edits("0.5.14").set_flags


def test_a_setup_is_static_where_the_release_has_adaptive_steps() -> None:
    """A unit that ran --speculative-adaptive would switch a setup's steps at run time: tune's trials would measure
    the tiers SGLang picked, not the setup. The setup's edits take adaptive off (and its config) where the release
    has it."""
    adaptive = ("--speculative-adaptive", "--speculative-adaptive-config")
    for version in ("0.5.17", "0.5.23"):
        assert set(adaptive) <= set(KIMI.edits(version).unset_flags)
        assert set(adaptive) <= set(SpecSetup(None).edits(version).unset_flags)
    assert not set(adaptive) & set(KIMI.edits("0.5.9").unset_flags)  # no such flag before
