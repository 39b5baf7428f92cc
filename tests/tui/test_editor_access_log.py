"""The editor's serving section offers --uvicorn-access-log-exclude-prefixes where the version has it (0.5.9 and
later), with its reason under it; typing the console's paths makes the edit. Pilot on a scripted host."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from console.tui.screens.edit import EditScreen
from tests.tui.support import FixedSession, screen_text, scripted_app, scripted_editor, view, wait_until

# (its paths wrap where the form has a scrollbar: the first is on the line of the reason)
REASON = "keep the console's polling out of the server's log: /health"


def _all_in(text: str, *phrases: str) -> bool:
    """All on one screen read: a read between two may catch the screen mid-layout."""
    return all(phrase in text for phrase in phrases)


async def test_the_field_and_its_reason_show_and_typing_the_paths_makes_the_edit() -> None:
    async with scripted_editor() as (app, pilot, editor):
        field = editor.query_one("#field-uvicorn-access-log-exclude-prefixes", Input)
        field.focus()  # scrolled into view
        await wait_until(pilot, lambda: _all_in(screen_text(app), REASON, "access log: skip paths"), "the reason")
        # keys go where the focus is when they arrive: before the field has it, "/" is the dashboard's search key
        await wait_until(pilot, lambda: app.focused is field, "the field focused")
        await pilot.press(*"/health /metrics")
        await wait_until(pilot, lambda: "ctrl+s: apply 1 change" in screen_text(app), "the edit")
        assert editor.preview is not None
        assert editor.preview.edits.set_flags == (("--uvicorn-access-log-exclude-prefixes", ["/health", "/metrics"]),)


@pytest.mark.parametrize("version", ["0.5.6"])
async def test_a_version_without_the_flag_has_no_such_field(version: str) -> None:
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=(120, 40)) as pilot:
        editor = EditScreen(FixedSession(version=version), label="gpu-a")  # type: ignore[arg-type]
        app.push_screen(editor)
        # the verdict is the load's last word: the worker is done before the app is taken down
        await wait_until(pilot, lambda: _all_in(screen_text(app), "tensor parallel", "Nothing to apply"), "the form")
        assert not editor.query("#field-uvicorn-access-log-exclude-prefixes")
        assert "polling" not in screen_text(app)
