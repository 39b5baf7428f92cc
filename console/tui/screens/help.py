"""`?`: every key of the screen it was opened from (as remapped in console.toml), and what it does."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from console.tui.config import CONFIG_NAME
from console.tui.widgets.footer import FittedFooter

KeyRow = tuple[str, str, str, str]  # keys, description, binding id, why disabled ("" when enabled)


def key_table(rows: list[KeyRow]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("does")
    table.add_column(Text("id (console.toml [keys])"), style="dim", no_wrap=True)
    for keys, description, binding_id, disabled in rows:
        does = Text(description)
        if disabled:
            does.append(f"  — {disabled}", style="yellow")
        table.add_row(keys, does, binding_id)
    return table


class HelpScreen(Screen[None]):
    """Opaque on purpose: a translucent modal re-renders the dashboard under it at every journal line."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark,f1", "dismiss", "Close", id="close-help")]

    def __init__(self, title: str, rows: list[KeyRow]) -> None:
        super().__init__()
        self.title_text = title
        self.rows = rows

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(Text(f"Keys — {self.title_text}", style="bold"))
            yield Static(key_table(self.rows))
            yield Static(
                Text(
                    f"Every action is also in the command palette (ctrl+p). Remap keys in <workspace>/{CONFIG_NAME}:\n"
                    '[keys]\nedit = "E"',
                    style="dim",
                )
            )
        yield FittedFooter(keep=("close-help",))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
