"""The Tune screen's form (console/tui/screens/tune.py): what checking the space costs per keystroke, and how long
a key takes to show in its field and to reach the space on the right, for a small and a large space.

The space is checked with the version's rules for every point (console.core.tune.build_space): a few
milliseconds for a handful of points, a fifth of a second or more for 144. The form checks it in a thread once
typing pauses (SPACE_PAUSE_S): a burst of keys never waits for it. Measured with Textual's Pilot on a fixed
unit (no host): a burst of changes of a field one every 80 ms while a probe measures the longest the event loop
(which handles the keys) goes without running, then the same once typing paused and the space is checked, and
the time from the last key to the space shown. Usage:

    .venv/bin/python benchmarks/tune_form.py [--keys 15] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPACES = {
    "small (3 points)": {},
    "large (144 points)": {
        "algorithm": "EAGLE,EAGLE3",
        "steps": "1,2,3,4",
        "topk": "1,2,4",
        "draft_tokens": "auto,4,8",
        "spec_v2": "on,off",
    },
}


def space_cost(form: dict[str, str], seconds: float = 2.0) -> tuple[int, float]:
    from console.core.tune import build_space, form_defaults, request_from_form, unit_speculation
    from tests.tui.support import DEMO_UNIT

    unit = unit_speculation(DEMO_UNIT, "0.5.9")
    request = request_from_form(form_defaults(unit) | form, unit)
    start, runs = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        build_space(request.space, DEMO_UNIT, unit_name="sglang.service", version="0.5.9")
        runs += 1
    return len(request.space.settings()), (time.perf_counter() - start) / runs * 1000


async def typing(form: dict[str, str], keys: int, gap_s: float) -> tuple[float, float, float]:
    """A burst of `keys` changes of the duration field, one every `gap_s` (a fast typist), while a probe measures
    how long the event loop (which handles the keys) goes without running. Returns (the longest stall during the
    burst, the longest after it while the space is checked, ms from the last key to the space checked)."""
    from textual.widgets import Input

    from console.tui.screens.tune import TuneFormScreen
    from tests.tui.support import FixedSession, screen_text, scripted_app, view, wait_until

    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=(120, 40)) as pilot:
        screen = TuneFormScreen(FixedSession(), label="gpu-a")  # type: ignore[arg-type]
        app.push_screen(screen)
        await wait_until(pilot, lambda: "to run" in screen_text(app), "the form")  # type: ignore[arg-type]
        for key, value in form.items():
            screen.query_one(f"#tune-field-{key.replace('_', '-')}", Input).value = value
        await wait_until(pilot, lambda: screen.space_values == screen.values and screen.space is not None, "space", 30)
        field = screen.query_one("#tune-field-duration", Input)
        loop = asyncio.get_running_loop()
        stalls = [0.0]
        done = asyncio.Event()

        async def probe() -> None:
            last = loop.time()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = loop.time()
                stalls[-1] = max(stalls[-1], now - last)
                last = now

        task = asyncio.create_task(probe())
        value = ""
        for n in range(keys):
            value = str(61 + n)
            field.value = value  # Input.Changed: as a key typed into the field
            await asyncio.sleep(gap_s)
        during = stalls[-1]
        stalls.append(0.0)
        last_key = time.perf_counter()
        while screen.space_values.get("duration") != value:
            await asyncio.sleep(0.001)
        checked = (time.perf_counter() - last_key) * 1000
        done.set()
        await task
    return during * 1000, stalls[-1] * 1000, checked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=15, help="keys per burst, one every 80 ms")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    import console.tui.screens.tune as tune_screen

    figures: dict[str, Any] = {}
    pause = tune_screen.SPACE_PAUSE_S
    for mode, pause_s in (("at every key", 0.001), ("once typing pauses", pause)):
        tune_screen.SPACE_PAUSE_S = pause_s
        for name, form in SPACES.items():
            points, ms = space_cost(form)
            runs = [asyncio.run(typing(form, opts.keys, 0.08)) for _ in range(opts.runs)]
            figures[f"{name}, checked {mode}"] = {
                "points": points,
                "build_space_ms": round(ms, 1),
                "stall_while_typing_ms_median": round(statistics.median(r[0] for r in runs), 1),
                "stall_while_typing_ms_max": round(max(r[0] for r in runs), 1),
                "last_key_to_space_ms_median": round(statistics.median(r[2] for r in runs), 1),
            }
    tune_screen.SPACE_PAUSE_S = pause
    if opts.json:
        print(json.dumps(figures, indent=2))
        return 0
    for name, f in figures.items():
        print(
            f"{name:<45} build_space {f['build_space_ms']:>6.1f} ms   longest stall of the loop while typing: "
            f"median {f['stall_while_typing_ms_median']:>6.1f} ms, max {f['stall_while_typing_ms_max']:>6.1f} ms   "
            f"last key -> space shown {f['last_key_to_space_ms_median']:>6.1f} ms"
        )
    every = figures["large (144 points), checked at every key"]["stall_while_typing_ms_median"]
    paused = figures["large (144 points), checked once typing pauses"]["stall_while_typing_ms_median"]
    print(f"large space: keys wait {paused / every:.2f}x as long while typing when checked once typing pauses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
