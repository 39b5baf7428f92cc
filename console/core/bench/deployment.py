"""A deployment benchmarked through its front door: rank 0's server for the ranks of one model (its records are rank
0's host's, as a single host's are), smg for prefill and decode servers, every level's figures side by side.

    records, sweep = await bench_deployment(deployment, sessions, config, label="...", workspace=ws)

PD: each level's record keeps `per_side` (console.core.deployment.pd_sides over the level's measured requests alone:
smg's and every member's counters read right before and right after them, past the warm-up); `sweep` is the same over
the whole sweep, warm-ups included (what `bench --json` prints beside the records). The records' `target` is the
deployment's name: what `predict` and `compare` find them by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console.bench.engine import SweepConfig
from console.bench.records import BenchRecord
from console.core.bench.host import ClientChoice, bench_host, bench_url
from console.core.deployment import Deployment, SideReadings, pd_sides
from console.core.session import Session
from console.core.status import read_sides
from console.workspace import Workspace


class PdLevelSides:
    """The engine's LevelProbe for a PD deployment: smg's and every member's counters before and after a level."""

    def __init__(self, deployment: Deployment, sessions: Mapping[str, Session]) -> None:
        self.deployment = deployment
        self.sessions = sessions

    async def start(self) -> SideReadings:
        return await read_sides(self.deployment, self.sessions)

    async def finish(self, started: Any) -> dict[str, Any] | None:
        after = await read_sides(self.deployment, self.sessions)
        return pd_sides(self.deployment, started, after)


async def bench_deployment(
    deployment: Deployment,
    sessions: Mapping[str, Session],
    config: SweepConfig,
    *,
    label: str,
    workspace: Workspace | None,
    on_event: Any = None,
    client: ClientChoice = "auto",
    api_key: str | None = None,
) -> tuple[list[BenchRecord], dict[str, Any] | None]:
    """The sweep through the deployment's front door, its records appended to logs/ (see the module's docstring);
    the whole sweep's per-side figures for PD (None otherwise). `api_key`: the key smg wants, where it wants one (a
    front door that is a member's server takes its own, as a host's benchmark does)."""
    front = deployment.front_door
    if front is not None:
        return await bench_host(sessions[front.name], config, label=label, on_event=on_event, client=client), None
    assert deployment.router is not None
    before = await read_sides(deployment, sessions)
    records = await bench_url(deployment.router.url, config, label=label, target=deployment.name,
                              workspace=workspace, on_event=on_event, api_key=api_key,
                              level_probe=PdLevelSides(deployment, sessions))  # fmt: skip
    after = await read_sides(deployment, sessions)
    return records, pd_sides(deployment, before, after)
