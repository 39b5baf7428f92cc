"""What the console shows of a prediction (console.core.tune.Foresight: one host's records fitted once): the editor's
lines for the setup its form makes, against the running one, and the tune confirmation's ranking of its candidates.
Pure: no textual here; the screens style each line by its kind.

    editor_lines(foresight, forecast, running)     # "C=1: 84 → 92 tok/s ± 6 %", the verdict, what would settle it
    predicted_ranking(named_forecasts, levels)     # the candidates best first, a cell per level, a verdict each
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from console.core.predict import Figure, LevelForecast, SetupForecast
from console.core.tune import Foresight

LineKind = Literal["head", "figures", "worth", "not-worth", "unknown", "note", "waiting"]

VERDICT_WORDS = {
    "running": "runs now (measured)",
    "worth": "worth a restart",
    "not-worth": "not worth a restart",
    "unknown": "unknown",
    "unrated": "no running setup to compare",
}


@dataclass(frozen=True)
class Line:
    """One line of a prediction; a level's line ("figures") also in its columns, for the screen to align: the
    level, the running setup's figure and the arrow ("" for the running setup itself), the figure, its band."""

    text: str
    kind: LineKind
    cells: tuple[str, ...] = ()


def tok_s(value: float) -> str:
    return f"{value:,.0f}"


def shown(level: LevelForecast) -> Figure:
    """The figure a level stands on: the setup's own measurement where it has one, else the prediction."""
    return level.measured or level.output_tok_s


def editor_lines(
    foresight: Foresight | None,
    forecast: SetupForecast | None,
    running: SetupForecast | None,
    *,
    unreadable: str = "",
    restart_cost: str = "",
) -> list[Line]:
    """The editor's prediction: while the records are read, why there is none (and, where no benchmark of the running
    setup is there, how to get one), or the form's setup at the running setup's levels beside the running setup's own
    figures, the verdict, what would settle it and the main assumption. Nothing for a form the rules refuse
    (`forecast` None with a predictor). `unreadable`: why the running server could not be read for it. `restart_cost`:
    what the restart the verdict weighs costs on this host ("a restart: ~10 min"), said with the verdict."""
    if unreadable:
        return [Line(f"No prediction: {unreadable}", "note")]
    if foresight is None:
        return [Line("prediction: reading this host's benchmark records ...", "waiting")]
    if foresight.predictor is None:
        lines = [Line(f"No prediction: {foresight.why_not}", "note")]
        if foresight.workload is None:  # no record of the running setup at all: the dashboard's b gives one
            lines.append(Line("esc, then b: a benchmark of the running setup, no restart", "note"))
        return lines
    if forecast is None:
        return []
    setup = forecast.setup.name()
    traffic = [Line(f"from this host's records of {foresight.workload}", "note")] if foresight.workload else []

    def figures(level: LevelForecast, base: LevelForecast | None) -> Line:
        figure = shown(level)
        arrow = f"{tok_s(shown(base).value)} →" if base is not None else ""
        band = figure.band_text() + (" (measured)" if level.measured and base is not None else "")
        cells = (f"C={level.concurrency}:", arrow, f"{tok_s(figure.value)} tok/s", band)
        return Line(" ".join(cell for cell in cells if cell), "figures", cells)

    if forecast.verdict.kind == "running":
        lines = [Line(f"Now: {setup}, measured", "head"), *(figures(lv, None) for lv in forecast.levels)]
        return [*lines, *traffic, Line("change a speculative field: its prediction shows here", "note")]
    lines = [Line(f"Predicted: {setup}", "head")]
    for level in forecast.levels:
        lines.append(figures(level, running.level(level.concurrency) if running is not None else None))
    kind = forecast.verdict.kind
    weighed = f"{forecast.verdict.text} ({restart_cost})" if restart_cost else forecast.verdict.text
    lines.append(Line(weighed, kind if kind in ("worth", "not-worth") else "unknown"))
    if forecast.verdict.settle:
        lines.append(Line(forecast.verdict.settle, "note"))
    if forecast.assumptions:
        more = len(forecast.assumptions) - 1
        lines.append(Line(f"assumes: {forecast.assumptions[0]}" + (f" (and {more} more)" if more else ""), "note"))
    return [*lines, *traffic]


@dataclass(frozen=True)
class Ranked:
    """One candidate in the predicted ranking: its cell per level ("" where it has no figure), its verdict."""

    name: str
    forecast: SetupForecast
    cells: tuple[str, ...]
    best_at: tuple[int, ...]  # the levels where its figure is the highest of all
    verdict: str

    @property
    def kind(self) -> str:
        return self.forecast.verdict.kind


def predicted_ranking(named: Sequence[tuple[str, SetupForecast]], levels: Sequence[int]) -> list[Ranked]:
    """The candidates best first: by their figure (measured or predicted) relative to the best one at each level,
    averaged over the levels; those the prediction cannot place last, in their order."""
    best = {c: max((shown(lv).value for _n, f in named if (lv := f.level(c)) is not None), default=0.0) for c in levels}

    def score(forecast: SetupForecast) -> float:
        ratios = [shown(lv).value / best[c] for c in levels if (lv := forecast.level(c)) is not None and best[c] > 0]
        return statistics.fmean(ratios) if ratios else -1.0

    out = []
    for name, forecast in sorted(named, key=lambda item: -score(item[1])):  # stable: ties keep the space's order
        cells = []
        for c in levels:
            level = forecast.level(c)
            cells.append("" if level is None else f"{tok_s(shown(level).value)} {shown(level).band_text(compact=True)}")
        top = tuple(c for c in levels if (lv := forecast.level(c)) is not None and shown(lv).value >= best[c] > 0)
        verdict = VERDICT_WORDS.get(forecast.verdict.kind, forecast.verdict.kind)
        if forecast.verdict.kind != "running" and forecast.levels and all(lv.measured for lv in forecast.levels):
            verdict += " (measured)"
        out.append(Ranked(name, forecast, tuple(cells), top, verdict))
    return out
