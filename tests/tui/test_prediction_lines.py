"""What the console shows of a prediction, as pure code (console/tui/presenters/prediction.py): the editor's lines for
each state of the host's prediction, the tune confirmation's ranking; and the tune board folding SetupsPredicted
(console/tui/presenters/tune_board.py). The forecasts are the core's own, of the Kimi host's records
(tests/tui/prediction_support.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.core.predict import Evidence, Figure, Predictor
from console.core.tune import Cell, Foresight, SetupsPredicted, TuneStarted
from console.core.tune.predict import foresight
from console.sglang.setup import SpecSetup
from console.tui.presenters.prediction import editor_lines, predicted_ranking
from console.tui.presenters.tune_board import TuneBoard
from tests.tui.prediction_support import DRAFT, kimi_records, kimi_request, kimi_session, kimi_space, kimi_workspace

AT = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
RUNNING = SpecSetup("EAGLE3", 2, 1, 3, True, DRAFT)


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> Foresight:
    import asyncio

    workspace = kimi_workspace(tmp_path_factory.mktemp("ws"))
    return asyncio.run(foresight(kimi_session(workspace)))  # type: ignore[arg-type]


def test_the_bands_of_a_table_cell_lose_their_spaces_not_their_edges() -> None:
    assert Figure(100.0, 94.0, 106.0).band_text(compact=True) == "±6%"
    assert Figure(100.0, 78.0, 144.0).band_text(compact=True) == "-22/+44%"


def test_the_editor_says_it_reads_the_records_then_why_there_is_no_prediction_and_how_to_get_one() -> None:
    assert [line.kind for line in editor_lines(None, None, None)] == ["waiting"]
    none = Foresight(RUNNING, True, (), None, None, "no benchmark of the running setup (X) in logs/: benchmark it (b)")
    lines = editor_lines(none, None, None)
    assert lines[0].text == "No prediction: no benchmark of the running setup (X) in logs/: benchmark it (b)"
    assert lines[1].text == "esc, then b: a benchmark of the running setup, no restart"
    # records of the running setup, but nothing to predict from (the predictor's Unknown): no benchmark hint
    unknown = Foresight(RUNNING, True, (1,), "random 1024/256", None, "no base: a benchmark of X")
    assert [line.text for line in editor_lines(unknown, None, None)] == ["No prediction: no base: a benchmark of X"]
    down = editor_lines(None, None, None, unreadable="the running server cannot be read (refused)")
    assert [line.text for line in down] == ["No prediction: the running server cannot be read (refused)"]


def test_the_editor_shows_the_running_setup_measured_and_another_beside_it_with_verdict_settle_and_assumption(
    found: Foresight,
) -> None:
    running = found.running_forecast()
    assert running is not None and found.predictor is not None
    lines = editor_lines(found, running, running)
    assert lines[0].text == "Now: EAGLE3 steps 2 topk 1 + spec v2, measured" and lines[0].kind == "head"
    c1 = running.level(1)
    assert c1 is not None and c1.measured is not None
    assert lines[1].cells == ("C=1:", "", f"{c1.measured.value:,.0f} tok/s", c1.measured.band_text())
    assert lines[-1].text == "change a speculative field: its prediction shows here"
    tree = SpecSetup("EAGLE3", 2, 2, 4, False, DRAFT)
    forecast = found.predictor.forecast(tree, False, found.levels)
    lines = editor_lines(found, forecast, running)
    assert lines[0].text == "Predicted: EAGLE3 steps 2 topk 2 draft 4"
    for line, level in zip(lines[1:3], forecast.levels, strict=True):
        base = running.level(level.concurrency)
        assert base is not None and base.measured is not None
        arrow, value = f"{base.measured.value:,.0f} →", f"{level.output_tok_s.value:,.0f} tok/s"
        assert line.cells == (f"C={level.concurrency}:", arrow, value, level.output_tok_s.band_text())
    kinds = {line.kind: line.text for line in lines[3:]}
    assert kinds["not-worth"] == forecast.verdict.text
    notes = [line.text for line in lines if line.kind == "note"]
    assert notes[0] == forecast.verdict.settle
    assert notes[1] == f"assumes: {forecast.assumptions[0]} (and {len(forecast.assumptions) - 1} more)"
    assert notes[2] == "from this host's records of random 1024/256 t=0 forced"
    # a form the rules refuse: no forecast, nothing said
    assert editor_lines(found, None, running) == []


def test_the_ranking_puts_the_best_relative_to_each_level_first_and_the_unplaced_last(found: Foresight) -> None:
    request = kimi_request()
    named = found.of_candidates(kimi_space(request).candidates, (1, 48))
    unplaced = found.predictor.forecast(SpecSetup("EAGLE", 2, 1, 3, False, None), False, (1, 48))  # type: ignore[union-attr]
    assert unplaced.levels == [] and unplaced.verdict.kind == "unknown"
    ranked = predicted_ranking([("EAGLE steps 2", unplaced), *named], (1, 48))
    assert [r.name for r in ranked][-1] == "EAGLE steps 2" and ranked[-1].cells == ("", "")

    def score(name: str) -> float:
        forecast = dict(named)[name]
        best = {c: max((f.level(c).measured or f.level(c).output_tok_s).value for _n, f in named) for c in (1, 48)}  # type: ignore[union-attr]
        return sum((forecast.level(c).measured or forecast.level(c).output_tok_s).value / best[c] for c in (1, 48))  # type: ignore[union-attr]

    scores = [score(r.name) for r in ranked[:-1]]
    assert scores == sorted(scores, reverse=True)
    best_at = {c: [r.name for r in ranked if c in r.best_at] for c in (1, 48)}
    assert best_at == {1: ["no speculation"], 48: ["EAGLE3 topk 1 + spec v2"]}  # no speculation at C=1 (the seeds)
    running = next(r for r in ranked if r.kind == "running")
    assert running.verdict == "runs now (measured)" and running.name == "EAGLE3 topk 1 + spec v2"


def test_the_board_shows_after_a_stage_which_untried_setups_can_still_win_and_their_predicted_figures(
    tmp_path: Path,
) -> None:
    request = kimi_request({"strategy": "predict"})
    space = kimi_space(request)
    board = TuneBoard.planned(space)
    cells = tuple(request.cells())
    board.feed(TuneStarted(space, cells, "predict", False, AT))
    c1, c48 = Cell("random", 1), Cell("random", 48)
    board.feed(
        SetupsPredicted(
            0,
            (("EAGLE3 topk 1", ((c1, 60.0, 70.0, 80.0), (c48, 500.0, 540.0, 580.0))),
             ("no speculation", ((c1, 80.0, 90.0, 100.0), (c48, 400.0, 450.0, 500.0)))),
            ("no speculation", "EAGLE3 topk 2"),
            ("EAGLE3 topk 1",),
            ("EAGLE3 topk 2",),
            AT,
        )
    )  # fmt: skip
    rows = {row.name: row for row in board.rows if row.key}
    assert rows["no speculation"].state_text == "pending: can win" and rows["no speculation"].predicted[c1][1] == 90.0
    assert rows["EAGLE3 topk 1"].state_text == "predicted out" and rows["EAGLE3 topk 1"].predicted[c48] == (
        500.0, 540.0, 580.0)  # fmt: skip
    assert rows["EAGLE3 topk 2"].state_text == "pending: no base" and rows["EAGLE3 topk 2"].predicted == {}
    assert rows["EAGLE3 topk 1 + spec v2"].chance == "" and board.prediction is not None
    # the next prediction, once no speculation was tried: its row has its measured figures, no chance any more
    board.feed(SetupsPredicted(1, (), (), ("EAGLE3 topk 1",), (), AT))
    assert rows["no speculation"].chance == "" and rows["no speculation"].predicted == {}
    assert rows["EAGLE3 topk 1"].state_text == "predicted out"


def test_records_of_the_kimi_host_are_the_running_setup_and_no_speculation_twice_at_each_level() -> None:
    """The scripted host the console's prediction tests stand on (a control: the Predictor itself fits them)."""
    records = kimi_records()
    assert {(r.label, r.max_concurrency) for r in records} == {(s, c) for s in ("running", "nospec") for c in (1, 48)}
    assert len(records) == 8 and {r.target for r in records} == {"gpu-a"}
    evidence = Evidence.from_records(list(records))
    predictor = Predictor(evidence, evidence.workloads()[0])
    assert predictor.noise is not None  # the repeats measured the noise
