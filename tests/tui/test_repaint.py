"""The dashboard repaints only what changed (console.tui.widgets.lines), and what reaches the terminal is still, after
every refresh, what a console started afresh on the same view shows: nothing stale is left on screen.

The terminal is modelled cell by cell from the frames the app sends it (each CompositorUpdate: a move of the cursor,
then cells), so a region the panels fail to mark as changed shows here as an old cell."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

from rich.cells import cell_len
from rich.segment import ControlType, Segment
from rich.style import Style
from textual._compositor import CompositorUpdate

from console.core.status import HostView
from console.tui.app import OpsConsoleApp
from console.tui.widgets.panels import GpuPanel, ServerPanel
from tests.tui.support import NOW, screen_text, scripted_app, view, wait_until

SIZE = (120, 40)
Cells = list[list[tuple[str, Style | None]]]


def blank() -> Cells:
    return [[(" ", None)] * SIZE[0] for _ in range(SIZE[1])]


def paint(cells: Cells, segments: list[Segment]) -> None:
    """Segments as a terminal takes them: a cursor move, then characters from there on."""
    x = y = 0
    for segment in segments:
        if segment.control:
            for code in segment.control:
                if code[0] == ControlType.CURSOR_MOVE_TO:
                    x, y = cast(tuple[ControlType, int, int], code)[1:]
            continue
        if segment.text == "\n":  # between lines; each line's cells start with a move
            continue
        for char in segment.text:
            cells[y][x] = (char, segment.style)
            for right in range(1, cell_len(char)):
                cells[y][x + right] = ("", segment.style)
            x += cell_len(char)


class Terminal:
    """The cells a terminal would show, from every frame the app hands to its driver (headless or not)."""

    def __init__(self, app: OpsConsoleApp) -> None:
        self.app = app
        self.cells = blank()
        display = app._display

        def recorded(screen: Any, renderable: Any) -> None:
            display(screen, renderable)
            if isinstance(renderable, CompositorUpdate):
                console = app.console
                paint(self.cells, list(console.render(renderable, console.options)))  # type: ignore[arg-type]

        app._display = recorded  # type: ignore[method-assign]


def full_render(app: OpsConsoleApp) -> Cells:
    """The whole screen as the app composes it now."""
    cells = blank()
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        paint(cells, [Segment("", None, [(ControlType.CURSOR_MOVE_TO, 0, y)]), *strip])
    return cells


def differences(shown: Cells, truth: Cells) -> str:
    rows = [y for y in range(SIZE[1]) if shown[y] != truth[y]]
    return "\n".join(
        f"row {y}: shown {''.join(c for c, _ in shown[y])!r}\n        fresh {''.join(c for c, _ in truth[y])!r}"
        for y in rows[:4]
    )


async def fresh_screen(shown: HostView, now: datetime) -> Cells:
    """What a console started on `shown` at `now` shows once it has laid itself out."""
    app = scripted_app(views={"gpu-a": shown}, clock=lambda: now)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(
            pilot,
            lambda: (
                app.query_one(ServerPanel).size.height > 0
                and app.query_one(GpuPanel).size.height > 0
                and "q Quit" in screen_text(app).splitlines()[-1]
            ),
            "the panels laid out and the footer drawn",
        )
        last: list[Cells] = [full_render(app)]

        def settled() -> bool:  # the same screen at two looks in a row: the panels were fitted to their sizes
            now_shown = full_render(app)
            same = now_shown == last[0]
            last[0] = now_shown
            return same

        await wait_until(pilot, settled, "the fresh console to settle")
        return last[0]


async def test_after_every_refresh_the_terminal_shows_what_a_fresh_console_shows() -> None:
    later = NOW + timedelta(seconds=42)
    # (what changes, the view the host sends or None for none, the clock then)
    steps: list[tuple[str, HostView | None, datetime]] = [
        ("first view", view(samples=8, gpus=8), NOW),
        ("history grows, figures move", view(samples=9, gpus=8), NOW),
        ("a throttle on every GPU", view(samples=10, gpus=8, throttle=("hw_slowdown",)), NOW),
        ("half the GPUs", view(samples=11, gpus=4), NOW),
        ("the server unhealthy", view(samples=12, gpus=4, healthy=False), NOW),
        ("no refresh for 42 s: stale", None, later),
        ("the GPU tool gone", view(samples=13, gpus=4, gpu_error="nvidia-smi: not found", at=later), later),
        ("back to 8 GPUs", view(samples=14, gpus=8, at=later), later),
    ]
    truths = []
    latest = steps[0][1]
    for _what, sent, now in steps:
        latest = sent or latest
        assert latest is not None
        truths.append(await fresh_screen(latest, now))

    clock = {"now": NOW}
    app = scripted_app(clock=lambda: clock["now"])
    terminal = Terminal(app)
    async with app.run_test(size=SIZE) as pilot:
        source: Callable[[HostView], None] | None = None
        await wait_until(pilot, lambda: "gpu-a" in app.scripted, "the host's source")  # type: ignore[attr-defined]
        source = app.scripted["gpu-a"].on_view  # type: ignore[attr-defined]
        for (what, sent, now), truth in zip(steps, truths, strict=True):
            clock["now"] = now
            if sent is not None:
                source(sent)
            try:
                await wait_until(pilot, lambda t=truth: terminal.cells == t, what, timeout=15)  # type: ignore[misc]
            except AssertionError:
                raise AssertionError(f"{what}: the terminal differs\n{differences(terminal.cells, truth)}") from None
