"""Screens pushed over the dashboard."""

from collections.abc import Iterator
from contextlib import contextmanager

from textual.binding import Binding
from textual.css.query import NoMatches
from textual.dom import DOMNode

# For screens that are forms. Priority, so that focus has moved before the next key is handed out: otherwise a key
# typed right after Tab (a paste, tmux send-keys, a fast typist on a busy machine) still lands in the field being
# left, because a non-priority binding runs only once the Tab has bubbled up from that field.
FORM_FOCUS_BINDINGS = [
    Binding("tab", "app.focus_next", "Next field", id="form-next-field", show=False, priority=True),
    Binding("shift+tab", "app.focus_previous", "Previous field", id="form-previous-field", show=False, priority=True),
]


@contextmanager
def unless_closing(screen: DOMNode) -> Iterator[None]:
    """Around what a screen's worker does to the screen after an await. A screen that closes (dismissed, the app
    quitting) takes its children first and cancels its workers only after them, so a worker between two awaits
    can find its widgets gone: nothing is left to show then. A widget missing from a screen that stays open is a
    bug, and still raises."""
    try:
        yield
    except NoMatches:
        if not (screen._pruning or screen._closing or screen._closed):
            raise
