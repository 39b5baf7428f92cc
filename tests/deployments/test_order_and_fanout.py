"""The restart order (written once: apply, restart and rollback run it) and which members carry an edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.change import EditError, EditRequest, parse_edits
from console.core.deployment import member_edits, resolve_deployment, restart_order


def kinds(order) -> list[tuple[str, tuple[str, ...]]]:  # type: ignore[no-untyped-def]
    return [(s.kind, s.members) for s in order.steps]


def test_ranks_restart_together_rank_0_first_down_every_rank_confirmed_down_then_all_up(profiles: Path) -> None:
    ranks = resolve_deployment("kimi-2node", profiles)
    both = ("gpu-a", "gpu-b")
    order = restart_order(ranks, gated=True)
    assert order.mode == "together" and order.downtime
    assert kinds(order) == [
        ("write", both),
        ("stop", ("gpu-a",)),
        ("wait_down", both),
        ("start", both),
        ("open_gate", ("gpu-a",)),
        ("wait_ready", both),
        ("verify", both),
    ]
    # a restart as it is writes nothing; without the gate there is none to open; a change of one rank restarts all
    assert [k for k, _ in kinds(restart_order(ranks, ["gpu-b"], write=False))] == [
        "stop", "wait_down", "start", "wait_ready", "verify"
    ]  # fmt: skip
    assert "previous units" in restart_order(ranks, rollback=True).steps[0].why


def test_pd_goes_one_member_at_a_time_prefill_first_each_out_of_smg_first(profiles: Path) -> None:
    pd = resolve_deployment("kimi-pd", profiles)
    order = restart_order(pd, ["gpu-d", "gpu-a", "gpu-c"])
    assert order.mode == "one_at_a_time" and not order.downtime
    prefill = ["router_out", "drain", "stop", "wait_dropped", "apply", "router_in"]  # down until decodes drop it
    decode = ["router_out", "drain", "apply", "router_in"]
    assert kinds(order) == [(k, ("gpu-a",)) for k in prefill] + [(k, (m,)) for m in ("gpu-c", "gpu-d") for k in decode]
    # the rollback goes back last changed first
    back = restart_order(pd, ["gpu-a", "gpu-c"], rollback=True)
    assert list(dict.fromkeys(s.members[0] for s in back.steps)) == ["gpu-c", "gpu-a"]


def test_a_pd_role_with_one_server_means_downtime_and_the_plan_says_so(profiles: Path) -> None:
    (profiles / "deployments" / "pair.toml").write_text(
        '[router]\nurl = "http://r:8000"\n[[member]]\nhost = "gpu-a"\nrole = "prefill"\n'
        '[[member]]\nhost = "gpu-b"\nrole = "decode"\n[[member]]\nhost = "gpu-c"\nrole = "decode"\n'
    )
    order = restart_order(resolve_deployment("pair", profiles))
    assert order.downtime and "one prefill server" in order.notes[0]
    assert not restart_order(resolve_deployment("pair", profiles), ["gpu-b"]).downtime


def test_a_single_host_is_its_own_apply(profiles: Path) -> None:
    assert kinds(restart_order(resolve_deployment("gpu-a", profiles))) == [("apply", ("gpu-a",))]


EDIT = parse_edits(["speculative-num-steps=3", "max-running-requests=64"], envs=["SGLANG_ENABLE_SPEC_V2=1"])


def test_every_rank_carries_the_whole_edit_and_it_cannot_be_narrowed(profiles: Path) -> None:
    ranks = resolve_deployment("kimi-2node", profiles)
    assert member_edits(ranks, EDIT).per_member == {"gpu-a": EDIT, "gpu-b": EDIT}
    with pytest.raises(EditError, match="every rank of kimi-2node runs the same command"):
        member_edits(ranks, EDIT, only=["gpu-b"])


@pytest.mark.parametrize("flag", ["node-rank=1", "nnodes=3", "disaggregation-mode=decode", "port=30001"])
def test_a_members_own_flag_is_refused(profiles: Path, flag: str) -> None:
    with pytest.raises(EditError, match="each member of kimi-pd has its own"):
        member_edits(resolve_deployment("kimi-pd", profiles), parse_edits([flag]))


def test_pd_narrowed_to_decode_keeps_the_shared_speculative_flags_on_every_member(profiles: Path) -> None:
    pd = resolve_deployment("kimi-pd", profiles)
    edits = member_edits(pd, EDIT, only=["decode"])
    shared = EditRequest((("--speculative-num-steps", "3"),), (), (("SGLANG_ENABLE_SPEC_V2", "1"),), ())
    assert edits.per_member == {"gpu-a": shared, "gpu-b": shared, "gpu-c": EDIT, "gpu-d": EDIT}
    assert "--speculative-num-steps, SGLANG_ENABLE_SPEC_V2 must match" in edits.notes[0]
    assert "also applied to gpu-a, gpu-b" in edits.notes[0]
    # a flag of one side only stays there
    only_decode = member_edits(pd, parse_edits(["max-running-requests=64"]), only=["gpu-c"])
    assert list(only_decode.per_member) == ["gpu-c"] and only_decode.notes == ()
    with pytest.raises(EditError, match="not a member or role of kimi-pd"):
        member_edits(pd, EDIT, only=["gpu-z"])
