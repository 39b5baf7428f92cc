"""The rules of the options that shorten a start (console.sglang.rules, wave5-facts §6): what SGLang refuses of them,
with its own text, and what they cannot do; and the editor's fields for them, where the release has them."""

from __future__ import annotations

import pytest

from console.core.apply.edit import editor_form
from console.sglang.rules import check_launch

M = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct"]
EAGLE = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"]
OVERLAP = ["--startup-weight-load-mode", "overlap"]


def _codes(argv: list[str], env: dict[str, str] | None = None, version: str = "0.5.23", **kw: object) -> list[str]:
    report = check_launch(argv, env or {}, version, **kw)  # type: ignore[arg-type]
    return [f.code for f in (*report.errors, *report.warnings) if f.code != "auto-choice-architecture-unknown"]


def test_overlap_on_its_allowlist_is_fine() -> None:
    assert _codes([*M, *OVERLAP, "--tp-size", "2"]) == []
    assert _codes(["--model-path", "/m", *OVERLAP], architecture="Qwen3ForCausalLM") == []


@pytest.mark.parametrize(
    ("extra", "reason", "architecture"),
    [
        (EAGLE, "speculative decoding is not supported", None),
        (["--tp-size", "4"], "only TP1 and TP2 are supported", None),
        (["--load-format", "presharded"], "load format must be auto or safetensors", None),
        (["--disable-cuda-graph"], "CUDA graph capture is disabled", None),
        (["--enable-torch-compile"], "torch.compile is not supported", None),
        (["--quantization", "fp8"], "quantization is not supported", None),
        (["--dtype", "float32"], "FP16 or BF16 only", None),
        (["--dp-size", "2"], "data parallelism is not supported", None),
        ([], "model architecture is not in the startup-overlap allowlist", "KimiK25ForConditionalGeneration"),
    ],
)
def test_overlap_refuses_what_sglang_refuses_with_its_text(extra: list[str], reason: str, architecture: str) -> None:
    report = check_launch([*M, *OVERLAP, *extra], {}, "0.5.23", architecture=architecture)
    errors = [e for e in report.errors if e.code == "startup-overlap-unsupported"]
    assert len(errors) == 1
    assert errors[0].sglang_log == f"ValueError: --startup-weight-load-mode=overlap is not supported: {reason}"
    assert "--startup-weight-load-mode serial" in errors[0].message
    assert errors[0].flags[0] == "--startup-weight-load-mode"


def test_the_first_of_sglangs_checks_that_fails_is_the_one_said() -> None:
    """SGLang says one reason, the first in its order: speculation before the tensor parallelism."""
    report = check_launch([*M, *OVERLAP, *EAGLE, "--tp-size", "8"], {}, "0.5.23")
    assert [e.sglang_log for e in report.errors if e.code == "startup-overlap-unsupported"] == [
        "ValueError: --startup-weight-load-mode=overlap is not supported: speculative decoding is not supported"
    ]


def test_overlap_is_not_a_flag_before_0_5_23() -> None:
    assert "unknown-flag" in _codes([*M, *OVERLAP], version="0.5.17")


@pytest.mark.parametrize("version", ["0.5.17", "0.5.23"])
def test_the_weight_cache_refuses_speculative_decoding(version: str) -> None:
    report = check_launch([*M, *EAGLE, "--weight-cache-mode", "client"], {}, version)
    error = next(e for e in report.errors if e.code == "weight-cache-speculative")
    assert error.sglang_log == (
        "ValueError: --weight-cache-mode is not supported together with speculative decoding (--speculative-algorithm):"
        " the weight cache daemon does not export the draft model's weights. Disable one of them (--weight-cache-mode"
        " off) for this configuration."
    )
    assert error.flags == ("--weight-cache-mode", "--speculative-algorithm")


def test_the_weight_cache_shares_only_unquantized_or_fp8_weights_and_its_daemon_mode_is_no_faster() -> None:
    assert _codes([*M, "--weight-cache-mode", "client"]) == []
    assert _codes([*M, "--weight-cache-mode", "client", "--quantization", "fp8"]) == []
    assert _codes([*M, "--weight-cache-mode", "client", "--quantization", "awq"]) == ["weight-cache-quantization"]
    assert _codes([*M, "--weight-cache-mode", "daemon"]) == ["weight-cache-daemon"]
    assert _codes([*M, "--weight-cache-mode", "client"], version="0.5.9") == ["unknown-flag"]


def test_prefetch_warns_that_it_turns_multithreaded_loading_off_unless_kept() -> None:
    assert _codes([*M, "--weight-loader-prefetch-checkpoints"]) == ["prefetch-single-thread"]
    kept = ["--model-loader-extra-config", '{"enable_multithread_load": true}']
    assert _codes([*M, "--weight-loader-prefetch-checkpoints", *kept]) == []


def test_the_loaders_extra_config_must_be_a_json_object() -> None:
    assert _codes([*M, "--load-format", "presharded", "--model-loader-extra-config", '{"presharded_path": "/s"}']) == []
    assert _codes([*M, "--model-loader-extra-config", "{presharded_path: /s}"]) == ["loader-extra-config-json"]
    assert _codes([*M, "--model-loader-extra-config", "[1]"]) == ["loader-extra-config-json"]


def test_a_compile_cache_dir_that_does_not_last_is_said() -> None:
    assert _codes(M, {"SGLANG_CACHE_DIR": "/var/cache/sglang"}) == []
    assert _codes(M, {"SGLANG_CACHE_DIR": "/tmp/sglang"}) == ["cache-dir-volatile"]
    assert _codes(M, {"SGLANG_CACHE_DIR": "/tmp/sglang"}, version="0.5.17") == []  # 0.5.17 moves no JIT cache there


UNIT = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m --tp-size 2\n"


@pytest.mark.parametrize(
    ("version", "fields"),
    [
        ("0.5.9", ["load_format", "model_loader_extra_config"]),
        ("0.5.17", ["load_format", "model_loader_extra_config", "weight_loader_prefetch_checkpoints",
                    "weight_cache_mode", "weight_cache_socket"]),
        ("0.5.23", ["load_format", "model_loader_extra_config", "weight_loader_prefetch_checkpoints",
                    "startup_weight_load_mode", "weight_cache_mode", "weight_cache_socket", "env:SGLANG_CACHE_DIR"]),
    ],
)  # fmt: skip
def test_the_editor_offers_each_option_where_the_release_has_it(version: str, fields: list[str]) -> None:
    form = editor_form(UNIT, version)
    offered = [f for f in form.fields if f.group == "faster restarts"]
    assert [f.dest for f in offered] == fields
    assert all(f.hint for f in offered)  # what each does, under it


def test_an_option_the_editor_offers_is_an_edit_like_any_other_and_checked_by_the_rules() -> None:
    form = editor_form(UNIT, "0.5.23")
    preview = form.preview({"load_format": "presharded", "env:SGLANG_CACHE_DIR": "/var/cache/sglang"})
    assert preview.ok and preview.plan is not None
    assert preview.edits.set_flags == (("--load-format", "presharded"),)
    assert preview.edits.set_env == (("SGLANG_CACHE_DIR", "/var/cache/sglang"),)
    assert 'Environment="SGLANG_CACHE_DIR=/var/cache/sglang"' in preview.plan.new_text
    refused = form.preview({"startup_weight_load_mode": "overlap", "load_format": "presharded"})
    assert not refused.ok and refused.plan is not None
    assert [e.code for e in refused.plan.report.errors] == ["startup-overlap-unsupported"]
