"""The core's planned operations all offer what console.core.pending describes, so that one progress screen (and
one CLI driver) can run any of them: execute with an event sink, abort; and only those that can be stopped
midway offer request_abort."""

from __future__ import annotations

import inspect

import pytest

from console.core.apply import PendingApply
from console.core.pending import Interruptible, Pending
from console.core.snapshot.freeze import PendingFreeze
from console.core.tune import PendingTune

PENDINGS = [PendingApply, PendingFreeze, PendingTune]


@pytest.mark.parametrize("pending", PENDINGS, ids=lambda cls: cls.__name__)
def test_every_planned_operation_is_a_pending(pending: type) -> None:
    assert issubclass(pending, Pending)
    assert inspect.iscoroutinefunction(pending.execute) and inspect.iscoroutinefunction(pending.abort)
    assert "on_event" in inspect.signature(pending.execute).parameters
    assert "why" in inspect.signature(pending.abort).parameters


def test_apply_and_tune_can_be_stopped_midway_and_a_freeze_runs_to_its_end() -> None:
    assert issubclass(PendingApply, Interruptible) and issubclass(PendingTune, Interruptible)
    assert not issubclass(PendingFreeze, Interruptible)


def test_something_else_is_not_a_pending() -> None:
    class OnlyExecutes:
        async def execute(self, on_event: object) -> None: ...

    assert not issubclass(OnlyExecutes, Pending) and not issubclass(OnlyExecutes, Interruptible)
