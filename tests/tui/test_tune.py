"""The Tune screen (T): the form, the planned space and its confirmation, the live rows and the result from the
real core against the demo host (its supervisor and SGLang stand-in, real processes, seeded as the Qwen host
of the seeds: tests/tune/simhost.py); an abort that puts the original unit back; read-only keeps it off.
Keys pressed, the screen read back, every wait on a condition."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Select

from console.core.tune import FIELDS
from console.tui.app import OpsConsoleApp
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.progress import ProgressScreen
from console.tui.screens.tune import TuneFormScreen, TuneView, tune_progress
from tests.support.demo import Demo, running_demo
from tests.tui.support import (
    FixedSession,
    demo_console,
    modal_rows,
    notices,
    screen_text,
    scripted_app,
    view,
    wait_until,
)
from tests.tui.test_e2e import OPSCONSOLE, Terminal
from tests.tune.simhost import QWEN, install, seed_unit

SIZE = (120, 40)
SLOW = 60.0  # a start of the demo host, a rollback: seconds
TUNE = 180.0  # a short tune: two setups, one level, a couple of seconds a run
QWEN_MTP_1 = [("--speculative-algorithm", "NEXTN"), ("--speculative-num-steps", "1"),
              ("--speculative-eagle-topk", "1"), ("--speculative-num-draft-tokens", "2")]  # fmt: skip


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        asyncio.run(install(running, lambda text: seed_unit(text, profile=QWEN, version="0.5.9", spec_v2=False,
                                                              speculative=QWEN_MTP_1)))  # fmt: skip
        yield running


def console(demo: Demo, *, read_only: bool = False) -> AbstractAsyncContextManager[tuple[OpsConsoleApp, Pilot[Any]]]:
    return demo_console(str(demo.workspace), read_only=read_only, size=SIZE, timeout=SLOW)


def is_tune(screen: object) -> bool:
    return isinstance(screen, ProgressScreen) and isinstance(screen.view, TuneView)


async def open_form(app: OpsConsoleApp, pilot: Pilot[Any]) -> TuneFormScreen:
    await pilot.press("T")
    await wait_until(pilot, lambda: isinstance(app.screen, TuneFormScreen) and app.screen.unit is not None, "the form")
    screen = app.screen
    assert isinstance(screen, TuneFormScreen)
    await wait_until(pilot, lambda: "setups to run" in screen_text(app), "the space")
    return screen


async def fill(pilot: Pilot[Any], screen: TuneFormScreen, **values: str) -> None:
    for key, text in values.items():
        field = screen.query_one(f"#tune-field-{key.replace('_', '-')}", Input)
        field.focus()
        field.value = ""
        await pilot.press(*text)
        await wait_until(pilot, lambda f=field, t=text: f.value == t, f"{key} = {text!r}")


SHORT = {"steps": "1,3", "concurrency": "1", "duration": "2", "input_len": "128", "output_len": "256"}


async def test_form_confirm_live_rows_and_the_result_with_its_crossovers_on_the_demo_host(demo: Demo) -> None:
    original = await asyncio.to_thread(demo.host().unit)
    async with console(demo) as (app, pilot):
        form = await open_form(app, pilot)
        # the defaults are the CLI's, from the unit the host runs
        assert form.form_values()["algorithm"] == "NEXTN" and form.form_values()["spec_v2"] == "off"
        assert "3 setups to run" in screen_text(app)
        await fill(pilot, form, **SHORT)
        await wait_until(pilot, lambda: "2 setups to run" in screen_text(app), "the space of the form")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", SLOW)
        rows = "\n".join(modal_rows(app))
        assert "steps 1" in rows and "steps 3" in rows and "starts of sglang-demo.service" in rows
        assert "Restart sglang-demo.service on demo with each of these setups" in rows
        await pilot.press("y")
        await wait_until(pilot, lambda: is_tune(app.screen), "the tune")
        tune = app.screen
        assert isinstance(tune, ProgressScreen) and isinstance(tune.view, TuneView)
        await wait_until(pilot, lambda: "benchmarking C=1" in screen_text(app), "a live row", SLOW)
        assert "▶ trial" in screen_text(app) and "elapsed" in screen_text(app)
        # d: the dashboard, live, while the tune goes on; q there is refused; the end is said; T shows the result
        await pilot.press("d")
        await wait_until(pilot, lambda: "SGLang 0.5.9" in screen_text(app), "the dashboard")
        await pilot.press("q")
        await wait_until(pilot, lambda: "a tune is running on demo" in notices(app), "q refused")
        assert app.is_running
        await wait_until(pilot, lambda: "the tune on demo is over" in notices(app), "the end said", TUNE)
        await pilot.press("T")
        await wait_until(pilot, lambda: app.screen is tune, "the tune again")
        await wait_until(pilot, lambda: "best setup per level" in screen_text(app), "the result")
        text = screen_text(app)
        assert "random: best setup per level" in text and "steps 3 best at every level" in text
        assert "demo: the original unit, healthy" in text
        states = {row.name: row.state for row in tune.view.board.rows}
        assert states == {"steps 1": "done", "steps 3": "done"}
        await pilot.press("escape")
        await wait_until(pilot, lambda: not is_tune(app.screen), "closed")
        assert not app.is_screen_installed("tune-demo")
    assert await asyncio.to_thread(demo.host().unit) == original


async def test_esc_aborts_when_confirmed_and_the_original_unit_comes_back(demo: Demo) -> None:
    original = await asyncio.to_thread(demo.host().unit)
    async with console(demo) as (app, pilot):
        form = await open_form(app, pilot)
        # one setup that is not the unit's: its screening runs for 30 s, the abort lands in it
        await fill(pilot, form, steps="3", concurrency="1", duration="240", input_len="128", output_len="256")
        await wait_until(pilot, lambda: "1 setup to run" in screen_text(app), "the space")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation", SLOW)
        await pilot.press("y")
        await wait_until(pilot, lambda: "benchmarking C=1" in screen_text(app), "the trial's benchmark", SLOW)
        assert "--speculative-num-steps 3" in await asyncio.to_thread(demo.host().unit)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert any("Abort the tune?" in row for row in modal_rows(app))
        await pilot.press("y")
        await wait_until(pilot, lambda: "demo: the original unit, healthy" in screen_text(app), "the restore", SLOW)
        assert "stopped early: aborted from the console" in screen_text(app)
    assert await asyncio.to_thread(demo.host().unit) == original
    assert await asyncio.to_thread(demo.host().healthy)


async def test_read_only_keeps_tune_off_and_says_why() -> None:
    app = scripted_app(views={"gpu-a": view()}, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("T")
        await wait_until(pilot, lambda: "a tune restarts the service" in notices(app), "the reason")
        assert not isinstance(app.screen, TuneFormScreen)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys —" in screen_text(app), "the help")
        assert any(r.startswith("T ") and "Tune  — read-only: a tune restarts" in r for r in modal_rows(app))
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await pilot.press(*"tune")
        await wait_until(pilot, lambda: "read-only: a tune restarts" in screen_text(app), "the palette's reason")


async def test_the_form_names_a_field_it_cannot_take_and_keeps_start_off() -> None:
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        form = TuneFormScreen(FixedSession(), label="gpu-a")  # type: ignore[arg-type]
        app.push_screen(form)
        await wait_until(pilot, lambda: "setups to run" in screen_text(app), "the form")
        assert form.check_action("start", ()) is True
        await fill(pilot, form, steps="1,two")
        await wait_until(pilot, lambda: "✖ steps: takes comma-separated whole numbers" in screen_text(app), "why")
        assert form.check_action("start", ()) is None
        await fill(pilot, form, steps="2", topk="1,2", spec_v2="on,off")
        await wait_until(pilot, lambda: "pruned (1)" in screen_text(app), "the pruned setup")
        assert form.space is not None and "Spec v2 currently only supports topk = 1" in form.space.pruned[0].reason
        assert form.check_action("start", ()) is True


async def test_the_form_takes_the_strategy_and_what_stays_and_refuses_as_the_cli_does() -> None:
    """--strategy, --apply-best and --best-at as fields: the two choices picked from a list, the level typed and
    refused as the CLI refuses it (beside its field), what the host runs afterwards said before anything starts."""
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        form = TuneFormScreen(FixedSession(), label="gpu-a")  # type: ignore[arg-type]
        app.push_screen(form)
        await wait_until(pilot, lambda: "afterwards: the original unit goes back" in screen_text(app), "the form")
        await pick(pilot, form, "strategy", "grid")
        await pick(pilot, form, "apply_best", "yes")
        await wait_until(pilot, lambda: "afterwards: the recommended setup stays" in screen_text(app), "what stays")
        await fill(pilot, form, best_at="16")
        await wait_until(pilot, lambda: "✖ best at level: 16 is not one of the" in screen_text(app), "16 refused")
        assert str(form.error) == (
            "best at level: 16 is not one of the concurrency levels (1,8,32,64): the winner at one of them stays"
        )
        assert form.check_action("start", ()) is None
        assert form.query_one("#tune-field-best-at").parent.has_class("-invalid")  # type: ignore[union-attr]
        await fill(pilot, form, best_at="32")
        await wait_until(pilot, lambda: "afterwards: the setup that wins at C=32 stays" in screen_text(app), "C=32")
        assert form.request is not None and form.check_action("start", ()) is True
        assert (form.request.strategy, form.request.apply_best, form.request.best_at) == ("grid", True, 32)
        await pick(pilot, form, "apply_best", "no")
        await wait_until(pilot, lambda: "✖ best at level: works only with" in screen_text(app), "without apply best")
        assert form.error is not None and form.error.field == "best_at"


async def pick(pilot: Pilot[Any], screen: TuneFormScreen, key: str, value: str) -> None:
    """Open the field's list with enter, move to `value` with the arrows, take it with enter."""
    field = screen.query_one(f"#tune-field-{key.replace('_', '-')}", Select)
    field.focus()
    await pilot.press("enter")
    await wait_until(pilot, lambda: field.expanded, f"{key}'s list open")
    values = [choice for choice, _meaning in next(f for f in FIELDS if f.key == key).choices]
    step = values.index(value) - values.index(str(field.value))
    await pilot.press(*(["down"] * step if step > 0 else ["up"] * -step), "enter")
    await wait_until(pilot, lambda: field.value == value and not field.expanded, f"{key} = {value}")


