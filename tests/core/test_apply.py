"""plan_apply / plan_restart -> execute / abort, in-process against the real demo host."""

from __future__ import annotations

import asyncio
import os

import pytest

from console.core.apply import plan_apply, plan_restart
from console.core.change import ApplyState, EditRequest, parse_edits
from console.core.events import ApplyEvent, LogLine, PhaseChanged, StepChanged
from console.core.session import Session, open_session
from console.host.base import UnitLocked
from console.workspace import Workspace
from tests.support.demo import Demo

STEPS_3 = parse_edits(["speculative-num-steps=3", "speculative-num-draft-tokens=4"])


def _session(demo: Demo):  # type: ignore[no-untyped-def]
    return open_session("demo", Workspace.resolve(demo.workspace))


async def _pid(session: Session) -> int | None:
    return (await session.service.state()).main_pid


async def test_plan_holds_the_lock_asks_nothing_and_abort_changes_nothing(demo: Demo) -> None:
    async with _session(demo) as session, _session(demo) as other:
        unit, pid = await session.service.read_unit(), await _pid(session)
        pending = await plan_apply(session, STEPS_3)
        assert pending.needs_confirmation and pending.plan.ok and pending.plan.changed
        assert "+    --speculative-num-steps 3" in pending.plan.diff
        with pytest.raises(UnitLocked, match=f"opsconsole apply, pid {os.getpid()}"):
            await plan_apply(other, STEPS_3)
        result = await pending.abort("not confirmed; nothing was changed")
        assert result.state is ApplyState.ABORTED and not result.ok
        assert await session.service.read_unit() == unit and await _pid(session) == pid
        # released: the other session can plan now, and leaving the block without executing aborts
        async with await plan_apply(other, STEPS_3) as again:
            assert again.needs_confirmation
        assert await session.service.read_unit() == unit


async def test_execute_reports_every_step_and_phase_and_verifies(demo: Demo) -> None:
    events: list[ApplyEvent] = []
    async with _session(demo) as session:
        pid = await _pid(session)
        pending = await plan_apply(session, STEPS_3, timeout_s=60)
        result = await pending.execute(on_event=events.append)
        assert result.state is ApplyState.VERIFIED and result.ok, result.error
        assert await _pid(session) != pid
        info = await (await session.sglang()).server_info()
    steps = [e.state for e in events if isinstance(e, StepChanged)]
    assert steps == [
        ApplyState.BACKED_UP,
        ApplyState.WRITTEN,
        ApplyState.DAEMON_RELOADED,
        ApplyState.RESTARTING,
        ApplyState.STARTING,
        ApplyState.HEALTHY,
        ApplyState.VERIFIED,
    ]
    phases = [e for e in events if isinstance(e, PhaseChanged)]
    started = [e.phase for e in phases if e.kind == "started"]
    assert started[:2] == ["load_weights", "kv_cache"] and "cuda_graph" in started
    assert phases[-1].kind == "ready" and phases[-1].progress == 1.0
    assert any(isinstance(e, LogLine) and "fired up" in e.entry.message for e in events)
    assert result.verification is not None
    values = {v.dest: v for v in result.verification.values}
    assert values["speculative_num_steps"].actual == 3 == info["speculative_num_steps"]


async def test_request_abort_while_the_new_unit_starts_rolls_back(demo: Demo) -> None:
    async with _session(demo) as session:
        unit = await session.service.read_unit()
        slow = parse_edits(["speculative-num-steps=2", "speculative-num-draft-tokens=3", "sim-time-scale=100"])
        pending = await plan_apply(session, slow, timeout_s=60)
        events: list[ApplyEvent] = []

        def on_event(event: ApplyEvent) -> None:
            events.append(event)
            # the operator presses Esc once the new server is loading its weights
            if isinstance(event, PhaseChanged) and event.kind == "started" and event.start == "new":
                pending.request_abort("aborted by the operator")

        result = await pending.execute(on_event=on_event)
        assert result.state is ApplyState.HEALTHY_ON_OLD and result.rollout.rolled_back
        assert result.error == "aborted by the operator"
        assert await session.service.read_unit() == unit
        assert await (await session.sglang()).healthy()
    assert any(isinstance(e, PhaseChanged) and e.start == "rollback" and e.kind == "ready" for e in events)


