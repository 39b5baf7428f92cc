"""What must match across members, held on launches the 0.5.23 rules resolve from real flag lists."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from console.core.apply import editor_form
from console.core.deployment import (
    GATE_DEST,
    Deployment,
    MemberLaunch,
    check_members,
    errors,
    gate_note,
    no_gate_text,
    resolve_deployment,
)
from console.sglang.rules import check_launch

SPEC = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "d", "--speculative-num-steps", "2",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"]  # fmt: skip
RANK = ["--model-path", "kimi", "--tp-size", "16", "--nnodes", "2", "--dist-init-addr", "10.0.0.1:5000",
        "--gated-launch-port", "30100", *SPEC]  # fmt: skip


def launch(deployment: Deployment, name: str, argv: list[str], env: Mapping[str, str] | None = None,
           version: str | None = "0.5.23", *, strict: bool = True) -> MemberLaunch:  # fmt: skip
    env = dict(env or {"SGLANG_ENABLE_SPEC_V2": "1"})
    report = check_launch(argv, env, "0.5.23")
    assert report.ok or not strict, report.errors
    return MemberLaunch(deployment.member(name), report.resolved, env, version, report.explicit)


def replaced(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def codes(found: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(m.level, m.code) for m in found]


@pytest.fixture
def ranks(profiles: Path) -> Deployment:
    return resolve_deployment("kimi-2node", profiles)


@pytest.fixture
def pd(profiles: Path) -> Deployment:
    return resolve_deployment("kimi-pd", profiles)


def two_ranks(deployment: Deployment, rank1: list[str], rank0: list[str] = RANK) -> list[MemberLaunch]:
    return [
        launch(deployment, "gpu-a", [*rank0, "--node-rank", "0"]),
        launch(deployment, "gpu-b", [*rank1, "--node-rank", "1"]),
    ]


def test_ranks_that_run_the_same_command_but_their_rank_match(ranks: Deployment) -> None:
    assert check_members(ranks, two_ranks(ranks, RANK)) == []


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--speculative-num-steps", "3"), ("--model-path", "other"), ("--tp-size", "8"),
     ("--dist-init-addr", "10.0.0.2:5000"), ("--gated-launch-port", "30101")],
)  # fmt: skip
def test_a_rank_that_differs_in_what_makes_them_one_group_is_an_error(ranks: Deployment, flag: str, value: str) -> None:
    found = check_members(ranks, two_ranks(ranks, replaced(RANK, flag, value)))
    assert {code for _level, code in codes(errors(found))} == {"ranks-differ"}  # steps 3 also moves the draft tokens
    said = next(m.message for m in found if m.message.startswith(flag))
    assert "gpu-a:" in said and f"gpu-b: {value}" in said


def test_the_ranks_their_count_and_the_rendezvous_are_checked_against_the_profile(ranks: Deployment) -> None:
    wrong = [
        launch(ranks, "gpu-a", [*RANK, "--node-rank", "1"]),
        launch(ranks, "gpu-b", [*replaced(RANK, "--nnodes", "4"), "--node-rank", "1"]),
    ]
    found = errors(check_members(ranks, wrong))
    assert ("error", "node-rank") in codes(found) and ("error", "nnodes") in codes(found)
    assert any("gpu-a runs --node-rank 1, the profile names it rank 0" in m.message for m in found)
    no_addr = [a for a in RANK if a not in ("--dist-init-addr", "10.0.0.1:5000")]
    assert ("error", "dist-init-addr") in codes(check_members(ranks, two_ranks(ranks, no_addr, no_addr)))


def test_spec_v2_on_one_rank_only_is_an_error(ranks: Deployment) -> None:
    launches = [
        launch(ranks, "gpu-a", [*RANK, "--node-rank", "0"]),
        launch(ranks, "gpu-b", [*RANK, "--node-rank", "1"], env={"SGLANG_ENABLE_SPEC_V2": "0"}),
    ]
    assert "SGLANG_ENABLE_SPEC_V2 differs" in errors(check_members(ranks, launches))[0].message


def test_ranks_without_the_gate_on_0_5_23_get_a_warning_and_another_flag_differing_too(ranks: Deployment) -> None:
    ungated = [a for a in RANK if a not in ("--gated-launch-port", "30100")]
    found = check_members(ranks, two_ranks(ranks, [*ungated, "--max-running-requests", "32"], ungated))
    assert codes(found) == [("warning", "no-gate"), ("warning", "differs")]
    assert "--max-running-requests differs" in found[1].message


def test_different_versions_are_an_error(ranks: Deployment) -> None:
    launches = two_ranks(ranks, RANK)
    launches[1] = MemberLaunch(launches[1].member, launches[1].resolved, launches[1].env, "0.5.17")
    found = errors(check_members(ranks, launches))
    assert "different SGLang versions (gpu-a: 0.5.23; gpu-b: 0.5.17)" in found[0].message


PD_BASE = ["--model-path", "kimi", "--tp-size", "8", "--page-size", "16", "--disaggregation-transfer-backend", "nixl",
           *SPEC]  # fmt: skip


def pd_launches(pd: Deployment, *, strict: bool = True, **argv_of: list[str]) -> list[MemberLaunch]:
    roles = {"gpu-a": "prefill", "gpu-b": "prefill", "gpu-c": "decode", "gpu-d": "decode"}
    return [
        launch(pd, name, argv_of.get(name.replace("-", "_"), [*PD_BASE, "--disaggregation-mode", role]), strict=strict)
        for name, role in roles.items()
    ]


def test_a_pd_pair_on_the_same_page_size_kv_and_spec_matches(pd: Deployment) -> None:
    assert check_members(pd, pd_launches(pd)) == []


def test_a_pair_with_mismatched_page_sizes_is_an_error_naming_both_values(pd: Deployment) -> None:
    found = check_members(pd, pd_launches(pd, gpu_c=[*replaced(PD_BASE, "--page-size", "32"),
                                                     "--disaggregation-mode", "decode"]))  # fmt: skip
    assert codes(errors(found)) == [("error", "pd-differ")]
    assert "--page-size differs (gpu-a, gpu-b, gpu-d: 16; gpu-c: 32)" in found[0].message


def test_an_eagle_decode_needs_its_prefill_on_the_same_speculative_setup(pd: Deployment) -> None:
    plain = [a for a in PD_BASE if a not in SPEC]
    found = check_members(pd, pd_launches(pd, gpu_a=[*plain, "--disaggregation-mode", "prefill"]))
    assert ("error", "pd-speculative") in codes(errors(found))
    # without speculation on decode, a prefill's setup is only a warning
    no_spec = {n: [*plain, "--disaggregation-mode", r] for n, r in (("gpu_b", "prefill"), ("gpu_c", "decode"),
                                                                    ("gpu_d", "decode"))}  # fmt: skip
    found = check_members(pd, pd_launches(pd, **no_spec))
    assert errors(found) == [] and ("warning", "pd-speculative") in codes(found)


def test_the_wrong_mode_and_fake_on_prefill_are_errors(pd: Deployment) -> None:
    fake = replaced(PD_BASE, "--disaggregation-transfer-backend", "fake")
    # (the rules refuse fake on a prefill on their own too: this is the deployment's own check of the same)
    found = errors(check_members(pd, pd_launches(pd, strict=False, gpu_b=[*PD_BASE, "--disaggregation-mode", "decode"],
                                                  gpu_a=[*fake, "--disaggregation-mode", "prefill"])))  # fmt: skip
    assert ("error", "disaggregation-mode") in codes(found) and ("error", "fake-prefill") in codes(found)
    assert any("gpu-b is a prefill server in the profile but runs --disaggregation-mode decode" in m.message
               for m in found)  # fmt: skip


def test_a_pd_pair_may_differ_in_tensor_parallelism(pd: Deployment) -> None:
    found = check_members(pd, pd_launches(pd, gpu_c=[*replaced(PD_BASE, "--tp-size", "4"),
                                                     "--disaggregation-mode", "decode"]))  # fmt: skip
    assert errors(found) == []


def test_a_single_host_has_nothing_to_match(profiles: Path) -> None:
    single = resolve_deployment("gpu-a", profiles)
    assert check_members(single, [launch(single, "gpu-a", PD_BASE)]) == []


def test_the_gate_is_offered_with_its_cost_never_added_and_its_change_said_before_it_is_confirmed(
    ranks: Deployment,
) -> None:
    """Without the gate the warning says what it would give, why it is not added (no timeout: a start without a
    console waits for ever) and the command that adds it; adding or removing it is a note of the change; a rank's
    editor offers the field with that cost under it, a host's editor does not."""
    ungated = [a for a in RANK if a not in ("--gated-launch-port", "30100")]
    (warning,) = [m for m in check_members(ranks, two_ranks(ranks, ungated, ungated)) if m.code == "no-gate"]
    assert warning.message == no_gate_text("kimi-2node")
    assert "no timeout" in warning.message and "waits at it for ever" in warning.message
    assert "opsconsole apply kimi-2node --set gated-launch-port=PORT" in warning.message
    added = gate_note("kimi-2node", None, 30100)
    assert added is not None and "POST /gate/activate" in added and "opsconsole restart kimi-2node" in added
    assert "waits there for ever" in added
    assert gate_note("kimi-2node", 30100, 30100) is None
    removed = gate_note("kimi-2node", 30100, None)
    assert removed is not None and "removed" in removed
    unit = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server " + " ".join([*ungated, "--node-rank", "0"])
    plain = editor_form(unit, "0.5.23")
    assert GATE_DEST not in {f.dest for f in plain.fields}
    form = editor_form(unit, "0.5.23", extra=(GATE_DEST,))
    gate = form.field(GATE_DEST)
    assert (gate.flag, gate.kind, form.values[GATE_DEST]) == ("--gated-launch-port", "int", "")
    assert "waits for ever" in gate.hint and "no timeout" in gate.hint
    preview = form.preview({GATE_DEST: "30100"})
    assert preview.edits.set_flags == (("--gated-launch-port", "30100"),)