@pytest.mark.long(27)  # its measured seconds: started first (tests/tiers.py)
@pytest.mark.system
def test_in_a_real_terminal_opsconsole_demo_tunes_two_setups_to_the_result_table(tmp_path: Path) -> None:
    """`opsconsole demo` in tmux: T, the form typed into, ctrl+s, y; two setups at one level, two seconds a run,
    reach the result table; the original unit is back; q quits once it is over."""
    workspace = tmp_path / "ws"
    term = Terminal([OPSCONSOLE, "--workspace", str(workspace), "demo", "--time-scale", "0.005"], dict(os.environ))
    try:
        term.wait_for("steps 1  topk 1", timeout=SLOW)
        original = Demo(workspace, None).host().unit()  # type: ignore[arg-type]
        term.keys("T")
        term.wait_for("3 setups to run", timeout=SLOW)  # the steps field has focus when the form opens
        _type_field(term, "steps", "1,2")
        term.wait_for("2 setups to run")
        for _ in range(5):  # steps -> topk -> draft tokens -> spec v2 -> draft model path -> concurrency
            term.keys("Tab")
        _type_field(term, "concurrency levels", "1")
        # workloads stay random, no dataset picked, its sample and seed as they are
        term.keys("Tab", "Tab", "Tab", "Tab", "Tab")
        _type_field(term, "seconds per level", "2")
        term.keys("Tab", "Tab")  # repeats stay 2
        _type_field(term, "input tokens", "128")
        term.keys("Tab")
        _type_field(term, "output tokens", "64")
        term.keys("C-s")
        screen = term.wait_for("with each of these setups", timeout=SLOW)
        assert "steps 1" in screen and "steps 2" in screen
        term.keys("y")
        term.wait_for("Tuning sglang-demo.service on demo", timeout=SLOW)
        screen = term.wait_for("best setup per level", timeout=TUNE)
        assert "demo: the original unit, healthy" in screen
        assert "C=1" in screen and "margin" in screen and "runner-up" in screen
        assert Demo(workspace, None).host().unit() == original  # type: ignore[arg-type]
        term.keys("Escape")
        term.wait_for("sglang-demo.service active/running")
        term.keys("q")
        term.wait_until(lambda s: "sglang-demo.service" not in s, "the console to quit")
    finally:
        term.close()


