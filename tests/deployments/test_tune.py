"""`tune DEPLOYMENT` on the demo's deployments (each member a supervised stand-in unit with its own host profile; the
real smg in front of the PD pair), the tune run in-process with every event kept:

- two-node: every trial that changes the setup is the deployment's change: both ranks' units written, rank 0 stopped,
  both down, both started together (their starts in the journals, the same count on each rank, side by side),
  verified at rank 0; benchmarked through rank 0's server; both original units back at the end, byte for byte, and
  the deployment up. Ctrl-C in a trial's start: the change rolls both ranks back, the originals go back.
- pd: every trial is rolled through smg one member at a time (prefill first: out of smg, drained, stopped until the
  decode dropped it, its apply, back in; then the decode), benchmarked through smg (its own request counter moves),
  each level's record keeping the per-side figures; both original units back, the deployment up.
"""

from __future__ import annotations

import asyncio
import tomllib
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from console.bench.records import BenchRecord, read_records
from console.core.deployment import Deployment, load_deployment
from console.core.roll import StepEvent
from console.core.session import Session
from console.core.status import open_members, read_deployment
from console.core.tune import (
    SpaceRequest,
    TrialApplied,
    TrialApplyEvent,
    TrialStarted,
    TuneEvent,
    TuneRequest,
    TuneResult,
    plan_deployment_tune,
    reference_member,
    space_from_axes,
    unit_speculation,
)
from console.sglang.setup import AXES
from console.workspace import Workspace
from tests.deployments.demo_support import running_deployment_demo

pytestmark = pytest.mark.system

SHORT = {"concurrencies": (2,), "duration_s": 2.0, "repeats": 1, "warmup": 1, "input_len": 128, "output_len": 64,
         "timeout_s": 120.0}  # fmt: skip


@pytest.fixture
def two_node(tmp_path: Path) -> Iterator[Path]:
    with running_deployment_demo(tmp_path, "two-node") as workspace:
        yield workspace


@pytest.fixture
def pd(tmp_path: Path) -> Iterator[Path]:
    with running_deployment_demo(tmp_path, "pd") as workspace:
        yield workspace


def request(steps: str, unit: str) -> TuneRequest:
    """The tune `tune demo --steps STEPS` asks for (the other axes from the reference member's unit, as the CLI)."""
    space = space_from_axes(SpaceRequest(), unit_speculation(unit, "0.5.23"), {"steps": steps},
                            names={axis: axis for axis in AXES})  # fmt: skip
    return TuneRequest(space=space, **SHORT)  # type: ignore[arg-type]


async def units(deployment: Deployment, sessions: dict[str, Session]) -> dict[str, str]:
    return {m.name: await sessions[m.name].service.read_unit() for m in deployment.members}


async def process_starts(session: Session, since: datetime, marker: str) -> list[datetime]:
    """When the member's processes began since `since` (each start's first line, `marker`)."""
    return [e.timestamp async for e in session.service.journal(lines=5000)
            if marker in e.message and e.timestamp >= since]  # fmt: skip


def trial_steps(events: list[TuneEvent]) -> dict[int, list[StepEvent]]:
    """Each trial's deployment steps (its change's StepEvents), by trial number."""
    out: dict[int, list[StepEvent]] = {}
    for event in events:
        if isinstance(event, TrialApplyEvent) and isinstance(event.event, StepEvent):
            out.setdefault(event.trial.number, []).append(event.event)
    return out


def restarted_trials(events: list[TuneEvent]) -> list[int]:
    return [e.trial.number for e in events if isinstance(e, TrialApplied) and e.restarted]


def tune_records(workspace: Path, result: TuneResult) -> list[BenchRecord]:
    return [r for f in sorted((workspace / "logs").glob("bench-*.jsonl")) for r in read_records(f)
            if r.label.startswith(result.label + "/")]  # fmt: skip


Tuned = tuple[TuneResult, list[TuneEvent], dict[str, str], dict[str, str], bool]


async def tune(workspace: Path, steps: str, *, abort_at_start: bool = False) -> Tuned:
    """The tune in-process: its result, its events, every member's unit before and after, and whether the deployment
    is up afterwards (status's judgement)."""
    ws = Workspace(workspace)
    deployment = load_deployment("demo", ws.profiles)
    events: list[TuneEvent] = []
    async with open_members(deployment, ws) as opened:
        sessions = {n: s for n, s in opened.items() if isinstance(s, Session)}
        before = await units(deployment, sessions)
        req = request(steps, before[reference_member(deployment).name])
        async with await plan_deployment_tune(deployment, sessions, req) as pending:

            def take(event: TuneEvent) -> None:
                events.append(event)
                started = isinstance(event, TrialApplyEvent) and isinstance(event.event, StepEvent)
                if abort_at_start and started and event.event.step.kind == "start" and event.event.state == "begun":
                    pending.request_abort("interrupted (the test's Ctrl-C)")

            result = await pending.execute(on_event=take)
        after = await units(deployment, sessions)
        up = (await read_deployment(deployment, sessions, checks=False)).ok
    return result, events, before, after, up


TOGETHER = ["write", "stop", "wait_down", "start", "wait_ready", "verify"]


