"""The editor's prediction (issue 37): beside the rules' verdict, what the form's setup would do on this host's traffic,
from the host's own benchmark records in the workspace (a scripted Kimi host whose records the SGLang stand-in's engine
made: tests/tui/prediction_support.py). Keys pressed, the screen read back, every wait on a condition; the figures
shown are held to the core's own forecast of the same records (console.core.tune.foresight)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from console.core.apply import editor_form
from console.core.apply.edit import SPEC_V2_DEST
from console.core.predict import SetupForecast
from console.core.tune import foresight
from console.tui.app import OpsConsoleApp
from console.tui.presenters.prediction import tok_s
from console.tui.screens.edit import EditScreen
from console.workspace import Workspace
from tests.tui.prediction_support import KIMI_UNIT, kimi_session, kimi_workspace
from tests.tui.support import screen_text, scripted_app, view, wait_until

SIZE = (120, 40)
FIT = 60.0  # the fit of the records, in a thread: a second or two on a busy machine


def flat(text: str) -> str:
    """The report's text as one line (the right-hand pane of each row, its wrapped lines joined)."""
    pane = [line.split("│", 1)[1] for line in text.splitlines() if "│" in line]
    return " ".join(" ".join(pane).split())


def predicted(editor: EditScreen) -> bool:
    """The editor shows the forecast of the setup its form resolves to now (not the one before it)."""
    preview = editor.preview
    if preview is None or preview.plan is None or editor.foresight is None:
        return False
    asked = (preview.plan.report.resolved, preview.plan.report.spec_mode)
    return editor.forecast is not None and editor._forecast_of == asked and editor.forecast.levels != []


async def open_editor(app: OpsConsoleApp, pilot: Pilot[Any], editor: EditScreen) -> None:
    app.push_screen(editor)
    await wait_until(pilot, lambda: editor.form is not None and editor.foresight is not None, "the editor", FIT)
    await wait_until(pilot, lambda: "Nothing to apply" in screen_text(app), "the report")


async def type_into(pilot: Pilot[Any], editor: EditScreen, field: str, text: str) -> None:
    """Focus the field, clear it and type `text` key by key."""
    widget = editor.query_one(f"#field-{field}")
    widget.focus()
    await pilot.press("ctrl+u") if getattr(widget, "value", "") else None
    widget.value = ""  # type: ignore[attr-defined]
    await pilot.press(*text)
    await wait_until(pilot, lambda: widget.value == text, f"{field} = {text!r}")  # type: ignore[attr-defined]


async def core_forecast(workspace: Workspace, values: dict[str, str]) -> tuple[SetupForecast, SetupForecast]:
    """What the core predicts for the setup the editor's model makes of these form values (and for the running
    setup), from the Kimi host's records: the rules' resolved values asked of the host's Foresight."""
    found = await foresight(kimi_session(workspace))  # type: ignore[arg-type]
    report = editor_form(KIMI_UNIT, "0.5.9").preview(values).plan.report  # type: ignore[union-attr]
    forecast, running = found.of(report.resolved, report.spec_mode), found.running_forecast()
    assert forecast is not None and running is not None
    return running, forecast


