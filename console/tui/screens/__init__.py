"""Screens pushed over the dashboard."""

from textual.binding import Binding

# For screens that are forms. Priority, so that focus has moved before the next key is handed out: otherwise a key
# typed right after Tab (a paste, tmux send-keys, a fast typist on a busy machine) still lands in the field being
# left, because a non-priority binding runs only once the Tab has bubbled up from that field.
FORM_FOCUS_BINDINGS = [
    Binding("tab", "app.focus_next", "Next field", id="form-next-field", show=False, priority=True),
    Binding("shift+tab", "app.focus_previous", "Previous field", id="form-previous-field", show=False, priority=True),
]
