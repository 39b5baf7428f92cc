"""`b` with a shape window on the demo host: the real HostWatcher, the real bench queue against the stand-in, whose
/metrics carries SGLang's series (the token histograms only where the version records them). First the demo's 0.5.9
without --collect-tokens-histogram: refused with what to add and nothing sent. Then, with the flag, the console
watches the server's traffic for a few seconds while load from this test runs, says the shape line and the rates
before it sends anything, and runs the shaped levels (the observed rate × each rate scale) into logs/."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input

from console.bench.records import read_records
from console.cli.connect import build_app
from console.core.session import open_session
from console.workspace import Workspace
from tests.support.demo import Demo, running_demo
from tests.support.known_load import KnownLoad
from tests.tui.support import screen_text, wait_until
from tests.tune.simhost import install

SIZE = (160, 60)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        yield running


def _text(app: object) -> str:
    return screen_text(app)  # type: ignore[arg-type]


async def _start_shaped(pilot: object, app: object) -> None:
    await pilot.press("b")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: "shape window" in _text(app), "the form")  # type: ignore[arg-type]
    screen = app.screen  # type: ignore[attr-defined]
    for field, value in (("label", "shaped"), ("shape-window", "3s"), ("rate-scale", "1,2"), ("requests", "12"),
                         ("warmup", "0"), ("repeat", "1")):  # fmt: skip
        screen.query_one(f"#bench-{field}", Input).value = value
    await pilot.press("ctrl+s")  # type: ignore[attr-defined]


async def test_a_shape_window_is_refused_without_the_histograms_then_watched_said_and_run(demo: Demo) -> None:
    workspace = Workspace.resolve(demo.workspace)
    args = argparse.Namespace(workspace=str(demo.workspace), ssh_config=None, refresh=0.5, read_only=False,
                              targets=["demo"])  # fmt: skip
    app = build_app(args, ["demo"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.views["demo"].status is not None, "a refresh of the demo host", 30)
        await _start_shaped(pilot, app)
        await wait_until(pilot, lambda: "failed:" in _text(app), "the refusal", 60)
        text = _text(app)
        assert "only with --collect-tokens-histogram" in text and "nothing was sent" in text, text
        assert not list(workspace.logs.glob("bench-*.jsonl"))  # nothing was sent, nothing recorded
        await pilot.press("escape")

        flagged = "--enable-metrics --collect-tokens-histogram"
        await install(demo, lambda unit: unit.replace("--enable-metrics", flagged))
        async with open_session("demo", workspace) as other:
            url = await other.sglang_url()
        with KnownLoad(url, workers=4, prompts=(50, 300), outputs=(8, 8)) as load:  # short: a few s see some end
            await wait_until(pilot, lambda: len(load.done) > 0, "the load's first request", 60)
            await wait_until(pilot, lambda: app.views["demo"].status is not None, "the dashboard after the restart", 60)
            await _start_shaped(pilot, app)
            await wait_until(pilot, lambda: "watching the server's /metrics for 3 s" in _text(app), "the window", 60)
            await wait_until(pilot, lambda: "shape: last 3" in _text(app), "the shape line", 60)
        text = _text(app)
        assert "req/s" in text and "input p50" in text and "cache hit" in text
        assert "workload: drawn from that shape, Poisson arrivals at" in text
        await wait_until(pilot, lambda: "finished: 2 level(s)" in _text(app), "the shaped levels", 120)
    records = [r for path in sorted(workspace.logs.glob("bench-*.jsonl")) for r in read_records(path)]
    assert [r.label for r in records] == ["shaped", "shaped"]
    rates = [r.request_rate for r in records]
    assert rates[1] == pytest.approx(2 * rates[0], rel=0.01)  # the observed rate × 1 and × 2
    assert all(r.workload.get("name") == "shape" for r in records), records[0].workload
