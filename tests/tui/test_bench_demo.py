"""`b` and `c` end to end on the demo host: the real HostWatcher, the real bench_host against the simulator (the
seeds' Kimi K2.5 profile, sped up as in tests/tune/simhost.py), the records in the workspace's logs/.

Two setups are benchmarked from the console: no speculation, then (applied through the core's apply between them,
as someone at another console would) EAGLE3 topk 1 with spec v2. Compared side by side, the crossover lies where
the simulator's profile puts it: no speculation ahead at C = 1, EAGLE3 topk 1 + v2 ahead at C = 48 (the tune finds
the same on this profile: tests/tune/test_tune_demo.py)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input

from console.cli.connect import build_app
from console.core.apply import plan_apply
from console.core.change import parse_edits
from console.core.session import open_session
from console.workspace import Workspace
from tests.support.demo import Demo, running_demo
from tests.tui.support import screen_text, wait_until
from tests.tune.simhost import KIMI, install, seed_unit

SIZE = (160, 70)  # the panes and the plots without scrolling
EAGLE3_TOPK1_V2 = [
    "speculative-algorithm=EAGLE3",
    "speculative-num-steps=2",
    "speculative-eagle-topk=1",
    "speculative-num-draft-tokens=3",
    "speculative-draft-model-path=sim/kimi-k2.5-eagle3",
]


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        yield running


def _args(workspace: Path) -> argparse.Namespace:
    return argparse.Namespace(workspace=str(workspace), ssh_config=None, refresh=0.5, read_only=False, targets=["demo"])


def _text(app: object) -> str:
    return screen_text(app)  # type: ignore[arg-type]


async def _benchmark(pilot: object, app: object, label: str) -> None:
    """b, the form with the label it proposes (the running setup), the seeds' workload at C = 1 and 48, start, wait."""
    await pilot.press("b")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: "concurrency" in _text(app), "the form")  # type: ignore[arg-type]
    screen = app.screen  # type: ignore[attr-defined]
    # the proposal follows the dashboard's view of the host: the setup's name once the host's server info is in
    await wait_until(pilot, lambda: screen.query_one("#bench-label", Input).value == label, f"the label {label!r}")  # type: ignore[arg-type]
    for field, value in (("concurrency", "1,48"), ("duration", "5"), ("input-len", "1024"), ("output-len", "1024"),
                         ("warmup", "1")):  # fmt: skip
        screen.query_one(f"#bench-{field}", Input).value = value
    await pilot.press("ctrl+s")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: "finished: 2 level(s)" in _text(app), f"the sweep of {label}", 120)  # type: ignore[arg-type]
    assert "load generator: here (on the host)" in _text(app)
    await pilot.press("escape")  # type: ignore[attr-defined]


@pytest.mark.long(41)  # its measured seconds: started first (tests/tiers.py)
async def test_two_setups_benchmarked_from_the_console_cross_where_the_profile_puts_it(demo: Demo) -> None:
    await install(demo, lambda text: seed_unit(text, profile=KIMI, version="0.5.9"))  # no speculation
    workspace = Workspace.resolve(demo.workspace)
    app = build_app(_args(demo.workspace), ["demo"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "moonshotai/Kimi-K2.5" in _text(app), "a refresh of the Kimi host", 30)
        await _benchmark(pilot, app, "no spec")

        async with open_session("demo", workspace) as other:  # the second setup, applied by the core's apply
            edits = parse_edits(EAGLE3_TOPK1_V2, envs=["SGLANG_ENABLE_SPEC_V2=True"])
            result = await (await plan_apply(other, edits, timeout_s=120)).execute()
            assert result.ok, result.error
        await wait_until(pilot, lambda: "EAGLE3" in _text(app), "the dashboard to show the new setup", 30)
        await wait_until(pilot, lambda: app.views["demo"].spec_v2 is True, "the unit's spec v2 read", 30)
        await _benchmark(pilot, app, "eagle3 s2 k1 d3 v2")

        await pilot.press("c")
        await wait_until(pilot, lambda: "Benchmark runs (" in _text(app), "the runs table")
        table = app.screen.query_one(DataTable)
        assert table.row_count == 2
        text = _text(app)  # the setups as the records say (spec v2 from the unit, by the version's rules)
        assert " eagle3 s2 k1 d3 v2 " in text.split("eagle3 s2 k1 d3 v2", 1)[1] and " no spec " in text
        table.focus()
        await pilot.press("down", "space", "up", "space", "enter")  # the older (no spec) first: the baseline
        await wait_until(pilot, lambda: "Side by side: 2 runs" in _text(app), "the panes")
        text = _text(app)
        # The profile puts the crossing near C = 30 (docs/demo.md); levels 48x apart say only that it is between them
        # (a line between them put it at C ≈ 14).
        crossed = "output tok/s: no spec ahead below, eagle3 s2 k1 d3 v2 ahead above: they cross between C = 1 and 48"
        assert crossed in text, text
        assert "A no spec  (baseline)" in text and "B eagle3 s2 k1 d3 v2" in text
        assert "  topk 1" in text and "spec v2 on" in text and "SGLang 0.5.9" in text
        await pilot.press("x")
        await wait_until(pilot, lambda: "write NAME.md" in _text(app), "the export field")
        app.screen.query_one("#runs-export-path", Input).value = "kimi-spec"
        await pilot.press("enter")
        await wait_until(pilot, lambda: "exported" in _text(app), "the export")
    data = json.loads((workspace.logs / "kimi-spec.json").read_text())
    (crossing,) = [c for c in data["crossovers"] if c["metric"] == "output_throughput"]
    assert (crossing["below"], crossing["above"], crossing["between"]) == (
        "no spec",
        "eagle3 s2 k1 d3 v2",
        ["C=1", "C=48"],
    )
    by_level = {lv["level"]: lv["runs"] for lv in data["comparison"]["levels"]}
    assert by_level["C=1"][1]["metrics"]["output_throughput"]["verdict"] == "worse"
    assert by_level["C=48"][1]["metrics"]["output_throughput"]["verdict"] == "better"
    assert "| C=48 |" in (workspace.logs / "kimi-spec.md").read_text()
