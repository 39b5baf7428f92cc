"""The compare plots' drawing (console/tui/widgets/plot.py), pure: what made it win over a plotting package
(textual-plotext was looked at, see the module's docstring) is held here. Each run's letter stands at each of its
measured points, on the row of its value; where two runs fall on one cell a `*` says so (a package's later series
simply hides the earlier one's point); a crossover is a dotted column of its own; the levels stand under their
points, on a log scale when they span a factor of 8 or more."""

from __future__ import annotations

from console.tui.widgets.plot import line_plot

# output tok/s at C = 1, 8, 64: both runs measure 100 at C=1 (one cell), then A levels off and B climbs past it
SERIES = {"no spec": [(1.0, 100.0), (8.0, 400.0), (64.0, 400.0)], "eagle3": [(1.0, 100.0), (8.0, 300.0), (64.0, 800.0)]}
WIDTH, HEIGHT = 60, 12
# the figures' layout for these: the top is 800 × 1.05 = 840, so labels are 3 wide and the plot 60 - 3 - 2 = 55
# columns of 12 - 3 = 9 rows; x on a log scale: C=1 at column 0, C=8 at 27, C=64 at 54; a value y at row
# 8 - round(y / 840 × 8): 100 -> 7, 300 -> 5, 400 -> 4, 800 -> 0
LEFT = 3 + 2  # "840 │"


def _cell(lines: list[str], row: int, column: int) -> str:
    return lines[1 + row][LEFT + column]  # line 0 is the title


def test_each_run_has_its_letter_at_its_points_and_a_shared_cell_is_a_star() -> None:
    lines = line_plot(SERIES, width=WIDTH, height=HEIGHT, title="output tok/s").plain.splitlines()
    assert lines[0] == "output tok/s"
    assert _cell(lines, 7, 0) == "*"  # both runs at 100 at C=1
    assert (_cell(lines, 4, 27), _cell(lines, 5, 27)) == ("A", "B")  # C=8: 400 and 300
    assert (_cell(lines, 4, 54), _cell(lines, 0, 54)) == ("A", "B")  # C=64: 400 and 800
    letters = sum(line.count("A") + line.count("B") + line.count("*") for line in lines[1:10])
    assert letters == 5  # one mark per measured point, nothing else drawn with letters


def test_the_axes_say_the_scale_and_the_levels_stand_under_their_points() -> None:
    lines = line_plot(SERIES, width=WIDTH, height=HEIGHT, title="t", axis="C").plain.splitlines()
    assert [line[:LEFT] for line in lines[1:10:4]] == ["840 │", "420 │", "  0 │"]  # top, middle, zero
    assert lines[10] == "    └" + "─" * 55
    ticks = lines[11]
    assert (ticks[LEFT + 0], ticks[LEFT + 27], ticks[LEFT + 53 : LEFT + 55]) == ("1", "8", "64")
    assert ticks.startswith("  C  1")  # the axis's name under the y labels: after the last tick it was cut off
    assert max(len(line) for line in lines) <= WIDTH
    rate = line_plot({"a": [(0.5, 10.0), (4.0, 90.0)]}, width=30, height=6, title="t", axis="rate").plain
    assert rate.splitlines()[-1].startswith("rate  0.5") and max(len(line) for line in rate.splitlines()) <= 30


def test_a_crossover_is_a_dotted_column_that_the_lines_cross() -> None:
    lines = line_plot(SERIES, width=WIDTH, height=HEIGHT, title="t", crossings=[20.0]).plain.splitlines()
    column = [_cell(lines, row, 39) for row in range(9)]  # log(20) / log(64) × 54 = 38.9
    assert set(column) <= {"┆", "·"} and column.count("┆") >= 7, column  # the two lines cross it, nothing else
    assert "┆" not in "".join(lines[1:10]).replace("┆", "", 9)  # one column, no other


def test_nothing_to_plot_or_no_room_says_so() -> None:
    assert "(no figures to plot)" in line_plot({}, width=WIDTH, height=HEIGHT, title="t").plain
    assert "(no figures to plot)" in line_plot(SERIES, width=15, height=HEIGHT, title="t").plain
