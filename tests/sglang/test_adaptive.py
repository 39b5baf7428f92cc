"""SGLang 0.5.23's adaptive speculative decoding as console/sglang/adaptive.py holds it (its source's rule, pure), the
status summary of an adaptive server (the launch config and the tier apart), and the DFLASH / DSPARK / UNO rules."""

from __future__ import annotations

import json

import pytest

from console.sglang.adaptive import (
    DEFAULT_DECODE_GRAPH_BS,
    AdaptiveConfigError,
    AdaptiveSpecParams,
    candidate_union,
    launch_steps,
    parse_config,
    settled_tier,
)
from console.sglang.client import summarize
from console.sglang.rules import check_launch


def test_default_tiers_union_and_launch_steps() -> None:
    assert candidate_union() == [0, 1, 3, 5, 7] and launch_steps() == 3
    params = AdaptiveSpecParams(3, graph_bs=DEFAULT_DECODE_GRAPH_BS)
    # a batch is padded up to a captured size, then served by the largest key not above it: 31 -> 32 -> slot 32
    assert [params.slot_key(b) for b in (1, 7, 8, 30, 31, 33, 63, 64, 200)] == [1, 1, 8, 8, 32, 32, 64, 64, 64]
    assert AdaptiveSpecParams(3).slot_key(31) == 8  # without graphs, no padding
    # each slot starts at the launch steps where they are its candidate, else at its middle one
    assert [params.steps_for_batch(b) for b in (1, 8, 32, 64)] == [3, 3, 1, 0]


def test_the_ema_rule_moves_a_slot_after_its_warm_up() -> None:
    params = AdaptiveSpecParams(3)
    changes = [params.on_verify_complete([0, 0], 1) for _ in range(15)]
    assert changes[:14] == [None] * 14  # 10 warm-up batches, then every 5th
    assert changes[14] == 1 and params.steps_for_batch(1) == 1  # nothing accepted: down to the slot's floor


def test_settled_tier_per_level() -> None:
    good = settled_tier(1, lambda s: 0.95 * s, launch=3)
    assert good.steps == 7 and good.path == (3, 5, 7) and not good.cycles
    poor = settled_tier(8, lambda s: 0.1 * s, launch=3)
    assert poor.slot == 8 and poor.steps in (0, 1) and poor.cycles  # 1 drops to 0, 0 probes 1 again
    assert settled_tier(64, lambda s: 0.9 * s, launch=3).steps == 0  # the big-batch slot never drafts


def test_a_config_file_is_checked_as_sglang_checks_it() -> None:
    assert candidate_union(parse_config(json.dumps({"1": {"candidate_steps": [2, 4]}}))) == [2, 4]
    with pytest.raises(AdaptiveConfigError, match="at least one integer-string BS key"):
        parse_config(json.dumps({"ema_alpha": 0.3}))
    with pytest.raises(AdaptiveConfigError, match="non-negative ints"):
        parse_config(json.dumps({"1": {"candidate_steps": [-1]}}))
    base = ["--model-path", "m", "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d",
            "--speculative-adaptive", "--speculative-adaptive-config", "/etc/a.json"]  # fmt: skip
    read = check_launch(
        [*base, "--speculative-num-steps", "2"], {}, "0.5.23", adaptive_config={"1": {"candidate_steps": [2, 4]}}
    )
    assert read.ok and read.resolved["speculative_num_draft_tokens"] == 3
    unread = check_launch(base, {}, "0.5.23")
    assert unread.ok and [w.code for w in unread.warnings] == ["adaptive-config-unread"]


def test_status_keeps_the_launch_config_and_shows_the_tier_apart() -> None:
    info = {"version": "0.5.23", "speculative_algorithm": "EAGLE", "speculative_adaptive": True,
            "speculative_num_steps": 3, "speculative_num_draft_tokens": 4,
            "internal_states": [{"speculative_num_steps": 1, "speculative_num_draft_tokens": 2}]}  # fmt: skip
    out = summarize(info)
    assert out["speculative_num_steps"] == 3 and out["speculative_num_draft_tokens"] == 4
    assert (
        out["speculative_adaptive"] is True and out["adaptive_num_steps"] == 1 and out["adaptive_num_draft_tokens"] == 2
    )
    static = summarize({**info, "speculative_adaptive": False})
    assert static["speculative_adaptive"] is None and static["adaptive_num_steps"] is None


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--speculative-algorithm", "DFLASH"],
         "DFLASH speculative decoding requires setting --speculative-draft-model-path."),
        (["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d", "--pp-size", "2"],
         "Currently DFLASH speculative decoding only supports pp_size == 1."),
        (["--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size", "7",
          "--speculative-num-draft-tokens", "5"],
         "DSpark speculative_num_draft_tokens must equal gamma + 1 (= 8 for gamma=7), but got "
         "speculative_num_draft_tokens=5."),
        (["--speculative-algorithm", "UNO"], "UNO requires --uno-lora-path."),
        (["--speculative-algorithm", "UNO", "--uno-lora-path", "/l", "--tp-size", "2"], "UNO requires TP=PP=1."),
        (["--speculative-algorithm", "UNO", "--uno-lora-path", "/l", "--speculative-draft-model-path", "d"],
         "UNO reuses the target model and does not accept --speculative-draft-model-path."),
    ],
)  # fmt: skip
def test_the_new_drafts_refuse_what_sglang_refuses(flags: list[str], error: str) -> None:
    report = check_launch(["--model-path", "m", *flags], {}, "0.5.23")
    assert not report.ok and report.errors[0].sglang_log == f"ValueError: {error}"


def test_the_new_drafts_resolve_their_own_window() -> None:
    flags = ["--model-path", "m", "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
             "--speculative-num-steps", "3", "--speculative-dflash-block-size", "8"]  # fmt: skip
    dflash = check_launch(flags, {}, "0.5.23")
    assert dflash.ok and [dflash.resolved[k] for k in ("speculative_num_steps", "speculative_eagle_topk",
                                                       "speculative_num_draft_tokens")] == [1, 1, 8]  # fmt: skip
    assert any("DFLASH only supports speculative_num_steps == 1" in (a.sglang_log or "") for a in dflash.adjustments)
    dspark = check_launch(["--model-path", "m", "--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size",
                           "7"], {}, "0.5.23")  # fmt: skip
    assert dspark.ok and dspark.resolved["speculative_num_draft_tokens"] == 8


def test_spec_v2_env_in_a_0523_unit_is_flagged_as_ignored() -> None:
    report = check_launch(["--model-path", "m", "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path",
                           "d", *("--speculative-num-steps", "2", "--speculative-eagle-topk", "1")],
                          {"SGLANG_ENABLE_SPEC_V2": "1"}, "0.5.23")  # fmt: skip
    assert report.ok and "spec-v2-env-removed" in [w.code for w in report.warnings]
    warning = next(w for w in report.warnings if w.code == "spec-v2-env-removed")
    assert "no effect in SGLang 0.5.23" in warning.message and warning.sglang_log is None  # silently ignored there
