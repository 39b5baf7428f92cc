"""plan_freeze -> execute / abort and plan_restore, in-process against the real demo host (its supervisor and the
SGLang stand-in as real processes). The host is read back around the code under test: the unit through a second
session, the document from the disk, the snapshot from the workspace's file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console.core.apply import plan_apply
from console.core.change import ApplyState, parse_edits
from console.core.session import open_session
from console.core.snapshot import FreezeRequest, FreezeStep, load_snapshot, plan_freeze, plan_restore, snapshot_path
from console.core.status import read_status
from console.host.base import UnitLocked
from console.workspace import Workspace
from tests.support.demo import Demo

STEPS_2 = parse_edits(["speculative-num-steps=2", "speculative-num-draft-tokens=3"])


def _session(demo: Demo):  # type: ignore[no-untyped-def]
    return open_session("demo", Workspace.resolve(demo.workspace))


async def _edit_without_restart(demo: Demo) -> None:
    """Change the unit on the host behind the console's back: written, not reloaded, not restarted."""
    async with _session(demo) as session:
        text = await session.service.read_unit()
        await session.service.write_unit(text.replace("--speculative-num-steps 1", "--speculative-num-steps 3"))


async def _freeze(demo: Demo, name: str, doc: Path, **kwargs: object):  # type: ignore[no-untyped-def]
    async with _session(demo) as session:
        pending = await plan_freeze(session, FreezeRequest(name, document=str(doc), **kwargs))  # type: ignore[arg-type]
        events: list[object] = []
        result = await pending.execute(on_event=events.append)
        return result, events


async def test_freeze_writes_the_document_enables_the_unit_and_keeps_the_snapshot(demo: Demo, tmp_path: Path) -> None:
    doc = tmp_path / "docs" / "production_{name}.md"
    doc.parent.mkdir()
    async with _session(demo) as session:
        unit_before = await session.service.read_unit()
        assert (await session.service.state()).unit_file_state == "disabled"
        pending = await plan_freeze(session, FreezeRequest("v1", note="steps 1", document=str(doc)))
        assert pending.needs_confirmation and pending.plan.refusals == ()
        assert "# Production setup v1" in pending.plan.document and not pending.plan.unit_changed
        assert not (tmp_path / "docs" / "production_v1.md").exists()  # planning writes nothing
        events: list[object] = []
        result = await pending.execute(on_event=events.append)
        assert result.ok, result.error
        state = await session.service.state()
        assert state.unit_file_state == "enabled"
        assert await session.service.read_unit() == unit_before
    written = (tmp_path / "docs" / "production_v1.md").read_text()
    assert written == result.plan.document and "--speculative-num-steps 1" in written
    assert [e.step for e in events if isinstance(e, FreezeStep)] == ["document_written", "enabled", "verified", "saved"]
    kept = load_snapshot(Workspace.resolve(demo.workspace), "v1")
    assert kept.server.resolved["speculative_num_steps"] == 1 and kept.unit.unit_file_state == "enabled"
    assert kept.host.document == str(tmp_path / "docs" / "production_v1.md")
    assert result.to_json()["snapshot"] == str(snapshot_path(Workspace.resolve(demo.workspace), "v1"))


async def test_freeze_is_refused_while_an_edit_is_unapplied_and_writes_nothing(demo: Demo, tmp_path: Path) -> None:
    await _edit_without_restart(demo)
    result, events = await _freeze(demo, "v1", tmp_path / "doc.md")
    assert result.state == "refused" and not result.ok and events == []
    assert [r.code for r in result.plan.refusals] == ["daemon-reload", "process-flags", "resolved"]
    assert "--speculative-num-steps: runs 1, the unit says 3" in result.error
    assert not (tmp_path / "doc.md").exists()
    assert not snapshot_path(Workspace.resolve(demo.workspace), "v1").exists()


