"""SVG snapshots of the console's predictions (issue 37), on the scripted Kimi host whose workspace holds the records
the SGLang stand-in's engine made for it (tests/tui/prediction_support.py: the same figures every run): the editor
with the seeds' question typed in (topk 2 on spec v1), at 120×40 and 80×24; the editor of a host with no benchmark
yet; the tune's confirmation ranking the planned setups; a tune with the strategy predict after its stages.
`pytest --snapshot-update` rewrites them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from console.tui.runners import Runners
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.edit import EditScreen
from console.tui.screens.tune import TuneFormScreen
from console.workspace import Workspace
from tests.tui.prediction_support import kimi_session, kimi_workspace, plan_on_kimi
from tests.tui.support import screen_text, scripted_app, view, wait_until, without_cursor
from tests.tui.test_editor_prediction import predicted

FIT = 60.0
TOPK_2 = {"speculative-eagle-topk": "2", "speculative-num-draft-tokens": "4"}


def _editor(workspace: Workspace, values: dict[str, str], *needles: str) -> tuple[Any, Any]:
    app = scripted_app(views={"gpu-a": view()})
    editor = EditScreen(kimi_session(workspace), label="gpu-a")  # type: ignore[arg-type]

    async def run_before(pilot: Pilot[Any]) -> None:
        app.push_screen(editor)
        await wait_until(pilot, lambda: editor.form is not None and editor.foresight is not None, "the editor", FIT)
        await wait_until(pilot, lambda: "backup of" in str(editor.query_one("#preset")._options), "the presets")  # type: ignore[attr-defined]
        for field, text in values.items():
            editor.query_one(f"#field-{field}").value = text  # type: ignore[attr-defined]
        if values:
            editor.query_one("#field-env-SGLANG-ENABLE-SPEC-V2").value = False  # type: ignore[attr-defined]
            await wait_until(pilot, lambda: predicted(editor), "the prediction of the form's setup", FIT)
        await wait_until(pilot, lambda: all(n in screen_text(app) for n in needles), f"{needles}")
        await without_cursor(pilot)
        await pilot.pause()

    return app, run_before


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_editor_predicting_topk_2(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app, run_before = _editor(kimi_workspace(tmp_path / "ws"), TOPK_2, "Predicted: EAGLE3 steps 2", "ctrl+s")
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_editor_without_a_benchmark_of_the_running_setup(snap_compare: Any, tmp_path: Path) -> None:
    app, run_before = _editor(Workspace(tmp_path / "ws").ensure(), {}, "No prediction")
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def _tune_app(workspace: Workspace) -> Any:
    sessions = {"gpu-a": kimi_session(workspace)}
    return scripted_app(views={"gpu-a": view()}, sessions=sessions, runners=Runners(tune=plan_on_kimi))


async def _planned(pilot: Pilot[Any]) -> None:
    """T, the form with the strategy predict over the Kimi space at C=1 and 48, ctrl+s: the confirmation."""
    app = pilot.app
    await pilot.press("T")
    await wait_until(pilot, lambda: isinstance(app.screen, TuneFormScreen), "the form")
    form = app.screen
    assert isinstance(form, TuneFormScreen)
    await wait_until(pilot, lambda: "setups to run" in screen_text(app), "the space")  # type: ignore[arg-type]
    form.query_one("#tune-field-strategy").value = "predict"  # type: ignore[attr-defined]
    for key, text in {"algorithm": "EAGLE3,none", "topk": "1,2", "spec_v2": "on,off", "concurrency": "1,48",
                      "steps": "2"}.items():  # fmt: skip
        form.query_one(f"#tune-field-{key.replace('_', '-')}").value = text  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: form.request is not None and form.request.strategy == "predict", "the request")
    # the form's own space shown behind the confirmation (it is checked once typing pauses)
    await wait_until(pilot, lambda: form.space is not None and form.space_values == form.values, "the form's space")
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", FIT)
    await wait_until(pilot, lambda: "best first" in screen_text(app), "the ranking")  # type: ignore[arg-type]


def test_tune_confirmation_ranking_the_setups_by_their_prediction(snap_compare: Any, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _planned(pilot)
        await pilot.pause()

    assert snap_compare(_tune_app(kimi_workspace(tmp_path / "ws")), terminal_size=(120, 40), run_before=run_before)


def test_tune_with_the_strategy_predict_after_two_stages(snap_compare: Any, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _planned(pilot)
        await pilot.press("y")
        await wait_until(pilot, lambda: "predicted after stage 1" in screen_text(pilot.app), "the board", FIT)  # type: ignore[arg-type]
        await pilot.pause()

    assert snap_compare(_tune_app(kimi_workspace(tmp_path / "ws")), terminal_size=(120, 40), run_before=run_before)
