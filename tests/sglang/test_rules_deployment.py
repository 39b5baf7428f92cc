"""The launch rules of multi-node and PD servers (console.sglang.rules): what SGLang 0.5.23 refuses at startup."""

from __future__ import annotations

from console.sglang.rules import check_launch


def _codes(*argv: str) -> list[str]:
    return [e.code for e in check_launch(["--model-path", "m", *argv], {}, "0.5.23").errors]


def test_tp_times_pp_must_split_over_the_nodes() -> None:
    assert "nnodes-divides-tp" in _codes("--nnodes", "2", "--tp-size", "3")
    assert "nnodes-divides-tp" not in _codes("--nnodes", "2", "--tp-size", "8")
    assert "nnodes-divides-tp" not in _codes("--nnodes", "2", "--tp-size", "1", "--pp-size", "2")
    report = check_launch(["--model-path", "m", "--nnodes", "2", "--tp-size", "3"], {}, "0.5.23")
    assert report.errors[0].sglang_log == "AssertionError: tp_size must be divisible by number of nodes"


def test_fake_transfer_is_for_decode_only() -> None:
    fake = ("--disaggregation-transfer-backend", "fake")
    assert "pd-fake-prefill" in _codes("--disaggregation-mode", "prefill", *fake)
    assert _codes("--disaggregation-mode", "decode", *fake) == []
    assert _codes("--disaggregation-mode", "prefill") == []
