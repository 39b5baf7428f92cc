"""`restore DEPLOYMENT NAME` on the demo's two-node deployment (rank 0 and rank 1, each a supervised stand-in unit with
its own host profile): every member back to its own snapshot of the set `freeze DEPLOYMENT --name NAME` wrote, through
the deployment's change.

- after a change, the set restored: both ranks' units back as frozen (every flag), restarted together in the ranks'
  order, each once, verified at rank 0;
- a set whose members' snapshots would leave the ranks mismatched (one snapshot edited by hand) is refused before
  anything restarts: every unit and MainPID as it was;
- a set whose units cannot start (both snapshots edited to a draft that is not there): the restore's start fails and
  both ranks go back to the units they ran before it, together, healthy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.core.deployment import load_deployment
from console.core.session import Session
from console.core.status import open_members
from console.workspace import Workspace
from tests.deployments.demo_support import deployment_status, opsconsole, running_deployment_demo

pytestmark = pytest.mark.system

RANKS = ("demo-rank0", "demo-rank1")
STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
DRAFT = "sim/kimi-k2.5-eagle3"  # the demo's Kimi draft, in a snapshot's flags, text and launch command


@pytest.fixture
def two_node(tmp_path: Path) -> Iterator[Path]:
    with running_deployment_demo(tmp_path, "two-node") as workspace:
        yield workspace


def units(workspace: Path) -> dict[str, str]:
    async def read() -> dict[str, str]:
        ws = Workspace(workspace)
        async with open_members(load_deployment("demo", ws.profiles), ws) as opened:
            return {n: await s.service.read_unit() for n, s in opened.items() if isinstance(s, Session)}

    return asyncio.run(read())


def pids(workspace: Path) -> list[int | None]:
    status = deployment_status(workspace)
    return [status.member(n).reading.main_pid for n in RANKS]


def frozen(workspace: Path, name: str) -> dict[str, str]:
    """`freeze demo --name NAME`: each rank's unit as it was frozen."""
    done = opsconsole(workspace, "freeze", "demo", "--name", name, "--yes", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return units(workspace)


def edit_snapshot(workspace: Path, name: str, old: str, new: str) -> None:
    path = workspace / "profiles" / "snapshots" / f"{name}.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def restore(workspace: Path, name: str) -> tuple[int, dict[str, Any]]:
    done = opsconsole(workspace, "restore", "demo", name, "--yes", "--json", "--timeout", "120")
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


TOGETHER = ["write", "stop", "wait_down", "start", "wait_ready", "verify"]


def test_a_set_restored_puts_every_rank_back_together_as_frozen(two_node: Path) -> None:
    at_freeze = frozen(two_node, "v1")
    assert opsconsole(two_node, "apply", "demo", *STEPS_3, "--yes", "--timeout", "120").returncode == 0
    changed, before = units(two_node), pids(two_node)
    assert changed != at_freeze
    code, result = restore(two_node, "v1")
    assert code == 0 and result["state"] == "verified", (result["state"], result["error"])
    assert (result["operation"], result["snapshot"]) == ("restore", "v1")
    assert [s["step"] for s in result["order"]] == TOGETHER
    for name in RANKS:
        member = result["members"][name]
        assert (member["starts"], member["outcome"], member["changed"]) == (1, "done", True), member
        assert "-    --speculative-num-steps 3" in member["diff"], member["diff"]
    assert result["members"]["demo-rank0"]["verified"]["ok"] is True
    assert units(two_node) == at_freeze  # every flag as frozen, byte for byte here (the change wrote nothing else)
    after = pids(two_node)
    assert all(a != b for a, b in zip(before, after, strict=True)) and deployment_status(two_node).ok
    print(f"\nrestore demo v1: both ranks back as frozen, restarted together, down {result['downtime_s']} s")


def test_a_set_that_would_leave_the_ranks_mismatched_is_refused_before_anything_restarts(two_node: Path) -> None:
    frozen(two_node, "v1")
    edit_snapshot(two_node, "v1.demo-rank1", DRAFT, "sim/another-draft")
    before, running = units(two_node), pids(two_node)
    code, result = restore(two_node, "v1")
    assert code == 1 and result["state"] == "refused", result
    said = " ".join(c["message"] for c in result["checks"] if c["level"] == "error")
    assert "speculative-draft-model-path" in said and "demo-rank1" in said, result["checks"]
    assert units(two_node) == before and pids(two_node) == running


def test_a_set_whose_units_cannot_start_rolls_both_ranks_back_together(two_node: Path) -> None:
    frozen(two_node, "v1")
    for name in RANKS:
        edit_snapshot(two_node, f"v1.{name}", DRAFT, "/nonexistent/draft")
    assert opsconsole(two_node, "apply", "demo", *STEPS_3, "--yes", "--timeout", "120").returncode == 0
    before = units(two_node)
    code, result = restore(two_node, "v1")
    assert code == 1 and result["state"] == "healthy_on_old" and result["rolled_back"] is True, result["error"]
    assert "/nonexistent/draft" in result["error"], result["error"]
    assert all(m["outcome"] == "rolled_back" for m in result["members"].values())
    assert units(two_node) == before and deployment_status(two_node).ok  # the units it ran before the restore
    print(f"\nrestore demo v1 that cannot start: {result['error'][:160]}; both ranks back, up")
