"""A screen's worker that outlives the screen: closing a screen takes its children first and cancels its workers
only after them, so a worker between two awaits can find its widgets gone (seen as `NoMatches` on
`#editor-report` when a test's app was torn down while the editor still loaded). That is said nothing of; a widget
missing from a screen that stays open still raises. Pilot on a scripted host."""

from __future__ import annotations

import asyncio

import pytest
from textual.css.query import NoMatches

from console.tui.screens import unless_closing
from console.tui.screens.edit import EditScreen
from tests.tui.support import FixedSession, scripted_app, scripted_editor, view, wait_until


async def test_a_missing_widget_raises_while_the_screen_is_open_and_not_once_it_closed() -> None:
    async with scripted_editor() as (app, pilot, editor):
        with pytest.raises(NoMatches), unless_closing(editor):
            editor.query_one("#no-such-widget")
        await app.pop_screen()
        await wait_until(pilot, lambda: not editor.children, "the editor taken down")
        with unless_closing(editor):
            editor.query_one("#editor-report")  # gone with its screen: the worker that asks stops quietly


class SlowSession(FixedSession):
    """A session whose version comes when the test says: the editor's load waits on it between two awaits."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def sglang_version(self) -> tuple[str, str]:
        self.asked.set()
        await self.answer.wait()
        return await super().sglang_version()


async def test_an_editor_closed_while_it_loads_leaves_no_error() -> None:
    """The editor closed while its load waits on the host, the answer coming as the screen is taken down: the
    load goes on into a screen whose fields cannot be mounted any more, and stops without an error."""
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=(120, 40)) as pilot:
        session = SlowSession()
        editor = EditScreen(session, label="gpu-a")  # type: ignore[arg-type]
        app.push_screen(editor)
        await wait_until(pilot, session.asked.is_set, "the editor asking the host")
        closing = app.pop_screen()
        session.answer.set()
        await closing
        await wait_until(
            pilot,
            lambda: not editor.children and all(w.is_finished for w in app.workers if w.node is editor),
            "the editor taken down, its load ended",
        )
    assert app._exception is None
