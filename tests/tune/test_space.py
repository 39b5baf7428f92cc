"""The tune's search space (console/core/tune/space.py): pruning and merging by the version rules, pure."""

from __future__ import annotations

import pytest

from console.core.tune.space import (
    Setting,
    SpaceRequest,
    build_space,
    parse_algorithms,
    parse_counts,
    parse_switches,
    space_from_file,
    unit_speculation,
)
from console.errors import UsageError
from console.sglang.setup import SpecSetup
from console.sglang.unit import UnitFile


def unit(*flags: str, env: str = "", version_flags: str = "") -> str:
    """An operator's SGLang unit run by SGLang's own launcher."""
    exec_start = " \\\n    ".join(
        [
            "ExecStart=/usr/bin/python3 -m sglang.launch_server",
            "--model-path Qwen/Qwen3.5-122B-A10B-FP8",
            "--tp-size 4",
            *flags,
            "--host 127.0.0.1",
            "--port 30000",
        ]
    )
    environment = f'Environment="{env}"\n' if env else ""
    return (
        "[Unit]\nDescription=SGLang\n\n[Service]\nType=simple\n"
        'Environment="HF_HOME=/var/lib/sglang/hf"\n'
        f"{environment}{exec_start}\nRestart=on-failure\n\n[Install]\nWantedBy=multi-user.target\n"
    )


QWEN_MTP = unit(
    "--speculative-algorithm NEXTN",
    "--speculative-num-steps 1",
    "--speculative-eagle-topk 1",
    "--speculative-num-draft-tokens 2",
    env="SGLANG_ENABLE_SPEC_V2=False",
)
KIMI_PLAIN = unit()


def space(request: SpaceRequest, text: str = QWEN_MTP, version: str = "0.5.9"):  # type: ignore[no-untyped-def]
    return build_space(request, text, unit_name="sglang.service", version=version)


TOPK_1_2 = SpaceRequest(algorithms=("NEXTN",), steps=(2,), topks=(1, 2), spec_v2=(True, False))


def test_on_0_5_9_topk_2_with_spec_v2_is_pruned_with_sglangs_reason_and_only_the_v1_path_is_tried() -> None:
    result = space(TOPK_1_2, version="0.5.9")
    pruned = [(p.setting.topk, p.setting.spec_v2, p.code) for p in result.pruned]
    assert pruned == [(2, True, "spec-v2-topk")]
    assert "SGLang says: ValueError: Spec v2 currently only supports topk = 1 for speculative decoding." in (
        result.pruned[0].reason
    )
    assert result.pruned[0].config == {
        "speculative_algorithm": "NEXTN",
        "speculative_num_steps": 2,
        "speculative_eagle_topk": 2,
        "speculative_num_draft_tokens": 4,
        "disable_overlap_schedule": False,
    }
    trees = [c for c in result.candidates if c.config["speculative_eagle_topk"] == 2]
    assert len(trees) == 1 and trees[0].config["disable_overlap_schedule"] is True and trees[0].spec_v2 is False
    assert 'Environment="SGLANG_ENABLE_SPEC_V2=False"' in trees[0].unit_text


def test_on_0_5_12_topk_2_with_spec_v2_is_merged_into_the_v1_tree_sglang_falls_back_to() -> None:
    result = space(TOPK_1_2, version="0.5.12")
    assert not result.pruned
    assert [(m.setting.topk, m.setting.spec_v2) for m in result.merged] == [(2, True)]
    merged = result.merged[0]
    tree = result.candidate(merged.into)
    assert tree.config["disable_overlap_schedule"] is True and tree.setting.spec_v2 is False
    assert "falls back to spec v1" in merged.reason and "0.5.12" in merged.reason


