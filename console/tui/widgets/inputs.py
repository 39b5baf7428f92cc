"""The console's text field: Textual's Input, with its own keys run in the order they were typed.

Textual's Input inserts a typed character as its key event reaches it, but runs a key bound on it (backspace, the
arrows, home/end, ctrl+u...) only once the event has bubbled back up to the app, behind the keys queued after it.
Keys that arrive together (a paste, a fast typist, tmux send-keys, a busy machine) then apply out of order:
`End BSpace 4 5` on "2" left "4", not "45". Textual issue #6605; the fix proposed there (pull request #6631) runs
the widget's own bindings in its key handler, and so does this field, until a Textual release carries it."""

from __future__ import annotations

from textual import events
from textual.widgets import Input


class OrderedInput(Input):
    """An Input whose own bindings run when their key reaches it, in turn with the characters typed around them."""

    async def _on_key(self, event: events.Key) -> None:
        # The focused widget heads the screen's binding chain, with the app's keymap applied (so a remapped key
        # runs here as it would at the app); priority bindings already ran before the key was sent here.
        chain = self.screen._binding_chain
        if chain and chain[0][0] is self:
            for binding in chain[0][1].key_to_bindings.get(event.key, ()):
                if not binding.priority and await self.app.run_action(binding.action, self):
                    event.stop()
                    event.prevent_default()
                    self._restart_blink()
                    return
        await super()._on_key(event)