async def test_an_abort_requested_before_execute_changes_nothing(demo: Demo) -> None:
    async with _session(demo) as session:
        unit = await session.service.read_unit()
        pending = await plan_apply(session, STEPS_3)
        pending.request_abort("the operator left")
        result = await pending.execute()
        assert result.state is ApplyState.ABORTED and "nothing was changed" in (result.error or "")
        assert await session.service.read_unit() == unit


async def test_restart_without_edits_watches_the_start_and_checks_the_resolved_values(demo: Demo) -> None:
    events: list[ApplyEvent] = []
    async with _session(demo) as session:
        unit, pid = await session.service.read_unit(), await _pid(session)
        pending = await plan_restart(session, timeout_s=60)
        assert pending.needs_confirmation and not pending.plan.changed
        result = await pending.execute(on_event=events.append)
        assert result.state is ApplyState.VERIFIED, result.error
        assert await _pid(session) != pid and await session.service.read_unit() == unit
    steps = [e.state for e in events if isinstance(e, StepChanged)]
    assert steps == [ApplyState.RESTARTING, ApplyState.STARTING, ApplyState.HEALTHY, ApplyState.VERIFIED]
    assert result.verification is not None
    checked = {v.dest for v in result.verification.values}
    assert {"speculative_num_steps", "speculative_num_draft_tokens", "max_running_requests"} <= checked


async def test_a_restart_that_fails_is_reported_with_its_journal_lines(demo: Demo) -> None:
    async with _session(demo) as session:
        unit = await session.service.read_unit()
        broken = unit.replace("--enable-metrics", "--enable-metrics --speculative-draft-model-path /models/gone")
        await session.service.write_unit(broken)
        await session.service.daemon_reload()
        result = await (await plan_restart(session, timeout_s=60)).execute()
        assert result.state is ApplyState.RESTART_FAILED and not result.rollout.rolled_back
        assert any("/models/gone" in line for line in result.journal_excerpt())


async def test_a_new_api_key_the_console_does_not_send_is_warned_about_before_anything_changes(demo: Demo) -> None:
    async with _session(demo) as session:
        unit = await session.service.read_unit()
        async with await plan_apply(session, parse_edits(["api-key=sk-new-key-1"])) as pending:
            codes = [w.code for w in pending.plan.report.warnings]
            assert "console-api-key" in codes
            warning = next(w for w in pending.plan.report.warnings if w.code == "console-api-key")
            assert "401" in warning.message and "api_key_env" in warning.message
            assert "sk-new-key-1" not in pending.plan.diff and "sk-new-key-1" not in str(pending.plan.report.to_json())
        assert await session.service.read_unit() == unit


async def test_nothing_to_change_and_refused_plans_need_no_confirmation(demo: Demo) -> None:
    async with _session(demo) as session:
        pending = await plan_apply(session, EditRequest())
        assert not pending.needs_confirmation
        assert (await pending.execute()).state is ApplyState.UNCHANGED
        spec_v2_tree = parse_edits(["speculative-eagle-topk=2"], envs=["SGLANG_ENABLE_SPEC_V2=1"])
        refused = await plan_apply(session, spec_v2_tree)
        assert not refused.plan.ok and not refused.needs_confirmation
        result = await refused.execute()
        assert result.state is ApplyState.REFUSED and result.error


async def test_a_cancelled_execute_rolls_back_before_it_ends_and_frees_the_lock(demo: Demo) -> None:
    """The console closing mid-apply cancels the task: the new unit is not verified, so the old one goes back."""
    async with _session(demo) as session:
        unit = await session.service.read_unit()
        pending = await plan_apply(session, STEPS_3, timeout_s=60)
        task: asyncio.Task[object] | None = None

        def on_event(event: ApplyEvent) -> None:
            if isinstance(event, StepChanged) and event.state is ApplyState.RESTARTING and task is not None:
                task.cancel()

        task = asyncio.ensure_future(pending.execute(on_event=on_event))
        result = await task
        assert result.state is ApplyState.HEALTHY_ON_OLD  # type: ignore[attr-defined]
        assert await session.service.read_unit() == unit
        async with await plan_apply(session, STEPS_3):
            pass  # the lock is free again
