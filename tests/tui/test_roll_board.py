"""The console's board of a roll (console/tui/presenters/roll_board.py), pure: each host's phase as the roll's
events come (pending, draining behind the router, applying with its start's progress, verifying, benchmarking for
the gate, rolling back), its outcome, the hosts the roll did not reach, and the log's lines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from console.core.change import ApplyState
from console.core.events import Notice, PhaseChanged, StepChanged
from console.core.phases import PhaseState, PhaseStatus
from console.core.roll import (
    BatchStarted,
    GateJudged,
    GateVerdict,
    HostFinished,
    HostOutcome,
    HostProgress,
    HostStarted,
    PendingRoll,
    RollHost,
    RollSpec,
    RollStopped,
    RouterStep,
    WaveSize,
)
from console.tui.presenters.roll_board import RollBoard

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Idle:
    """A host's change that is never run here: the board only reads the roll's plan and its events."""

    restarts = True
    refusal = None

    async def run(self, on_event: Any) -> Any:
        raise AssertionError("not run")

    def request_abort(self) -> None: ...

    async def abort(self, why: str) -> None: ...


def planned(labels: tuple[str, ...] = ("a", "b", "c"), operation: str = "apply") -> PendingRoll:
    hosts = [RollHost(label, None, Idle()) for label in labels]  # type: ignore[arg-type]
    spec = RollSpec(canary=1, wave=WaveSize(count=2))
    return PendingRoll("trio", operation, hosts, spec, router=None, router_before=[], refusals=[], drain_timeout_s=1.0)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_every_host_starts_pending_in_its_batch() -> None:
    board = RollBoard.planned(planned())
    assert [(r.host, r.batch, r.phase) for r in board.rows.values()] == [
        ("a", "canary 1", "pending"), ("b", "wave 1", "pending"), ("c", "wave 1", "pending"),
    ]  # fmt: skip
    assert board.batches == ["canary 1: a", "wave 1: b, c"] and board.count("pending") == 3


def test_a_host_goes_through_the_router_its_start_and_its_verification() -> None:
    roll = planned()
    board = RollBoard.planned(roll)
    row = board.rows["a"]
    assert board.feed(BatchStarted(roll.batches[0], at(0))) == ("== canary 1: a", "bold")
    board.feed(HostStarted("a", roll.batches[0], at(1)))
    assert row.phase == "applying" and board.under_way == ["a"]
    board.feed(RouterStep("a", "removed", "http://a:30000 left the router", at(2)))
    line = board.feed(RouterStep("a", "draining", "3 requests still running or queued on the worker", at(3)))
    assert row.phase == "draining" and line == (
        "a: router: draining: 3 requests still running or queued on the worker",
        "",
    )
    board.feed(RouterStep("a", "drained", "no request running or queued on the worker", at(4)))
    assert row.phase == "applying"
    board.feed(HostProgress("a", StepChanged(ApplyState.WRITTEN, "", at(5))))
    assert row.detail == "new unit written"
    loading = PhaseStatus("load_weights", "loading weights", PhaseState.RUNNING, at(6))
    started = PhaseChanged("started", "load_weights", at(6), "Load weight begin", 0.25, (loading,))
    assert board.feed(HostProgress("a", started)) == ("a: loading weights ...", "dim")
    assert row.start_progress == 0.25 and "loading weights (25% of the start)" in row.detail
    board.feed(HostProgress("a", StepChanged(ApplyState.HEALTHY, "", at(8))))
    assert row.phase == "verifying"
    board.feed(GateJudged("a", GateVerdict(True, "output_throughput 1000.0 vs 990.0 (+1.0%) at C=8"), at(9)))
    assert row.detail.startswith("gate passed: output_throughput 1000.0")
    board.feed(RouterStep("a", "added", "back in the router", at(10)))
    line = board.feed(HostFinished("a", HostOutcome.DONE, "verified", at(11)))
    assert line == ("a: done (verified)", "green")
    assert (row.phase, row.outcome, row.start_progress, row.seconds(at(99))) == ("done", HostOutcome.DONE, None, 10.0)


def test_a_failed_host_rolls_back_and_the_hosts_not_reached_are_untouched() -> None:
    roll = planned()
    board = RollBoard.planned(roll)
    board.feed(HostStarted("a", roll.batches[0], at(1)))
    board.feed(HostProgress("a", StepChanged(ApplyState.FAILED, "OSError: no config.json", at(2))))
    assert board.rows["a"].phase == "rolling back"
    line = board.feed(HostFinished("a", HostOutcome.ROLLED_BACK, "healthy on old: OSError", at(3)))
    assert line == ("a: rolled back (healthy on old: OSError)", "bold red")
    assert board.feed(RollStopped("a: healthy on old: OSError (1 failed; at most 0 may fail)", at(4)))[1] == "bold red"
    assert board.feed(Notice("the router's worker list after the roll could not be read")) is not None
    ledger = roll.report.ledger
    ledger.begin("a", roll.batches[0], at(1))
    ledger.finish("a", HostOutcome.ROLLED_BACK, "healthy on old: OSError", at(3))
    board.finish(roll.report)
    assert [(r.phase, r.detail) for r in board.rows.values()] == [
        ("rolled back", "healthy on old: OSError"),
        ("not started", "untouched: the roll stopped at a failure"),
        ("not started", "untouched: the roll stopped at a failure"),
    ]
    assert board.stopped is not None and board.stopped.startswith("a: healthy on old")


def test_a_restart_and_a_freeze_say_what_they_do() -> None:
    roll = planned(operation="restart")
    board = RollBoard.planned(roll)
    board.feed(HostStarted("a", roll.batches[0], at(1)))
    assert board.rows["a"].phase == "restarting"
    roll = planned(operation="freeze")
    board = RollBoard.planned(roll)
    board.feed(HostStarted("a", roll.batches[0], at(1)))
    from console.core.snapshot import FreezeStep

    assert board.feed(HostProgress("a", FreezeStep("enabled", "sglang.service", at(2)))) == (
        "a: enabled: sglang.service",
        "",
    )
    assert board.rows["a"].phase == "freezing"
