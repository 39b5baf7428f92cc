"""One test (at least) per rule of console.sglang.rules, for the versions it holds for."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.sglang.flags import SUPPORTED_VERSIONS, flag_table
from console.sglang.rules import CheckReport, auto_speculative_params, check_launch

M = ["--model-path", "Qwen/Qwen3-8B"]
EAGLE = [*M, "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d"]


def triple(steps: int, topk: int, draft: int) -> list[str]:
    return [
        "--speculative-num-steps",
        str(steps),
        "--speculative-eagle-topk",
        str(topk),
        "--speculative-num-draft-tokens",
        str(draft),
    ]


def codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


def adjusted(report: CheckReport) -> dict[str, tuple[Any, Any]]:
    return {a.flag: (a.from_value, a.to_value) for a in report.adjustments}


def test_readme_example_spec_v2_with_topk_2_on_0_5_9() -> None:
    r = check_launch([*EAGLE, *triple(3, 2, 6)], {"SGLANG_ENABLE_SPEC_V2": "1"}, "0.5.9")
    assert not r.ok
    assert codes(r.errors) == ["spec-v2-topk"]
    error = r.errors[0]
    assert error.flags == ("--speculative-eagle-topk", "SGLANG_ENABLE_SPEC_V2")
    assert "topk = 1" in error.message and "--speculative-eagle-topk 1" in error.message
    assert error.sglang_log == "ValueError: Spec v2 currently only supports topk = 1 for speculative decoding."


def test_spec_v2_topk_is_fine_without_the_env_on_0_5_9_and_overlap_goes_off() -> None:
    r = check_launch([*EAGLE, *triple(3, 2, 6)], {}, "0.5.9")
    assert r.ok
    assert adjusted(r)["disable_overlap_schedule"] == (False, True)
    assert r.resolved["disable_overlap_schedule"] is True and r.spec_v2 is False


def test_spec_v2_auto_topk_is_not_caught_on_0_5_9_but_warned() -> None:
    r = check_launch(
        ["--model-path", "meta-llama/Llama-3.1-8B", "--speculative-algorithm", "EAGLE"],
        {"SGLANG_ENABLE_SPEC_V2": "true"},
        "0.5.9",
    )
    assert r.ok and r.resolved["speculative_eagle_topk"] == 4
    assert "spec-v2-auto-topk" in codes(r.warnings)


def test_0_5_12_falls_back_to_spec_v1_for_topk_above_1() -> None:
    r = check_launch([*EAGLE, *triple(3, 4, 8)], {}, "0.5.12")
    assert r.ok
    adj = next(a for a in r.adjustments if a.flag == "disable_overlap_schedule")
    assert (adj.from_value, adj.to_value) == (False, True)
    assert adj.sglang_log == (
        "Spec v1 is used for eagle/eagle3/standalone speculative decoding because "
        "spec v2 currently only supports topk = 1."
    )
    assert r.spec_v2 is False and r.overlap_schedule is False


def test_0_5_12_spec_v2_is_on_by_default_and_env_false_turns_it_off() -> None:
    on = check_launch([*EAGLE, *triple(2, 1, 3)], {}, "0.5.12")
    assert on.spec_v2 is True and on.resolved["disable_overlap_schedule"] is False
    off = check_launch([*EAGLE, *triple(2, 1, 3)], {"SGLANG_ENABLE_SPEC_V2": "0"}, "0.5.12")
    assert off.resolved["disable_overlap_schedule"] is True
    assert "SGLANG_ENABLE_SPEC_V2=False" in off.adjustments[-1].reason + str(off.adjustments[-1].sglang_log)


def test_0_5_6_spec_v2_env_turns_overlap_on_only_for_eagle() -> None:
    r = check_launch([*EAGLE, *triple(2, 1, 3), "--disable-overlap-schedule"], {"SGLANG_ENABLE_SPEC_V2": "1"}, "0.5.6")
    assert adjusted(r)["disable_overlap_schedule"] == (True, False)
    eagle3 = [*M, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", *triple(2, 1, 3)]
    r3 = check_launch([*eagle3, "--disable-overlap-schedule"], {"SGLANG_ENABLE_SPEC_V2": "1"}, "0.5.6")
    assert r3.resolved["disable_overlap_schedule"] is True  # neither branch fires: configured value kept
    default = check_launch([*EAGLE, *triple(2, 1, 3)], {}, "0.5.6")
    assert default.resolved["disable_overlap_schedule"] is True and default.spec_v2 is False


@pytest.mark.parametrize("version", ["0.5.14", "0.5.23"])
def test_from_0_5_14_topk_above_1_keeps_overlap_and_the_env_is_gone(version: str) -> None:
    r = check_launch([*EAGLE, *triple(3, 4, 8)], {"SGLANG_ENABLE_SPEC_V2": "1"}, version)
    assert r.ok and r.spec_v2 is True and r.resolved["disable_overlap_schedule"] is False
    assert "spec-v2-env-removed" in codes(r.warnings)
    sync = check_launch([*EAGLE, *triple(3, 4, 8), "--disable-overlap-schedule"], {}, version)
    assert sync.overlap_schedule is False and "spec-v2-synchronous" in codes(sync.warnings)


def test_invalid_env_boolean_is_an_error() -> None:
    r = check_launch([*EAGLE, *triple(2, 1, 3)], {"SGLANG_ENABLE_SPEC_V2": "maybe"}, "0.5.9")
    assert codes(r.errors) == ["invalid-env"]
    assert r.errors[0].sglang_log == 'ValueError: "maybe" is not a valid boolean value'


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_topk_1_chain_rule_sets_draft_tokens(version: str) -> None:
    r = check_launch([*EAGLE, *triple(3, 1, 8)], {}, version)
    assert r.ok
    assert adjusted(r)["speculative_num_draft_tokens"] == (8, 4)
    assert r.resolved["speculative_num_draft_tokens"] == 4
    log = next(a.sglang_log for a in r.adjustments if a.flag == "speculative_num_draft_tokens")
    assert (
        log == "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
    )


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_max_running_requests_reset_to_48_unless_set(version: str) -> None:
    r = check_launch([*EAGLE, *triple(2, 1, 3)], {}, version)
    assert r.resolved["max_running_requests"] == 48
    adj = next(a for a in r.adjustments if a.flag == "max_running_requests")
    assert adj.sglang_log is not None and adj.sglang_log.startswith("Max running requests is reset to 48")
    explicit = check_launch([*EAGLE, *triple(2, 1, 3), "--max-running-requests", "128"], {}, version)
    assert explicit.resolved["max_running_requests"] == 128
    assert "max_running_requests" not in adjusted(explicit)
    plain = check_launch(M, {}, version)
    assert plain.resolved["max_running_requests"] is None and plain.adjustments == [] and plain.spec_v2 is None


def test_nextn_becomes_eagle() -> None:
    r = check_launch([*M, "--speculative-algorithm", "NEXTN", *triple(1, 1, 2)], {}, "0.5.9")
    assert adjusted(r)["speculative_algorithm"] == ("NEXTN", "EAGLE")
    assert r.resolved["speculative_algorithm"] == "EAGLE"


def test_0_5_23_upper_cases_and_refuses_unknown_algorithms() -> None:
    r = check_launch([*M, "--speculative-algorithm", "eagle3", *triple(2, 1, 3)], {}, "0.5.23")
    assert r.ok and r.resolved["speculative_algorithm"] == "EAGLE3"
    bad = check_launch([*M, "--speculative-algorithm", "MEDUSA"], {}, "0.5.23")
    assert codes(bad.errors) == ["unknown-algorithm"]
    assert bad.errors[0].sglang_log == "ValueError: Unknown speculative algorithm name: MEDUSA"


@pytest.mark.parametrize(
    ("version", "architecture", "expected"),
    [
        ("0.5.6", None, (5, 4, 8)),
        ("0.5.9", None, (3, 1, 4)),
        ("0.5.23", "LlamaForCausalLM", (5, 4, 8)),
        ("0.5.9", "DeepseekV3ForCausalLM", (3, 1, 4)),
        ("0.5.9", "Grok1ForCausalLM", (5, 4, 8)),
    ],
)
def test_auto_choice_by_architecture_and_version(version: str, architecture: str | None, expected: tuple) -> None:
    assert auto_speculative_params(version, "EAGLE", architecture) == expected
    r = check_launch(EAGLE, {}, version, architecture=architecture)
    assert r.ok
    got = tuple(
        r.resolved[d] for d in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    )
    assert got == expected
    assert ("auto-choice-architecture-unknown" in codes(r.warnings)) == (architecture is None)


def test_auto_choice_standalone_and_model_path_hint() -> None:
    assert auto_speculative_params("0.5.6", "STANDALONE", "LlamaForCausalLM") == (3, 1, 4)
    r = check_launch(["--model-path", "deepseek-ai/DeepSeek-V3", "--speculative-algorithm", "EAGLE"], {}, "0.5.6")
    assert r.resolved["speculative_eagle_topk"] == 1  # guessed DeepseekV3ForCausalLM


def test_all_or_none_of_the_triple() -> None:
    topk_only = check_launch([*EAGLE, "--speculative-eagle-topk", "2"], {}, "0.5.23")
    assert codes(topk_only.errors) == ["spec-params-partial"]
    assert topk_only.errors[0].sglang_log == "AssertionError"
    steps_only = check_launch([*EAGLE, "--speculative-num-steps", "3"], {}, "0.5.23")
    assert codes(steps_only.errors) == ["spec-params-partial"]
    assert "--speculative-eagle-topk" in steps_only.errors[0].message
    tree_no_draft = check_launch(
        [*EAGLE, "--speculative-num-steps", "3", "--speculative-eagle-topk", "4"], {}, "0.5.23"
    )
    assert codes(tree_no_draft.errors) == ["spec-params-partial"]
    chain_no_draft = check_launch(
        [*EAGLE, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"], {}, "0.5.23"
    )
    assert chain_no_draft.ok and chain_no_draft.resolved["speculative_num_draft_tokens"] == 4
    assert "spec-params-partial" in codes(chain_no_draft.warnings)


@pytest.mark.parametrize(
    "backend_flag", ["--attention-backend", "--decode-attention-backend", "--prefill-attention-backend"]
)
def test_trtllm_mha_needs_topk_1(backend_flag: str) -> None:
    r = check_launch([*EAGLE, *triple(3, 4, 8), backend_flag, "trtllm_mha"], {}, "0.5.23")
    assert codes(r.errors) == ["trtllm-mha-topk"]
    assert backend_flag in r.errors[0].flags and "--speculative-eagle-topk" in r.errors[0].flags
    assert r.errors[0].sglang_log == "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding."
    assert check_launch([*EAGLE, *triple(3, 1, 4), backend_flag, "trtllm_mha"], {}, "0.5.23").ok


@pytest.mark.parametrize(
    ("version", "backend", "ok"),
    [
        ("0.5.9", "flashinfer", True),
        ("0.5.9", "triton", False),
        ("0.5.23", "triton", True),
        ("0.5.23", "flashmla", False),
    ],
)
def test_tree_with_paged_kv_needs_certain_backends(version: str, backend: str, ok: bool) -> None:
    r = check_launch([*EAGLE, *triple(3, 4, 8), "--page-size", "16", "--attention-backend", backend], {}, version)
    assert ("paged-tree" in codes(r.errors)) is not ok


def test_flashmla_and_flex_attention() -> None:
    r = check_launch([*EAGLE, *triple(3, 2, 6), "--attention-backend", "flashmla"], {}, "0.5.9")
    assert "flashmla-topk" in codes(r.errors)
    flex = check_launch([*EAGLE, *triple(3, 1, 4), "--attention-backend", "flex_attention"], {}, "0.5.9")
    assert codes(flex.errors) == ["flex-attention-spec"]


def test_draft_tokens_beyond_the_tree_warn() -> None:
    r = check_launch([*EAGLE, *triple(2, 2, 8)], {}, "0.5.23")
    assert r.ok and codes(r.warnings) == ["draft-tokens-exceed-tree"]
    assert "5" in r.warnings[0].message  # steps * topk + 1
    assert check_launch([*EAGLE, *triple(2, 2, 5)], {}, "0.5.23").warnings == []


@pytest.mark.parametrize("algorithm", ["STANDALONE", "NGRAM"])
@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_dp_attention_refused_for_standalone_and_ngram(algorithm: str, version: str) -> None:
    r = check_launch([*M, "--speculative-algorithm", algorithm, "--enable-dp-attention", "--dp-size", "2"], {}, version)
    code = "standalone-dp-attention" if algorithm == "STANDALONE" else "ngram-dp-attention"
    assert code in codes(r.errors)
    error = next(e for e in r.errors if e.code == code)
    assert "--enable-dp-attention" in error.flags and "dp attention" in str(error.sglang_log)


def test_mixed_chunk_is_forced_off() -> None:
    r = check_launch([*EAGLE, *triple(2, 1, 3), "--enable-mixed-chunk"], {}, "0.5.9")
    assert r.ok and adjusted(r)["enable_mixed_chunk"] == (True, False)
    assert r.resolved["enable_mixed_chunk"] is False


def test_ngram_resolution_by_version() -> None:
    old = check_launch([*M, "--speculative-algorithm", "NGRAM"], {}, "0.5.6")
    assert old.resolved["speculative_eagle_topk"] == 10 and old.resolved["speculative_num_draft_tokens"] == 12
    assert old.resolved["disable_overlap_schedule"] is True and old.resolved["max_running_requests"] == 48
    new = check_launch([*M, "--speculative-algorithm", "NGRAM"], {}, "0.5.23")
    assert new.resolved["disable_overlap_schedule"] is False
    assert new.resolved["speculative_num_steps"] == 12 // 10


def test_ngram_paged_tree_needs_flashinfer_before_0_5_14() -> None:
    argv = [*M, "--speculative-algorithm", "NGRAM", "--page-size", "16", "--attention-backend", "fa3"]
    (error,) = [e for e in check_launch(argv, {}, "0.5.9").errors if e.code == "paged-tree"]
    assert "SGLang 0.5.9;" in error.message and "{" not in error.message
    assert "paged-tree" not in codes(check_launch([*argv[:-1], "flashinfer"], {}, "0.5.9").errors)


def test_pipeline_parallel_with_speculation_before_0_5_14() -> None:
    r = check_launch([*EAGLE, *triple(2, 1, 3), "--pp-size", "2"], {}, "0.5.9")
    assert "pipeline-parallel-spec" in codes(r.errors)
    assert check_launch([*EAGLE, *triple(2, 1, 3), "--pp-size", "2"], {}, "0.5.23").ok


def test_0_5_23_rejection_sampling_and_adaptive() -> None:
    r = check_launch([*EAGLE, *triple(3, 4, 8), "--speculative-use-rejection-sampling"], {}, "0.5.23")
    assert "rejection-sampling-topk" in codes(r.errors)
    adaptive = check_launch([*EAGLE, "--speculative-adaptive"], {}, "0.5.23")
    assert adaptive.ok
    assert [
        adaptive.resolved[d]
        for d in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    ] == [3, 1, 4]
    bad = check_launch([*EAGLE, "--speculative-adaptive", *triple(2, 1, 3)], {}, "0.5.23")
    assert codes(bad.errors) == ["adaptive-steps"]
    fallback = check_launch([*EAGLE, "--speculative-adaptive", *triple(3, 4, 8)], {}, "0.5.23")
    assert fallback.ok and adjusted(fallback)["speculative_adaptive"] == (True, False)


def test_spec_flags_without_algorithm_warn() -> None:
    r = check_launch([*M, *triple(2, 1, 3)], {}, "0.5.23")
    assert r.ok and codes(r.warnings) == ["spec-flags-ignored"]


def test_argv_errors_become_errors_with_argparse_log() -> None:
    r = check_launch([*M, "--speculative-num-steps", "three", "--no-such-flag"], {}, "0.5.9")
    assert codes(r.errors) == ["invalid-value", "unknown-flag"]
    assert (
        r.errors[0].sglang_log
        == "launch_server.py: error: argument --speculative-num-steps: invalid int value: 'three'"
    )
    assert r.errors[1].sglang_log == "launch_server.py: error: unrecognized arguments: --no-such-flag"
    moved = check_launch([*M, "--cuda-graph-max-bs", "64"], {}, "0.5.23")
    assert moved.errors[0].code == "ambiguous-prefix"
    assert "0.5.14" in moved.errors[0].message and moved.errors[0].sglang_log.startswith("sglang serve: error: ")


def test_deprecated_flag_warns() -> None:
    r = check_launch([*M, "--cuda-graph-max-bs", "64"], {}, "0.5.14")
    assert r.ok and codes(r.warnings) == ["deprecated-flag"]
    assert r.resolved["cuda_graph_max_bs_decode"] == 64


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_resolved_has_every_dest_and_json_shape(version: str) -> None:
    r = check_launch([*EAGLE, *triple(2, 1, 3)], {}, version)
    assert set(flag_table(version).by_dest) <= set(r.resolved)
    for dest in (
        "speculative_algorithm",
        "speculative_num_steps",
        "max_running_requests",
        "disable_overlap_schedule",
        "tp_size",
        "attention_backend",
    ):
        assert dest in r.resolved
    data = r.to_json()
    assert list(data) == ["ok", "sglang_version", "errors", "warnings", "adjustments", "resolved"]
    assert data["sglang_version"] == version
    for adj in data["adjustments"]:
        assert list(adj) == ["flag", "from", "to", "reason"] and adj["flag"] in r.resolved
    assert "sglang_log" not in str(data.keys())


def test_every_error_names_flags_and_says_what_to_change() -> None:
    cases = [
        ([*EAGLE, *triple(3, 2, 6)], {"SGLANG_ENABLE_SPEC_V2": "1"}, "0.5.9"),
        ([*EAGLE, *triple(3, 4, 8), "--attention-backend", "trtllm_mha"], {}, "0.5.23"),
        ([*M, "--speculative-algorithm", "NGRAM", "--enable-dp-attention"], {}, "0.5.23"),
        ([*EAGLE, "--speculative-num-steps", "2"], {}, "0.5.23"),
        ([*M, "--bogus"], {}, "0.5.23"),
    ]
    for argv, env, version in cases:
        r = check_launch(argv, env, version)
        assert r.errors
        for error in r.errors:
            assert error.flags and all(f in error.message for f in error.flags)
            assert any(word in error.message for word in ("Set ", "Use ", "Remove", "remove", "set ", "use "))
            assert error.sglang_log


SPEC_WORDS = [
    "--speculative-algorithm",
    "--speculative-algo",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-adaptive",
    "--speculative-use-rejection-sampling",
    "--speculative-ngram-max-bfs-breadth",
    "--enable-dp-attention",
    "--enable-mixed-chunk",
    "--disable-overlap-schedule",
    "--page-size",
    "--attention-backend",
    "--max-running-requests",
    "--pp-size",
    "--cuda-graph-max-bs",
    "--model-path",
    "--bogus",
]
SPEC_VALUES = [
    "EAGLE",
    "EAGLE3",
    "NEXTN",
    "STANDALONE",
    "NGRAM",
    "eagle",
    "0",
    "1",
    "2",
    "4",
    "-1",
    "x",
    "trtllm_mha",
    "fa3",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(SPEC_WORDS + SPEC_VALUES), max_size=14),
    st.sampled_from(SUPPORTED_VERSIONS),
    st.sampled_from([{}, {"SGLANG_ENABLE_SPEC_V2": "1"}, {"SGLANG_ENABLE_SPEC_V2": "false"}]),
)
def test_any_argv_gives_a_report_never_an_exception(argv: list[str], version: str, env: dict[str, str]) -> None:
    r = check_launch(argv, env, version)
    assert set(flag_table(version).by_dest) <= set(r.resolved)
    assert r.ok == (not r.errors)
    for finding in r.errors:
        assert finding.message and finding.sglang_log


# --- 0.5.17, reviewed against its wheel's server_args.py / speculative_hook.py and run on an H200 -------------

TINY = ["--model-path", "/opt/sgm/tiny-llama", "--attention-backend", "triton"]
TINY_EAGLE = [*TINY, "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/opt/sgm/tiny-eagle"]


def test_0_5_17_agrees_with_every_launch_captured_on_the_real_server() -> None:
    """research/real-sglang runs/3_cg_ok_and_variants/var: (a)-(d) and NGRAM, as the real 0.5.17 took them."""
    # (c) an unknown flag: argparse's text from "sglang serve", exit 2
    c = check_launch([*TINY_EAGLE, "--speculative-num-stepz", "2", "--speculative-eagle-topk", "1"], {}, "0.5.17")
    assert codes(c.errors)[0] == "unknown-flag"  # argparse stops there; the rules see the rest too
    assert c.errors[0].sglang_log == "sglang serve: error: unrecognized arguments: --speculative-num-stepz 2"
    # (b) draft tokens 8 with topk 1 and steps 2: started, adjusted to 3 with SGLang's warning
    b = check_launch([*TINY_EAGLE, *triple(2, 1, 8)], {}, "0.5.17", architecture="LlamaForCausalLM")
    assert b.ok and adjusted(b)["speculative_num_draft_tokens"] == (8, 3)
    # (a) SGLANG_ENABLE_SPEC_V2=1 with topk 2: started, the removal logged, overlap kept
    a = check_launch([*TINY_EAGLE, *triple(2, 2, 4)], {"SGLANG_ENABLE_SPEC_V2": "1"}, "0.5.17")
    assert a.ok and a.resolved["disable_overlap_schedule"] is False
    assert any((w.sglang_log or "").startswith("SGLANG_ENABLE_SPEC_V2 has been removed") for w in a.warnings)
    # (d) EAGLE without a draft path: not refused
    d = check_launch([*TINY, "--speculative-algorithm", "EAGLE", *triple(2, 1, 3)], {}, "0.5.17")
    assert d.ok and d.resolved["speculative_draft_model_path"] is None
    # NGRAM: 12 draft tokens by default, topk 10, steps 1, 48 running requests
    n = check_launch([*TINY, "--speculative-algorithm", "NGRAM"], {}, "0.5.17")
    assert n.ok
    assert {k: n.resolved[k] for k in (*("speculative_num_draft_tokens", "speculative_eagle_topk"),)} == {
        "speculative_num_draft_tokens": 12,
        "speculative_eagle_topk": 10,
    }
    assert (n.resolved["speculative_num_steps"], n.resolved["max_running_requests"]) == (1, 48)
    # the golden launch: max running requests reset to 48, nothing else
    g = check_launch([*TINY_EAGLE, *triple(2, 1, 3), "--enable-metrics", "--mem-fraction-static", "0.3"], {}, "0.5.17")
    assert g.ok and adjusted(g) == {"max_running_requests": (None, 48)}


def test_0_5_17_auto_choice_knows_the_mimo_models() -> None:
    for arch in ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM"):
        assert auto_speculative_params("0.5.17", "EAGLE", arch) == (3, 1, 4)
    assert auto_speculative_params("0.5.17", "EAGLE", "LlamaForCausalLM") == (5, 4, 8)


def test_0_5_17_adaptive_takes_step_0_and_refuses_multi_layer_eagle() -> None:
    base = [*TINY_EAGLE, "--speculative-adaptive", "--speculative-eagle-topk", "1"]
    assert check_launch([*base, "--speculative-num-steps", "0"], {}, "0.5.17").ok  # candidates 0, 1, 3, 7
    assert check_launch([*base, "--speculative-num-steps", "0"], {}, "0.5.23").ok  # the union 0, 1, 3, 5, 7
    assert not check_launch([*base, "--speculative-num-steps", "2"], {}, "0.5.23").ok
    assert not check_launch([*base, "--speculative-num-steps", "5"], {}, "0.5.17").ok  # 0, 1, 3, 7
    off = check_launch([*base, "--enable-multi-layer-eagle"], {}, "0.5.17")
    assert adjusted(off)["speculative_adaptive"] == (True, False)


def test_0_5_17_rejection_sampling_refuses_deterministic_inference() -> None:
    r = check_launch(
        [*TINY_EAGLE, *triple(2, 1, 3), "--speculative-use-rejection-sampling", "--enable-deterministic-inference"],
        {},
        "0.5.17",
    )
    assert codes(r.errors) == ["rejection-sampling-deterministic"]


def test_0_5_17_draft_window_and_skip_dp_mlp_sync_checks() -> None:
    window = check_launch([*TINY_EAGLE, *triple(2, 1, 3), "--speculative-draft-window-size", "0"], {}, "0.5.17")
    assert codes(window.errors) == ["draft-window-size"]
    assert window.errors[0].sglang_log == "ValueError: --speculative-draft-window-size must be positive, got 0."
    skip = check_launch([*TINY, "--speculative-algorithm", "NGRAM", "--speculative-skip-dp-mlp-sync"], {}, "0.5.17")
    assert codes(skip.errors) == ["skip-dp-mlp-sync-algorithm"]
    assert check_launch([*TINY_EAGLE, *triple(2, 1, 3), "--speculative-skip-dp-mlp-sync"], {}, "0.5.17").ok
