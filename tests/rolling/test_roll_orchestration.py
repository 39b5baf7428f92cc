"""The roll's order and stops, with scripted hosts (no router, no I/O): the first failure stops it and the hosts
not reached are aborted (their plans let go of), Ctrl-C between hosts stops cleanly and during one is passed to
that host's apply; the group's lock refuses a second roll, naming its holder; and --gate bench with a scripted
benchmark judged by the real verdict: a pass lets the waves go on, a failure (or Ctrl-C during the benchmark)
rolls the canary back and halts the roll."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from console.core.events import ApplyEvent, EventSink
from console.core.roll import (
    GateJudged,
    GateSpec,
    GateVerdict,
    GroupLocked,
    HostEnded,
    HostFinished,
    HostOutcome,
    PendingRoll,
    RollEvent,
    RollHost,
    RollSpec,
    gate_verdict,
    group_lock,
)
from console.workspace import Workspace


@dataclass
class ScriptedChange:
    """A host's change that ends as scripted; `gate` (when given) is awaited inside it, like a start in progress."""

    label: str
    outcome: HostOutcome = HostOutcome.DONE
    gate: asyncio.Event | None = None
    ran: bool = False
    aborted: str | None = None
    abort_requested: bool = False
    calls: list[str] = field(default_factory=list)

    @property
    def restarts(self) -> bool:
        return True

    @property
    def refusal(self) -> str | None:
        return None

    async def run(self, on_event: EventSink[ApplyEvent]) -> HostEnded:
        self.ran = True
        if self.gate is not None:
            await self.gate.wait()
        if self.abort_requested:
            return HostEnded(HostOutcome.ROLLED_BACK, "interrupted: rolled back", {})
        return HostEnded(self.outcome, self.outcome.value, {})

    def request_abort(self) -> None:
        self.abort_requested = True

    async def abort(self, why: str) -> None:
        self.aborted = why


def roll_of(changes: list[ScriptedChange], spec: RollSpec | None = None) -> PendingRoll:
    hosts = [RollHost(c.label, None, c) for c in changes]  # type: ignore[arg-type]  # no session: no router
    return PendingRoll("trio", "apply", hosts, spec or RollSpec(), router=None, router_before=[], refusals=[],
                       drain_timeout_s=1.0)  # fmt: skip


async def test_the_first_failure_stops_the_roll_and_leaves_the_rest_untouched() -> None:
    changes = [ScriptedChange("a"), ScriptedChange("b", HostOutcome.ROLLED_BACK), ScriptedChange("c")]
    events: list[RollEvent] = []
    report = await roll_of(changes).execute(events.append)
    assert report.ledger.outcomes() == {"a": HostOutcome.DONE, "b": HostOutcome.ROLLED_BACK,
                                        "c": HostOutcome.NOT_STARTED}  # fmt: skip
    assert not changes[2].ran and changes[2].aborted is not None and "b:" in changes[2].aborted
    assert changes[0].aborted is None and changes[1].aborted is None
    assert [e.host for e in events if isinstance(e, HostFinished)] == ["a", "b"]
    assert not report.ok and report.to_json()["stopped"].startswith("b:")


async def test_a_refused_roll_changes_nothing() -> None:
    changes = [ScriptedChange("a"), ScriptedChange("b")]
    roll = roll_of(changes)
    roll.report.refusals.append("b: the rules refuse it")
    report = await roll.execute()
    assert not any(c.ran for c in changes) and all(c.aborted for c in changes)
    assert set(report.ledger.outcomes().values()) == {HostOutcome.NOT_STARTED} and not report.ok


async def test_ctrl_c_during_a_host_rolls_it_back_and_stops_before_the_next() -> None:
    gate = asyncio.Event()
    changes = [ScriptedChange("a", gate=gate), ScriptedChange("b"), ScriptedChange("c")]
    roll = roll_of(changes)
    running = asyncio.create_task(roll.execute())
    while not changes[0].ran:
        await asyncio.sleep(0)
    roll.request_abort("interrupted")
    gate.set()
    report = await running
    assert changes[0].abort_requested
    assert report.ledger.outcomes() == {"a": HostOutcome.ROLLED_BACK, "b": HostOutcome.NOT_STARTED,
                                        "c": HostOutcome.NOT_STARTED}  # fmt: skip
    assert not changes[1].ran and not changes[2].ran


async def test_ctrl_c_between_hosts_stops_cleanly() -> None:
    changes = [ScriptedChange("a"), ScriptedChange("b"), ScriptedChange("c")]
    roll = roll_of(changes)

    def on_event(event: RollEvent) -> None:
        if isinstance(event, HostFinished) and event.host == "a":
            roll.request_abort("interrupted")

    report = await roll.execute(on_event)
    assert report.ledger.outcomes()["a"] is HostOutcome.DONE and not changes[0].abort_requested
    assert not changes[1].ran and report.ledger.stopped is not None and report.ledger.stopped[0] == "interrupted"