def test_from_0_5_14_topk_2_runs_on_the_v2_worker_and_spec_v2_off_is_the_synchronous_path() -> None:
    result = space(TOPK_1_2, version="0.5.14")
    assert not result.pruned and not result.merged
    by_axes = {(c.config["speculative_eagle_topk"], c.config["disable_overlap_schedule"]): c for c in result.candidates}
    assert set(by_axes) == {(1, False), (1, True), (2, False), (2, True)}
    tree_v2 = by_axes[(2, False)]
    assert tree_v2.spec_v2 is True and tree_v2.name.endswith("+ spec v2")
    # the removed variable is taken out; "off" is --disable-overlap-schedule
    assert "SGLANG_ENABLE_SPEC_V2" not in tree_v2.unit_text
    assert "--disable-overlap-schedule" in by_axes[(2, True)].unit_text
    assert "--disable-overlap-schedule" not in tree_v2.unit_text


def test_a_chain_with_other_draft_tokens_is_merged_because_sglang_sets_steps_plus_one() -> None:
    result = space(SpaceRequest(algorithms=("NEXTN",), steps=(3,), draft_tokens=(None, 6), spec_v2=(False,)))
    assert len(result.candidates) == 1 and result.candidates[0].config["speculative_num_draft_tokens"] == 4
    assert [m.setting.draft_tokens for m in result.merged] == [6]
    assert "speculative_num_draft_tokens 6 -> 4" in result.merged[0].reason


def test_a_tree_that_cannot_hold_its_draft_tokens_is_pruned() -> None:
    request = SpaceRequest(algorithms=("NEXTN",), steps=(2,), topks=(2,), draft_tokens=(4, 9), spec_v2=(False,))
    result = space(request)
    assert [c.config["speculative_num_draft_tokens"] for c in result.candidates] == [4]
    assert [(p.setting.draft_tokens, p.code) for p in result.pruned] == [(9, "draft-tokens-exceed-tree")]


def test_no_speculation_is_one_candidate_and_names_say_the_algorithm_next_to_it() -> None:
    request = SpaceRequest(
        algorithms=(None, "EAGLE3"), steps=(2,), topks=(1, 4), spec_v2=(True, False), draft_model_path="/m/eagle3"
    )
    result = space(request, KIMI_PLAIN, "0.5.9")
    names = [c.name for c in result.candidates]
    assert names == ["no speculation", "EAGLE3 topk 1 + spec v2", "EAGLE3 topk 1", "EAGLE3 topk 4"]
    assert [p.setting.describe() for p in result.pruned] == ["EAGLE3 steps 2 topk 4 draft tokens auto spec v2 on"]
    plain = result.candidates[0]
    assert plain.config["speculative_algorithm"] is None and "--speculative" not in plain.unit_text
    tree = result.candidates[3]
    assert tree.config["speculative_num_draft_tokens"] == 8  # auto for a tree: steps × topk
    assert "--speculative-draft-model-path /m/eagle3" in tree.unit_text


def test_eagle3_without_a_draft_model_is_pruned_with_what_to_give() -> None:
    result = space(SpaceRequest(algorithms=("EAGLE3",), steps=(2,), spec_v2=(True,)), KIMI_PLAIN)
    assert not result.candidates
    assert result.pruned[0].code == "draft-model-missing" and "--draft-model-path" in result.pruned[0].reason


def test_each_candidate_is_the_original_unit_with_its_edits_only() -> None:
    result = space(SpaceRequest(algorithms=("NEXTN",), steps=(1, 3), spec_v2=(False,)))
    same, steps3 = result.candidates
    assert same.unit_text == QWEN_MTP  # the unit's own setup: byte-identical, so the tune need not restart it
    changed = [(a, b) for a, b in zip(QWEN_MTP.splitlines(), steps3.unit_text.splitlines(), strict=True) if a != b]
    assert changed == [
        ("    --speculative-num-steps 1 \\", "    --speculative-num-steps 3 \\"),
        ("    --speculative-num-draft-tokens 2 \\", "    --speculative-num-draft-tokens 4 \\"),
    ]
    assert UnitFile.parse(steps3.unit_text, "0.5.9").environment()["HF_HOME"] == "/var/lib/sglang/hf"


