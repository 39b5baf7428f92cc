"""The Tune screen's prediction (issue 37): before anything restarts, the confirmation ranks the planned setups by what
the host's own records predict at the form's levels; the strategy predict is taken from the form (and refused beside
its field with an objective it cannot rank by); while such a tune runs, the board shows after each stage which setups
can still win. A scripted Kimi host with records in its workspace (tests/tui/prediction_support.py); keys pressed,
the screen read back, every wait on a condition; the ranking held to the core's own forecasts of the same records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from console.bench.records import append_records
from console.core.tune import foresight
from console.sim.profiles import get_profile
from console.tui.app import OpsConsoleApp
from console.tui.presenters.prediction import predicted_ranking
from console.tui.runners import Runners
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.progress import ProgressScreen
from console.tui.screens.tune import TuneFormScreen, TuneView
from console.workspace import Workspace
from tests.support.virtual_bench import resolved_args, virtual_records
from tests.tui.prediction_support import DRAFT, kimi_request, kimi_session, kimi_space, kimi_workspace, plan_on_kimi
from tests.tui.support import modal_rows, screen_text, scripted_app, view, wait_until
from tests.tui.test_tune import fill, pick

SIZE = (120, 40)
FIT = 60.0  # the fit of the records, in a thread: a second or two on a busy machine


def setup_of(row: str, ranked: list[Any]) -> str:
    """The setup a row of the ranking is of (the longest name it starts with: "EAGLE3 topk 1" is a prefix of others)."""
    return max((x.name for x in ranked if row.startswith(x.name + " ")), key=len)


def console(workspace: Workspace) -> OpsConsoleApp:
    """The console on the scripted Kimi host, connected (its session reads the workspace's records); T plans on it."""
    sessions = {"gpu-a": kimi_session(workspace)}
    return scripted_app(views={"gpu-a": view()}, sessions=sessions, runners=Runners(tune=plan_on_kimi))


async def open_form(app: OpsConsoleApp, pilot: Pilot[Any]) -> TuneFormScreen:
    await pilot.press("T")
    await wait_until(pilot, lambda: isinstance(app.screen, TuneFormScreen), "the form")
    await wait_until(pilot, lambda: "setups to run" in screen_text(app), "the space")
    assert isinstance(app.screen, TuneFormScreen)
    return app.screen


async def test_the_confirmation_ranks_the_planned_setups_by_their_prediction_and_predict_runs_from_the_form(
    tmp_path: Path,
) -> None:
    workspace = kimi_workspace(tmp_path / "ws")
    found = await foresight(kimi_session(workspace))  # type: ignore[arg-type]
    request = kimi_request({"strategy": "predict"})
    expected = predicted_ranking(found.of_candidates(kimi_space(request).candidates, (1, 48)), (1, 48))
    app = console(workspace)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(app, pilot)
        await fill(pilot, form, algorithm="EAGLE3,none", steps="2", topk="1,2", spec_v2="on,off", concurrency="1,48")
        await pick(pilot, form, "objective", "goodput")
        await pick(pilot, form, "strategy", "predict")
        await fill(pilot, form, slo="ttft_p95=1s")
        # refused beside the field, as the CLI refuses it, before anything is planned
        await wait_until(pilot, lambda: "✖ strategy: predict ranks setups by the output tok/s" in screen_text(app),
                         "the refusal")  # fmt: skip
        assert form.check_action("start", ()) is None
        await pick(pilot, form, "objective", "throughput")
        await wait_until(pilot, lambda: "strategy predict: the running setup measured" in screen_text(app), "ok")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", FIT)
        rows = modal_rows(app)
        text = "\n".join(rows)
        assert "Predicted from this host's records, best first (on random 1024/256" in text
        table = [r for r in rows if any(r.startswith(x.name + " ") for x in expected)]
        assert [setup_of(r, expected) for r in table] == [x.name for x in expected]  # best first
        for row, ranked in zip(table, expected, strict=True):  # each cell as the core forecast it, ★ the best
            for level, cell in zip((1, 48), ranked.cells, strict=True):
                assert (("★ " if level in ranked.best_at else "") + cell) in row, (row, cell)
            assert ranked.verdict in row
        # the records hold no speculation too (the Kimi case): measured, and ahead of the running setup at C=1
        assert [x.name for x in expected[:2]] == ["no speculation", "EAGLE3 topk 1 + spec v2"]
        assert expected[0].verdict == "worth a restart (measured)" and expected[1].verdict == "runs now (measured)"
        assert "At most" in text and "only for the setups predicted to be" in text.replace("\n", " ")
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, ProgressScreen), "the tune")
        tune = app.screen
        assert isinstance(tune, ProgressScreen) and isinstance(tune.view, TuneView)
        await wait_until(pilot, lambda: "predicted after stage 1" in screen_text(app), "the prediction", FIT)
        text = screen_text(app)
        assert "stage 2: EAGLE3 topk 1, the likeliest winner by the prediction" in text
        board = tune.view.board
        assert board.prediction is not None
        chances = {row.name: row.chance for row in board.rows if row.key}
        assert chances["no speculation"] == "" and chances["EAGLE3 topk 1 + spec v2"] == ""  # measured
        assert chances["EAGLE3 topk 2"] == "can win" and "can still win: EAGLE3 topk 1, EAGLE3 topk 2" in text
        topk2 = next(row for row in board.rows if row.name == "EAGLE3 topk 2")
        assert f"~{topk2.predicted[board.cells[0]][1]:,.0f}" in text  # its predicted figure, marked ~
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the abort question")


