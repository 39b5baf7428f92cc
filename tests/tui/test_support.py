"""The Pilot helpers' own promise (tests/tui/support.py): wait_until returns only once what it checked is laid out
as the terminal will show it."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Static

from tests.tui.support import laid_out, modal_rows, wait_until


class Question(ModalScreen[None]):
    DEFAULT_CSS = "Question > Static { border: thick $primary; width: 40; height: 5; }"

    def compose(self) -> ComposeResult:
        yield Static("apply these changes?")


class Asker(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("main")


async def test_a_screen_just_pushed_is_not_laid_out_until_its_first_layout() -> None:
    app = Asker()
    async with app.run_test() as pilot:
        app.push_screen(Question())  # not awaited: the state a test sees right after the key that pushes it
        assert isinstance(app.screen, Question)
        assert not laid_out(app), "a pushed screen counted as laid out before it was: its rows read as empty"
        await wait_until(pilot, lambda: isinstance(app.screen, Question), "the question")
        assert "apply these changes?" in modal_rows(app)
