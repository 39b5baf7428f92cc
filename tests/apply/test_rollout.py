"""The pure apply plan: edit parsing, version choice, verification, and the state machine."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.core.apply import lock_owner
from console.core.change import (
    RESTART_TRANSITIONS,
    TERMINAL,
    TRANSITIONS,
    ApplyState,
    EditError,
    EditRequest,
    Expectation,
    IllegalTransition,
    Rollout,
    choose_version,
    parse_edits,
    server_value,
    unified_diff,
    values_equal,
    verify_resolved,
)

T0 = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)

KINDS = {"--enable-metrics": "bool", "--disable-cuda-graph": "bool", "--cuda-graph-bs": "list"}


def kind(flag: str) -> str | None:
    return KINDS.get(flag, "value" if flag.startswith("--speculative") else None)


def test_set_values_with_or_without_dashes() -> None:
    edits = parse_edits(["--speculative-num-steps=3", "speculative-eagle-topk=1"], flag_kind=kind)
    assert edits.set_flags == (("--speculative-num-steps", "3"), ("--speculative-eagle-topk", "1"))
    assert not edits.empty


def test_boolean_flags() -> None:
    edits = parse_edits(["--enable-metrics", "disable-cuda-graph=false"], flag_kind=kind)
    assert edits.set_flags == (("--enable-metrics", True),)
    assert edits.unset_flags == ("--disable-cuda-graph",)
    assert parse_edits(["--enable-metrics=yes"], flag_kind=kind).set_flags == (("--enable-metrics", True),)
    with pytest.raises(EditError, match="boolean flag"):
        parse_edits(["--enable-metrics=maybe"], flag_kind=kind)


def test_list_flags_split_on_commas_and_spaces() -> None:
    edits = parse_edits(["--cuda-graph-bs=1,2, 4 8"], flag_kind=kind)
    assert edits.set_flags == (("--cuda-graph-bs", ["1", "2", "4", "8"]),)
    with pytest.raises(EditError, match="at least one value"):
        parse_edits(["--cuda-graph-bs= , "], flag_kind=kind)


def test_value_flag_without_value_is_a_usage_error() -> None:
    with pytest.raises(EditError, match="takes a value"):
        parse_edits(["--speculative-num-steps"], flag_kind=kind)
    with pytest.raises(EditError, match="empty value"):
        parse_edits(["--speculative-num-steps="], flag_kind=kind)


def test_unknown_flags_keep_their_text_for_the_rules_to_judge() -> None:
    assert parse_edits(["--foo=bar"], flag_kind=kind).set_flags == (("--foo", "bar"),)
    assert parse_edits(["--foo"], flag_kind=kind).set_flags == (("--foo", True),)


@pytest.mark.parametrize(
    ("sets", "unsets", "message"),
    [
        (["-x=1"], [], "short flag"),
        (["--bad name=1"], [], "not a launch flag name"),
        (["=3"], [], "not a launch flag name"),
        (["--speculative-num-steps=2", "--speculative-num-steps=3"], [], "more than once"),
        (["--speculative-num-steps=2"], ["speculative-num-steps"], "both set and unset"),
        ([], ["--"], "not a launch flag name"),
    ],
)
def test_malformed_flag_edits(sets: list[str], unsets: list[str], message: str) -> None:
    with pytest.raises(EditError, match=message):
        parse_edits(sets, unsets, flag_kind=kind)


def test_environment_edits() -> None:
    edits = parse_edits([], envs=["SGLANG_ENABLE_SPEC_V2=1", "EMPTY="], unset_envs=["CUDA_VISIBLE_DEVICES"])
    assert edits.set_env == (("SGLANG_ENABLE_SPEC_V2", "1"), ("EMPTY", ""))
    assert edits.unset_env == ("CUDA_VISIBLE_DEVICES",)
    for bad in (["NOVALUE"], ["1BAD=x"], ["A-B=x"]):
        with pytest.raises(EditError, match="KEY=VALUE"):
            parse_edits([], envs=bad)
    with pytest.raises(EditError, match="variable name"):
        parse_edits([], unset_envs=["not valid"])
    with pytest.raises(EditError, match="both set and unset"):
        parse_edits([], envs=["A=1"], unset_envs=["A"])


def test_empty_request() -> None:
    assert EditRequest().empty
    assert parse_edits([]).empty


def test_version_choice_prefers_the_running_server() -> None:
    assert choose_version("0.5.9", "0.5.6", "0.5.23") == ("0.5.9", "server")
    assert choose_version(None, "0.5.6", "0.5.23") == ("0.5.6", "profile")
    assert choose_version(None, None, "0.5.23") == ("0.5.23", "newest")


def test_unified_diff_names_the_unit_and_shows_only_the_change() -> None:
    old = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server \\\n  --speculative-num-steps 2\n"
    new = old.replace("steps 2", "steps 3")
    diff = unified_diff(old, new, "sglang.service")
    assert diff.startswith("--- sglang.service (now)\n+++ sglang.service (new)\n")
    assert "-  --speculative-num-steps 2\n" in diff and "+  --speculative-num-steps 3\n" in diff
    assert unified_diff(old, old, "x") == ""
    # a last line without newline still gives a well-formed diff
    assert unified_diff("a", "b", "u").endswith("-a\n+b\n")


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (3, "3", True),
        (3, 3.0, True),
        ("0.85", 0.85, True),
        (None, None, True),
        (None, "None", True),
        (None, 0, False),
        (True, "true", True),
        (False, True, False),
        (False, "False", True),
        (True, 1, True),
        ([1, 2, 4], ["1", "2", "4"], True),
        ([1, 2], [1, 2, 4], False),
        ([1], 1, False),
        ("EAGLE", "EAGLE", True),
        ("EAGLE", "EAGLE3", False),
        ("fa3", 3, False),
    ],
)
def test_values_equal(a: object, b: object, equal: bool) -> None:
    assert values_equal(a, b) is equal
    assert values_equal(b, a) is equal


@given(st.one_of(st.integers(), st.floats(allow_nan=False), st.text(), st.booleans(), st.none()))
def test_values_equal_is_reflexive(value: object) -> None:
    assert values_equal(value, value)


def test_server_value_reads_top_level_then_internal_states() -> None:
    info = {"speculative_num_steps": 3, "internal_states": [{"avg_spec_accept_length": 2.4}]}
    assert server_value(info, "speculative_num_steps") == (True, 3)
    assert server_value(info, "avg_spec_accept_length") == (True, 2.4)
    assert server_value(info, "missing") == (False, None)
    assert server_value({"internal_states": []}, "x") == (False, None)


def test_verification_tells_requested_adjusted_and_mismatch_apart() -> None:
    expectations = {
        "speculative_num_steps": Expectation("speculative_num_steps", 3, 3),
        "speculative_num_draft_tokens": Expectation(
            "speculative_num_draft_tokens", 8, 4, "draft tokens := steps + 1 when topk = 1"
        ),
        "max_running_requests": Expectation("max_running_requests", None, 48, "reset to 48 with speculation"),
        "attention_backend": Expectation("attention_backend", "fa3", "fa3"),
        "mem_fraction_static": Expectation("mem_fraction_static", 0.8, 0.8),
    }
    info = {
        "speculative_num_steps": 3,
        "speculative_num_draft_tokens": 4,
        "max_running_requests": 48,
        "attention_backend": "flashinfer",
    }
    verification = verify_resolved(expectations, info)
    statuses = {v.dest: v.status for v in verification.values}
    assert statuses == {
        "speculative_num_steps": "as_requested",
        "speculative_num_draft_tokens": "adjusted",
        "max_running_requests": "adjusted",
        "attention_backend": "mismatch",
        "mem_fraction_static": "not_reported",
    }
    assert not verification.ok
    assert [v.dest for v in verification.mismatches] == ["attention_backend"]
    assert {v.dest for v in verification.adjusted} == {"speculative_num_draft_tokens", "max_running_requests"}
    doc = verification.to_json()
    assert doc["ok"] is False
    assert doc["values"]["speculative_num_draft_tokens"] == {
        "requested": 8,
        "expected": 4,
        "actual": 4,
        "status": "adjusted",
        "reason": "draft tokens := steps + 1 when topk = 1",
    }
    info["attention_backend"] = "fa3"
    assert verify_resolved(expectations, info).ok


SUCCESS_PATH = [
    ApplyState.BACKED_UP,
    ApplyState.WRITTEN,
    ApplyState.DAEMON_RELOADED,
    ApplyState.RESTARTING,
    ApplyState.STARTING,
    ApplyState.HEALTHY,
    ApplyState.VERIFIED,
]
ROLLBACK_PATH = [
    ApplyState.BACKED_UP,
    ApplyState.WRITTEN,
    ApplyState.DAEMON_RELOADED,
    ApplyState.RESTARTING,
    ApplyState.STARTING,
    ApplyState.FAILED,
    ApplyState.ROLLING_BACK,
    ApplyState.RESTORED,
    ApplyState.HEALTHY_ON_OLD,
]


def walk(states: list[ApplyState]) -> Rollout:
    rollout = Rollout.start(T0)
    for state in states:
        rollout.advance(state, T0)
    return rollout


def test_success_path() -> None:
    rollout = walk(SUCCESS_PATH)
    assert rollout.finished and rollout.ok and rollout.exit_code == 0
    assert rollout.touched_host and not rollout.rolled_back
    assert rollout.history[0].to_json()["state"] == "validated"


def test_rollback_path_is_a_failure_that_restored_the_old_unit() -> None:
    rollout = walk(ROLLBACK_PATH)
    assert rollout.finished and not rollout.ok and rollout.exit_code == 1
    assert rollout.rolled_back


@pytest.mark.parametrize("final", [ApplyState.REFUSED, ApplyState.ABORTED, ApplyState.WRITE_FAILED])
def test_stops_before_touching_the_host(final: ApplyState) -> None:
    rollout = walk([final])
    assert rollout.finished and not rollout.ok and not rollout.touched_host


def test_unchanged_is_success_without_touching_the_host() -> None:
    rollout = walk([ApplyState.UNCHANGED])
    assert rollout.ok and not rollout.touched_host


def test_rollback_can_fail() -> None:
    rollout = walk([*ROLLBACK_PATH[:-1], ApplyState.ROLLBACK_FAILED])
    assert rollout.finished and not rollout.ok and rollout.rolled_back


def test_illegal_transitions_are_refused() -> None:
    rollout = Rollout.start(T0)
    with pytest.raises(IllegalTransition, match="validated to restarting"):
        rollout.advance(ApplyState.RESTARTING, T0)
    done = walk(SUCCESS_PATH)
    with pytest.raises(IllegalTransition):
        done.advance(ApplyState.FAILED, T0)


def test_every_state_is_reachable_and_every_non_terminal_state_can_move() -> None:
    reachable = {ApplyState.VALIDATED}
    frontier = [ApplyState.VALIDATED]
    both = {s: TRANSITIONS.get(s, frozenset()) | RESTART_TRANSITIONS.get(s, frozenset()) for s in ApplyState}
    while frontier:
        for nxt in both.get(frontier.pop(), frozenset()):
            if nxt not in reachable:
                reachable.add(nxt)
                frontier.append(nxt)
    assert reachable == set(ApplyState)
    for state in ApplyState:
        assert (state in TERMINAL) == (not both[state])


def test_lock_owner_names_user_host_process_and_start() -> None:
    at = datetime(2026, 11, 30, 5, 0, 7, tzinfo=UTC)
    assert (
        lock_owner("alice", "laptop", 4242, at)
        == "alice@laptop (opsconsole apply, pid 4242) since 2026-11-30 05:00:07 UTC"
    )
