"""The service journal, live: startup phases and errors stand out, secrets arrive masked (the session masks
them), follow pauses while the operator reads back and counts what arrived meanwhile, `/` filters, memory
stays bounded (MAX_LINES kept)."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from itertools import islice
from typing import ClassVar, NamedTuple

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Input, Static

from console.core.console_requests import ConsoleRequest
from console.core.phases import classify_line
from console.host.base import JournalEntry
from console.tui.widgets.inputs import OrderedInput

MAX_LINES = 5000
# Lines reach the screen at most this often: taking them is cheap (the log grows without a layout and draws
# only what is on screen), but a batch per watcher message (20 a second) would repaint the log 20 times a second.
FLUSH_S = 0.25
LINE_STYLE = {
    "failure": "bold red",
    "ready": "bold green",
    "phase": "cyan",
    "warning": "yellow",
    "normal": "",
    "date": "bold dim",
    "console": "dim",  # the console's own requests, when shown
}


class JournalLine(NamedTuple):
    """One line as the log keeps it: plain text (a str is nothing for the garbage collector to walk, a rendered
    line is a dozen objects), how long its time prefix is, and how it stands out."""

    text: str
    prefix: int
    kind: str


# SGLang stamps every line `[YYYY-MM-DD HH:MM:SS]`, a scheduler's with its rank (`[... TP0]`, `[... DP1 TP3]`).
SGLANG_STAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})((?: [^\]\n]*)?)\] ?")


class LineMaker:
    """Entries to the log's lines. SGLang's stamp is shortened to its time (and rank): its date takes a line of
    its own, before the first stamped line and wherever it changes, not 11 of the ~40 columns a narrow journal
    has on every line. Other lines get the journal's time, as before."""

    def __init__(self) -> None:
        self.date = ""  # the date of the last stamped line

    def lines(self, entry: JournalEntry) -> list[JournalLine]:
        """The entry's lines, the first with its time; a message of several lines keeps its kind on each."""
        kind = "console" if isinstance(entry, ConsoleRequest) else classify_line(entry.message)
        first, *rest = entry.message.split("\n")
        out: list[JournalLine] = []
        stamp = SGLANG_STAMP.match(first)
        if stamp is not None:
            date, time, rank = stamp.groups()
            if date != self.date:
                self.date = date
                out.append(JournalLine(f"── {date} ──", 0, "date"))
            prefix = f"{time}{rank} "
            first = prefix + first[stamp.end() :]
        else:
            prefix = "" if first.startswith("[") else entry.timestamp.strftime("%H:%M:%S ")
            first = prefix + first
        out.append(JournalLine(first, len(prefix), kind))
        out.extend(JournalLine(line, 0, kind) for line in rest)
        return out


def line_text(line: JournalLine) -> Text:
    text = Text(line.text, no_wrap=True)
    text.stylize("dim", 0, line.prefix)
    if LINE_STYLE[line.kind]:
        text.stylize(LINE_STYLE[line.kind], line.prefix)
    return text


def format_line(entry: JournalEntry, maker: LineMaker | None = None) -> Text:
    """The entry as one Text (for logs that render what they are given, like the restart's progress); `maker`
    keeps the date from one entry to the next."""
    return Text("\n").join(line_text(line) for line in (maker or LineMaker()).lines(entry))


