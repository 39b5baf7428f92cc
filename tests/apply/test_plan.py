"""The apply plan through the real unit model and version rules (pure: no host, no server)."""

from __future__ import annotations

import pytest

from console.core.change import EditRequest, Plan, build_plan, parse_edits, plan_for_version, verify_resolved
from console.sglang.flags import flag_table
from console.sglang.rules import SPEC_TRIPLE, check_launch
from console.sglang.unit import UnitError, UnitFile

UNIT = """\
[Unit]
Description=SGLang server (Qwen3.5-122B-A10B-FP8, EAGLE speculative decoding)

[Service]
Type=simple
# spec v2 on 0.5.9 needs the switch
Environment="SGLANG_ENABLE_SPEC_V2=1"
Environment=CUDA_VISIBLE_DEVICES=0,1,2,3
ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server \\
    --model-path Qwen/Qwen3.5-122B-A10B-FP8 \\
    --tp-size 4 \\
    --speculative-algorithm EAGLE \\
    --speculative-num-steps 2 \\
    --speculative-eagle-topk 1 \\
    --speculative-num-draft-tokens 3 \\
    --mem-fraction-static 0.85 \\
    --host 127.0.0.1 \\
    --port 30000
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def kind_for(version: str):  # type: ignore[no-untyped-def]
    table = flag_table(version)

    def kind(flag: str) -> str | None:
        spec = table.lookup(flag)
        if spec is None:
            return None
        return "bool" if spec.is_boolean else "list" if spec.is_list else "value"

    return kind


def plan_for(version: str, *sets: str, unsets: tuple[str, ...] = (), envs: tuple[str, ...] = (),
             unset_envs: tuple[str, ...] = ()) -> Plan:  # fmt: skip
    edits = parse_edits(sets, unsets, envs, unset_envs, flag_kind=kind_for(version))
    return build_plan(
        UNIT,
        edits,
        unit_name="sglang.service",
        version=version,
        version_source="server",
        parse_unit=lambda text: UnitFile.parse(text, version),
        check=lambda argv, env, v: check_launch(argv, env, v),
    )


def test_a_valid_change_edits_only_its_lines_and_passes_the_rules() -> None:
    plan = plan_for("0.5.9", "--speculative-num-steps=3", "--speculative-num-draft-tokens=4")
    assert plan.ok and plan.changed
    changed = [ln for ln in plan.diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("---", "+++"))]
    assert changed == [
        "-    --speculative-num-steps 2 \\",
        "+    --speculative-num-steps 3 \\",
        "-    --speculative-num-draft-tokens 3 \\",
        "+    --speculative-num-draft-tokens 4 \\",
    ]
    assert plan.new_text == UNIT.replace("steps 2", "steps 3").replace("draft-tokens 3", "draft-tokens 4")
    expectations = plan.expectations()
    assert expectations["speculative_num_steps"].expected == 3
    assert expectations["speculative_num_draft_tokens"].expected == 4
    assert plan.speculative and plan.cuda_graph


def test_the_rules_refuse_spec_v2_with_topk_2_on_0_5_9() -> None:
    plan = plan_for("0.5.9", "--speculative-eagle-topk=2", "--speculative-num-draft-tokens=4")
    assert not plan.ok
    assert any("topk" in e.message for e in plan.report.errors)
    # the same edit is legal on 0.5.14+, where spec v2 supports trees
    assert plan_for("0.5.14", "--speculative-eagle-topk=2", "--speculative-num-draft-tokens=4").ok


def test_a_non_numeric_value_is_refused() -> None:
    plan = plan_for("0.5.9", "--speculative-num-steps=two")
    assert not plan.ok
    assert any("--speculative-num-steps" in " ".join(e.flags) for e in plan.report.errors)


def test_silent_adjustment_is_predicted_and_verified_as_adjusted() -> None:
    # topk 1 with 8 draft tokens: SGLang sets draft tokens := steps + 1 = 3 without failing.
    plan = plan_for("0.5.9", "--speculative-num-draft-tokens=8")
    assert plan.ok
    exp = plan.expectations()["speculative_num_draft_tokens"]
    assert (exp.requested, exp.expected) == (8, 3)
    assert exp.adjustment_reason
    verification = verify_resolved(plan.expectations(), {"speculative_num_draft_tokens": 3})
    assert verification.ok
    assert [v.status for v in verification.values if v.dest == "speculative_num_draft_tokens"] == ["adjusted"]


def test_setting_the_current_value_changes_nothing() -> None:
    plan = plan_for("0.5.9", "--speculative-num-steps=2")
    assert plan.ok and not plan.changed and plan.diff == ""


def test_boolean_flags_and_environment() -> None:
    plan = plan_for("0.5.9", "--enable-metrics", envs=("SGLANG_RECORD_STEP_TIME=1",),
                    unset_envs=("CUDA_VISIBLE_DEVICES",))  # fmt: skip
    assert plan.ok
    assert "--enable-metrics" in plan.new_text
    assert "CUDA_VISIBLE_DEVICES" not in plan.new_text
    assert "SGLANG_RECORD_STEP_TIME=1" in plan.new_text
    assert plan.expectations()["enable_metrics"].expected is True
    off = build_plan(
        plan.new_text,
        parse_edits(["--enable-metrics=false"], flag_kind=kind_for("0.5.9")),
        unit_name="sglang.service",
        version="0.5.9",
        version_source="profile",
        parse_unit=lambda text: UnitFile.parse(text, "0.5.9"),
        check=lambda argv, env, v: check_launch(argv, env, v),
    )
    assert "--enable-metrics" not in off.new_text


def test_spec_v2_switch_changes_the_predicted_overlap() -> None:
    plan = plan_for("0.5.9", unset_envs=("SGLANG_ENABLE_SPEC_V2",))
    assert plan.ok and plan.changed
    assert plan.expectations()["disable_overlap_schedule"].expected is True


def test_unsetting_a_flag_expects_its_default() -> None:
    plan = plan_for("0.5.9", unsets=("--mem-fraction-static",))
    assert plan.ok
    assert "--mem-fraction-static" not in plan.new_text
    assert "mem_fraction_static" in plan.expectations()


def test_an_unknown_flag_is_refused() -> None:
    plan = plan_for("0.5.9", "--speculative-num-stepz=3")
    assert not plan.ok


@pytest.mark.parametrize("version", ["0.5.6", "0.5.9", "0.5.12", "0.5.14", "0.5.23"])
def test_every_supported_version_plans_the_steps_change(version: str) -> None:
    plan = plan_for(version, "--speculative-num-steps=3", "--speculative-num-draft-tokens=4")
    assert plan.ok, [e.message for e in plan.report.errors]
    assert plan.report.sglang_version == version


def test_empty_edit_request_is_unchanged() -> None:
    plan = build_plan(
        UNIT,
        EditRequest(),
        unit_name="u",
        version="0.5.9",
        version_source="newest",
        parse_unit=UnitFile.parse,
        check=lambda argv, env, v: check_launch(argv, env, v),
    )
    assert not plan.changed and plan.ok


def test_adjustments_the_old_unit_already_had_are_not_this_edits() -> None:
    # "max running requests := 48 with speculation" applies before and after: it is reported, not verified.
    plan = plan_for("0.5.9", "--speculative-num-steps=3", "--speculative-num-draft-tokens=4")
    assert any(a.flag == "max_running_requests" for a in plan.report.adjustments)
    assert "max_running_requests" not in plan.expectations()


# --- plan_for_version: the one plan with a version's own unit model and rules --------------------------------


def test_plan_for_version_is_build_plan_with_that_versions_unit_model_and_rules() -> None:
    edits = parse_edits(["--speculative-num-steps=3", "--speculative-num-draft-tokens=4"], flag_kind=kind_for("0.5.9"))
    plan = plan_for_version(UNIT, edits, unit_name="sglang.service", version="0.5.9")
    by_hand = plan_for("0.5.9", "--speculative-num-steps=3", "--speculative-num-draft-tokens=4")
    assert (plan.new_text, plan.diff, plan.version_source) == (by_hand.new_text, by_hand.diff, "server")
    assert (plan.report.to_json(), plan.old_report.to_json()) == (
        by_hand.report.to_json(),
        by_hand.old_report.to_json(),
    )
    unchanged = plan_for_version(UNIT, unit_name="sglang.service", version="0.5.9", version_source="profile")
    assert not unchanged.changed and unchanged.diff == "" and unchanged.version_source == "profile"


def test_a_replacement_plan_writes_the_whole_text_and_checks_both_units_like_an_edit() -> None:
    edited = plan_for("0.5.9", "--speculative-eagle-topk=2", "--speculative-num-draft-tokens=4")
    ignored = EditRequest(set_flags=(("--tp-size", "8"),))
    back = plan_for_version(edited.new_text, ignored, unit_name="sglang.service", version="0.5.9", replacement=UNIT)
    assert back.old_text == edited.new_text and back.new_text == UNIT  # the edits were ignored
    assert back.diff.startswith("--- sglang.service (now)\n+++ sglang.service (new)\n")
    assert back.report.to_json() == edited.old_report.to_json()
    assert back.old_report.to_json() == edited.report.to_json()
    with pytest.raises(UnitError):
        plan_for_version(UNIT, unit_name="sglang.service", version="0.5.9", replacement="[Service]\nType=simple\n")


def test_plan_for_version_checks_with_the_served_models_architecture() -> None:
    """SGLang's auto-choice of the draft tree depends on the model: a Llama gets (5, 4, 8), a DeepSeek (3, 1, 4)."""
    edits = EditRequest(
        unset_flags=("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    )

    def tree(architecture: str) -> list[object]:
        plan = plan_for_version(UNIT, edits, unit_name="sglang.service", version="0.5.9", architecture=architecture)
        return [plan.report.resolved[dest] for dest in SPEC_TRIPLE]

    assert tree("LlamaForCausalLM") == [5, 4, 8]
    assert tree("DeepseekV3ForCausalLM") == [3, 1, 4]
