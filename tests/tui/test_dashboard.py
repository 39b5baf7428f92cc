"""The dashboard with Pilot: keys pressed, the screen read back, every wait on a condition."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from console.core.status import HostView
from console.host.ssh import ConnectionState
from console.tui.config import ConfigError, ConsoleConfig, load_config
from console.tui.widgets.journal import JournalView
from console.tui.widgets.overview import Overview
from tests.tui.support import (
    NOW,
    journal_lines,
    modal_rows,
    notices,
    screen_text,
    scripted_app,
    startup_journal,
    view,
    wait_until,
)

SIZE = (120, 40)


async def test_a_connected_host_shows_header_gpus_server_and_journal() -> None:
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": startup_journal()})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "ready to roll" in screen_text(app), "the journal")
        text = screen_text(app)
    assert "● connected" in text and "gpu-a" in text and "sglang.service active/running" in text
    assert "up 03:07:09" in text and "restarts 1" in text
    assert "SGLang 0.5.9" in text and "Qwen/Qwen3.5-122B-A10B-FP8" in text and "GPU memory 500.0 GiB" in text
    for index in range(4):
        assert f"\n   {index} " in text or f"   {index}  " in text
    assert "EAGLE3" in text and "steps 2" in text and "topk 1" in text
    assert "draft tokens 3* (unit asks 8)" in text  # SGLang resolved something else than the unit asks
    assert "max running" in text and "running 12  queued 0" in text
    assert "TTFT ms" in text and "p50" in text and "ITL ms" in text
    assert "Load weight begin" in text


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (ConnectionState("reconnecting", 3, "Connection lost"), "⟳ reconnecting (attempt 3) — Connection lost"),
        (ConnectionState("failed", 1, "Host key for gpu-a is not trusted"), "✖ Host key for gpu-a is not trusted"),
    ],
)
async def test_connection_trouble_is_said_in_the_header(state: ConnectionState, expected: str) -> None:
    shown = replace(view(), connection=state, error=state.last_error if state.phase == "failed" else None)
    app = scripted_app(views={"gpu-a": shown})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: expected in screen_text(app), expected)


async def test_a_host_that_stopped_answering_goes_stale_with_the_age_of_its_values() -> None:
    clock = {"now": NOW}
    app = scripted_app(views={"gpu-a": view()}, clock=lambda: clock["now"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "refreshed 0 s ago" in screen_text(app), "a fresh dashboard")
        clock["now"] = NOW + timedelta(seconds=42)  # no refresh for 42 s
        await wait_until(pilot, lambda: "STALE: last refresh 42 s ago" in screen_text(app), "the stale header")
        assert app.query_one("HostPane").has_class("-stale")
        assert "healthy" not in screen_text(app).split("health", 1)[1].split("\n")[0] or "ago" in screen_text(app)


async def test_a_failed_service_an_unhealthy_server_and_no_gpu_tool_are_each_said() -> None:
    failed = view(active="failed", healthy=False)
    app = scripted_app(views={"gpu-a": failed})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "failed/failed" in screen_text(app), "the failed service")
        assert "unhealthy (/health is not 200)" in screen_text(app)
    no_smi = view(gpu_error="nvidia-smi: command not found (exit 127)")
    app = scripted_app(views={"gpu-a": no_smi})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "GPUs: nvidia-smi: command not found" in screen_text(app), "the GPU error")


async def test_help_lists_every_key_of_the_dashboard_with_its_id() -> None:
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys — host gpu-a" in screen_text(app), "the help screen")
        rows = modal_rows(app)
        for key, does, ident in (("e", "Edit", "edit"), ("r", "Restart", "restart"), ("b", "Bench", "benchmark"),
                                 ("c", "Compare", "compare"), ("F", "Freeze", "freeze"), ("/", "Search", "search"),
                                 ("q", "Quit", "quit"), ("^p", "Commands", "command-palette"),
                                 ("tab", "Next host", "next-host"), ("1", "Host 1: gpu-a", "host-1"),
                                 ("?", "Help", "help"), ("^r", "Refresh now", "refresh")):  # fmt: skip
            starts = (key + " ", key + ",")
            assert any(r.startswith(starts) and does in r and r.endswith(ident) for r in rows), (key, does)
        assert not any("Host 2" in r for r in rows)  # one host: no key for a second
        await pilot.press("escape")
        await wait_until(pilot, lambda: "Keys —" not in screen_text(app), "help to close")


async def test_the_palette_has_every_action_and_the_host_actions_need_a_connected_host() -> None:
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: "Edit parameters" in screen_text(app), "the palette")
        for word in ("Edit parameters", "Restart", "Benchmark", "Compare", "Freeze"):
            await pilot.press(*"".join(ch for ch in word.lower() if ch != " ")[:6])
            await wait_until(pilot, lambda w=word: w in screen_text(app), f"{word} in the palette")
            await pilot.press("ctrl+u")  # the search field emptied, as an operator would
        await pilot.press("escape")
        await pilot.press("b")  # a scripted host has no session: the benchmark says why it cannot start
        await wait_until(pilot, lambda: "not connected yet" in notices(app), "the benchmark's notice")
        await pilot.press("e")  # a scripted host has no session: the editor says why it cannot open
        await wait_until(pilot, lambda: "not connected yet" in notices(app), "the editor's notice")


async def test_tab_and_numbers_switch_hosts_and_enter_on_the_overview_opens_one() -> None:
    views = {label: view(label) for label in ("gpu-a", "gpu-b", "gpu-c")}
    app = scripted_app(("gpu-a", "gpu-b", "gpu-c"), views=views)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.current_pane is not None and app.current_pane.label == "gpu-a", "host 1")
        await pilot.press("tab")
        await wait_until(pilot, lambda: app.current_pane is not None and app.current_pane.label == "gpu-b", "host 2")
        await pilot.press("3")
        await wait_until(pilot, lambda: app.current_pane is not None and app.current_pane.label == "gpu-c", "host 3")
        await pilot.press("o")
        await wait_until(pilot, lambda: app.current_pane is None and "GPU power W" in screen_text(app), "the overview")
        text = screen_text(app)
        assert all(label in text for label in views) and "eagle3 s2 k1 d3 v2" in text
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: app.current_pane is not None and app.current_pane.label == "gpu-b", "gpu-b")


async def test_read_only_disables_the_actions_that_change_a_host_and_says_why() -> None:
    app = scripted_app(views={"gpu-a": view()}, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        for key, reason in (("r", "restarting changes"), ("F", "freezing writes"), ("b", "flushes the server's cache")):
            await pilot.press(key)
            await wait_until(pilot, lambda r=reason: r in notices(app), f"{key} to say why it does nothing")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys —" in screen_text(app), "the help")
        rows = modal_rows(app)
        assert any(r.startswith("r ") and "Restart  — read-only: restarting changes the host" in r for r in rows)
        assert any(r.startswith("c ") and "—" not in r for r in rows)  # comparing changes nothing


async def test_keys_are_remapped_from_the_workspace_config(tmp_path: Path) -> None:
    (tmp_path / "console.toml").write_text('refresh_s = 2.5\n[keys]\nbenchmark = "B"\nquit = "x"\n')
    config = load_config(tmp_path, known_ids={"benchmark", "quit"})
    assert config.refresh_s == 2.5
    app = scripted_app(views={"gpu-a": view()}, config=config)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("B")
        await wait_until(pilot, lambda: "not connected yet" in notices(app), "B to benchmark")
        await pilot.press("x")
        await wait_until(pilot, lambda: not app.is_running, "x to quit")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[keys]\nedti = "E"\n', "[keys] edti: no such binding"),
        ("refresh_s = 0\n", "refresh_s: expected greater than 0.1"),
        ('[keys]\nedit = ""\n', 'keys: Value error, edit: expected "key"'),
        ("[thresholds]\nutil = [90, 10]\n", "thresholds.util: expected [low, high] with low <= high"),
        ("colour = 1\n", "colour: unknown key"),
    ],
)
def test_a_malformed_config_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "console.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, known_ids={"edit", "quit"})
    assert str(caught.value).startswith(str(tmp_path / "console.toml")), caught.value
    assert message.replace("Value error, ", "") in str(caught.value), caught.value


async def test_the_journal_pauses_when_scrolled_up_counts_new_lines_and_follows_again() -> None:
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": journal_lines(300)})
    async with app.run_test(size=SIZE) as pilot:
        journal = app.query_one(JournalView)
        await wait_until(pilot, lambda: "line 299" in screen_text(app), "the newest line")
        journal.log_widget.focus()
        await pilot.press("home")
        await wait_until(pilot, lambda: not journal.following, "follow to pause")
        app.scripted["gpu-a"].on_journal(journal_lines(7, start=NOW + timedelta(minutes=5), prefix="new"))  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "paused — 7 new lines below (f: follow)" in screen_text(app), "the count")
        assert "new, line 6" not in screen_text(app)
        await pilot.press("f")
        await wait_until(pilot, lambda: "new, line 6" in screen_text(app), "following again")
        assert "paused" not in screen_text(app)


async def test_a_followed_journal_stays_on_the_newest_line_as_batches_keep_coming() -> None:
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": journal_lines(300)})
    async with app.run_test(size=SIZE) as pilot:
        journal = app.query_one(JournalView)
        await wait_until(pilot, lambda: "line 299" in screen_text(app), "the newest line")
        for batch in range(3):  # batches after the first: the log grows under a view that follows it
            start = NOW + timedelta(minutes=batch + 1)
            app.scripted["gpu-a"].on_journal(journal_lines(7, start=start, prefix=f"batch {batch}"))  # type: ignore[attr-defined]
            await wait_until(pilot, lambda b=batch: f"batch {b}, line 6" in screen_text(app), f"batch {batch}")  # type: ignore[misc]
        assert journal.following and journal.missed == 0
        assert "journal (following)" in screen_text(app) and "paused" not in screen_text(app)


async def test_slash_filters_the_journal_and_escape_clears_it() -> None:
    entries = startup_journal() + journal_lines(50)
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": entries})
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "line 49" in screen_text(app), "the journal")
        await pilot.press("slash")
        await pilot.press(*"cuda graph", "enter")
        await wait_until(pilot, lambda: "filter “cuda graph”: 2 of 58 lines" in screen_text(app), "the filter")
        assert "line 49" not in screen_text(app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: "line 49" in screen_text(app) and "filter" not in screen_text(app), "cleared")


async def test_the_journal_keeps_a_bounded_number_of_lines() -> None:
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        source = app.scripted["gpu-a"]  # type: ignore[attr-defined]
        for batch in range(12):
            source.on_journal(journal_lines(500, start=NOW + timedelta(hours=batch)))
        journal = app.query_one(JournalView)
        await wait_until(pilot, lambda: len(journal.entries) == 5000, "the journal to fill")
        assert len(journal.log_widget.lines) <= 5000


async def test_ctrl_r_refreshes_the_current_host_now() -> None:
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: app.scripted["gpu-a"].refreshes == 1, "a refresh")  # type: ignore[attr-defined]


def _unused(_: HostView, __: ConsoleConfig) -> None:  # keep the imports used by type hints only
    pass


@asynccontextmanager
async def two_host_overview(
    views: dict[str, HostView], clock: dict[str, datetime]
) -> AsyncIterator[tuple[Any, Any, Overview]]:
    """The overview (o) of two scripted hosts, gpu-a and gpu-b, on a clock the test moves."""
    app = scripted_app(("gpu-a", "gpu-b"), views=views, clock=lambda: clock["now"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await wait_until(pilot, lambda: "GPU power W" in screen_text(app) and "gpu-b" in screen_text(app), "overview")
        yield app, pilot, app.query_one(Overview)


async def test_an_overview_cell_drawn_before_its_column_widened_is_drawn_again_at_the_new_width() -> None:
    """The table widens a column only when its own queue next goes idle. A frame drawn before that (the screen's
    refresh, a busy machine) rendered the cell at the old width, and Textual's cell cache (keyed by content, not
    by width) kept that cut cell: "stale 42 s" read "stale" until the cell changed again (Textual #3533)."""
    clock = {"now": NOW}
    views = {label: view(label) for label in ("gpu-a", "gpu-b")}
    async with two_host_overview(views, clock) as (app, pilot, table):
        alerts = table.get_column_index("alerts")
        clock["now"] = NOW + timedelta(seconds=42)
        for label in ("gpu-a", "gpu-b"):  # both alerts grow (none is left to change later); the width follows idle
            table.show(app.views[label], clock["now"])
        for row in range(2):  # drawn before that idle: the cells at the old width
            table.render_line(table.header_height + row)
        await wait_until(pilot, lambda: table.ordered_columns[alerts].content_width >= len("stale 42 s"), "widened")
        await wait_until(pilot, lambda: "stale 42 s" in screen_text(app), "the whole alert drawn")


async def test_the_overview_dims_a_host_gone_stale_and_brightens_it_when_it_answers_again() -> None:
    clock = {"now": NOW}
    views = {label: view(label) for label in ("gpu-a", "gpu-b")}
    async with two_host_overview(views, clock) as (app, pilot, table):
        clock["now"] = NOW + timedelta(seconds=42)  # neither host refreshed for 42 s
        await wait_until(
            pilot,
            lambda: "stale 42 s" in screen_text(app) and str(table.get_cell("gpu-b", "SGLang").style) == "dim",
            "the stale alert and gpu-b dimmed",
        )
        app.sources["gpu-b"].on_view(replace(views["gpu-b"], refreshed_at=clock["now"]))  # gpu-b answers again
        await wait_until(pilot, lambda: str(table.get_cell("gpu-b", "SGLang").style) == "", "gpu-b live again")
        assert str(table.get_cell("gpu-a", "SGLang").style) == "dim"  # gpu-a still has not
