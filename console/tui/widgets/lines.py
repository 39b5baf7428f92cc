"""Panels that repaint only the cells that changed.

Textual repaints a whole widget when its content is updated: every line goes through the styles cache, the
compositor and the terminal again, although a refresh of an idle host changes one cell of a history or nothing.
A LinePanel compares the new text with the one it shows, line by line, and marks only the spans of cells that read
otherwise as dirty; the rest of the widget stays as the terminal already has it. It draws exactly what a Static
given the same text draws: the content is rendered by Textual as before, only the regions sent are smaller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from rich.cells import cell_len
from rich.style import StyleType
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual, VisualType, visualize
from textual.widgets import Static


class Span(NamedTuple):
    """Cells [start, end) of line `y` that must be drawn again."""

    y: int
    start: int
    end: int


def _cells(line: Text) -> list[tuple[str, tuple[StyleType, ...]]]:
    """Each character with the styles that cover it, in the order they apply."""
    plain = line.plain
    styles: list[list[StyleType]] = [[] for _ in plain]
    for span in line.spans:
        for index in range(max(span.start, 0), min(span.end, len(plain))):
            styles[index].append(span.style)
    return [(char, tuple(style)) for char, style in zip(plain, styles, strict=True)]


def changed_span(old: Text, new: Text) -> tuple[int, int] | None:
    """The cells [start, end) of a line that read otherwise in `new` than in `old`, or None when none does.

    The span starts two cells early: a line cut at the panel's width ends in an ellipsis in its last cell (and a
    blank before it where the cut halves a wide character), which a change just past the cut turns on or off."""
    if old.style != new.style:  # the whole line's style: every cell
        return 0, max(cell_len(old.plain), cell_len(new.plain))
    if old == new:  # same characters, same spans
        return None
    before, after = _cells(old), _cells(new)
    common = min(len(before), len(after))
    first = next((i for i in range(common) if before[i] != after[i]), common)
    old_cells, new_cells = cell_len(old.plain), cell_len(new.plain)
    if len(before) == len(after) and old_cells == new_cells:
        if first == common:
            return None  # the spans were cut differently, every cell reads the same
        last = next(i for i in range(common - 1, first - 1, -1) if before[i] != after[i])
        end = cell_len(new.plain[: last + 1])
    else:  # a line that grew or shrank: everything after the first difference, to the longer one's end
        end = max(old_cells, new_cells)
    return max(cell_len(new.plain[:first]) - 2, 0), end


def changed_spans(old: Sequence[Text], new: Sequence[Text], width: int) -> list[Span]:
    """The spans of cells, within `width`, that must be drawn again to turn lines `old` into lines `new`
    (a line that is gone is cleared, a new line drawn)."""
    spans: list[Span] = []
    for y in range(max(len(old), len(new))):
        if y >= len(old) or y >= len(new):
            found: tuple[int, int] | None = (0, width)
        else:
            found = changed_span(old[y], new[y])
        if found is not None:
            start, end = found[0], min(found[1], width)
            if end > start:
                spans.append(Span(y, start, end))
    return spans


class LinePanel(Static):
    """A Static that is given Text with `show`, and repaints only the cells that changed since the last one. Its lines
    are rendered one by one, and again only when they changed: a Static renders its whole content again whenever
    a part of it is dirty (that was most of what the compositor spent on an idle dashboard)."""

    def __init__(self, *, classes: str | None = None, id: str | None = None) -> None:
        super().__init__(classes=classes, id=id)
        # no links in a panel: Textual would otherwise rebuild every rendered line to style the links it might hold
        self.set_reactive(LinePanel.auto_links, False)
        self._text: Text | None = None  # what `show` was given last (None: nothing yet, or Static's own content)
        self._lines: list[Text] = []  # the same, line by line
        self._visual: Visual | None = None  # of the whole text, made when Textual asks for it (to measure it)
        self._strips: dict[int, Strip] = {}  # the lines rendered, by y
        self._strips_for: tuple[int, VisualStyle] | None = None  # the width and style they were rendered with

    def render(self) -> VisualType:
        if self._text is None:
            return super().render()
        if self._visual is None:
            self._visual = visualize(self, self._text)
        return self._visual

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        """As Static's (the whole panel repainted); the next `show` repaints in full too."""
        self._text, self._lines, self._visual = None, [], None
        self._strips.clear()
        super().update(content, layout=layout)

    def show(self, text: Text, *, layout: bool = False) -> None:
        """Show `text`. `layout`: its number of lines may change the panel's height (a layout pass follows)."""
        lines = list(text.split("\n", allow_blank=True))
        old, first = self._lines, self._text is None
        self._text, self._lines, self._visual = text, lines, None
        width = self.content_size.width
        if layout or first or not width:
            self._strips.clear()
            self.refresh(layout=layout)
            return
        spans = changed_spans(old, lines, width)
        for span in spans:
            self._strips.pop(span.y, None)
        if spans:
            self.refresh(*(Region(span.start, span.y, span.end - span.start, 1) for span in spans))

    def render_line(self, y: int) -> Strip:
        """Line `y` of the content, rendered as Static renders it (Textual's own Visual.to_strips), one line at a
        time: with no wrapping, each line is drawn apart from the others. A selection of text, or an alignment of
        the content, takes Static's way."""
        if self._text is None or self.text_selection is not None or self.styles.content_align != ("left", "top"):
            return super().render_line(y)
        # Textual's render_line clears this once it has rendered the whole content; here nothing else reads it
        self._dirty_regions.clear()
        width, style = self.size.width, self.visual_style
        if self._strips_for != (width, style):
            self._strips.clear()
            self._strips_for = (width, style)
        strip = self._strips.get(y)
        if strip is None:
            rendered = (
                Visual.to_strips(self, visualize(self, self._lines[y]), width, 1, style) if y < len(self._lines) else []
            )
            strip = rendered[0] if rendered else Strip.blank(width, style.rich_style)
            self._strips[y] = strip
        return strip
