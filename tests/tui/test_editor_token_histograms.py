"""The editor's serving section offers --collect-tokens-histogram where the version needs it for the token histograms
(up to 0.5.10), one line with its reason under it; ticking it makes the edit. Pilot on a scripted host."""

from __future__ import annotations

from textual.widgets import Checkbox

from console.tui.screens.edit import EditScreen
from tests.tui.support import FixedSession, screen_text, scripted_app, scripted_editor, view, wait_until

REASON = "length histograms in /metrics, for bench --shape-from-server"


async def test_the_switch_and_its_reason_show_and_ticking_it_makes_the_edit() -> None:
    async with scripted_editor() as (app, pilot, editor):
        box = editor.query_one("#field-collect-tokens-histogram", Checkbox)
        box.focus()
        await wait_until(pilot, lambda: REASON in screen_text(app), "the reason")
        assert "token length histograms" in screen_text(app) and not box.value
        await pilot.press("space")
        await wait_until(pilot, lambda: "ctrl+s: apply 1 change" in screen_text(app), "the edit")
        assert editor.preview is not None
        assert editor.preview.edits.set_flags == (("--collect-tokens-histogram", True),)


async def test_a_version_that_records_them_always_has_no_such_field() -> None:
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=(120, 40)) as pilot:
        editor = EditScreen(FixedSession(version="0.5.17"), label="gpu-a")  # type: ignore[arg-type]
        app.push_screen(editor)
        await wait_until(pilot, lambda: editor.form is not None and "tensor parallel" in screen_text(app), "the form")
        assert not editor.query("#field-collect-tokens-histogram")
        assert REASON not in screen_text(app)
