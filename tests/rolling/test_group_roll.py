"""A group's roll as one planned operation (console.core.roll: plan_group_roll), with scripted hosts (no router,
no I/O but the workspace's lock file): what is refused before anything is contacted, the group's lock held from
planning until the roll is executed or aborted (and let go of when a host cannot be reached), the sessions closed
after it, a group freeze's names checked free and its set kept."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.cli.common import said
from console.core.roll import (
    GroupLocked,
    GroupRoll,
    HostOutcome,
    RollRequest,
    RollSpec,
    WaveSize,
    free_set_name,
    group_lock,
    plan_group_roll,
)
from console.errors import UsageError
from console.fleet.groups import Group
from console.host.base import HostError
from console.workspace import Workspace
from tests.rolling.test_roll_orchestration import ScriptedChange

TRIO = Group("trio", ("a", "b", "c"))


@dataclass
class Host:
    """What the roll asks of a session here: its label (no router: no address, no port)."""

    label: str


class Hosts:
    """open_host for the roll: records what is opened and closed; `unreachable` raises as a host out of reach does."""

    def __init__(self, unreachable: str | None = None) -> None:
        self.unreachable = unreachable
        self.opened: list[str] = []
        self.closed: list[str] = []

    @asynccontextmanager
    async def open(self, label: str) -> AsyncIterator[Any]:
        if label == self.unreachable:
            raise HostError(f"{label}: connection refused")
        self.opened.append(label)
        try:
            yield Host(label)
        finally:
            self.closed.append(label)


async def plan_scripted(session: Any) -> ScriptedChange:
    return ScriptedChange(session.label)


def request(hosts: tuple[str, ...] = ("a", "b"), **kwargs: Any) -> RollRequest:
    values: dict[str, Any] = {"operation": "restart", "spec": RollSpec(), "owner": "ops@test (pid 1)"}
    values.update(kwargs)
    return RollRequest(TRIO, hosts, **values)


async def held(workspace: Workspace) -> bool:
    try:
        async with group_lock(workspace, "trio", "probe"):
            return False
    except GroupLocked:
        return True


@pytest.mark.parametrize("how", ["execute", "abort"])
async def test_the_group_lock_is_held_from_planning_to_the_end(tmp_path: Path, how: str) -> None:
    workspace, hosts = Workspace(tmp_path), Hosts()
    roll = await plan_group_roll(workspace, request(), plan_scripted, hosts.open)
    assert isinstance(roll, GroupRoll) and hosts.opened == ["a", "b"] and hosts.closed == []
    with pytest.raises(GroupLocked, match=r"held by ops@test \(pid 1\)"):
        async with group_lock(workspace, "trio", "another console"):
            pass
    if how == "execute":
        report = await roll.execute()
        assert report.ok and report.ledger.outcomes() == {"a": HostOutcome.DONE, "b": HostOutcome.DONE}
    else:
        report = await roll.abort("not confirmed; nothing was changed")
        assert set(report.ledger.outcomes().values()) == {HostOutcome.NOT_STARTED}
        assert all(h.change.aborted for h in roll.plan.hosts)  # type: ignore[attr-defined]
    assert hosts.closed == ["b", "a"] and not await held(workspace)
    await roll.abort("again")  # a second end is harmless: nothing is closed twice
    assert hosts.closed == ["b", "a"]


async def test_a_host_out_of_reach_lets_go_of_everything(tmp_path: Path) -> None:
    workspace, hosts = Workspace(tmp_path), Hosts(unreachable="b")
    with pytest.raises(HostError, match="b: connection refused"):
        await plan_group_roll(workspace, request(("a", "b", "c")), plan_scripted, hosts.open)
    assert hosts.opened == ["a"] and hosts.closed == ["a"] and not await held(workspace)


@pytest.mark.parametrize(
    ("hosts", "kwargs", "says"),
    [
        ((), {}, "@trio: no host to roll; select at least one"),
        (("a", "x"), {}, "x: not in @trio (a, b, c); a rolling change runs over the hosts of one group"),
        (("a", "a"), {}, "each host once in a roll"),
        (("a",), {"spec": RollSpec(canary=2)}, "--canary 2: only 1 host is rolled"),
        (("a",), {"operation": "freeze"}, "a group freeze needs the snapshot set's name"),
        (("a",), {"drain_timeout_s": 0.0}, "the drain timeout must be a positive number of seconds, not 0"),
    ],
)
async def test_what_cannot_be_rolled_is_refused_before_any_host_is_contacted(
    tmp_path: Path, hosts: tuple[str, ...], kwargs: dict[str, Any], says: str
) -> None:
    opened = Hosts()
    with pytest.raises(UsageError) as caught:
        await plan_group_roll(Workspace(tmp_path), request(hosts, **kwargs), plan_scripted, opened.open)
    assert said(caught.value) == says and opened.opened == []  # in the CLI's words, as `apply @trio` says it


async def test_a_group_freeze_checks_its_names_free_and_keeps_its_set(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    (workspace.profiles / "snapshot-sets").mkdir(parents=True)
    (workspace.profiles / "snapshot-sets" / "v1.toml").write_text("[set]\n")
    hosts = Hosts()
    with pytest.raises(UsageError, match="snapshot set 'v1' exists"):
        await plan_group_roll(workspace, request(operation="freeze", set_name="v1"), plan_scripted, hosts.open)
    assert hosts.opened == [] and free_set_name(workspace, ["a", "b"]) == "v2"
    spec = RollSpec(canary=0, wave=WaveSize(percent=100.0))
    roll = await plan_group_roll(workspace, request(operation="freeze", set_name="v2", spec=spec), plan_scripted,
                                 hosts.open)  # fmt: skip
    report = await roll.execute()
    assert report.snapshot_set is not None and report.snapshot_set["members"] == {"a": "v2.a", "b": "v2.b"}
    assert (workspace.profiles / "snapshot-sets" / "v2.toml").is_file() and free_set_name(workspace, ["a"]) == "v3"
