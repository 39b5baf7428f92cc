"""A deployment's state from its members' readings: rank 0's health, never a rank >= 1's dummy 200."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console.core.deployment import (
    Deployment,
    MemberReading,
    RouterListing,
    RouterReading,
    judge,
    resolve_deployment,
)

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def running(deployment: Deployment, name: str, **kw: object) -> MemberReading:
    values: dict[str, object] = {"active_state": "active", "sub_state": "running", "main_pid": 100, "started_at": T0,
                                 "summary": "active (running)"}  # fmt: skip
    member = deployment.member(name)
    if member.serves_api:
        values.update(healthy=True, ready=True)
    values.update(kw)
    return MemberReading(member, **values)  # type: ignore[arg-type]


@pytest.fixture
def ranks(profiles: Path) -> Deployment:
    return resolve_deployment("kimi-2node", profiles)


def test_two_running_ranks_with_rank_0_answering_are_up(ranks: Deployment) -> None:
    health = judge(ranks, [running(ranks, "gpu-a"), running(ranks, "gpu-b", started_at=T0 + timedelta(seconds=2))])
    assert health.state == "up" and health.ok
    assert health.members["gpu-b"].reason.startswith("its unit runs (its own /health is a dummy 200")


def test_a_dead_rank_makes_the_deployment_down_naming_it_although_rank_0_still_answers(ranks: Deployment) -> None:
    dead = running(ranks, "gpu-b", active_state="failed", sub_state="failed", summary="failed (result: signal)")
    health = judge(ranks, [running(ranks, "gpu-a"), dead])
    assert health.state == "down" and health.down_members == ["gpu-b"]
    assert health.reason == "gpu-b: down, failed (result: signal)"


def test_a_rank_whose_dummy_health_would_say_200_is_still_down_when_its_journal_failed(ranks: Deployment) -> None:
    failing = running(ranks, "gpu-b", healthy=True, failure="Received sigquit from a child process")
    assert judge(ranks, [running(ranks, "gpu-a"), failing]).state == "down"


def test_a_rank_restarted_on_its_own_after_rank_0_cannot_rejoin(ranks: Deployment) -> None:
    late = running(ranks, "gpu-b", started_at=T0 + timedelta(minutes=5))
    health = judge(ranks, [running(ranks, "gpu-a"), late])
    assert health.state == "down" and "cannot rejoin the running group" in health.reason


def test_with_rank_0_down_a_running_rank_is_named_too(ranks: Deployment) -> None:
    """A killed rank 1 is back running (systemd restarted it) by the time rank 0, which lost its peer, is down: the
    deployment is down naming both, never rank 0 alone (a CI run read exactly that, 4 s after the kill)."""
    gone = running(ranks, "gpu-a", active_state="activating", sub_state="auto-restart",
                   summary="activating (auto-restart)", healthy=False, ready=False)  # fmt: skip
    back = running(ranks, "gpu-b", started_at=T0 + timedelta(seconds=20))
    health = judge(ranks, [gone, back])
    assert health.state == "down" and health.down_members == ["gpu-a", "gpu-b"]
    assert "gpu-b: down, its unit runs, but rank 0 is down: it cannot rejoin" in health.reason


def test_rank_0_not_answering_is_down_while_it_starts(ranks: Deployment) -> None:
    health = judge(ranks, [running(ranks, "gpu-a", healthy=False, ready=False), running(ranks, "gpu-b")])
    assert health.state == "down" and health.members["gpu-a"].state == "starting"
    health = judge(ranks, [running(ranks, "gpu-a", ready=False), running(ranks, "gpu-b")])
    assert "/ready does not yet" in health.reason


def test_a_member_that_cannot_be_read_is_unknown_and_the_deployment_degraded(ranks: Deployment) -> None:
    health = judge(ranks, [running(ranks, "gpu-a"), MemberReading(ranks.member("gpu-b"), error="no route to host")])
    assert health.state == "degraded" and health.members["gpu-b"].state == "unknown"


@pytest.fixture
def pd(profiles: Path) -> Deployment:
    return resolve_deployment("kimi-pd", profiles)


def routed(pd: Deployment, name: str, **kw: object) -> MemberReading:
    return running(pd, name, router=RouterListing(True, "ready", True), **kw)


READY = RouterReading(True)


def test_pd_up_degraded_and_down(pd: Deployment) -> None:
    names = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]
    assert judge(pd, [routed(pd, n) for n in names], router=READY).state == "up"
    out = [routed(pd, n) for n in names[:3]] + [running(pd, "gpu-d", router=RouterListing(False))]
    health = judge(pd, out, router=READY)
    assert health.state == "degraded" and health.members["gpu-d"].state == "out"
    dead = [routed(pd, n) for n in ("gpu-a", "gpu-b")] + [
        routed(pd, n, active_state="inactive", sub_state="dead", summary="inactive (dead)") for n in ("gpu-c", "gpu-d")
    ]
    health = judge(pd, dead, router=READY)
    assert health.state == "down" and health.reason.startswith("no decode server serves behind smg")
    assert judge(pd, [routed(pd, n) for n in names], router=RouterReading(None, "connection refused")).state == "down"


def test_pd_sides_are_the_increases_over_the_sweep_side_by_side(profiles: Path) -> None:
    from console.core.deployment import SideReadings, pd_sides, sides_lines

    pd = resolve_deployment("kimi-pd", profiles)
    before = SideReadings(
        {"smg_pd_ttft_seconds_sum": 1.0, "smg_pd_ttft_seconds_count": 10, "smg_pd_bootstrap_failures_total": 2},
        {"gpu-a": {"sglang:time_to_first_token_seconds_sum": 3.0, "sglang:time_to_first_token_seconds_count": 10},
         "gpu-c": {"sglang:inter_token_latency_seconds_sum": 1.0, "sglang:inter_token_latency_seconds_count": 100,
                   "sglang:num_transfer_failed_reqs_total": 1}},
    )  # fmt: skip
    after = SideReadings(
        {"smg_pd_ttft_seconds_sum": 1.5, "smg_pd_ttft_seconds_count": 20, "smg_pd_bootstrap_failures_total": 3},
        {"gpu-a": {"sglang:time_to_first_token_seconds_sum": 4.0, "sglang:time_to_first_token_seconds_count": 20},
         "gpu-c": {"sglang:inter_token_latency_seconds_sum": 1.8, "sglang:inter_token_latency_seconds_count": 200,
                   "sglang:num_transfer_failed_reqs_total": 1}},
    )  # fmt: skip
    sides = pd_sides(pd, before, after)
    assert sides["prefill"]["ttft_ms_smg"] == 50.0 and sides["prefill"]["ttft_ms_servers"] == 100.0
    assert sides["decode"]["tpot_ms_servers"] == 8.0 and sides["decode"]["kv_transfer_ms"] is None
    assert sides["decode"]["failures"]["num_transfer_failed_reqs_total"] == 0.0
    assert sides["smg"] == {"smg_pd_bootstrap_failures_total": 1.0}
    assert sides_lines(sides)[1].startswith("decode: TPOT 8.0 ms")
