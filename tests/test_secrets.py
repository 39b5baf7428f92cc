"""The one definition of a secret, and the ways it is masked."""

from __future__ import annotations

import io

from console.secrets import REDACTED, RedactingWriter, redact, redact_argv, redact_command, secret_values


def test_secret_values_come_from_secret_named_flags_and_variables_only() -> None:
    argv = ["--api-key", "k-one", "--admin-api-key=k-two", "--speculative-num-draft-tokens", "4", "--port", "30000"]
    env = {"HF_TOKEN": "hf-three", "CUDA_VISIBLE_DEVICES": "0,1", "DB_PASSWORD": "", "MY_SECRET": "s-four"}
    assert secret_values(argv, env) == {"k-one", "k-two", "hf-three", "s-four"}


def test_redact_masks_values_inside_text_and_secret_named_keys() -> None:
    doc = {"api_key": "k-one", "note": "started with --api-key k-one", "lines": ["k-one", "fine"], "port": 30000}
    assert redact(doc, {"k-one"}) == {
        "api_key": REDACTED,
        "note": f"started with --api-key {REDACTED}",
        "lines": [REDACTED, "fine"],
        "port": 30000,
    }


def test_very_short_values_are_not_masked_in_free_text() -> None:
    assert redact("1 2 3", {"1"}) == "1 2 3"


def test_redact_argv_and_command() -> None:
    assert redact_argv(["--api-key", "k", "--api-key=k", "HF_TOKEN=t", "--tp", "4"]) == [
        "--api-key",
        REDACTED,
        f"--api-key={REDACTED}",
        f"HF_TOKEN={REDACTED}",
        "--tp",
        "4",
    ]
    assert "sekrit" not in redact_command("python -m sglang.launch_server --api-key 'sekrit' --port 1")
    # a systemd `Environment="HF_TOKEN=t A=1"` split on whitespace
    assert redact_argv(['"HF_TOKEN=t', 'A=1"']) == [f'"HF_TOKEN={REDACTED}', 'A=1"']


def test_redacting_writer_masks_what_passes_through() -> None:
    sink = io.StringIO()
    writer = RedactingWriter(sink, {"k-one"})
    writer.write("key=k-one\n")
    assert sink.getvalue() == f"key={REDACTED}\n"


def test_counting_args_that_end_in_token_are_not_secrets() -> None:
    from console.secrets import is_secret_name

    assert [is_secret_name(n) for n in ("HF_TOKEN", "--hf-token", "--token", "GITHUB_TOKEN", "api_key")] == [True] * 5
    harmless = ("bucket_time_to_first_token", "kt_max_deferred_experts_per_token", "speculative_num_draft_tokens")
    assert [is_secret_name(n) for n in harmless] == [False] * 3
