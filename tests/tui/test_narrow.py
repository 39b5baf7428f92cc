"""The dashboard on a small terminal (80×24) and the journal's lines, with Pilot on scripted hosts: the latency
lines show whatever the number of GPUs, SGLang's `[date time]` stamp leaves its ~40 columns to the message, and
the console's own requests fold into a count that a key opens."""

from __future__ import annotations

from datetime import timedelta

import pytest

from console.core.console_requests import ConsoleRequest
from console.host.base import JournalEntry
from console.tui.widgets.journal import JournalView, LineMaker
from console.tui.widgets.panels import render_server
from tests.tui.support import NOW, screen_text, scripted_app, startup_journal, view, wait_until

SMALL = (80, 24)


def _server_rows(text: str) -> list[str]:
    """The server panel's column of the screen (left of the journal's border)."""
    return [line.split("│")[0] for line in text.splitlines() if "│" in line]


@pytest.mark.parametrize("gpus", [1, 4, 8])
async def test_at_80x24_the_server_panel_shows_health_the_setup_and_both_latency_lines(gpus: int) -> None:
    app = scripted_app(views={"gpu-a": view(gpus=gpus)}, journal={"gpu-a": startup_journal()})
    async with app.run_test(size=SMALL) as pilot:
        await wait_until(pilot, lambda: "ITL ms" in screen_text(app) and "q Quit" in screen_text(app), "the panel")
        rows = _server_rows(screen_text(app))
    shown = "\n".join(rows)
    assert "● healthy" in shown and "EAGLE3" in shown and "steps 2  topk 1" in shown
    assert "draft tokens 3* (unit asks 8)" in shown  # a silent change reads on one line
    ttft = next(row for row in rows if "TTFT ms" in row)
    itl = next(row for row in rows if "ITL ms" in row)
    assert "p50 38  p95 120  p99 184" in ttft and "p50 15  p95 37  p99 47" in itl, (ttft, itl)


def test_rows_give_way_in_their_order_and_never_health_setup_or_latency() -> None:
    shown = view(gpus=8)
    full = render_server(shown, NOW, history_width=10, width=42).plain.splitlines()
    assert len(full) == 14 and full[-1].strip() == "last 39 s, 624 requests"
    for height, gone in (
        (13, ["last 39 s"]),
        (12, ["last 39 s", "draft model"]),
        (11, ["last 39 s", "draft model", "usage"]),
        (8, ["last 39 s", "draft model", "usage", "max running", "accept len", "requests"]),
    ):
        lines = render_server(shown, NOW, history_width=10, width=42, height=height).plain.splitlines()
        assert len(lines) == height, (height, lines)
        for what in gone:
            assert not any(what in line for line in lines), (height, what)
        for kept in ("health", "speculative", "steps", "draft tokens", "spec v2", "TTFT ms", "ITL ms"):
            assert any(kept in line for line in lines), (height, kept)
    assert len(render_server(shown, NOW, history_width=10, width=42, height=40).plain.splitlines()) == 14
    narrow = render_server(shown, NOW, history_width=10, width=30, height=13).plain.splitlines()  # rows that wrap
    assert len(narrow) == 13 and any("ITL ms" in line for line in narrow), narrow


def _entry(message: str, seconds: int = 0) -> JournalEntry:
    return JournalEntry(
        cursor=f"c{seconds}-{message[:12]}", timestamp=NOW + timedelta(seconds=seconds), message=message
    )


def test_sglangs_stamp_is_shortened_to_its_time_and_its_date_said_once_and_where_it_changes() -> None:
    maker = LineMaker()
    texts = [
        [line.text for line in maker.lines(_entry(message, n))]
        for n, message in enumerate(
            [
                "[2026-12-01 23:59:58 TP0] Decode batch, #running-req: 1",
                '[2026-12-01 23:59:59] INFO:     127.0.0.1:40228 - "GET /health HTTP/1.1" 200 OK',
                "[2026-12-02 00:00:01 DP0 TP3] Prefill batch, #new-seq: 1",
                "sglang.service: Main process exited, code=killed, status=9/KILL",
                "[13:16:05] /project/cpp/tokenizer_info.cc:144: Warning: Vocab type detection failed",
                '[2026-12-02 00:00:02] Traceback (most recent call last):\n  File "x.py", line 1',
            ]
        )
    ]
    assert texts == [
        ["── 2026-12-01 ──", "23:59:58 TP0 Decode batch, #running-req: 1"],
        ['23:59:59 INFO:     127.0.0.1:40228 - "GET /health HTTP/1.1" 200 OK'],
        ["── 2026-12-02 ──", "00:00:01 DP0 TP3 Prefill batch, #new-seq: 1"],
        ["12:00:03 sglang.service: Main process exited, code=killed, status=9/KILL"],  # the journal's own time
        ["[13:16:05] /project/cpp/tokenizer_info.cc:144: Warning: Vocab type detection failed"],  # as it came
        ["00:00:02 Traceback (most recent call last):", '  File "x.py", line 1'],
    ]
    first = maker.lines(_entry("[2026-12-02 00:00:03] The server is fired up and ready to roll!"))[0]
    assert first.prefix == len("00:00:03 ") and first.kind == "ready"  # the time dim, the message green


