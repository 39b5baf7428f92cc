"""Questions that change a host get their own screen: what will happen, then `y` or `n`."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.core.apply import RestartCost, cost_text
from console.tui.widgets.footer import FittedFooter


def diff_text(diff: str) -> Text:
    """A unified diff, coloured the way every operator reads one."""
    out = Text()
    for line in diff.splitlines():
        style = ""
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        out.append(line + "\n", style=style)
    return out


def cost_line(cost: RestartCost | None, host: str) -> Text:
    """What a restart of the host costs (console/core/apply/restarts.py), in the confirmation before one."""
    said = cost_text(cost, host)
    return Text(said[:1].upper() + said[1:], style="bold" if cost is not None else "dim")


class ConfirmScreen(ModalScreen[bool]):
    """`question` over `body`; `y` answers yes, `n` or `esc` no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
        # a modal screen stops the app's keys: its own help key (the app's action, listing this screen's keys)
        Binding("question_mark,f1", "app.help", "Help", id="help"),
    ]

    def __init__(self, question: str, body: RenderableType | None = None, *, danger: bool = False) -> None:
        super().__init__()
        self.question = question
        self.body = body
        self.danger = danger

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="confirm-box", classes="-danger" if self.danger else ""):
            if self.body is not None:
                yield Static(self.body, id="confirm-body")
            yield Static(
                Group(
                    Text(self.question, style="bold"),
                    Text("y: yes    n / esc: no", style="dim"),
                ),
                id="confirm-question",
            )
        yield FittedFooter(keep=("confirm-yes", "confirm-no"))  # the answers, not the keys of the screen below

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