async def test_a_two_node_tune_restarts_both_ranks_together_per_trial_and_puts_both_units_back(two_node: Path) -> None:
    ws = Workspace(two_node)
    deployment = load_deployment("demo", ws.profiles)
    began = datetime.now().astimezone()
    result, events, before, after, up = await tune(two_node, "2,3")
    assert result.ok and result.final_unit == "original" and result.host_healthy, (result.error, result.stopped)
    assert result.target == "demo" and [t.state for t in result.trials] == ["benchmarked", "benchmarked"]
    # Each trial that changed the setup was the deployment's change, in the ranks' order, verified at rank 0.
    steps = trial_steps(events)
    changed = restarted_trials(events)
    assert changed, "no trial restarted the ranks"
    for number in changed:
        done = [s for s in steps[number] if s.state == "done"]
        assert [s.step.kind for s in done] == TOGETHER and not any(s.rollback for s in steps[number]), steps[number]
        assert done[0].step.members == ("demo-rank0", "demo-rank1") and done[1].step.members == ("demo-rank0",)
        assert "rank 0 resolved what the rules predicted" in done[-1].detail
    # Both ranks started as often as the tune restarted (the trials and the put-back), side by side.
    async with open_members(deployment, ws) as opened:
        sessions = {n: s for n, s in opened.items() if isinstance(s, Session)}
        starts = [
            await process_starts(sessions[n], began, "Init parallel begin.") for n in ("demo-rank0", "demo-rank1")
        ]
    assert len(starts[0]) == len(starts[1]) == result.restarts, (starts, result.restarts)
    apart = max(abs((a - b).total_seconds()) for a, b in zip(*starts, strict=True))
    assert apart < 1.0, starts
    # Benchmarked through the front door: rank 0's server.
    records = tune_records(two_node, result)
    assert records and {r.target for r in records} == {"demo-rank0"}
    # Both originals back, byte for byte, and the deployment up.
    assert after == before and up
    print(f"\ntwo-node tune: {len(result.trials)} setups, {result.restarts} restarts of both ranks (starts at most "
          f"{apart:.2f} s apart), {len(records)} levels through rank 0, {result.elapsed_s:.1f} s")  # fmt: skip


async def test_ctrl_c_in_a_trials_start_rolls_both_ranks_back_and_the_originals_go_back(two_node: Path) -> None:
    result, events, before, after, up = await tune(two_node, "2,3", abort_at_start=True)
    assert result.stopped and "interrupted" in result.stopped, result.stopped
    assert result.final_unit == "original" and result.host_healthy
    rolled = [s for steps in trial_steps(events).values() for s in steps if s.rollback and s.state == "done"]
    assert [s.step.kind for s in rolled] == TOGETHER, rolled  # the trial's own rollback: both ranks, together
    assert after == before and up


def smg_requests(workspace: Path) -> float:
    profile = tomllib.loads((workspace / "profiles" / "deployments" / "demo.toml").read_text())
    with urllib.request.urlopen(profile["router"]["metrics"] + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("smg_router_requests_total"))  # fmt: skip


PREFILL = ["router_out", "drain", "stop", "wait_dropped", "apply", "router_in"]
DECODE = ["router_out", "drain", "apply", "router_in"]


@pytest.mark.long(100)  # its measured seconds (96 on the 2-core VM): started first (tests/tiers.py)
async def test_a_pd_tune_rolls_each_trial_through_smg_one_member_at_a_time_and_benchmarks_through_smg(
    pd: Path,
) -> None:
    routed = smg_requests(pd)
    result, events, before, after, up = await tune(pd, "2,3")
    assert result.ok and result.final_unit == "original" and result.host_healthy, (result.error, result.stopped)
    steps = trial_steps(events)
    changed = restarted_trials(events)
    assert changed
    for number in changed:
        done = [(s.step.kind, s.step.members[0]) for s in steps[number] if s.state == "done"]
        expected = [(k, "demo-prefill") for k in PREFILL] + [(k, "demo-decode") for k in DECODE]
        assert done == expected, done  # the decode's steps only once the prefill is back in smg
    records = tune_records(pd, result)
    completed = sum(r.completed for r in records)
    assert records and {r.target for r in records} == {"demo"}
    assert smg_requests(pd) - routed >= completed  # every measured request went through smg
    for record in records:  # each level's figures side by side, kept in its record
        sides: dict[str, Any] = record.per_side or {}
        assert sides["prefill"]["ttft_ms_servers"] > 0 and sides["decode"]["tpot_ms_servers"] > 0, sides
    assert after == before and up
    print(f"\npd tune: {len(result.trials)} setups, {len(changed)} trials rolled through smg, {completed} requests "
          f"in {len(records)} levels through smg, {result.elapsed_s:.1f} s")  # fmt: skip


def test_the_started_trials_are_counted(two_node: Path) -> None:
    """Guard for the helper: a tune whose every setup already runs restarts nothing (0 starts, nothing written)."""
    result, events, before, after, up = asyncio.run(tune(two_node, "2"))
    assert result.restarts == 0 and restarted_trials(events) == [] and after == before and up
    assert [e.trial.number for e in events if isinstance(e, TrialStarted)]