async def test_the_form_s_setup_is_predicted_as_the_operator_types_beside_the_running_setup_s_figures(
    tmp_path: Path,
) -> None:
    workspace = kimi_workspace(tmp_path / "ws")
    topk2_values = {"speculative_eagle_topk": "2", "speculative_num_draft_tokens": "4", SPEC_V2_DEST: "false"}
    running, topk2 = await core_forecast(workspace, topk2_values)
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        editor = EditScreen(kimi_session(workspace), label="gpu-a")  # type: ignore[arg-type]
        await open_editor(app, pilot, editor)
        # the unit as it is: the running setup's own figures, measured at the levels its records have
        await wait_until(pilot, lambda: "Now: EAGLE3 steps 2 topk 1 + spec v2, measured" in screen_text(app), "now")
        text = screen_text(app)
        for level in running.levels:
            assert f"C={level.concurrency}: {tok_s(level.measured.value)} tok/s" in flat(text)  # type: ignore[union-attr]
        assert "from this host's records of random 1024/256" in text
        # the seeds' question: topk 2 (spec v1, which 0.5.9 needs with a tree), typed key by key
        await type_into(pilot, editor, "speculative-eagle-topk", "2")
        await type_into(pilot, editor, "speculative-num-draft-tokens", "4")
        editor.query_one("#field-env-SGLANG-ENABLE-SPEC-V2").value = False  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: predicted(editor) and "Predicted: EAGLE3 steps 2 topk 2 draft 4" in
                         screen_text(app), "the prediction of topk 2")  # fmt: skip
        text = screen_text(app)
        assert editor.forecast is not None and editor.forecast.setup == topk2.setup
        for level in topk2.levels:
            base = running.level(level.concurrency)
            assert base is not None and base.measured is not None
            figure = level.output_tok_s
            line = f"{tok_s(base.measured.value)} → {tok_s(figure.value)} tok/s {figure.band_text()}"
            assert f"C={level.concurrency}: {line}" in flat(text), line
        assert topk2.verdict.text in flat(text)
        assert "(a restart) would settle it" in text and "assumes: a tree's further branches" in text
        # back to the unit's topk: the running setup again
        await type_into(pilot, editor, "speculative-eagle-topk", "1")
        await type_into(pilot, editor, "speculative-num-draft-tokens", "3")
        editor.query_one("#field-env-SGLANG-ENABLE-SPEC-V2").value = True  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "Now: EAGLE3 steps 2 topk 1 + spec v2" in screen_text(app), "the unit again")


async def test_a_setup_measured_before_is_shown_as_measured_and_one_the_rules_refuse_is_not_predicted(
    tmp_path: Path,
) -> None:
    workspace = kimi_workspace(tmp_path / "ws")
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        editor = EditScreen(kimi_session(workspace), label="gpu-a")  # type: ignore[arg-type]
        await open_editor(app, pilot, editor)
        editor.query_one("#field-speculative-algorithm").value = "none"  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "Predicted: no speculation" in screen_text(app), "no speculation")
        assert "tok/s ± 0% (measured)" in screen_text(app) or "(measured)" in screen_text(app)
        editor.query_one("#field-speculative-algorithm").value = "EAGLE3"  # type: ignore[attr-defined]
        await type_into(pilot, editor, "speculative-eagle-topk", "2")  # a tree with spec v2: 0.5.9 refuses it
        await wait_until(pilot, lambda: "spec v2 supports only topk = 1" in screen_text(app), "the refusal")
        assert editor.forecast is None and "Predicted:" not in screen_text(app) and "Now:" not in screen_text(app)


async def test_without_a_benchmark_of_the_running_setup_it_says_what_would_give_one(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws").ensure()  # logs/ with no record of this host
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        editor = EditScreen(kimi_session(workspace), label="gpu-a")  # type: ignore[arg-type]
        await open_editor(app, pilot, editor)
        await type_into(pilot, editor, "speculative-num-steps", "3")
        await wait_until(pilot, lambda: "ctrl+s: apply" in screen_text(app), "a valid edit")
        text = flat(screen_text(app))
        assert "No prediction: no benchmark of the running setup (EAGLE3 steps 2 topk 1 + spec v2) in logs/" in text
        assert "benchmark it (b) to predict" in text


async def test_without_a_workspace_nothing_is_said_of_a_prediction() -> None:
    """The existing editor (the snapshots' fixed host has no workspace): the report as it was."""
    from tests.tui.support import FixedSession

    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        editor = EditScreen(FixedSession(), label="gpu-a")  # type: ignore[arg-type]
        app.push_screen(editor)
        await wait_until(pilot, lambda: "Nothing to apply" in screen_text(app), "the report")
        assert not editor.predicts and "prediction" not in screen_text(app).lower()
