"""The spans a LinePanel repaints (console.tui.widgets.lines): repainting them turns what the terminal shows into
the new text, whatever changed (characters, styles, length, the ellipsis at the panel's edge), and nothing else is
sent for what did not change."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.style import Style
from rich.text import Text

from console.tui.widgets.lines import Span, changed_span, changed_spans

_CONSOLE = Console(file=io.StringIO(), width=400, color_system="truecolor")
Cell = tuple[str, Style | None]  # None: a cell the line does not reach


def picture(line: Text, width: int) -> list[Cell]:
    """A line as a terminal shows it in `width` cells, each with the style rich gives it (independently of the code
    under test): cut with an ellipsis in the last cell when longer, padded with blanks when shorter."""
    cells: list[Cell] = []
    for offset, char in enumerate(line.plain):
        style = line.get_style_at_offset(_CONSOLE, offset)
        cells.append((char, style))
        cells.extend(("", style) for _ in range(cell_len(char) - 1))  # the right half of a wide one
    if len(cells) > width:
        cells = [*cells[: width - 1], ("…", cells[width - 1][1])]
    return cells + [(" ", None)] * (width - len(cells))


def repainted(old: list[Text], new: list[Text], width: int) -> list[list[Cell]]:
    """The terminal after showing `old`, then drawing the spans changed_spans gives for `new`, and only those."""
    screen = [picture(line, width) for line in old]
    screen += [[(" ", None)] * width for _ in range(len(new) - len(old))]
    for y, start, end in changed_spans(old, new, width):
        target = picture(new[y], width) if y < len(new) else [(" ", None)] * width
        screen[y][start:end] = target[start:end]
    return screen[: len(new)] + [[(" ", None)] * width for _ in range(len(old) - len(new))]


def expected(new: list[Text], width: int, old_lines: int) -> list[list[Cell]]:
    return [picture(line, width) for line in new] + [[(" ", None)] * width for _ in range(old_lines - len(new))]


STYLES = st.sampled_from(["bold", "red", "dim", "bold red", "cyan"])


@st.composite
def lines(draw: st.DrawFn) -> Text:
    plain = draw(st.text("ab 0%▁▂▇–", max_size=24))
    text = Text(plain, style=draw(st.sampled_from(["", "bold"])))
    for _ in range(draw(st.integers(0, 3))):
        start = draw(st.integers(0, len(plain)))
        text.stylize(draw(STYLES), start, draw(st.integers(start, len(plain))))
    return text


@given(st.lists(lines(), max_size=4), st.lists(lines(), max_size=4), st.integers(1, 30))
def test_repainting_the_changed_spans_shows_the_new_text(old: list[Text], new: list[Text], width: int) -> None:
    assert repainted(old, new, width) == expected(new, width, len(old))


@given(lines(), st.integers(1, 30))
def test_a_line_that_reads_the_same_is_not_repainted(line: Text, width: int) -> None:
    same = line.copy()
    assert changed_spans([line], [same], width) == []


def test_a_history_that_grows_by_one_value_repaints_two_cells() -> None:
    """The idle dashboard's commonest change: a sparkline gains a block on its left edge."""
    before = Text("  3   0%  " + "   ▁▁▁▁" + " 115/700")
    after = Text("  3   0%  " + "  ▁▁▁▁▁" + " 115/700")
    before.stylize("cyan", 10, 17)
    after.stylize("cyan", 10, 17)
    assert changed_spans([before], [after], 120) == [Span(0, 10, 13)]  # two cells early, for an ellipsis


def test_a_change_of_style_alone_is_repainted() -> None:
    plain = "GPU 0  87%  63°C"
    before, after = Text(plain), Text(plain)
    before.stylize("green", 12, 16)
    after.stylize("bold red", 12, 16)
    assert changed_span(before, after) == (10, 16)
    assert changed_span(Text(plain, style="dim"), Text(plain)) == (0, len(plain))


def test_spans_cut_otherwise_with_the_same_look_are_not_repainted() -> None:
    before, after = Text("abcdef"), Text("abcdef")
    before.stylize("red", 0, 6)
    after.stylize("red", 0, 3)
    after.stylize("red", 3, 6)
    assert changed_span(before, after) is None


def test_a_change_just_past_the_edge_repaints_the_ellipsis_cell() -> None:
    """At width 10, a line of exactly 10 cells shows them all; one more character turns the last into `…`."""
    old, new = Text("0123456789"), Text("0123456789x")
    assert repainted([old], [new], 10) == expected([new], 10, 1)
    assert changed_spans([old], [new], 10) == [Span(0, 8, 10)]


def test_wide_characters_shift_the_cells_after_them() -> None:
    old, new = Text("ab 12 cd"), Text("ab 日本 cd")
    assert repainted([old], [new], 20) == expected([new], 20, 1)
    assert repainted([new], [old], 20) == expected([old], 20, 1)


def test_lines_that_come_or_go_are_drawn_or_cleared_in_full() -> None:
    assert changed_spans([Text("a")], [Text("a"), Text("b")], 8) == [Span(1, 0, 8)]
    assert changed_spans([Text("a"), Text("b")], [Text("a")], 8) == [Span(1, 0, 8)]