class JournalLog(ScrollView, can_focus=True):
    """The last MAX_LINES lines, each drawn when it scrolls into view (a screen shows ~30 of 5,000); End (or `f`)
    goes back to following.

    Not a RichLog, which renders every line as it is written (0.25 ms a line: 2.5 % of a core at 100 lines/s)
    and keeps it as segments, nor Textual's Log, which lays out the whole screen and starts a thread at every
    write."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("f", "follow", "Follow", id="journal-follow")]
    DEFAULT_CSS = """
    JournalLog {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        &:focus {
            background-tint: $foreground 5%;
        }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[JournalLine] = []
        self._dropped = 0  # lines trimmed from the top so far: a drawn line is cached by its number since the start
        self._width = 0
        self._drawn: LRUCache[int, Strip] = LRUCache(1024)

    def on_mount(self) -> None:
        self.anchor()  # stays at the newest line as lines arrive, until the operator scrolls up

    def append(self, lines: list[JournalLine]) -> None:
        """Lines at the bottom, without a layout of the whole screen.

        Textual lays out the whole screen whenever a scroll view's virtual size changes, so that a widget sized
        by its content can grow; this log is sized by its container, so growing moves nothing else on screen.
        A layout of the dashboard costs 10-150 ms (it measures every panel again), which a key pressed meanwhile
        waits for; here the log updates its own scrollbars and, when following, its scroll position, which is
        what the layout would have done for it."""
        if not lines:
            return
        self.lines.extend(lines)
        excess = len(self.lines) - MAX_LINES
        if excess > 0:
            del self.lines[:excess]
            self._dropped += excess
        self._width = max(self._width, max(cell_len(line.text) for line in lines))
        self.set_reactive(ScrollView.virtual_size, Size(self._width, len(self.lines)))  # no layout requested
        self._scroll_update(self.virtual_size)  # a scrollbar appearing still lays out (scrollbars are placed)
        if self.following:  # as the compositor moves an anchored view (scroll_to would release the anchor)
            self.scroll_target_y = self.scroll_y = self.max_scroll_y
        self.refresh()

    def clear(self) -> None:
        self._dropped += len(self.lines)
        self.lines.clear()
        self._width = 0
        self.virtual_size = Size(0, 0)
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._drawn.clear()  # a theme change: the lines are drawn again in its colours

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        rich_style = self.rich_style
        if not 0 <= index < len(self.lines):
            return Strip.blank(width, rich_style)
        number = self._dropped + index
        strip = self._drawn.get(number)
        if strip is None:
            line = self.lines[index]
            strip = self._drawn[number] = Strip(line_text(line).render(self.app.console), cell_len(line.text))
        return strip.crop_extend(scroll_x, scroll_x + width, rich_style).apply_style(rich_style)

    @property
    def following(self) -> bool:
        # Textual releases the anchor when the operator scrolls up and restores it back at the bottom;
        # it has no public reader of that state.
        return not getattr(self, "_anchor_released", False)

    def action_follow(self) -> None:
        self.anchor()
        self.post_message(JournalView.Followed())


def _console_requests(entries: Iterable[JournalEntry]) -> int:
    return sum(isinstance(entry, ConsoleRequest) for entry in entries)


CONSOLE_REQUESTS_ID = "console-requests"  # the dashboard's key that shows or folds them (console/tui/app.py)


class JournalView(Vertical):
    """Journal lines with follow/pause, a filter, and a status line. The console's own requests (the access lines
    of its polling, console.core.console_requests) are folded: counted in the status line, shown on a key."""

    class Followed(Message):
        """The operator went back to the newest line."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: deque[JournalEntry] = deque(maxlen=MAX_LINES)
        self.filter_text = ""
        self.missed = 0  # lines that arrived while the operator was reading back
        self.show_console_requests = False
        self.console_requests = 0  # how many of `entries` are the console's own requests
        self._maker = LineMaker()
        self._status: Text | None = None
        self._pending: list[JournalEntry] = []
        self._flush_timer: Timer | None = None
        self._toggle_key = "p"

    def compose(self) -> ComposeResult:
        yield Static("", classes="journal-status")
        yield JournalLog()
        yield OrderedInput(placeholder="filter the journal (Enter: apply, Esc: clear)", classes="journal-search")

    def on_mount(self) -> None:
        for active in self.screen.active_bindings.values():  # the key as console.toml may have remapped it
            if active.binding.id == CONSOLE_REQUESTS_ID:
                self._toggle_key = self.app.get_key_display(active.binding)
        self._show_status()

    @property
    def log_widget(self) -> JournalLog:
        return self.query_one(JournalLog)

    @property
    def following(self) -> bool:
        return self.log_widget.following

    def _matches(self, entry: JournalEntry) -> bool:
        return not self.filter_text or self.filter_text.lower() in entry.message.lower()

    def _shown(self, entry: JournalEntry) -> bool:
        return (self.show_console_requests or not isinstance(entry, ConsoleRequest)) and self._matches(entry)

    def add(self, entries: list[JournalEntry]) -> None:
        """Take new lines; they are drawn with the next flush (at most FLUSH_S from now)."""
        self._pending.extend(entries)
        del self._pending[:-MAX_LINES]
        if self._flush_timer is None:
            self._flush_timer = self.set_timer(FLUSH_S, self.flush)

    def flush(self) -> None:
        self._flush_timer = None
        entries, self._pending = self._pending, []
        if not entries:
            return
        # the bounded buffer lets its oldest go (add() keeps a batch within MAX_LINES: only older ones)
        dropped = len(self.entries) + len(entries) - MAX_LINES
        if dropped > 0:
            self.console_requests -= _console_requests(islice(self.entries, dropped))
        self.entries.extend(entries)
        self.console_requests += _console_requests(entries)
        shown = [entry for entry in entries if self._shown(entry)]
        if not self.following:
            self.missed += len(shown)
        self.log_widget.append([line for entry in shown for line in self._maker.lines(entry)])
        self._show_status()

    def _show_status(self) -> None:
        parts = []
        if self.filter_text:
            shown = sum(1 for e in self.entries if self._matches(e))
            parts.append(f"filter “{self.filter_text}”: {shown} of {len(self.entries)} lines (Esc clears)")
        if self.missed:
            parts.append(f"paused — {self.missed} new line{'s' * (self.missed != 1)} below (f: follow)")
        key = self._toggle_key
        told: list[str] = []  # what is said of the console's requests, longest first: the key always
        if self.show_console_requests:
            told = [f"console requests shown ({key}: fold)", f"console requests shown ({key})"]
        elif self.console_requests:
            count = f"{self.console_requests:,} console request{'s' * (self.console_requests != 1)} folded"
            told = [f"{count} ({key}: show)", f"{count} ({key})", f"{self.console_requests:,} folded ({key})"]
        # the longest that fits; following is said when there is room beside the rest
        lines = [parts or ["journal (following)"]]
        if told:
            lines = [[*(parts or ["journal (following)"]), told[0]], *([*parts, one] for one in told)]
        said = ["  ·  ".join(line) for line in lines]
        room = self.size.width - 2
        text = Text(
            next((line for line in said if room <= 0 or cell_len(line) <= room), said[-1]),
            style="yellow" if self.missed else "dim",
        )
        if text != self._status:  # a one-line status: redrawn only when it says something else, never re-laid out
            self._status = text
            self.query_one(".journal-status", Static).update(text, layout=False)

    def on_resize(self) -> None:
        self._show_status()  # what it says depends on the room it has

    def toggle_console_requests(self) -> None:
        """Show the console's own requests among the lines, or fold them again."""
        self.show_console_requests = not self.show_console_requests
        self._redraw()

    def on_journal_view_followed(self, _message: Followed) -> None:
        self.missed = 0
        self._show_status()

    def on_mouse_scroll_down(self) -> None:
        self.call_after_refresh(self._caught_up)

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape" and (self.filter_text or self.query_one(".journal-search", Input).has_class("-open")):
            self.apply_filter("")
            self.log_widget.focus()
            event.stop()
        elif event.key in ("end", "down", "pagedown"):
            self.call_after_refresh(self._caught_up)

    def _caught_up(self) -> None:
        """Scrolled back to the newest line: following again."""
        if self.missed and self.following:
            self.missed = 0
            self._show_status()

    def open_search(self) -> None:
        search = self.query_one(".journal-search", Input)
        search.add_class("-open")
        search.value = self.filter_text
        search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.apply_filter(event.value.strip())
        self.log_widget.focus()

    def apply_filter(self, text: str) -> None:
        self.filter_text = text
        search = self.query_one(".journal-search", Input)
        search.set_class(bool(text), "-open")
        self._redraw()

    def _redraw(self) -> None:
        """Every kept line drawn again for what is shown now (the filter, the console's requests folded or not)."""
        self.flush()
        log = self.log_widget
        log.clear()
        self._maker = LineMaker()
        log.append([line for entry in self.entries if self._shown(entry) for line in self._maker.lines(entry)])
        log.anchor()
        self.missed = 0
        self._show_status()
