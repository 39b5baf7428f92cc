"""The pure edges of the core: the restart state machine, secret values in verification and reports, own locks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.core.change import (
    ApplyState,
    EditRequest,
    Expectation,
    IllegalTransition,
    Rollout,
    build_plan,
    mask_plan,
    verify_resolved,
)
from console.secrets import SecretMask
from console.sglang.rules import check_launch
from console.sglang.unit import UnitFile

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
UNIT = """[Service]
Environment="HF_TOKEN=hf_secret_value"
ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path m --api-key sk-unit-key \\
    --speculative-algorithm EAGLE --speculative-draft-model-path d --speculative-num-steps 2 \\
    --speculative-eagle-topk 1 --speculative-num-draft-tokens 3
"""


def test_a_restart_moves_from_validated_straight_to_restarting_and_fails_without_rollback() -> None:
    restart = Rollout.start(T0, restart_only=True)
    for state in (ApplyState.RESTARTING, ApplyState.STARTING, ApplyState.RESTART_FAILED):
        restart.advance(state, T0)
    assert restart.finished and not restart.ok and not restart.rolled_back and restart.exit_code == 1
    with pytest.raises(IllegalTransition):
        Rollout.start(T0, restart_only=True).advance(ApplyState.BACKED_UP, T0)
    with pytest.raises(IllegalTransition):  # an apply never restarts before writing
        Rollout.start(T0).advance(ApplyState.RESTARTING, T0)
    with pytest.raises(IllegalTransition):  # nor ends in a restart's failure
        apply = Rollout.start(T0)
        for state in (ApplyState.BACKED_UP, ApplyState.WRITTEN, ApplyState.DAEMON_RELOADED, ApplyState.RESTARTING):
            apply.advance(state, T0)
        apply.advance(ApplyState.RESTART_FAILED, T0)


def test_a_secret_is_never_compared_nor_shown_by_verification() -> None:
    expectations = {"api_key": Expectation("api_key", "sk-new", "sk-new"), "tp_size": Expectation("tp_size", 4, 4)}
    verification = verify_resolved(expectations, {"api_key": "***", "tp_size": 4})
    values = {v.dest: v for v in verification.values}
    assert verification.ok and values["api_key"].status == "secret"
    assert "sk-new" not in repr(verification) and values["tp_size"].status == "as_requested"


def test_a_masked_plan_shows_no_secret_but_keeps_the_texts_to_write() -> None:
    plan = build_plan(
        UNIT,
        EditRequest(set_flags=(("--speculative-num-steps", "3"), ("--speculative-num-draft-tokens", "4"))),
        unit_name="sglang.service",
        version="0.5.9",
        version_source="server",
        parse_unit=lambda text: UnitFile.parse(text, "0.5.9"),
        check=check_launch,
    )
    mask = SecretMask()
    mask.learn_launch(UnitFile.parse(UNIT).flags(), UnitFile.parse(UNIT).environment())
    shown = mask_plan(plan, mask)
    visible = repr(shown) + shown.diff + str(shown.report.to_json()) + str(shown.old_report.to_json())
    assert "sk-unit-key" not in visible and "hf_secret_value" not in visible
    assert shown.report.resolved["api_key"] == "***"
    assert "sk-unit-key" in shown.new_text and shown.new_text == plan.new_text  # what gets written is untouched
