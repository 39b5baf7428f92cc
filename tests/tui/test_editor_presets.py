"""The editor's preset list fills the fields only when the operator picks another preset: never over what was typed.
Pilot on a scripted host (tests.tui.support.FixedSession: a unit with steps 2 and two backups with steps 1)."""

from __future__ import annotations

from textual.widgets import Input, Select

from console.tui.screens.edit import UNIT_PRESET
from tests.tui.support import screen_text, scripted_editor, wait_until


async def test_the_presets_first_report_arriving_late_keeps_what_was_typed_and_a_pick_still_fills() -> None:
    async with scripted_editor() as (app, pilot, editor):
        preset: Select[str] = editor.query_one("#preset", Select)
        await wait_until(pilot, lambda: len(preset._options) == 3, "the unit and its two backups")
        steps = editor.query_one("#field-speculative-num-steps", Input)
        steps.value = "3"
        await wait_until(pilot, lambda: "ctrl+s: apply 1 change" in screen_text(app), "the edit")

        # The Select's first Changed (posted as it mounted) reaching the screen only now, as it can under load;
        # the callback queued behind it runs once the screen has handled it.
        handled: list[bool] = []
        editor.post_message(Select.Changed(preset, UNIT_PRESET))
        editor.call_later(handled.append, True)
        await wait_until(pilot, lambda: bool(handled), "the late report handled")
        assert steps.value == "3", "the preset list's first report overwrote what was typed"

        backup = next(value for label, value in preset._options if str(label).startswith("backup of"))
        preset.value = backup
        await wait_until(pilot, lambda: steps.value == "1", "the backup's steps")
        preset.value = UNIT_PRESET
        await wait_until(pilot, lambda: steps.value == "2", "the unit's steps again")
