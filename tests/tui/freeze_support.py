"""A scripted freeze for the console's Pilot and snapshot tests: the real pure plan
(console.core.snapshot.freeze_plan on a fixed capture) behind the PendingFreeze interface, and views whose status
carries a production snapshot."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from console.core.snapshot import FreezeResult, FreezeStep, Snapshot, save_snapshot
from console.core.snapshot.drift import production_status
from console.core.snapshot.freeze_plan import Capture, FreezePlan, FreezeRequest, build_freeze_plan
from console.core.status import HostView, setup_values
from console.tui.runners import Runners
from console.workspace import Workspace
from tests.support import snapshots as snaps
from tests.tui.support import view


class ScriptedPending:
    """PendingFreeze's interface over a fixed capture: plan and force are the real pure code; execute reports the
    steps a freeze takes and says frozen (the real one runs against hosts in tests/core and tests/e2e)."""

    def __init__(self, capture: Capture, request: FreezeRequest) -> None:
        self.capture = capture
        self.plan: FreezePlan = build_freeze_plan(capture, request)
        self.aborted: str | None = None
        self.executed = False

    def force(self, reason: str) -> FreezePlan:
        self.plan = build_freeze_plan(self.capture, dataclasses.replace(self.plan.request, force=reason))
        return self.plan

    async def execute(self, on_event: Callable[[Any], None]) -> FreezeResult:
        self.executed = True
        for step in ("document_written", "enabled", "verified", "saved"):
            on_event(FreezeStep(step, "", snaps.AT))  # type: ignore[arg-type]
        return FreezeResult(
            "gpu-a",
            "sglang.service",
            self.plan.snapshot.name,
            state="frozen",
            plan=self.plan,
            snapshot_path=f"profiles/snapshots/{self.plan.snapshot.name}.toml",
            unit_file_state="enabled",
            healthy=True,
        )

    async def abort(self, why: str = "") -> FreezeResult:
        self.aborted = why
        return FreezeResult("gpu-a", "sglang.service", self.plan.snapshot.name, state="aborted", plan=self.plan)


def scripted_planner(made: list[ScriptedPending], **capture_kwargs: Any) -> Runners:
    """The console's runners with a freeze planner that plans on a fixed capture of the host (kwargs: see
    snaps.capture) and asks nothing of its session; each planned freeze is appended to `made`."""

    async def plan(_session_of: Any, label: str, request: FreezeRequest) -> ScriptedPending:
        pending = ScriptedPending(snaps.capture(label=label, **capture_kwargs), request)
        made.append(pending)
        return pending

    return Runners(freeze=plan)


def snapshot_workspace(root: Path) -> tuple[Workspace, list[Snapshot]]:
    """A workspace with three snapshots of gpu-a (v1 steps 1, v2 steps 2 with benchmarks, v3 forced) and one of
    gpu-b, at fixed times."""
    from datetime import timedelta

    workspace = Workspace(root)
    at = snaps.AT
    t1, t2 = snaps.unit_text(steps=1), snaps.unit_text(steps=2)
    made = [
        snaps.snapshot(
            "v1",
            text=t1,
            info=snaps.server_info(t1),
            label="gpu-a",
            frozen_at=at - timedelta(days=2),
            records=[snaps.record(unit=t1, steps=1, throughput=123.5)],
        ),
        snaps.snapshot(
            "v2",
            text=t2,
            label="gpu-a",
            frozen_at=at - timedelta(days=1),
            note="steps 2: +45 % at C = 32",
            records=[snaps.record(unit=t2, throughput=178.0), snaps.record(unit=t2, concurrency=32, throughput=2100.0)],
        ),
        snaps.snapshot("b1", text=t2, label="gpu-b", frozen_at=at - timedelta(hours=3)),
    ]
    for snap in made:
        save_snapshot(workspace, snap)
    return workspace, made


def view_with_production(name: str = "v2", **running: Any) -> HostView:
    """The dashboard's view of gpu-a whose production snapshot `name` froze what the scripted host runs, while the
    server now runs with `running` changed (e.g. speculative_num_steps=3)."""
    from console.core.snapshot.store import DRIFT_FIELDS

    shown = view()
    status = shown.status
    assert status is not None
    frozen = {k: getattr(status.sglang, k) for k in DRIFT_FIELDS}
    base = snaps.snapshot(name, label="gpu-a")
    server = base.server.model_copy(
        update={"version": frozen.pop("version"), "resolved": {k: v for k, v in frozen.items() if v is not None}}
    )
    snapshot = base.model_copy(update={"server": server})
    sglang = status.sglang.model_copy(update=running)
    production = production_status(snapshot, {k: getattr(sglang, k) for k in DRIFT_FIELDS})
    now = status.model_copy(update={"sglang": sglang, "production": production})
    # the unit asks what now runs (an apply made it so): the server panel agrees with the header
    asked = {"speculative_algorithm": "EAGLE3", "speculative_num_draft_tokens": 8, **running}
    return replace(shown, status=now, setup=setup_values(now, asked))
