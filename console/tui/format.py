"""How figures look on screen (pure): numbers, ages, sparklines, colours by threshold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

BLOCKS = "▁▂▃▄▅▆▇█"
DASH = "–"


def sparkline(values: Sequence[float], width: int, *, lo: float | None = 0.0, hi: float | None = None) -> str:
    """The last `width` values as block characters, scaled to [lo, hi] (hi: the maximum seen); padded left."""
    if width <= 0:
        return ""
    tail = list(values)[-width:]
    if not tail:
        return " " * width
    low = min(tail) if lo is None else lo
    high = max(tail) if hi is None else hi
    span = high - low
    chars = []
    for v in tail:
        level = 0 if span <= 0 else round((min(max(v, low), high) - low) / span * (len(BLOCKS) - 1))
        chars.append(BLOCKS[level])
    return " " * (width - len(tail)) + "".join(chars)


def num(value: Any, digits: int = 0, unit: str = "") -> str:
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}{unit}"
    return f"{value}{unit}"


def age(seconds: float | None) -> str:
    """Whole units, rounded down ("at least this old"): a value refreshed every second reads "0 s" until the
    next refresh is late, instead of flipping between 0 and 1 with the clock's phase (a repaint each time)."""
    if seconds is None:
        return "never"
    if seconds < 60:
        return f"{int(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    return f"{seconds / 3600:.1f} h"


def uptime(seconds: float | None) -> str:
    if seconds is None:
        return DASH
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}:{minutes:02d}:{secs:02d}" if days else f"{hours:02d}:{minutes:02d}:{secs:02d}"


WARN = ("green", "yellow", "bold red")  # higher is worse: temperature, power against its cap, memory
LOAD = ("dim", "yellow", "green")  # higher is busier, which for a serving GPU is good: utilisation


def level_style(value: float | None, thresholds: tuple[float, float], palette: tuple[str, str, str] = WARN) -> str:
    """Three levels as nvitop has them (light, moderate, heavy), coloured by what they mean for the metric."""
    if value is None:
        return "dim"
    low, high = thresholds
    return palette[0] if value < low else palette[1] if value <= high else palette[2]


def styled(text: str, style: str) -> Text:
    return Text(text, style=style)


def gib(mib: float | None, digits: int = 1) -> str:
    return DASH if mib is None else f"{mib / 1024:,.{digits}f}"
