"""Every screen's footer at 80×24 names its way out (quit, close, back, cancel, no) and its help key, whole, on
the bottom row; the dashboard's at 120 columns shows every key it has, Tune among them. Pilot on scripted hosts.

At 80 columns Textual's footer cut the dashboard's keys at "o Overv▏^p Commands": `q Quit` and `? Help` were off
screen (console/tui/widgets/footer.py fits them now)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Footer

from console.host.ssh import ConnectionState
from console.tui.app import OpsConsoleApp
from console.tui.runners import Runners
from console.tui.widgets.footer import fit_keys
from console.workspace import Workspace
from tests.tui.bench_support import ScriptedBench, bench_app, seeds_workspace
from tests.tui.freeze_support import ScriptedPending as FreezePending
from tests.tui.freeze_support import scripted_planner, snapshot_workspace
from tests.tui.support import (
    NOW,
    FixedSession,
    ScriptedPending,
    screen_text,
    scripted_app,
    startup_journal,
    view,
    wait_until,
)
from tests.tui.tune_support import ScriptedTune

Opener = Callable[[Pilot[Any]], Awaitable[None]]


def bottom_row(app: OpsConsoleApp) -> str:
    return screen_text(app).splitlines()[-1]


# Help is `?`, or F1 where a text field has the focus (it takes `?` as a letter, and Textual's footer leaves out
# the keys a focused field consumes).
HELP = ("? Help", "f1 Help")


async def footer_drawn(pilot: Pilot[Any], *keys: str | tuple[str, ...]) -> str:
    """The bottom row once the screen's footer shows each of `keys` (a tuple: any one of them); it composes its
    keys after the screen shows."""
    app = pilot.app
    wanted = [(key,) if isinstance(key, str) else key for key in keys]

    def drawn() -> bool:
        row = bottom_row(app)  # type: ignore[arg-type]
        return all(any(one in row for one in key) for key in wanted)

    await wait_until(pilot, lambda: bool(app.screen.query(Footer)), "a footer on the screen")
    await wait_until(pilot, drawn, f"{keys} in the footer")
    return bottom_row(app)  # type: ignore[arg-type]


def _press(*keys: str, needle: str) -> Opener:
    async def open_it(pilot: Pilot[Any]) -> None:
        await pilot.press(*keys)
        await wait_until(pilot, lambda: needle in screen_text(pilot.app), needle)  # type: ignore[arg-type]

    return open_it


def _push(make: Callable[[], Any], needle: str) -> Opener:
    async def open_it(pilot: Pilot[Any]) -> None:
        pilot.app.push_screen(make())
        await wait_until(pilot, lambda: needle in screen_text(pilot.app), needle)  # type: ignore[arg-type]

    return open_it


def _editor() -> Any:
    from console.tui.screens.edit import EditScreen

    return EditScreen(FixedSession(), label="gpu-a")  # type: ignore[arg-type]


def _confirm() -> Any:
    from console.tui.screens.confirm import ConfirmScreen

    return ConfirmScreen("Restart sglang.service on gpu-a?", danger=True)


def _apply() -> Any:
    from console.tui.screens.progress import apply_progress

    return apply_progress(ScriptedPending("verified"), title="Applying to gpu-a", clock=lambda: NOW)  # type: ignore[arg-type]


def _tune_form() -> Any:
    from console.tui.screens.tune import TuneFormScreen

    return TuneFormScreen(FixedSession(), label="gpu-a", clock=lambda: NOW)  # type: ignore[arg-type]


def _tune_live() -> Any:
    from console.tui.screens.tune import tune_progress

    return tune_progress(ScriptedTune(finish=True), label="gpu-a", clock=lambda: NOW)


def _plain(_tmp: Path) -> OpsConsoleApp:
    return scripted_app(views={"gpu-a": view()}, journal={"gpu-a": startup_journal()})


def _eight_gpus(_tmp: Path) -> OpsConsoleApp:
    return scripted_app(views={"gpu-a": view(gpus=8)})


def _three_hosts(_tmp: Path) -> OpsConsoleApp:
    views = {
        "gpu-a": view("gpu-a"),
        "gpu-b": view("gpu-b", active="failed", healthy=False),
        "gpu-c": replace(view("gpu-c"), connection=ConnectionState("reconnecting", 2, "Connection lost")),
    }
    return scripted_app(("gpu-a", "gpu-b", "gpu-c"), views=views)


def _freeze_app(_tmp: Path) -> OpsConsoleApp:
    made: list[FreezePending] = []
    return scripted_app(views={"gpu-a": view()}, runners=scripted_planner(made))


def _snapshots_app(tmp: Path) -> OpsConsoleApp:
    return scripted_app(views={"gpu-a": view()}, workspace=snapshot_workspace(tmp)[0])


def _bench_app(tmp: Path) -> OpsConsoleApp:
    return bench_app(Workspace(tmp).ensure(), ScriptedBench())  # type: ignore[no-any-return]


def _runs_app(tmp: Path) -> OpsConsoleApp:
    return bench_app(seeds_workspace(tmp))  # type: ignore[no-any-return]


def _trio_app(tmp: Path) -> OpsConsoleApp:
    from tests.tui.roll_support import ScriptedRolls, trio_workspace

    views = {label: view(label) for label in ("gpu-a", "gpu-b", "gpu-c")}
    return scripted_app(("gpu-a", "gpu-b", "gpu-c"), views=views, workspace=trio_workspace(tmp / "ws"),
                        runners=Runners(roll=ScriptedRolls()), groups=("trio",))  # fmt: skip


async def _nothing(_pilot: Pilot[Any]) -> None:
    return None


async def _two_selected(pilot: Pilot[Any]) -> None:
    await _press("o", needle="accept")(pilot)
    await pilot.press("space", "space")
    await wait_until(pilot, lambda: "2 selected" in screen_text(pilot.app), "two selected")  # type: ignore[arg-type]


async def _roll_form(pilot: Pilot[Any]) -> None:
    await _two_selected(pilot)
    await _press("r", needle="Rolling restart · @trio")(pilot)


async def _roll_report(pilot: Pilot[Any]) -> None:
    await _roll_form(pilot)
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: "Restart these 2 hosts" in screen_text(pilot.app), "the confirmation")  # type: ignore[arg-type]
    await pilot.press("y")
    await wait_until(pilot, lambda: "rolling restart done" in screen_text(pilot.app), "the report")  # type: ignore[arg-type]


async def _snapshots(pilot: Pilot[Any]) -> None:
    pilot.app.action_snapshots()  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: "Production snapshots" in screen_text(pilot.app), "the view")  # type: ignore[arg-type]


async def _bench_live(pilot: Pilot[Any]) -> None:
    await _press("b", needle="concurrency")(pilot)
    pilot.app.screen.query_one("#bench-requests").value = "64"  # type: ignore[attr-defined]
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: "Compare these runs" in screen_text(pilot.app), "the sweep done")  # type: ignore[arg-type]


async def _side_by_side(pilot: Pilot[Any]) -> None:
    from textual.widgets import DataTable

    await _press("c", needle="Benchmark runs (")(pilot)
    pilot.app.screen.query_one(DataTable).focus()
    await pilot.press("down", "space", "up", "space", "enter")
    await wait_until(pilot, lambda: "Side by side" in screen_text(pilot.app), "the panes")  # type: ignore[arg-type]


# (screen, the app, how to open it, the keys its footer must show: its way out, then help)
SCREENS: list[tuple[str, Callable[[Path], OpsConsoleApp], Opener, tuple[str | tuple[str, ...], ...]]] = [
    ("dashboard", _plain, _nothing, ("q Quit", HELP)),
    ("dashboard, 8 GPUs", _eight_gpus, _nothing, ("q Quit", HELP)),
    ("overview", _three_hosts, _press("o", needle="accept"), ("q Quit", HELP)),
    ("help", _plain, _press("question_mark", needle="Keys — host gpu-a"), ("esc Close",)),
    ("editor", _plain, _push(_editor, "rules (version from"), ("esc Close", HELP)),
    ("confirmation", _plain, _push(_confirm, "Restart sglang.service"), ("n No", HELP)),
    ("apply progress", _plain, _push(_apply, "verified"), ("Abort / close", HELP)),
    ("freeze", _freeze_app, _press("F", needle="as a production snapshot"), ("esc Cancel", HELP)),
    ("snapshots", _snapshots_app, _snapshots, ("esc Close", HELP)),
    ("bench form", _bench_app, _press("b", needle="concurrency"), ("esc Back to the dashboard", HELP)),
    ("bench live", _bench_app, _bench_live, ("esc Back to the dashboard", HELP)),
    ("runs", _runs_app, _press("c", needle="Benchmark runs ("), ("esc Back", HELP)),
    ("side by side", _runs_app, _side_by_side, ("esc Back", HELP)),
    ("tune form", _plain, _push(_tune_form, "setups to run"), ("esc Close", HELP)),
    ("tune result", _plain, _push(_tune_live, "best setup per level"), ("Abort / close", HELP)),
    ("overview with a selection", _trio_app, _two_selected, ("q Quit", HELP)),
    ("rolling form", _trio_app, _roll_form, ("esc Cancel", HELP)),
    ("rolling report", _trio_app, _roll_report, ("Abort / close", HELP)),
]


@pytest.mark.parametrize(("name", "make", "open_it", "keys"), SCREENS, ids=[s[0] for s in SCREENS])
async def test_every_footer_at_80x24_names_its_way_out_and_help(
    name: str,
    make: Callable[[Path], OpsConsoleApp],
    open_it: Opener,
    keys: tuple[str | tuple[str, ...], ...],
    tmp_path: Path,
) -> None:
    app = make(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_it(pilot)
        row = await footer_drawn(pilot, *keys)
        if not app.screen.is_modal:  # a modal screen stops the app's keys, the palette's among them
            assert "^p Commands" in row, row


async def test_the_dashboard_footer_at_120_columns_has_every_key_tune_among_them() -> None:
    app = _plain(Path())
    async with app.run_test(size=(120, 40)) as pilot:
        row = await footer_drawn(pilot, "q Quit")
        for key in ("e Edit", "r Restart", "b Bench", "c Compare", "F Freeze", "T Tune", "/ Search", "o Overview"):
            assert key in row, row
        await pilot.resize_terminal(80, 24)  # narrowed: the keys of least use give way, never quit or help
        row = await footer_drawn(pilot, "q Quit", "? Help")
        assert "o Overview" not in row and "e Edit" in row, row


def test_fit_keys_leaves_out_the_last_declared_keys_first_never_those_kept() -> None:
    keys = [("edit", "e", "Edit"), ("restart", "r", "Restart"), ("search", "/", "Search"), ("quit", "q", "Quit")]
    keep = frozenset({"quit"})
    assert fit_keys(keys, 200, keep=keep, palette=("^p", "Commands")) == ([0, 1, 2, 3], False)
    # normal: 8+11+10+8 = 37 and the palette's 13; compact: one cell less a key
    assert fit_keys(keys, 50, keep=keep, palette=("^p", "Commands")) == ([0, 1, 2, 3], False)
    assert fit_keys(keys, 49, keep=keep, palette=("^p", "Commands")) == ([0, 1, 2, 3], True)
    assert fit_keys(keys, 45, keep=keep, palette=("^p", "Commands")) == ([0, 1, 3], True)
    assert fit_keys(keys, 10, keep=keep, palette=("^p", "Commands")) == ([3], True)  # too narrow even so: kept
