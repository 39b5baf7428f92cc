"""The roll's order and stops, with scripted hosts (no router, no I/O): the first failure stops it and the hosts
not reached are aborted (their plans let go of), Ctrl-C between hosts stops cleanly and during one is passed to
that host's apply; and the group's lock refuses a second roll, naming its holder."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from console.core.events import ApplyEvent, EventSink
from console.core.rolling import GroupLocked, HostFinished, PendingRoll, RollEvent, RollHost, group_lock
from console.core.rolling_plan import HostOutcome, RollSpec
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

    async def run(self, on_event: EventSink[ApplyEvent]) -> tuple[HostOutcome, str, dict[str, Any]]:
        self.ran = True
        if self.gate is not None:
            await self.gate.wait()
        if self.abort_requested:
            return HostOutcome.ROLLED_BACK, "interrupted: rolled back", {}
        return self.outcome, self.outcome.value, {}

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
