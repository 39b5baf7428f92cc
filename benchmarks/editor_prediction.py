"""The editor's prediction (console/tui/screens/edit.py): what it costs and where it runs.

The editor fits the host's prediction once as it opens (console.core.tune.foresight, in a worker: the workspace's
records read, the acceptance and the round cost fitted) and asks it again, at once, whenever the setup its form
resolves to changes. Measured on the scripted Kimi host of the console's tests (8 records the SGLang stand-in's engine
made: the running setup and no speculation at C=1 and 48, twice each; tests/tui/prediction_support.py), and on the
same records 125 times over (1,000 records, 2.4 MB of logs/: a month of benchmarks):

- the fit (8 and 1,000 records), and one forecast: of a setup whose draft the fit has seen, and of one whose draft it
  has not (the draft model path cleared: that chain is fitted then);
- the longest the editor's event loop (which handles the keys) goes without running while the form changes every
  80 ms, from the moment the editor opens: no prediction (the control), the 1,000 records fitted;
- the same once it is open (8 records), a burst that clears the draft model path once: no prediction, the forecast at
  once (as the editor does it), the forecast in a thread.

    .venv/bin/python benchmarks/editor_prediction.py [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GAP_S = 0.08  # between two changes of the form: a fast typist


def month_of_records(root: Path, times: int = 125) -> Path:
    """A workspace whose logs/ hold the Kimi host's 8 records `times` over (each copy its own run, a minute older)."""
    from datetime import timedelta

    from console.bench.records import append_records
    from console.workspace import Workspace
    from tests.tui.prediction_support import kimi_records

    workspace = Workspace(root).ensure()
    for i in range(times):
        copies = [r.model_copy(update={"run_id": f"{r.run_id}-{i}", "started_at": r.started_at - timedelta(minutes=i)})
                  for r in kimi_records()]  # fmt: skip
        append_records(workspace.logs, copies)
    return workspace.root


def costs(runs: int, month: Path) -> dict[str, float]:
    """Median ms of the fit (8 records, 1,000), of a forecast of a fitted draft and of one of a draft not fitted."""
    from console.core.tune import foresight
    from console.sglang.setup import SpecSetup
    from console.workspace import Workspace
    from tests.tui.prediction_support import DRAFT, kimi_session, kimi_workspace

    fit, cached, unseen, big = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        session = kimi_session(kimi_workspace(Path(tmp)))
        for _ in range(runs):
            start = time.perf_counter()
            asyncio.run(foresight(kimi_session(Workspace(month))))  # type: ignore[arg-type]
            big.append(time.perf_counter() - start)
            start = time.perf_counter()
            found = asyncio.run(foresight(session))  # type: ignore[arg-type]
            fit.append(time.perf_counter() - start)
            assert found.predictor is not None
            for steps in (1, 3, 1, 3):
                start = time.perf_counter()
                found.predictor.forecast(SpecSetup("EAGLE3", steps, 1, steps + 1, True, DRAFT), True, found.levels)
                cached.append(time.perf_counter() - start)
            start = time.perf_counter()
            found.predictor.forecast(SpecSetup("EAGLE3", 2, 1, 3, True, None), True, found.levels)
            unseen.append(time.perf_counter() - start)
    return {
        "fit_ms": statistics.median(fit) * 1000,
        "fit_1000_records_ms": statistics.median(big) * 1000,
        "forecast_fitted_draft_ms": statistics.median(cached) * 1000,
        "forecast_new_draft_ms": statistics.median(unseen) * 1000,
    }


def threaded_editor() -> type:
    """The editor with its forecast in a thread worker (the alternative measured beside it)."""
    from textual import work

    from console.tui.screens.edit import EditScreen

    class ThreadedEditScreen(EditScreen):
        def _ask_forecast(self, preview: Any, *, again: bool = False) -> None:
            if self.foresight is None or self.foresight.predictor is None:
                return
            plan = preview.plan
            if plan is None or not preview.ok:
                self._forecast_of, self.forecast = None, None
                return
            asked = (plan.report.resolved, plan.report.spec_mode)
            if asked != self._forecast_of or again:
                self._forecast_of = asked
                self._in_thread(self.foresight, asked)

        @work(thread=True, exclusive=True, group="bench-forecast")
        def _in_thread(self, found: Any, asked: Any) -> None:
            forecast = found.of(*asked)
            self.app.call_from_thread(self._done, asked, forecast)

        def _done(self, asked: Any, forecast: Any) -> None:
            if asked == self._forecast_of:
                self.forecast = forecast
                self._show_report()

    return ThreadedEditScreen


