"""The editor says what a restart of this host costs before one starts, and offers the options that shorten a start
like any other field: with Pilot against a real demo host as SGLang 0.5.23 (Kimi K2.5, its start scaled down)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input, Select

from console.core.apply.restarts import read_restarts
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.edit import EditScreen
from console.tui.screens.progress import ProgressScreen
from tests.support.demo import Demo, running_demo
from tests.tui.support import demo_console, modal_rows, screen_text, wait_until

pytestmark = pytest.mark.long(60)

SLOW = 60.0


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    kimi = "kimi-k2.5-int4-8x-rtxpro6000-pcie"
    with running_demo(tmp_path / "ws", profile=kimi, time_scale="0.005", sglang_version="0.5.23") as running:
        yield running


async def test_the_confirmation_names_the_hosts_restart_cost_and_a_faster_start_applies_like_any_edit(
    demo: Demo, tmp_path: Path
) -> None:
    for _ in range(2):
        done = demo.run("restart", "demo", "--yes", "--json", "--timeout", "60")
        assert done.returncode == 0, json.loads(done.stdout).get("error")
    async with demo_console(str(demo.workspace), size=(120, 45), timeout=SLOW, version="0.5.23") as (app, pilot):
        await pilot.press("e")
        await wait_until(pilot, lambda: "Nothing to apply" in screen_text(app), "the editor")
        editor = app.screen
        assert isinstance(editor, EditScreen)
        # the host's cost, and what would shorten its longest phase that SGLang accepts on this unit: presharded
        # weights (the overlap and the weight cache refuse its speculative decoding)
        said = [str(line) for line in editor._restart_lines()]  # as the report shows them (wrapped on screen)
        assert re.fullmatch(r"A restart of demo takes ~\d+\.\d s \(median of 2; loading weights \d+ %\)", said[0])
        assert said[1:] == ["  shorter with load format presharded (under faster restarts)"]
        text = screen_text(app)
        assert "A restart of demo takes ~" in text and "shorter with load format presharded" in text
        # the group of options that shorten a start, each with what it does
        assert "faster restarts" in text
        editor.query_one("#field-load-format", Select).value = "presharded"
        editor.query_one("#field-env-SGLANG-CACHE-DIR", Input).value = str(tmp_path / "cache")
        await wait_until(pilot, lambda: "ctrl+s: apply 2 changes" in screen_text(app), "the edit")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        rows = "\n".join(modal_rows(app))
        assert re.search(r"A restart of demo takes ~\d+\.\d s \(median of 2; loading weights \d+ %\)", rows), rows
        assert "--load-format presharded" in rows and "SGLANG_CACHE_DIR=" in rows
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), "the progress")
        await wait_until(pilot, lambda: "✔ verified" in screen_text(app), "the verification", SLOW)
    kept = read_restarts(demo.workspace / "logs")
    assert len(kept) == 3 and kept[-1].start == "apply"
    assert kept[-1].options == {"load_format": "presharded", "SGLANG_CACHE_DIR": str(tmp_path / "cache")}