async def test_without_records_the_confirmation_says_why_there_is_no_prediction(tmp_path: Path) -> None:
    app = console(Workspace(tmp_path / "ws").ensure())
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(app, pilot)
        await fill(pilot, form, steps="2", concurrency="1")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", FIT)
        text = " ".join(" ".join(modal_rows(app)).split())
        assert "No prediction: no benchmark of the running setup (EAGLE3 steps 2 topk 1 + spec v2) in logs/" in text
        assert "Restart sglang.service on gpu-a with each of these setups" in text  # the strategy halving's question
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, TuneFormScreen), "the form again")


async def test_the_ranking_is_of_the_tune_s_own_traffic_not_the_newest_measured(tmp_path: Path) -> None:
    """The running setup measured on random 1024/256 and, later, on random 512/128: the editor's foresight is of the
    newest traffic, a tune of random 1024/256 is ranked on that (a refit on its records), and a tune of chat, which
    the running setup was never measured on, gets no prediction and says why (not one of other traffic)."""
    workspace = kimi_workspace(tmp_path / "ws", no_speculation=False)
    profile = get_profile("kimi-k2.5-int4-8x-rtxpro6000-pcie")
    later = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    running = resolved_args("EAGLE3", 2, 1, spec_v2=True, draft_model_path=DRAFT)
    shorter = virtual_records(profile, running, (1, 48), input_len=512, output_len=128, repeat=2, label="short",
                              version="0.5.9", start=later)  # fmt: skip
    append_records(workspace.logs, [r.model_copy(update={"target": "gpu-a"}) for r in shorter])
    found = await foresight(kimi_session(workspace))  # type: ignore[arg-type]
    assert found.workload is not None and found.workload.startswith("random 512/128")
    request = kimi_request()
    on_tune = found.on_workload(request.workload_spec("random"))
    assert on_tune.workload is not None and on_tune.workload.startswith("random 1024/256")
    assert on_tune.predictor is not None and on_tune.levels == found.levels
    assert on_tune.running_forecast() != found.running_forecast()  # fitted on other traffic
    on_chat = found.on_workload(kimi_request({"workload": "chat"}).workload_spec("chat"))
    assert on_chat.predictor is None and on_chat.why_not is not None and "on chat" in on_chat.why_not

    app = console(workspace)
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(app, pilot)
        await fill(pilot, form, steps="2", concurrency="1,48", workload="chat")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", FIT)
        text = " ".join(" ".join(modal_rows(app)).split())
        assert "No prediction: no benchmark of the running setup (EAGLE3 steps 2 topk 1 + spec v2) on chat" in text
        await pilot.press("n")
        await wait_until(pilot, lambda: isinstance(app.screen, TuneFormScreen), "the form again")
        await fill(pilot, form, workload="random")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", FIT)
        text = " ".join(" ".join(modal_rows(app)).split())
        assert "Predicted from this host's records, best first (on random 1024/256" in text
