"""Hosts selected on an overview (the per-host overview of `connect @group`, the fleet's Prometheus overview), and
the rolling changes started from them: `space` selects the host under the cursor (and moves to the next), `a`
selects every host or none; with a selection, `e` sets flags, `r` restarts and `F` freezes the selected hosts one
batch at a time (console/tui/screens/roll.py). Without one those keys are the dashboard's own (dimmed on the
overview: a host's actions need a host).

The table keeps the selection (it is what the operator sees); the app hears of it through SelectionChanged (the bar
above the table says how many, and which) and RollRequested (the roll's form opens)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Static

MARK = "✔ "
UNMARKED = "  "
MARK_STYLE = "bold magenta"
SHOWN_NAMES = 6  # the bar names this many selected hosts, then counts the rest

SELECTION_BINDINGS: list[BindingType] = [
    Binding("space", "toggle_selected", "Select", id="select-host"),
    Binding("a", "select_all", "Select all / none", id="select-all", show=False),
    # shown only with a selection (check_action): without one, the dashboard's e / r / F are the keys
    Binding("e", "roll('apply')", "Rolling set", id="roll-set"),
    Binding("r", "roll('restart')", "Rolling restart", id="roll-restart"),
    Binding("F", "roll('freeze')", "Fleet freeze", id="fleet-freeze"),
]
ROLL_ACTIONS = ("roll('apply')", "roll('restart')", "roll('freeze')")


class SelectionChanged(Message):
    def __init__(self, hosts: tuple[str, ...]) -> None:
        super().__init__()
        self.hosts = hosts  # the selected hosts, in the table's order


class RollRequested(Message):
    def __init__(self, operation: str, hosts: tuple[str, ...]) -> None:
        super().__init__()
        self.operation = operation  # apply | restart | freeze
        self.hosts = hosts


class HostSelection:
    """The selection of a table of hosts, mixed into Overview and FleetTable (first among their bases: its
    check_action is theirs), which say their hosts' order, the host under the cursor and how a row shows its mark;
    their BINDINGS take SELECTION_BINDINGS."""

    if TYPE_CHECKING:  # the widget's own (declared here for the type checker only: no stub shadows them)

        def post_message(self, message: Message) -> bool: ...

        def refresh_bindings(self) -> None: ...

    def init_selection(self) -> None:
        self.selected: set[str] = set()

    # what the table says ------------------------------------------------------------------------------------

    def host_order(self) -> list[str]:
        raise NotImplementedError

    def host_under_cursor(self) -> str | None:
        raise NotImplementedError

    def next_row(self) -> None:
        """Move the cursor one row down (at the last row: stay)."""
        raise NotImplementedError

    def marks_changed(self, hosts: list[str]) -> None:
        """Draw the rows of `hosts` again (their mark, or the room for one, changed)."""
        raise NotImplementedError

    # the selection ------------------------------------------------------------------------------------------

    def selected_hosts(self) -> tuple[str, ...]:
        return tuple(h for h in self.host_order() if h in self.selected)

    def host_cell(self, host: str, plain: Text) -> Text:
        """The host's cell: its name as the table writes it, marked when selected; with no selection, as it is."""
        if not self.selected:
            return plain
        if host in self.selected:
            return Text(MARK + host, style=MARK_STYLE)
        return Text(UNMARKED) + plain

    def set_selected(self, hosts: set[str]) -> None:
        before = set(self.selected)
        self.selected = {h for h in hosts if h in self.host_order()}
        if before == self.selected:
            return
        # from none to some (or back) every row gains (or loses) the room for a mark; otherwise only those toggled
        changed = self.host_order() if bool(before) != bool(self.selected) else sorted(before ^ self.selected)
        self.marks_changed(changed)
        self.refresh_bindings()
        self.post_message(SelectionChanged(self.selected_hosts()))

    def action_toggle_selected(self) -> None:
        host = self.host_under_cursor()
        if host is None:
            return
        self.set_selected(self.selected ^ {host})
        self.next_row()

    def action_select_all(self) -> None:
        everyone = set(self.host_order())
        self.set_selected(set() if self.selected == everyone else everyone)

    def action_roll(self, operation: str) -> None:
        if self.selected:
            self.post_message(RollRequested(operation, self.selected_hosts()))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "roll":
            return bool(self.selected)  # False: not in the footer; the dashboard's key of that letter shows instead
        return True


def selection_bar_text(hosts: tuple[str, ...], total: int) -> Text:
    """The line above the table while hosts are selected (pure)."""
    text = Text()
    text.append(f" {MARK}{len(hosts)} selected ", style="bold reverse magenta")
    names = ", ".join(hosts[:SHOWN_NAMES]) + (f" (+{len(hosts) - SHOWN_NAMES})" if len(hosts) > SHOWN_NAMES else "")
    text.append(f"of {total}: {names}", style="bold")
    text.append("   e set flags · r restart · F freeze (one batch at a time, canary first) · a all/none", style="dim")
    return text


class SelectionBar(Static):
    """How many hosts are selected, which, and what the keys do with them; hidden while none is."""

    DEFAULT_CSS = """
    SelectionBar { height: 1; display: none; text-wrap: nowrap; text-overflow: ellipsis; }
    SelectionBar.-shown { display: block; }
    """

    def show_selection(self, hosts: tuple[str, ...], total: int) -> None:
        self.set_class(bool(hosts), "-shown")
        self.update(selection_bar_text(hosts, total) if hosts else "")
