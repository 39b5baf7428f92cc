"""How a figure reads (console/bench/present.py), the same in compare's table, the console's panes, the Markdown
export, bench's placement line and the console's live view, and a prediction's band. Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO

import pytest
from rich.console import Console

from console.bench.comparison import Cell, compare_runs
from console.bench.events import ClientPlaced
from console.bench.present import band_text, delta_style, delta_text, placement_text, value_text
from console.bench.records import BenchRecord
from console.bench.sidebyside import metric_spec, side_by_side, to_markdown
from console.cli.compare import render

TPUT, TTFT, FAILED = metric_spec("output_throughput"), metric_spec("median_ttft_ms"), metric_spec("failed")
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("median", "spec", "text"),
    [(775.4, TPUT, "775"), (1135.0, TPUT, "1,135"), (84.04, TTFT, "84.0"), (2.4, TPUT, "2.40"), (3.0, FAILED, "3")],
)
def test_a_value_is_whole_from_100_one_decimal_from_10_two_below(median: float, spec: object, text: str) -> None:
    assert value_text(Cell(median, median, median, 1), spec) == text  # type: ignore[arg-type]


def test_a_value_of_repeats_says_their_spread_and_a_missing_one_a_dash() -> None:
    assert value_text(Cell(100.0, 99.0, 101.0, 3), TPUT) == "100 ±1.0%"
    assert value_text(Cell(None, None, None, 0), TPUT) == "-"


def test_a_delta_in_full_and_compact_with_its_style() -> None:
    better = Cell(112.3, None, None, 1, delta_pct=12.3, verdict="better")
    noise = Cell(96.0, 90.0, 99.0, 3, delta_pct=-4.0, verdict="worse", within_noise=True)
    same = Cell(100.2, None, None, 1, delta_pct=0.2, verdict="same")
    assert [delta_text(c) for c in (better, noise, same)] == ["+12.3% ▲", "-4.0% ▼ noise", "+0.2% ="]
    assert [delta_text(c, compact=True) for c in (better, noise, same)] == ["▲12.3%", "▼4.0% noise", "="]
    assert [delta_style(c) for c in (better, noise, same)] == ["green", "yellow", "dim"]
    assert delta_text(Cell(100.0, None, None, 1)) == ""  # the baseline


def record(label: str, ttft: float) -> BenchRecord:
    return BenchRecord(run_id=label, label=label, target="t", started_at=T0, ended_at=T0, completed=10,
                       max_concurrency=8, output_throughput=300.0, median_ttft_ms=ttft)  # fmt: skip


def test_compare_the_panes_and_the_markdown_write_a_figure_alike() -> None:
    """compare's table wrote 84.00 where the console's panes and the Markdown wrote 84.0."""
    runs = [[record("a", 84.04)], [record("b", 92.4)]]
    out = StringIO()
    Console(file=out, width=120, color_system=None).print(render(compare_runs(runs)))
    assert "84.0 " in out.getvalue() and "84.00" not in out.getvalue() and "92.4 +9.9% ▼" in out.getvalue()
    assert "| 84.0 | 92.4 (+9.9% ▼) |" in to_markdown(side_by_side(runs)).replace("| C=8 ", "")


def test_where_the_load_generator_runs_is_worded_once() -> None:
    """bench's stderr said "the SSH port forward", the console's live view "the SSH forward"."""
    here = ClientPlaced("console", 0.4, None, "round trip 0.4 ms: at most 5 ms, the forward costs nothing")
    host = ClientPlaced("host", 150.0, "/usr/bin/python3 (Python 3.12.3)", "round trip 150 ms")
    assert placement_text(here) == (
        "load generator: here, through the SSH port forward (round trip 0.4 ms: at most 5 ms, the forward costs "
        "nothing)"
    )
    assert (
        placement_text(host) == "load generator: on the host with /usr/bin/python3 (Python 3.12.3) (round trip 150 ms)"
    )


@pytest.mark.parametrize(
    ("figure", "full", "compact"),
    [
        ((100.0, 94.0, 106.0), "± 6%", "±6%"),
        ((100.0, 78.0, 144.0), "-22% / +44%", "-22/+44%"),
        ((0.0, 0, 0), "± ?", "±?"),
    ],
)
def test_a_bands_text_in_full_and_for_a_tables_cell(
    figure: tuple[float, float, float], full: str, compact: str
) -> None:
    assert band_text(*figure) == full and band_text(*figure, compact=True) == compact
