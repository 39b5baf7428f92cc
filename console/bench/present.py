"""How a figure reads, the same wherever it is shown (pure: no Rich, no Textual). The CLI and the console both
render through it: a compared cell's value and its delta against the baseline (compare's table, the console's
side-by-side panes, the Markdown export), where a benchmark's load generator runs (bench's line on stderr, the
console's live view), and a prediction's band (predict, the editor, the tune confirmation).

    value_text(cell, spec)            "775"  "84.0"  "2.40"  "1,135 ±0.3%" (the repeats' spread)
    delta_text(cell)                  "+12.3% ▲"  "-4.0% ▼ noise"  "+0.2% ="  ("" for the baseline)
    delta_text(cell, compact=True)    "▲12.3%"  "▼4.0% noise"  "="  (four panes side by side on 80 columns)
    delta_style(cell)                 "green"  "red"  "dim"  "yellow" (inside the noise): a style either renderer takes
    placement_text(event)             "load generator: here, through the SSH port forward (round trip 0.4 ms: ...)"
    band_text(100, 94, 106)           "± 6%"  ("-45% / +82%" where the edges differ by more than a third)
    band_text(100, 94, 106, compact=True)   "±6%"  ("-45/+82%")
"""

from __future__ import annotations

from console.bench.comparison import Cell, MetricSpec
from console.bench.events import ClientPlaced

ARROWS = {"better": "▲", "worse": "▼"}  # "same" (and a figure without a verdict) is "="
VERDICT_STYLES = {"better": "green", "worse": "red", "same": "dim"}
NOISE_STYLE = "yellow"
WHERE = {
    "host": "on the host",
    "console": "here, through the SSH port forward",
    "on-host": "here (on the host)",
}


def value_text(cell: Cell, spec: MetricSpec) -> str:
    """A cell's median: whole from 100 (and a count of failures), one decimal from 10, two below; with its spread
    over the repeats as ± half the range."""
    if cell.median is None:
        return "-"
    size = abs(cell.median)
    digits = 0 if size >= 100 or spec.key == "failed" else 1 if size >= 10 else 2
    text = f"{cell.median:,.{digits}f}"
    if cell.repeats >= 2 and cell.low is not None and cell.high is not None and cell.median:
        text += f" ±{(cell.high - cell.low) / 2 / size * 100:.1f}%"
    return text


def delta_text(cell: Cell, *, compact: bool = False) -> str:
    """The delta against the baseline in % with ▲/▼ in the metric's own direction (= the same), and `noise` where
    the repeats' spreads overlap; empty for the baseline or a figure missing on either side."""
    if cell.delta_pct is None:
        return ""
    arrow = ARROWS.get(cell.verdict, "=")
    noise = " noise" if cell.within_noise and cell.verdict != "same" else ""
    if compact:
        return "=" if cell.verdict == "same" else f"{arrow}{abs(cell.delta_pct):.1f}%{noise}"
    return f"{cell.delta_pct:+.1f}% {arrow}{noise}"


def delta_style(cell: Cell) -> str:
    """The delta's style name: green better, red worse, dim the same, yellow inside the noise."""
    if cell.within_noise and cell.verdict != "same":
        return NOISE_STYLE
    return VERDICT_STYLES.get(cell.verdict, "dim")


def placement_text(event: ClientPlaced) -> str:
    """Where the load runs and why, as said before the sweep (`load generator: on the host with ... (...)`)."""
    text = f"load generator: {WHERE.get(event.location, event.location)}"
    if event.python:
        text += f" with {event.python}"
    return f"{text} ({event.reason})"


def band_text(value: float, low: float, high: float, *, compact: bool = False) -> str:
    """A predicted figure's band relative to it: `± 6%`, or `-45% / +82%` where the edges differ by more than a
    third (compact, for a table's cell: `±6%`, `-45/+82%`)."""
    if value <= 0:
        return "±?" if compact else "± ?"
    down, up = (value - low) / value, (high - value) / value
    if max(down, up) > 1.33 * min(down, up) and max(down, up) >= 0.05:
        lower, upper = f"-{down:.0%}", f"+{up:.0%}"
        return f"{lower.removesuffix('%')}/{upper}" if compact else f"{lower} / {upper}"
    return f"±{max(down, up):.0%}" if compact else f"± {max(down, up):.0%}"
