"""How journal lines reach the operator: masked by the session's SecretMask, printed by `opsconsole logs` (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from console.cli.logs import format_entry
from console.host.base import JournalEntry
from console.secrets import SecretMask

WHEN = datetime(2026, 11, 30, 4, 20, tzinfo=UTC)


def test_sglang_launch_settings_are_masked_keeping_the_rest_of_the_line() -> None:
    # The INFO line every SGLang start writes (ServerArgs repr), and 0.5.23's launch command.
    server_args = (
        "server_args=ServerArgs(model_path='Qwen/Qwen3-8B', api_key='sk-live-123', "
        "admin_api_key='sk-admin-456', speculative_num_steps=2, port=30000)"
    )
    masked = SecretMask().text(server_args)
    assert "sk-live-123" not in masked and "sk-admin-456" not in masked
    assert masked == (
        "server_args=ServerArgs(model_path='Qwen/Qwen3-8B', api_key='***', "
        "admin_api_key='***', speculative_num_steps=2, port=30000)"
    )
    launch = "launch_command: python -m sglang.launch_server --api-key sk-live-123 --port 30000"
    assert SecretMask().text(launch) == "launch_command: python -m sglang.launch_server --api-key *** --port 30000"


def test_a_known_secret_is_masked_wherever_it_appears() -> None:
    mask = SecretMask(["hf_tokenvalue"])
    assert mask.text("401 from hub with hf_tokenvalue, retrying") == "401 from hub with ***, retrying"


def test_lines_are_printed_with_time_and_pid() -> None:
    message = "Decode batch, #running-req: 3, #token: 1000, token usage: 0.10, accept len: 2.50,  gen throughput: 9"
    assert format_entry(JournalEntry(cursor="c3", timestamp=WHEN, message=message)) == f"2026-11-30 04:20:00 {message}"
    entry = JournalEntry(cursor="c4", timestamp=WHEN, message="up", pid=538)
    assert format_entry(entry) == "2026-11-30 04:20:00 [538] up"


def test_counts_named_like_tokens_are_not_secrets() -> None:
    line = "Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0"
    assert SecretMask().text(line) == line
    assert SecretMask().text("--speculative-num-draft-tokens 3 --max-total-tokens 9") == (
        "--speculative-num-draft-tokens 3 --max-total-tokens 9"
    )