def _field_row(screen: str, label: str) -> str:
    """What the form's row of `label` shows right of the label (its value, or its hint when empty)."""
    for line in screen.splitlines():
        left = line.split("│")[0].strip()
        if left.startswith(label + "  "):
            return left.removeprefix(label).strip()
    return ""


def _type_field(term: Terminal, label: str, value: str) -> None:
    """Clear the focused field and type `value`, each step seen on the screen before the next key: a key sent
    right behind ctrl+u can be lost between tmux and the console."""
    hint = next(f.hint for f in FIELDS if f.label == label)
    term.keys("C-u")
    term.wait_until(lambda s: hint.startswith(_field_row(s, label)[:12]), f"{label} cleared", 10)
    term.keys(value)
    term.wait_until(lambda s: _field_row(s, label) == value, f"{label} = {value}", 10)


async def test_the_form_takes_the_objective_the_slo_and_a_dataset_and_the_board_ranks_by_goodput(
    tmp_path: Path,
) -> None:
    """T with the operator's traffic: a dataset picked from datasets/ joins the workloads (its sample read as `tune
    --dataset` reads it), goodput needs an SLO (the profile's [slo] prefills it); a tune by goodput shows each
    level's ranking, each setup's capacity at the SLO and where speculation loses."""
    from console.sim.datasets import write_datasets
    from tests.tui.tune_support import ScriptedTune

    write_datasets(tmp_path, count=20)
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=SIZE) as pilot:
        session = FixedSession(slo=(("ttft_p95", 800.0),))
        form = TuneFormScreen(session, label="gpu-a", datasets=tmp_path)  # type: ignore[arg-type]
        app.push_screen(form)
        await wait_until(pilot, lambda: "setups to run" in screen_text(app), "the form")
        assert form.form_values()["slo"] == "ttft_p95=800ms"  # the profile's [slo]
        await pick(pilot, form, "objective", "goodput")
        await wait_until(pilot, lambda: "objective goodput: requests/s whose own" in screen_text(app), "goodput")
        await fill(pilot, form, slo="")
        await wait_until(pilot, lambda: form.request is not None and form.request.slo is None, "the profile's SLO")
        form.query_one("#tune-field-dataset", Select).value = "code.jsonl"
        await wait_until(pilot, lambda: form.request is not None and form.request.dataset is not None, "the sample")
        assert form.request.workloads == ("random", "dataset") and form.request.dataset.file == "code.jsonl"
        await wait_until(pilot, lambda: "dataset code.jsonl: prompt JSONL" in screen_text(app), "the sample said")
        assert (form.request.dataset.sample, form.request.dataset.seed) == (1000, 1)  # `tune --dataset`'s defaults
        first = [r.prompt for r in form.request.dataset.requests]
        await fill(pilot, form, dataset_sample="8", seed="5")  # the file sampled again: 8 requests, seed 5
        await wait_until(
            pilot,
            lambda: form.request is not None and form.request.dataset is not None
            and (form.request.dataset.sample, form.request.dataset.seed) == (8, 5),
            "the new sample",
        )  # fmt: skip
        assert len(form.request.dataset.requests) == 8 and form.request.seed == 5
        assert [r.prompt for r in form.request.dataset.requests] != first[:8]
        await fill(pilot, form, dataset_sample="0")
        await wait_until(pilot, lambda: form.error is not None and form.error.field == "dataset_sample", "the refusal")
        assert form.request is None
        await fill(pilot, form, dataset_sample="8")
        await wait_until(pilot, lambda: form.request is not None and form.request.dataset is not None, "read again")
        await fill(pilot, form, workload="random")
        await wait_until(pilot, lambda: "✖ workloads: add dataset" in screen_text(app), "the file left out")
        app.pop_screen()
        app.push_screen(tune_progress(ScriptedTune(finish=True, objective="goodput"), label="gpu-a"))
        await wait_until(pilot, lambda: "best setup per level by goodput" in screen_text(app), "the result")
        text = screen_text(app)
        assert "ranked by goodput (req/s" in text and "C=1: 1. no speculation" in text
        assert "speculation loses on this traffic" in text
        assert "! on random speculation loses at C=1, 16: no speculation is best there by goodput" in text
        assert "no speculation: C=16 (2.40 req/s); C=64 misses it" in text