def test_names_and_keys_are_unique_and_say_what_varies() -> None:
    result = space(SpaceRequest(algorithms=("NEXTN",), steps=(1, 2, 3), spec_v2=(False,)))
    assert [c.name for c in result.candidates] == ["steps 1", "steps 2", "steps 3"]
    assert len({c.key for c in result.candidates}) == 3


@pytest.mark.parametrize("version", ["0.5.9", "0.5.12", "0.5.14", "0.5.17"])
@pytest.mark.parametrize(
    "setup",
    [SpecSetup("EAGLE3", 2, 1, 3, True, "/m/eagle3"), SpecSetup("EAGLE3", 2, 4, 8, False, "/m/eagle3"),
     SpecSetup("EAGLE", 3, 1, 4, False), SpecSetup(None)],
    ids=lambda s: s.key,
)  # fmt: skip
def test_a_setups_edits_make_each_version_run_it(version: str, setup: SpecSetup) -> None:
    """SpecSetup.edits through the unit model and the version's rules, as a tune applies them: the server runs the
    setup asked for (a wrong spec-v2 edit, the variable always True, fails it on 0.5.9 and 0.5.12)."""
    asked = Setting.asked(setup.algorithm, setup.steps, setup.topk, setup.draft_tokens, setup.spec_v2,
                          setup.draft_model_path)  # fmt: skip
    result = space(SpaceRequest(explicit=(asked,), include_grid=False), version=version)
    assert not result.pruned and [c.setup for c in result.candidates] == [setup]


def test_when_only_spec_v2_varies_the_names_say_the_algorithm() -> None:
    """Not " + spec v2" and "" (as on main before SpecSetup.name took the axes): a name is never empty."""
    result = space(SpaceRequest(algorithms=("NEXTN",), steps=(2,), spec_v2=(True, False)))
    assert [(c.key, c.name) for c in result.candidates] == [
        ("eagle-s2-k1-n3-v2", "EAGLE + spec v2"),
        ("eagle-s2-k1-n3-v1", "EAGLE"),
    ]


def test_the_units_own_speculation_is_read_as_written() -> None:
    found = unit_speculation(QWEN_MTP, "0.5.9")
    assert (found.algorithm, found.steps, found.topk, found.draft_tokens, found.spec_v2) == ("NEXTN", 1, 1, 2, False)
    assert unit_speculation(KIMI_PLAIN, "0.5.9").algorithm is None


def test_a_space_file_gives_axes_and_single_candidates() -> None:
    data = {
        "algorithm": ["EAGLE3", "none"],
        "steps": [2],
        "topk": "1,4",
        "spec_v2": [True, False],
        "draft_model_path": "/m/eagle3",
        "candidate": [{"algorithm": "EAGLE", "steps": 3, "topk": 1, "spec_v2": "off"}],
    }
    request = space_from_file(data, "space.toml")
    assert request.algorithms == ("EAGLE3", None) and request.topks == (1, 4) and request.spec_v2 == (True, False)
    assert request.explicit == (Setting.asked("EAGLE", 3, 1, None, False, None),)
    only = space_from_file({"candidate": [{"algorithm": "none"}]}, "space.toml")
    assert only.settings() == [Setting(None)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"stepz": [1]}, r"unknown key\(s\) stepz"),
        ({"steps": ["two"]}, "whole numbers"),
        ({"spec_v2": ["maybe"]}, "on and/or off"),
        ({"candidate": [{"algorithm": "EAGLE"}]}, "EAGLE needs steps and topk"),
    ],
)
def test_a_bad_space_file_says_what_is_wrong(data: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        space_from_file(data, "space.toml")


def test_axis_options_parse_with_clear_errors() -> None:
    assert parse_algorithms("none,eagle3") == (None, "EAGLE3")
    assert parse_counts("auto,8", "--draft-tokens", allow_auto=True) == (None, 8)
    assert parse_switches("on,off", "--spec-v2") == (True, False)
    with pytest.raises(UsageError, match="at least 1"):
        parse_counts("0", "--steps")
    with pytest.raises(UsageError, match="needs at least one value"):
        parse_counts(",", "--steps")