async def test_the_group_lock_refuses_a_second_roll_naming_its_holder(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    holder = "ops@console-1 (opsconsole apply --rolling @trio, pid 1)"
    async with group_lock(workspace, "trio", holder):
        # flock treats every open of the file on its own, so a second open here is refused as another process is.
        with pytest.raises(GroupLocked, match=re.escape(f"held by {holder}")):
            async with group_lock(workspace, "trio", "second"):
                pass
        async with group_lock(workspace, "other", "another group"):  # another group's roll is not held up
            pass
    async with group_lock(workspace, "trio", "third"):  # let go of at the end of the block
        pass


def test_group_locked_names_the_group_and_the_fix() -> None:
    with pytest.raises(GroupLocked, match=r"@trio: another rolling change of this group is running \(held by x\)"):
        raise GroupLocked("trio", "x")


@dataclass
class ScriptedGate:
    """A canary gate whose benchmark measures `values` against `baseline` (the real gate_verdict judges them);
    `hold` (when given) is awaited inside the benchmark, like a sweep in progress."""

    values: list[float]
    baseline: tuple[float, ...] = (1000.0, 1010.0)
    hold: asyncio.Event | None = None
    judged: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "bench", "concurrency": 8, "max_regression_pct": 5.0, "baselines": {}}

    async def judge(self, host: RollHost, emit: EventSink[RollEvent]) -> tuple[GateVerdict, dict[str, Any]]:
        self.judged.append(host.label)
        if self.hold is not None:
            await self.hold.wait()
        verdict = gate_verdict(self.baseline, self.values, level="C=8", max_regression_pct=5.0)
        return verdict, {"values": list(self.values), "baseline_run": {"run_id": "r1"}}

    async def roll_back(self, host: RollHost, emit: EventSink[RollEvent]) -> HostEnded:
        self.rolled_back.append(host.label)
        return HostEnded(HostOutcome.ROLLED_BACK, "rolled back to its previous unit (verified)")


def gated_roll(changes: list[ScriptedChange], gate: ScriptedGate) -> PendingRoll:
    hosts = [RollHost(c.label, None, c) for c in changes]  # type: ignore[arg-type]  # no session: no router
    return PendingRoll("trio", "apply", hosts, RollSpec(gate=GateSpec(concurrency=8)), router=None, router_before=[],
                       refusals=[], drain_timeout_s=1.0, gate=gate)  # fmt: skip


async def test_a_passing_gate_leaves_the_canary_on_the_new_setup_and_the_waves_follow() -> None:
    changes = [ScriptedChange("a"), ScriptedChange("b"), ScriptedChange("c")]
    gate = ScriptedGate(values=[995.0, 1005.0])
    events: list[RollEvent] = []
    report = await gated_roll(changes, gate).execute(events.append)
    assert report.ok and gate.judged == ["a"] and gate.rolled_back == []  # only the canary is benchmarked
    assert all(c.ran for c in changes)
    canary = report.to_json()["hosts"][0]
    assert canary["gate"]["passed"] is True and canary["gate"]["values"] == [995.0, 1005.0]
    assert "gate passed: output_throughput 1000.0 vs 1005.0" in canary["detail"]
    assert report.to_json()["gate"]["concurrency"] == 8
    judged = [e for e in events if isinstance(e, GateJudged)]
    assert [(e.host, e.verdict.passed) for e in judged] == [("a", True)]


async def test_a_failed_gate_rolls_the_canary_back_and_halts_the_roll_saying_both_figures() -> None:
    changes = [ScriptedChange("a"), ScriptedChange("b"), ScriptedChange("c")]
    gate = ScriptedGate(values=[700.0, 710.0])
    roll = gated_roll(changes, gate)
    report = await roll.execute()
    assert gate.rolled_back == ["a"]
    assert report.ledger.outcomes() == {"a": HostOutcome.ROLLED_BACK, "b": HostOutcome.NOT_STARTED,
                                        "c": HostOutcome.NOT_STARTED}  # fmt: skip
    assert not changes[1].ran and changes[1].aborted is not None
    assert report.ledger.stopped is not None and report.ledger.stopped[0] == "gate"
    stopped = report.to_json()["stopped"]
    assert "a: the gate halted the roll: output_throughput 705.0 vs 1005.0 (-29.9%) at C=8" in stopped
    canary = report.to_json()["hosts"][0]
    assert canary["gate"]["passed"] is False and (canary["gate"]["baseline"], canary["gate"]["value"]) == (
        1005.0, 705.0,
    )  # fmt: skip
    assert canary["detail"].startswith("gate failed: ") and canary["detail"].endswith("(verified)")
    assert not report.ok and report.exit_code == 1


async def test_ctrl_c_during_the_gate_stops_the_benchmark_and_rolls_the_canary_back() -> None:
    hold = asyncio.Event()  # never set: the benchmark runs until it is stopped
    changes = [ScriptedChange("a"), ScriptedChange("b")]
    gate = ScriptedGate(values=[1000.0], hold=hold)
    roll = gated_roll(changes, gate)
    running = asyncio.create_task(roll.execute())
    while not gate.judged:
        await asyncio.sleep(0)
    roll.request_abort("interrupted")
    report = await asyncio.wait_for(running, timeout=30)
    assert gate.rolled_back == ["a"] and not changes[1].ran
    assert report.ledger.outcomes()["a"] is HostOutcome.ROLLED_BACK
    assert "interrupted during the canary's benchmark" in report.ledger.records["a"].detail
