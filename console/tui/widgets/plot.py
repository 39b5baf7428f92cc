"""A line plot drawn with characters (Rich text): one line per run against concurrency, each run in its colour with
its letter at the measured points, the crossovers marked on the axis. Every figure shown stays the core's
(console.bench.sidebyside).

Drawn by hand rather than with a plotting widget: textual-plotext (plotext in a Textual widget) was put beside it
on the same runs at 80 and 120 columns. Its braille lines are finer, but a measured point's letter sits on a
whole cell while its line runs between cells, so the letter stood a row off its own line; a later run's line and
letter covered an earlier run's point where the two nearly met (no `*`); a crossover line looked like the frame
(it joined it with ┬ and ┴); the frame and the axis title took 3 of the plot's 12 rows; and textual-plotext
1.0.1 requires plotext < 6 (the current plotext breaks its import). What it did better, the x axis's name, is
done here too."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.widget import Widget

RUN_STYLES = ("bold cyan", "bold magenta", "bold yellow", "bold green")
RUN_MARKS = "ABCD"
Series = Mapping[str, Sequence[tuple[float, float]]]


def _x_scale(xs: Sequence[float], width: int) -> tuple[bool, float, float]:
    """Log scale when the levels span a factor of 8 or more (1, 8, 32, 64 sit apart), else linear."""
    low, high = min(xs), max(xs)
    use_log = low > 0 and high / low >= 8
    return use_log, (math.log(low) if use_log else low), (math.log(high) if use_log else high)


def line_plot(
    series: Series, *, width: int, height: int, title: str, crossings: Sequence[float] = (), axis: str = "C"
) -> Text:
    """The plot as Text of `height` lines (title and axes included) and at most `width` columns."""
    points = [(x, y) for pts in series.values() for x, y in pts]
    out = Text(title + "\n", style="bold")
    if not points or width < 20 or height < 5:
        out.append("(no figures to plot)", style="dim")
        return out
    top = max(y for _, y in points) * 1.05 or 1.0
    # The y labels and, under them, the x axis's name share a margin: after the last tick it ran past `width`
    # and was cut off (the levels read as bare numbers).
    label_w = max(len(f"{top:,.0f}"), len(axis))
    plot_w = max(10, width - label_w - 2)
    plot_h = max(3, height - 3)  # title, x axis, tick labels
    use_log, x0, x1 = _x_scale([x for x, _ in points], plot_w)

    def col(x: float) -> int:
        pos = math.log(x) if use_log else x
        return 0 if x1 == x0 else round((pos - x0) / (x1 - x0) * (plot_w - 1))

    def row(y: float) -> int:
        return plot_h - 1 - min(plot_h - 1, max(0, round(y / top * (plot_h - 1))))

    grid: list[list[tuple[str, str]]] = [[(" ", "")] * plot_w for _ in range(plot_h)]
    for at in crossings:
        if min(x for x, _ in points) <= at <= max(x for x, _ in points):
            c = col(at)
            for r in range(plot_h):
                grid[r][c] = ("┆", "dim")
    for n, (_label, pts) in enumerate(series.items()):
        style = RUN_STYLES[n % len(RUN_STYLES)]
        ordered = sorted(pts)
        for (xa, ya), (xb, yb) in itertools.pairwise(ordered):
            ca, cb, ra, rb = col(xa), col(xb), row(ya), row(yb)
            steps = max(abs(cb - ca), abs(rb - ra), 1)
            for i in range(1, steps):
                c = ca + round((cb - ca) * i / steps)
                r = ra + round((rb - ra) * i / steps)
                if grid[r][c][0] in (" ", "┆"):
                    grid[r][c] = ("·", style)
        for x, y in ordered:
            c, r = col(x), row(y)
            grid[r][c] = ("*" if grid[r][c][0] in RUN_MARKS else RUN_MARKS[n % len(RUN_MARKS)], style)
    for r, cells in enumerate(grid):
        y = top * (plot_h - 1 - r) / (plot_h - 1)
        out.append((f"{y:,.0f}" if r in (0, plot_h // 2, plot_h - 1) else "").rjust(label_w) + " │", style="dim")
        for char, style in cells:
            out.append(char, style=style)
        out.append("\n")
    out.append(" " * label_w + " └" + "─" * plot_w + "\n", style="dim")
    ticks = [" "] * plot_w
    for x in sorted({x for x, _ in points}):
        text = f"{x:g}"
        start = min(max(0, col(x) - len(text) // 2), plot_w - len(text))
        if all(ch == " " for ch in ticks[max(0, start - 1) : start + len(text) + 1]):
            ticks[start : start + len(text)] = list(text)
    out.append(axis.rjust(label_w) + "  " + "".join(ticks).rstrip(), style="dim")
    return out


class Plot(Widget):
    """Renders line_plot at the widget's size; `show` hands it the figures."""

    DEFAULT_CSS = """
    Plot { height: 12; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.series: Series = {}
        self.title = ""
        self.crossings: Sequence[float] = ()
        self.axis = "C"

    def show(self, series: Series, *, title: str, crossings: Sequence[float] = (), axis: str = "C") -> None:
        self.series, self.title, self.crossings, self.axis = series, title, crossings, axis
        self.refresh()

    def render(self) -> Text:
        return line_plot(
            self.series,
            width=self.size.width,
            height=self.size.height,
            title=self.title,
            crossings=self.crossings,
            axis=self.axis,
        )
