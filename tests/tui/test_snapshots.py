"""SVG snapshots of the console's screens at 80×24, 120×40 and 200×60 (pytest-textual-snapshot).

Clock, host names and figures are fixed: the hosts are scripted HostViews built by the core's own Monitor
from fixed refreshes, and the app's clock is frozen (tests/tui/support.py). `pytest --snapshot-update`
rewrites them after an intended change; look at the report before committing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.pilot import Pilot

from console.host.ssh import ConnectionState
from tests.tui.support import NOW, screen_text, scripted_app, startup_journal, view, wait_until, without_cursor


def _settled(*needles: str) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        await wait_until(pilot, lambda: all(n in screen_text(pilot.app) for n in needles), f"{needles} on screen")  # type: ignore[arg-type]

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
def test_dashboard(snap_compare: Any, size: tuple[int, int]) -> None:
    app = scripted_app(views={"gpu-a": view()}, journal={"gpu-a": startup_journal()})
    assert snap_compare(app, terminal_size=size, run_before=_settled("server is fired", "TTFT"))


def test_dashboard_eight_gpus_one_throttled(snap_compare: Any) -> None:
    shown = view(gpus=8)
    status = shown.status
    assert status is not None
    hot = status.gpus[5].model_copy(update={"temperature_gpu": 88.0, "throttle_reasons": ["sw_thermal_slowdown"]})
    gpus = [*status.gpus[:5], hot, *status.gpus[6:]]
    shown = replace(shown, status=status.model_copy(update={"gpus": gpus}))
    app = scripted_app(views={"gpu-a": shown}, journal={"gpu-a": startup_journal()})
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settled("thermal", "server is fired"))


def test_overview_of_three_hosts(snap_compare: Any) -> None:
    views = {
        "gpu-a": view("gpu-a"),
        "gpu-b": replace(view("gpu-b", active="failed", healthy=False)),
        "gpu-c": replace(view("gpu-c"), connection=ConnectionState("reconnecting", 2, "Connection lost")),
    }
    app = scripted_app(("gpu-a", "gpu-b", "gpu-c"), views=views)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("o")
        await wait_until(
            pilot, lambda: "GPU power W" in screen_text(app) and "reconnecting" in screen_text(app), "overview"
        )

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_help(snap_compare: Any) -> None:
    app = scripted_app(views={"gpu-a": view()}, read_only=True)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys — host gpu-a" in screen_text(app), "help")

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_reconnecting(snap_compare: Any) -> None:
    shown = replace(view(), connection=ConnectionState("reconnecting", 4, "Connection lost"))
    app = scripted_app(views={"gpu-a": shown}, clock=lambda: NOW + timedelta(seconds=20))
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settled("reconnecting (attempt 4)", "STALE"))


def test_service_failed_and_server_unhealthy(snap_compare: Any) -> None:
    app = scripted_app(views={"gpu-a": view(active="failed", healthy=False)})
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settled("failed/failed", "unhealthy"))


def test_no_gpu_tool(snap_compare: Any) -> None:
    app = scripted_app(views={"gpu-a": view(gpu_error="nvidia-smi: command not found (exit 127)")})
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settled("command not found"))


def _reported(editor: Any) -> bool:
    """The editor's report is the one for what its fields hold now (it follows each field's Changed message)."""
    form, preview = editor.form, editor.preview
    return form is not None and preview is not None and preview.edits == form.preview(editor.values()).edits


def _editor_app(values: dict[str, str] | None = None) -> tuple[Any, Any]:
    from console.tui.screens.edit import EditScreen
    from tests.tui.support import FixedSession

    app = scripted_app(views={"gpu-a": view()})
    editor = EditScreen(FixedSession(), label="gpu-a")  # type: ignore[arg-type]

    async def run_before(pilot: Pilot[Any]) -> None:
        app.push_screen(editor)
        await wait_until(
            pilot,
            lambda: editor.form is not None and "backup of" in str(editor.query_one("#preset")._options),
            "the editor",
        )  # type: ignore[attr-defined]
        for dest, text in (values or {}).items():
            editor.query_one(f"#field-{dest.replace('_', '-').replace(':', '-')}").value = text  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: _reported(editor), "the report on the values just typed")
        await without_cursor(pilot)
        await pilot.pause()

    return app, run_before


def test_editor_with_a_valid_edit_and_its_silent_changes(snap_compare: Any) -> None:
    app, run_before = _editor_app({"speculative_num_steps": "3"})
    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_editor_with_the_hosts_restart_cost_and_what_would_shorten_it(snap_compare: Any, tmp_path: Path) -> None:
    """SGLang 0.5.23, four restarts of about 10 min kept in the workspace, loading weights most of each: the report
    says so and offers what SGLang accepts on this unit against it (presharded; not the overlap nor the weight cache,
    which refuse speculative decoding); the options' group is in view (scrolled to)."""
    from datetime import UTC, datetime, timedelta

    from console.core.apply.restarts import REST, PhaseTime, RestartRecord, append_restart
    from console.tui.screens.edit import EditScreen
    from console.workspace import Workspace
    from tests.tui.support import DEMO_UNIT, FixedSession

    workspace = Workspace(tmp_path).ensure()
    at = datetime(2026, 12, 1, tzinfo=UTC)
    for i, total in enumerate((598.0, 612.0, 640.0, 605.0)):
        phases = (PhaseTime("load_weights", total * 0.62), PhaseTime("cuda_graph", total * 0.2),
                  PhaseTime(REST, total * 0.18))  # fmt: skip
        append_restart(workspace.logs, RestartRecord("gpu-a", "sglang.service", at + timedelta(hours=i), total, phases,
                                                     "server", "0.5.23", "EAGLE3 steps 2 topk 1", "apply"))  # fmt: skip
    unit = DEMO_UNIT.replace('Environment="SGLANG_ENABLE_SPEC_V2=False"\n', "")
    app = scripted_app(views={"gpu-a": view()})
    editor = EditScreen(FixedSession(unit, version="0.5.23", workspace=workspace), label="gpu-a")  # type: ignore[arg-type]

    async def run_before(pilot: Pilot[Any]) -> None:
        app.push_screen(editor)
        await wait_until(pilot, lambda: "shorter with" in screen_text(app), "the report with the cost")
        field = editor.query_one("#field-load-format")
        field.focus()
        await wait_until(pilot, lambda: "presharded: the first start" in screen_text(app), "the options in view")
        # where the focus scrolled the form depended on how far its layout had got (a busy machine scrolled it to its
        # end): the group's first field at the top, the same on every machine
        editor.query_one("#editor-form", VerticalScroll).scroll_to_widget(field, animate=False, top=True)
        shown = lambda: screen_text(app)  # noqa: E731
        await wait_until(pilot, lambda: "load format" in shown() and "weight cache" in shown(), "the group, top")
        await without_cursor(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_editor_refusing_spec_v2_with_a_tree_on_0_5_9(snap_compare: Any) -> None:
    app, run_before = _editor_app({"speculative_eagle_topk": "2", "speculative_num_draft_tokens": "4"})

    async def refuse(pilot: Pilot[Any]) -> None:
        await run_before(pilot)
        pilot.app.screen.query_one("#field-env-SGLANG-ENABLE-SPEC-V2").value = True  # type: ignore[attr-defined]
        await wait_until(pilot, lambda: "Apply is blocked" in screen_text(app), "the refusal")
        await without_cursor(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=refuse)


def test_confirmation_with_the_unit_diff(snap_compare: Any) -> None:
    """As the editor asks it: the diff, then what a restart of this host costs (its recent restarts)."""
    from datetime import UTC, datetime, timedelta

    from rich.console import Group
    from rich.text import Text

    from console.core.apply import RestartRecord, restart_cost
    from console.core.apply.restarts import REST, PhaseTime
    from console.tui.screens.confirm import ConfirmScreen, cost_line, diff_text

    app = scripted_app(views={"gpu-a": view()})
    diff = (
        "--- sglang.service (now)\n+++ sglang.service (new)\n@@ -9,7 +9,7 @@\n"
        "     --speculative-draft-model-path /models/qwen-eagle3 \\\n"
        "-    --speculative-num-steps 2 \\\n+    --speculative-num-steps 3 \\\n"
        "     --speculative-eagle-topk 1 \\\n"
    )
    at = datetime(2026, 12, 1, tzinfo=UTC)
    restarts = [
        RestartRecord("gpu-a", "sglang.service", at + timedelta(hours=i), total,
                      (PhaseTime("load_weights", total * 0.62), PhaseTime(REST, total * 0.38)), "server", "0.5.23",
                      "EAGLE3 steps 2 topk 1 + spec v2", "apply")
        for i, total in enumerate((598.0, 612.0, 640.0, 605.0))
    ]  # fmt: skip
    body = Group(diff_text(diff), Text(""), cost_line(restart_cost(restarts, "gpu-a"), "gpu-a"))

    async def run_before(pilot: Pilot[Any]) -> None:
        app.push_screen(ConfirmScreen("Write this unit to gpu-a and restart sglang.service?", body, danger=True))
        await wait_until(pilot, lambda: "Write this unit" in screen_text(app), "the question")

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


@pytest.mark.parametrize("outcome", ["verified", "rolled_back"])
def test_progress_to_its_outcome(snap_compare: Any, outcome: str) -> None:
    from console.tui.screens.progress import apply_progress
    from tests.tui.support import ScriptedPending

    app = scripted_app(views={"gpu-a": view()})

    async def run_before(pilot: Pilot[Any]) -> None:
        screen = apply_progress(ScriptedPending(outcome), title="Applying to gpu-a (sglang.service)", clock=lambda: NOW)  # type: ignore[arg-type]
        app.push_screen(screen)
        shown = "✔ verified" if outcome == "verified" else "✖ healthy on the previous unit"
        await wait_until(pilot, lambda: screen.result is not None and shown in screen_text(app), "the outcome shown")

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


# --- 80×24: every screen that had a snapshot only at 120×40 (the footer keeps quit/close and help, the dashboard
# its latency lines) ----------------------------------------------------------------------------------------

SMALL = (80, 24)


def test_dashboard_eight_gpus_at_80x24(snap_compare: Any) -> None:
    app = scripted_app(views={"gpu-a": view(gpus=8)}, journal={"gpu-a": startup_journal()})
    assert snap_compare(app, terminal_size=SMALL, run_before=_settled("ITL ms", "server is fired", "q Quit"))


def test_overview_of_three_hosts_at_80x24(snap_compare: Any) -> None:
    views = {
        "gpu-a": view("gpu-a"),
        "gpu-b": view("gpu-b", active="failed", healthy=False),
        "gpu-c": replace(view("gpu-c"), connection=ConnectionState("reconnecting", 2, "Connection lost")),
    }
    app = scripted_app(("gpu-a", "gpu-b", "gpu-c"), views=views)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("o")
        await wait_until(pilot, lambda: "reconnecting" in screen_text(app) and "q Quit" in screen_text(app), "it")

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_help_at_80x24(snap_compare: Any) -> None:
    app = scripted_app(views={"gpu-a": view()}, read_only=True)

    async def run_before(pilot: Pilot[Any]) -> None:
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: "Keys — host gpu-a" in screen_text(app) and "esc" in screen_text(app), "help")

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_editor_at_80x24(snap_compare: Any) -> None:
    app, run_before = _editor_app({"speculative_num_steps": "3"})
    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_confirmation_at_80x24(snap_compare: Any) -> None:
    from console.tui.screens.confirm import ConfirmScreen, diff_text

    app = scripted_app(views={"gpu-a": view()})
    diff = (
        "--- sglang.service (now)\n+++ sglang.service (new)\n"
        "-    --speculative-num-steps 2 \\\n+    --speculative-num-steps 3 \\\n"
    )
    question = "Write this unit to gpu-a and restart sglang.service?"

    async def run_before(pilot: Pilot[Any]) -> None:
        app.push_screen(ConfirmScreen(question, diff_text(diff), danger=True))
        await wait_until(pilot, lambda: "Write this unit" in screen_text(app) and "n No" in screen_text(app), "it")

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_progress_verified_at_80x24(snap_compare: Any) -> None:
    from console.tui.screens.progress import apply_progress
    from tests.tui.support import ScriptedPending

    app = scripted_app(views={"gpu-a": view()})

    async def run_before(pilot: Pilot[Any]) -> None:
        title = "Applying to gpu-a (sglang.service)"
        screen = apply_progress(ScriptedPending("verified"), title=title, clock=lambda: NOW)  # type: ignore[arg-type]
        app.push_screen(screen)
        await wait_until(pilot, lambda: screen.result is not None, "the outcome")
        await wait_until(pilot, lambda: "✔ verified" in screen_text(app) and "Help" in screen_text(app), "drawn")

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)
