"""How `opsconsole logs` prints a journal entry (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from console.core.logs import format_entry
from console.host.base import JournalEntry

WHEN = datetime(2026, 11, 30, 4, 20, tzinfo=UTC)


def test_sglang_launch_settings_are_printed_without_their_keys() -> None:
    # The INFO line every SGLang start writes (ServerArgs repr), and 0.5.23's launch command.
    server_args = (
        "server_args=ServerArgs(model_path='Qwen/Qwen3-8B', api_key='sk-live-123', "
        "admin_api_key='sk-admin-456', speculative_num_steps=2, port=30000)"
    )
    line = format_entry(JournalEntry(cursor="c1", timestamp=WHEN, message=server_args, pid=538))
    assert "sk-live-123" not in line and "sk-admin-456" not in line
    assert line.startswith("2026-11-30 04:20:00 [538] server_args=ServerArgs(model_path='Qwen/Qwen3-8B',")
    assert "speculative_num_steps=2, port=30000)" in line
    launch = "launch_command: python -m sglang.launch_server --api-key sk-live-123 --port 30000"
    assert "sk-live-123" not in format_entry(JournalEntry(cursor="c2", timestamp=WHEN, message=launch))


def test_ordinary_lines_are_printed_as_they_are() -> None:
    message = "Decode batch, #running-req: 3, #token: 1000, token usage: 0.10, accept len: 2.50,  gen throughput: 9"
    assert format_entry(JournalEntry(cursor="c3", timestamp=WHEN, message=message)) == f"2026-11-30 04:20:00 {message}"
