"""Keys that arrive together apply in the order they were typed, in the editor's fields and in the console's other
text fields (console.tui.widgets.inputs.OrderedInput): a paste, a fast typist or tmux send-keys. Textual's own
Input runs its bound keys (backspace, end, ...) only after the characters queued behind them (Textual #6605).

The keys are posted to the app all at once, as a terminal's read hands them over, not pressed one at a time."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Input

from console.tui.widgets.inputs import OrderedInput
from tests.tui.support import scripted_editor, wait_until

# (key, character) as the terminal's parser reports them
BURST = [
    ("end", None),
    ("backspace", "\x7f"),
    ("4", "4"),
    ("5", "5"),
    ("minus", "-"),
    ("backspace", "\x7f"),
    ("7", "7"),
]


async def typed_at_once(pilot: Pilot[Any], keys: list[tuple[str, str | None]]) -> None:
    handled: list[bool] = []
    for key, character in keys:
        pilot.app.post_message(events.Key(key, character))
    pilot.app.call_later(handled.append, True)  # queued behind the keys: runs once the app has read them all
    await wait_until(pilot, lambda: bool(handled), "the keys read")


async def test_a_burst_in_the_editors_steps_field_applies_in_order() -> None:
    async with scripted_editor() as (app, pilot, editor):
        steps = editor.query_one("#field-speculative-num-steps", Input)
        assert app.focused is steps and steps.value == "2"
        await typed_at_once(pilot, BURST)
        # end, backspace: "" · 4 5: "45" · minus (a step down): "44" · backspace: "4" · 7: "47"
        await wait_until(pilot, lambda: steps.value == "47", f"steps 47 (it shows {steps.value!r})", timeout=10)


class OneField(App[None]):
    def __init__(self, kind: type[Input]) -> None:
        super().__init__()
        self.kind = kind

    def compose(self) -> ComposeResult:
        yield self.kind("xy", select_on_focus=False)


async def typed_into(kind: type[Input], keys: list[tuple[str, str | None]]) -> str:
    app = OneField(kind)
    async with app.run_test() as pilot:
        field = app.query_one(kind)
        field.focus()
        await wait_until(pilot, lambda: app.focused is field, "the field focused")
        await typed_at_once(pilot, keys)
        await pilot.pause()
        return field.value


async def test_a_plain_text_field_keeps_the_order_where_textuals_own_input_does_not() -> None:
    keys = [("end", None), ("backspace", "\x7f"), ("b", "b"), ("home", None), ("a", "a")]
    assert await typed_into(OrderedInput, keys) == "axb"
    # The day this fails, a Textual release runs an Input's bindings in order (#6605): OrderedInput can go.
    assert await typed_into(Input, keys) != "axb"