async def test_at_80x24_the_journal_shows_the_time_alone_and_more_of_each_message() -> None:
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": startup_journal()})
    async with app.run_test(size=SMALL) as pilot:
        await wait_until(pilot, lambda: "11:59:20 The server" in screen_text(app), "the journal")
        text = screen_text(app)
    assert "── 2026-11-30 ──" in text and "[2026-11-30" not in text
    assert "11:58:01 TP0 Load weight begin." in text


def _access(path: str, seconds: int) -> str:
    return f'[2026-11-30 12:00:{seconds:02d}] INFO:     127.0.0.1:{40000 + seconds} - "GET {path} HTTP/1.1" 200 OK'


async def test_the_consoles_own_requests_fold_into_a_count_and_p_shows_them() -> None:
    own = [ConsoleRequest.of(_entry(_access(path, n), n)) for n in range(3) for path in ("/health", "/metrics")]
    other = _entry('[2026-11-30 12:00:09] INFO:     10.1.2.3:5555 - "GET /metrics HTTP/1.1" 200 OK', 9)
    decode = _entry("[2026-11-30 12:00:10 TP0] Decode batch, #running-req: 3", 10)
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": [*startup_journal(), *own, other, decode]})
    async with app.run_test(size=(120, 40)) as pilot:
        journal = app.query_one(JournalView)
        await wait_until(pilot, lambda: "6 console requests folded (p: show)" in screen_text(app), "the count")
        text = screen_text(app)
        assert "10.1.2.3:5555" in text and "Decode batch" in text  # not the console's: shown
        assert "GET /health" not in text and "127.0.0.1:40000" not in text
        await pilot.press("p")
        await wait_until(pilot, lambda: "console requests shown (p: fold)" in screen_text(app), "shown")
        assert screen_text(app).count("GET /health") == 3 and journal.show_console_requests
        await pilot.press("p")
        await wait_until(pilot, lambda: "GET /health" not in screen_text(app), "folded again")
        assert "6 console requests folded" in screen_text(app)
        app.scripted["gpu-a"].on_journal([ConsoleRequest.of(_entry(_access("/metrics", 20), 20))])  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "7 console requests folded" in screen_text(app), "one more")
        assert journal.missed == 0  # a folded line is nothing new to read


async def test_the_fold_key_is_in_help_with_its_id_and_follows_a_remap() -> None:
    from console.tui.config import ConsoleConfig

    config = ConsoleConfig(keys={"console-requests": "P"})
    own = [ConsoleRequest.of(_entry(_access("/metrics", 1), 1))]
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": own}, config=config)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: "1 console request folded (P: show)" in screen_text(app), "the count")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys — host gpu-a" in screen_text(app), "help")
        row = next(line for line in screen_text(app).splitlines() if "console-requests" in line)
        assert "P" in row and "Journal: show or fold the console's own requests" in row, row


async def test_at_80x24_the_fold_count_and_its_key_fit_the_journals_status_line() -> None:
    own = [ConsoleRequest.of(_entry(_access(path, n), n)) for n in range(30) for path in ("/health", "/metrics")]
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": [*startup_journal(), *own]})
    async with app.run_test(size=SMALL) as pilot:
        await wait_until(pilot, lambda: "60 console requests folded (p)" in screen_text(app), "the count and its key")
        await pilot.press("p")
        await wait_until(pilot, lambda: "│ console requests shown (p: fold)" in screen_text(app), "shown, and its key")
        await pilot.press("p")
        await pilot.resize_terminal(120, 40)  # room for all of it
        await wait_until(
            pilot, lambda: "journal (following)  ·  60 console requests folded (p: show)" in screen_text(app), "it"
        )
