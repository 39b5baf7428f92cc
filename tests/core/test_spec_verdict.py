"""Issue 22, item 1: every place that says whether spec v2 runs says what the server runs (pure, one per consumer).

The case is the issue's: SGLang 0.5.9 runs EAGLE with the overlap scheduler off (`SGLANG_ENABLE_SPEC_V2=False`:
spec v1), while what the console learnt from the unit says spec v2 (it was read with another version's rules
while the server restarted, or the unit changed on disk since the start). Before the fix the dashboard said
"spec v2 on", the proposed label ended in "v2", a record kept spec_v2 true and the runs table said
"v2 no-overlap"; check-args says "spec v2 worker: no; overlap scheduler: off"."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from console.bench.engine import LevelResult, ServerInfo, SweepConfig, SweepResult
from console.bench.events import Level
from console.bench.records import BenchRecord
from console.bench.runs import summarize
from console.bench.sidebyside import run_setup
from console.bench.workloads import WorkloadSpec
from console.core.bench import proposed_label
from console.core.bench.host import _keep_records
from console.core.snapshot import setup_text
from console.core.status import HostView, Monitor, UnitAsk, setup_label
from console.core.tune import SpaceRequest, build_space
from console.host.ssh import ConnectionState
from console.sglang.rules import check_launch
from console.sglang.specmode import SpecMode
from tests.tui.support import DEMO_UNIT, status

T0 = datetime(2026, 12, 1, 14, 0, tzinfo=UTC)
# What the 0.5.9 server resolved for the unit: EAGLE (NEXTN's alias), steps 2, draft 3, overlap off.
SERVER_ARGS = {
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 2,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 3,
    "disable_overlap_schedule": True,
}
CHECK_ARGS = "spec v2 worker: no; overlap scheduler: off"
# The unit as the console read it with the wrong rules: it would run spec v2 with the overlap on.
V2_UNIT = DEMO_UNIT.replace("SGLANG_ENABLE_SPEC_V2=False", "SGLANG_ENABLE_SPEC_V2=True")


def _check_args() -> str:
    argv = ["--model-path", "Qwen/Qwen3.5-122B-A10B-FP8", "--speculative-algorithm", "NEXTN", "--speculative-num-steps",
            "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"]  # fmt: skip
    mode = check_launch(argv, {"SGLANG_ENABLE_SPEC_V2": "False"}, "0.5.9").spec_mode
    assert mode is not None
    return mode.describe()


def _dashboard(asked: UnitAsk | None) -> HostView:
    s = status()
    s = s.model_copy(
        update={"sglang": s.sglang.model_copy(update={**SERVER_ARGS, "speculative_draft_model_path": None})}
    )
    return Monitor("demo").refreshed(s, asked=asked, connection=ConnectionState("local"), at=T0, clock=0.0)


def test_check_args_says_spec_v1_without_overlap() -> None:
    assert _check_args() == CHECK_ARGS


def test_the_dashboard_follows_the_server_not_a_wrong_reading_of_the_unit() -> None:
    view = _dashboard(UnitAsk({"speculative_num_steps": 2}, spec_v2=True, overlap=True))
    assert view.spec_mode == SpecMode(False, False, "server")
    assert view.spec_v2 is False and view.spec_mode.describe() == _check_args()
    assert setup_label(view) == "eagle s2 k1 d3"


def test_the_dashboard_falls_back_to_the_rules_while_the_server_does_not_answer() -> None:
    s = status()
    down = s.model_copy(update={"sglang": s.sglang.model_copy(update={"version": None, "error": "not answering"})})
    asked = UnitAsk({}, spec_v2=False, overlap=False)
    view = Monitor("demo").refreshed(down, asked=asked, connection=ConnectionState("local"), at=T0, clock=0.0)
    assert view.spec_mode == SpecMode(False, False, "rules")


def test_the_proposed_label_names_spec_v1_as_the_runs_table_does() -> None:
    view = _dashboard(UnitAsk({}, spec_v2=True, overlap=True))
    assert proposed_label(view, "demo") == "eagle s2 k1 d3"
    records = [_record(spec_v2=True)]  # a record whose kept verdict was the wrong one
    assert summarize(records).setup == proposed_label(view, "demo")


def _record(spec_v2: bool | None, args: dict[str, Any] | None = None, version: str = "0.5.9") -> BenchRecord:
    return BenchRecord(
        run_id="r@1", label="eagle s2 k1 d3", target="demo", started_at=T0, ended_at=T0 + timedelta(seconds=30),
        sglang_version=version, server_args=args or SERVER_ARGS, max_concurrency=1, spec_v2=spec_v2,
    )  # fmt: skip


class _Sweep:
    """A finished sweep of one level, as the engine hands it over (pure: nothing runs)."""

    def __init__(self, args: dict[str, Any]) -> None:
        level = LevelResult(Level(concurrency=1), 0, T0, T0, {"completed": 4}, {}, [], None, False)
        self.result = SweepResult(ServerInfo("0.5.9", "qwen", dict(args), True), [level], [], None)

    async def run(self) -> SweepResult:
        return self.result

    def result_so_far(self, stopped: str | None = None) -> SweepResult:
        return self.result


def test_a_record_keeps_the_servers_verdict_not_the_unit_on_disk() -> None:
    keep = _keep_records(
        _Sweep(SERVER_ARGS), SweepConfig(WorkloadSpec()), label="x", target="demo", client_location="console",
        workspace=None, unit_hash=None, unit_text=V2_UNIT,
    )  # fmt: skip
    [record] = asyncio.run(keep)
    assert record.spec_v2 is False and record.spec_mode == SpecMode(False, False, "server")
    # where the server did not report the overlap, the version's rules on the unit decide
    args = {k: v for k, v in SERVER_ARGS.items() if k != "disable_overlap_schedule"}
    keep = _keep_records(
        _Sweep(args), SweepConfig(WorkloadSpec()), label="x", target="demo", client_location="console",
        workspace=None, unit_hash=None, unit_text=V2_UNIT,
    )  # fmt: skip
    [record] = asyncio.run(keep)
    assert record.spec_v2 is True


def test_the_runs_table_and_side_by_side_decide_from_the_records_server_args() -> None:
    wrong = [_record(spec_v2=True)]
    assert summarize(wrong).setup == "eagle s2 k1 d3"
    setup = run_setup(wrong)
    assert setup.spec_v2 is False and setup.setup == "eagle s2 k1 d3"
    v2 = {**SERVER_ARGS, "disable_overlap_schedule": False}
    assert summarize([_record(spec_v2=False, args=v2)]).setup == "eagle s2 k1 d3 v2"
    synchronous = _record(spec_v2=None, args=SERVER_ARGS, version="0.5.14")
    assert summarize([synchronous]).setup == "eagle s2 k1 d3 v2 no-overlap"
    # an old record without the overlap: what it kept is all there is
    kept = {k: v for k, v in SERVER_ARGS.items() if k != "disable_overlap_schedule"}
    assert run_setup([_record(spec_v2=True, args=kept)]).spec_v2 is True


def test_tune_names_a_setup_spec_v2_only_where_the_verdict_says_so() -> None:
    request = SpaceRequest(algorithms=("EAGLE3",), steps=(2,), topks=(1,), spec_v2=(True, False))
    for version in ("0.5.9", "0.5.14"):
        space = build_space(request, DEMO_UNIT, unit_name="sglang.service", version=version)
        by_v2 = {c.setting.spec_v2: c for c in space.candidates}
        on, off = by_v2[True], by_v2[False]
        assert on.spec_mode is not None and on.spec_mode.overlap_path and on.name.endswith("+ spec v2")
        assert off.spec_mode is not None and not off.spec_mode.overlap_path and "spec v2" not in off.name
        # 0.5.14 has no spec v1: "off" is the V2 worker's synchronous path
        assert off.spec_v2 is (version == "0.5.14")


def test_freeze_says_which_worker_the_frozen_server_runs() -> None:
    assert setup_text(SERVER_ARGS, "0.5.9") == "EAGLE steps 2, topk 1, draft tokens 3, overlap off, spec v1"
    assert setup_text(SERVER_ARGS, "0.5.14") == "EAGLE steps 2, topk 1, draft tokens 3, overlap off, spec v2"
    assert setup_text(SERVER_ARGS) == "EAGLE steps 2, topk 1, draft tokens 3, overlap off"  # no version: unknown