async def test_a_forced_freeze_records_its_reason(demo: Demo, tmp_path: Path) -> None:
    await _edit_without_restart(demo)
    result, _ = await _freeze(demo, "v1", tmp_path / "doc.md", force="documenting the edit before restarting")
    assert result.ok, result.error
    kept = load_snapshot(Workspace.resolve(demo.workspace), "v1")
    assert kept.forced is not None and kept.forced.reason == "documenting the edit before restarting"
    assert "Frozen with --force" in (tmp_path / "doc.md").read_text()


async def test_freeze_waits_for_nobody_an_apply_holds_the_lock(demo: Demo, tmp_path: Path) -> None:
    async with _session(demo) as session, _session(demo) as other:
        async with await plan_apply(session, STEPS_2):
            with pytest.raises(UnitLocked, match=f"opsconsole apply, pid {os.getpid()}"):
                await plan_freeze(other, FreezeRequest("v1", document=str(tmp_path / "d.md")))
        async with await plan_freeze(other, FreezeRequest("v1", document=str(tmp_path / "d.md"))):
            with pytest.raises(UnitLocked, match="opsconsole freeze"):
                await plan_apply(session, STEPS_2)
    assert not (tmp_path / "d.md").exists()


async def test_status_reports_drift_and_restore_brings_the_snapshot_back(demo: Demo, tmp_path: Path) -> None:
    first, _ = await _freeze(demo, "v1", tmp_path / "v1.md")
    assert first.ok, first.error
    async with _session(demo) as session:
        result = await (await plan_apply(session, STEPS_2, timeout_s=60)).execute()
        assert result.state is ApplyState.VERIFIED, result.error
        status = await read_status(session)
        assert status.production is not None and status.production.snapshot == "v1"
        assert status.production.in_sync is False
        texts = [d["text"] for d in status.production.drift]
        assert texts == ["steps 2, production v1 has 1", "draft tokens 3, production v1 has 2"]
        pending, notes = await plan_restore(session, load_snapshot(Workspace.resolve(demo.workspace), "v1"))
        assert notes == []
        diff = pending.plan.diff
        assert "-    --speculative-num-steps 2" in diff and "+    --speculative-num-steps 1" in diff
        restored = await pending.execute()
        assert restored.state is ApplyState.VERIFIED, restored.error
        info = await (await session.sglang()).server_info()
        assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (1, 2)
        status = await read_status(session)
        assert status.production is not None and status.production.in_sync is True
        assert status.to_json()["production"]["snapshot"] == "v1"


async def test_a_name_that_is_taken_is_refused_before_anything_is_read(demo: Demo, tmp_path: Path) -> None:
    first, _ = await _freeze(demo, "v1", tmp_path / "a.md")
    assert first.ok
    with pytest.raises(FileExistsError, match="choose another name"):
        await _freeze(demo, "v1", tmp_path / "b.md")
    assert not (tmp_path / "b.md").exists()


async def test_a_stopped_server_is_refused_and_can_be_forced_with_a_reason(demo: Demo, tmp_path: Path) -> None:
    async with _session(demo) as session:
        await session.service.stop()
    refused, _ = await _freeze(demo, "v1", tmp_path / "d.md")
    assert refused.state == "refused"
    assert {"not-active", "unhealthy", "no-server-info"} <= {r.code for r in refused.plan.refusals}
    forced, _ = await _freeze(demo, "v1", tmp_path / "d.md", force="the unit to keep while the GPU is repaired")
    assert forced.ok and forced.healthy is False, forced.error
    kept = load_snapshot(Workspace.resolve(demo.workspace), "v1")
    assert kept.forced is not None and kept.server.version is None and kept.unit.unit_file_state == "enabled"


async def test_a_document_path_that_is_a_directory_fails_before_anything_else(demo: Demo, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    result, _ = await _freeze(demo, "v1", tmp_path / "docs")
    assert result.state == "failed" and "is a directory" in str(result.error)
    assert list((tmp_path / "docs").iterdir()) == []
    assert not snapshot_path(Workspace.resolve(demo.workspace), "v1").exists()