async def stall(kind: type, workspace: Path | None, *, at_open: bool, clear_draft: bool, keys: int) -> float:
    """The longest stall of the editor's event loop (ms) over a burst of `keys` changes of the steps field, one every
    GAP_S: from the moment the editor opens (`at_open`), else once its prediction is there; the draft model path
    cleared halfway when `clear_draft`."""
    from console.workspace import Workspace
    from tests.tui.prediction_support import kimi_session
    from tests.tui.support import scripted_app, view, wait_until

    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=(120, 40)) as pilot:
        editor = kind(kimi_session(Workspace(workspace) if workspace else None), label="gpu-a")
        predicts = workspace is not None

        def ready() -> bool:
            return editor.preview is not None and (not predicts or editor.forecast is not None)

        if not at_open:
            app.push_screen(editor)
            await wait_until(pilot, ready, "the editor and its prediction", 120)
        loop = asyncio.get_running_loop()
        worst = [0.0]
        done = asyncio.Event()

        async def probe() -> None:
            last = loop.time()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = loop.time()
                worst[0] = max(worst[0], now - last)
                last = now

        task = asyncio.create_task(probe())
        if at_open:
            app.push_screen(editor)
            await wait_until(pilot, lambda: editor.preview is not None, "the editor", 120)
        steps = editor.query_one("#field-speculative-num-steps")
        for n in range(keys):
            if clear_draft and n == keys // 2:
                editor.query_one("#field-speculative-draft-model-path").value = ""
            else:
                steps.value = str(1 + n % 3)
            await asyncio.sleep(GAP_S)
        last: Callable[[], bool] = ready
        if clear_draft and predicts:
            last = lambda: editor.forecast is not None and editor.forecast.setup.draft_model_path is None  # noqa: E731
        await wait_until(pilot, last, "the last forecast", 120)
        done.set()
        await task
    return worst[0] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keys", type=int, default=20, help="changes per burst, one every 80 ms")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    from console.tui.screens.edit import EditScreen
    from tests.tui.prediction_support import kimi_workspace

    threaded = threaded_editor()
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as big:
        workspace, month = kimi_workspace(Path(tmp)).root, month_of_records(Path(big))
        figures: dict[str, Any] = {k: round(v, 2) for k, v in costs(opts.runs, month).items()}
        cases: dict[str, tuple[type, Path | None, bool, bool]] = {
            # name: (editor, workspace, at open, clear the draft)
            "open, no prediction": (EditScreen, None, True, False),
            "open, 1,000 records fitted": (EditScreen, month, True, False),
            "typing, no prediction": (EditScreen, None, False, True),
            "typing, forecast at once": (EditScreen, workspace, False, True),
            "typing, forecast in a thread": (threaded, workspace, False, True),
        }
        for name, (kind, where, at_open, clear) in cases.items():
            runs = [asyncio.run(stall(kind, where, at_open=at_open, clear_draft=clear, keys=opts.keys))
                    for _ in range(opts.runs)]  # fmt: skip
            figures[name] = {"median_ms": round(statistics.median(runs), 1), "max_ms": round(max(runs), 1)}
    if opts.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"the fit (records read, fitted), 8 records:          {figures['fit_ms']:8.1f} ms (median)")
    print(f"the fit, 1,000 records:                             {figures['fit_1000_records_ms']:8.1f} ms")
    print(f"a forecast of a setup whose draft is fitted:        {figures['forecast_fitted_draft_ms']:8.2f} ms")
    print(f"a forecast of a setup whose draft is not fitted:    {figures['forecast_new_draft_ms']:8.1f} ms")
    print("the longest stall of the editor's event loop while the form changes every 80 ms:")
    for name in cases:
        f = figures[name]
        print(f"  {name:<30} median {f['median_ms']:7.1f} ms   max {f['max_ms']:7.1f} ms")
    for a, b in (("open, 1,000 records fitted", "open, no prediction"),
                 ("typing, forecast at once", "typing, no prediction"),
                 ("typing, forecast in a thread", "typing, forecast at once")):  # fmt: skip
        ratio = figures[a]["median_ms"] / max(figures[b]["median_ms"], 0.1)
        print(f"{a} / {b}: {ratio:.2f}x (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
