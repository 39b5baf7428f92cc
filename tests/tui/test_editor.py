"""The editor, apply and restart in the console, with Pilot against a real demo host (the supervisor and the
SGLang stand-in, real processes): keys pressed, the screen read back, every wait on a condition."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from console.core.apply import plan_apply
from console.core.change import parse_edits
from console.core.session import open_session
from console.core.snapshot import FreezeRequest, plan_freeze
from console.tui.app import OpsConsoleApp
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.edit import UNIT_PRESET, EditScreen
from console.tui.screens.progress import ProgressScreen, apply_progress
from console.workspace import Workspace
from tests.support.demo import Demo, running_demo
from tests.tui.support import demo_console, modal_rows, notices, screen_text, wait_until

SIZE = (120, 40)
SLOW = 60.0  # a start of the demo host, a rollback: seconds


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        yield running


def console(demo: Demo, *, read_only: bool = False) -> AbstractAsyncContextManager[tuple[OpsConsoleApp, Pilot[Any]]]:
    return demo_console(str(demo.workspace), read_only=read_only, size=SIZE, timeout=SLOW)


async def _freeze(demo: Demo, name: str, document: Path) -> None:
    async with open_session("demo", Workspace.resolve(demo.workspace)) as session:
        pending = await plan_freeze(session, FreezeRequest(name, document=str(document)))
        result = await pending.execute(on_event=lambda event: None)
        assert result.ok, result


async def open_editor(app: OpsConsoleApp, pilot: Pilot[Any]) -> EditScreen:
    await pilot.press("e")
    await wait_until(pilot, lambda: isinstance(app.screen, EditScreen) and app.screen.form is not None, "the editor")
    screen = app.screen
    assert isinstance(screen, EditScreen)
    await wait_until(pilot, lambda: "Nothing to apply" in screen_text(app), "the report")
    return screen


async def set_field(pilot: Pilot[Any], screen: EditScreen, dest: str, text: str) -> None:
    field = screen.query_one(f"#field-{dest.replace('_', '-')}", Input)
    field.focus()
    field.value = ""
    await pilot.press(*text) if text else None
    await wait_until(pilot, lambda: field.value == text, f"{dest} = {text!r}")


async def test_an_invalid_value_updates_the_report_and_blocks_apply(demo: Demo) -> None:
    async with console(demo) as (app, pilot):
        editor = await open_editor(app, pilot)
        await set_field(pilot, editor, "speculative_num_steps", "3x")
        await wait_until(pilot, lambda: "steps: a whole number" in screen_text(app), "the report")
        assert "Apply is blocked" in screen_text(app)
        await pilot.press("ctrl+s")  # refused, with the reason; nothing planned
        await wait_until(pilot, lambda: "Apply is blocked: fix what the report marks" in notices(app), "the refusal")
        assert app.screen is editor and not editor.busy
        await set_field(pilot, editor, "speculative_num_steps", "3")
        await wait_until(pilot, lambda: "ctrl+s: apply 1 change" in screen_text(app), "a valid edit")
        assert "draft tokens 2 -> 4" in screen_text(app)  # what the server will really run
        assert editor.check_action("apply", ()) is True
        # the rules of 0.5.9: spec v2 with a tree is refused, with what to change
        await set_field(pilot, editor, "speculative_eagle_topk", "2")
        editor.query_one("#field-env-SGLANG-ENABLE-SPEC-V2").value = True  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "spec v2 supports only topk = 1" in screen_text(app), "the refusal")
        app.clear_notifications()
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "Apply is blocked" in notices(app), "Apply refused again")
        assert app.screen is editor


async def test_a_valid_edit_shows_diff_confirmation_progress_and_verification(demo: Demo) -> None:
    async with console(demo) as (app, pilot):
        editor = await open_editor(app, pilot)
        await set_field(pilot, editor, "speculative_num_steps", "2")
        await set_field(pilot, editor, "speculative_num_draft_tokens", "3")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        rows = modal_rows(app)
        assert "+    --speculative-num-steps 2 \\" in rows and "-    --speculative-num-steps 1 \\" in rows
        assert "Write this unit to demo and restart sglang-demo.service?" in rows
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), "the progress")
        await wait_until(pilot, lambda: "✔ verified" in screen_text(app), "the verification", SLOW)
        text = screen_text(app)
        assert "✔ loading weights" in text and "✔ warm-up" in text and "server is fired up" in text
        assert "steps " in text and "as requested" in text
        await pilot.press("escape")
        await wait_until(pilot, lambda: "steps 2  topk 1" in screen_text(app), "the dashboard's new values", SLOW)
        assert "draft tokens 3" in screen_text(app)


async def test_a_failing_start_shows_the_lines_that_explain_it_and_the_rollback(demo: Demo) -> None:
    async with console(demo) as (app, pilot):
        unit_before = await asyncio.to_thread(demo.host().unit)
        editor = await open_editor(app, pilot)
        await set_field(pilot, editor, "speculative_draft_model_path", "/models/gone")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        explained = ("healthy on the previous unit", "✖", "why (journal):", "/models/gone", "(rollback)")
        await wait_until(
            pilot,
            lambda: all(part in screen_text(app) for part in explained),
            "the rollback and the journal lines that explain the failure",
            SLOW,
        )
        assert "the previous unit's start (rollback)" in screen_text(app)
    assert await asyncio.to_thread(demo.host().unit) == unit_before and await asyncio.to_thread(demo.host().healthy)


async def test_abort_mid_start_asks_then_rolls_back(demo: Demo) -> None:
    async with console(demo) as (app, pilot):
        unit_before = await asyncio.to_thread(demo.host().unit)
        session = app.sources["demo"].session
        assert session is not None
        # a start that takes hours: the abort always lands while the new unit starts
        slow = parse_edits(["speculative-num-steps=2", "speculative-num-draft-tokens=3", "sim-time-scale=100"])
        pending = await plan_apply(session, slow, timeout_s=SLOW)
        app.push_screen(apply_progress(pending, title="Applying to demo"))
        await wait_until(pilot, lambda: "▶ loading weights" in screen_text(app), "the new start", SLOW)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert any("Abort and roll back to the previous unit?" in row for row in modal_rows(app))
        await pilot.press("y")
        await wait_until(pilot, lambda: "healthy on the previous unit" in screen_text(app), "the rollback", SLOW)
        assert "aborted from the console" in screen_text(app)
    assert await asyncio.to_thread(demo.host().unit) == unit_before


async def test_restart_without_edits_is_confirmed_and_watched(demo: Demo) -> None:
    async with console(demo) as (app, pilot):
        pid = await asyncio.to_thread(demo.host().main_pid)
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert any("Restart sglang-demo.service on demo?" in row for row in modal_rows(app))
        await pilot.press("y")
        await wait_until(pilot, lambda: "✔ verified" in screen_text(app), "the restart", SLOW)
        await pilot.press("escape")
    assert await asyncio.to_thread(demo.host().main_pid) != pid


async def test_another_console_holding_the_lock_is_named_and_nothing_changes(demo: Demo) -> None:
    async with console(demo) as (app, pilot):
        editor = await open_editor(app, pilot)
        await set_field(pilot, editor, "speculative_num_steps", "2")
        await set_field(pilot, editor, "speculative_num_draft_tokens", "3")
        holder = "alice@laptop (opsconsole apply, pid 4242) since 2026-11-30 12:00:00 UTC"
        async with open_session("demo", Workspace.resolve(demo.workspace)) as other, other.service.lock(holder):
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: "alice@laptop" in notices(app), "the holder", 20)
            assert "since 2026-11-30 12:00:00" in notices(app)
            assert isinstance(app.screen, EditScreen)
        assert "--speculative-num-steps 1" in await asyncio.to_thread(demo.host().unit)


async def test_read_only_opens_the_editor_to_read_and_keeps_restart_off(demo: Demo) -> None:
    async with console(demo, read_only=True) as (app, pilot):
        await pilot.press("e")
        await wait_until(pilot, lambda: "Apply is off: read-only console" in screen_text(app), "the read-only editor")
        editor = app.screen
        assert isinstance(editor, EditScreen) and editor.check_action("apply", ()) is None
        assert editor.query_one("#field-speculative-num-steps", Input).disabled
        await pilot.press("escape")
        await pilot.press("r")
        await wait_until(pilot, lambda: "read-only: restarting changes the host" in notices(app), "the reason")


async def test_presets_offer_the_unit_backups_snapshots_and_the_setups_applied_from_here(
    demo: Demo, tmp_path: Path
) -> None:
    await _freeze(demo, "v1", tmp_path / "production_v1.md")  # steps 1, as the demo starts
    async with console(demo) as (app, pilot):
        editor = await open_editor(app, pilot)
        await set_field(pilot, editor, "speculative_num_steps", "3")
        await set_field(pilot, editor, "speculative_num_draft_tokens", "4")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: "✔ verified" in screen_text(app), "the apply", SLOW)
        await pilot.press("escape")
        editor = await open_editor(app, pilot)
        preset = editor.query_one("#preset")
        await wait_until(pilot, lambda: len(preset._options) >= 4, "the presets")  # type: ignore[attr-defined]
        labels = [str(label) for label, _value in preset._options]  # type: ignore[attr-defined]
        assert any(label.startswith("backup of 20") for label in labels)
        assert any(label.startswith("applied from this console") for label in labels)
        backup = next(value for label, value in preset._options if str(label).startswith("backup of"))  # type: ignore[attr-defined]
        preset.value = backup  # type: ignore[attr-defined]
        steps = editor.query_one("#field-speculative-num-steps", Input)
        await wait_until(pilot, lambda: steps.value == "1", "the backup's steps")
        await wait_until(pilot, lambda: "ctrl+s: apply 2 changes" in screen_text(app), "the edit back to the backup")
        preset.value = UNIT_PRESET  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: steps.value == "3", "the unit's steps again")
        snapshot = next(value for label, value in preset._options if str(label).startswith("snapshot v1 20"))  # type: ignore[attr-defined]
        preset.value = snapshot  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: steps.value == "1", "the snapshot's steps")
