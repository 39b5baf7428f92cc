"""What must match across a deployment's members, checked on their launches (pure).

    launches = [MemberLaunch(member, plan.report.resolved, env, version) for ...]
    problems = check_members(deployment, launches)          # [Mismatch(level, code, message, members)]

A launch is what the rules resolved from a member's unit (console.sglang.rules.check_launch: every server argument,
SGLang's defaults filled in), its environment, and the version its server reports. The checks (docs/deployments.md,
"What must match across members"; shared/research/wave5-facts.md §4, §5):

- ranks of one model run the same command but for --node-rank: the model, parallelism, page size, KV dtype, the
  speculative setup and the rendezvous must be the same on every rank, --nnodes the number of ranks and --node-rank
  the member's rank;
- prefill and decode servers: the same model, page size, KV dtype, transfer backend and decode allocation policy
  (a decode server raises at first contact otherwise, or fails the request), the right --disaggregation-mode on each,
  `fake` only on decode, and the same speculative setup where decode runs an EAGLE-family algorithm (the prefill
  ships the draft's hidden states; no startup check of SGLang's enforces it);
- every member on the same SGLang version.

An error refuses a change (nothing is written); a warning is shown. Each names the members and their values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from console import hints
from console.core.change import values_equal
from console.core.deployment.model import Deployment, Member
from console.sglang.vocabulary import View, dests

Level = Literal["error", "warning"]

MODEL = ("model_path", "tokenizer_path", "revision")
PARALLEL = ("tp_size", "pp_size", "dp_size", "ep_size", "enable_dp_attention")
KV = ("page_size", "kv_cache_dtype")
WEIGHTS = ("quantization", "dtype", "load_format", "context_length")
# The speculative setup (the vocabulary's, but the overlap: the scheduler's own, which the transfer does not see).
SPECULATIVE = tuple(d for d in dests(View.SPECULATIVE) if d != "disable_overlap_schedule")
SPECULATIVE_ENV = ("SGLANG_ENABLE_SPEC_V2",)
RENDEZVOUS = ("dist_init_addr", "dist_timeout", "gated_launch_port")
TRANSFER = (
    "disaggregation_transfer_backend",
    "disaggregation_decode_allocation_policy",
    "disaggregation_enable_kv_checksum",
)
TRANSFER_ENV = ("SGLANG_ENABLE_DISAGG_SAMPLING_MASK",)
# The same on every rank: everything that makes them one process group of one model.
SAME_ON_RANKS = (*MODEL, *PARALLEL, *RENDEZVOUS, *KV, *WEIGHTS, *SPECULATIVE)
# The same on every prefill and decode server: what the KV transfer needs both sides to agree on.
SAME_ON_PD = (*MODEL, *KV, "quantization", "dtype", "context_length", *TRANSFER)
# A member's own values: never compared (each rank its own, each server its own address).
OWN = frozenset(
    {"node_rank", "host", "port", "disaggregation_mode", "disaggregation_bootstrap_port", "api_key", "base_gpu_id"}
)
EAGLE_LIKE = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})


@dataclass(frozen=True)
class MemberLaunch:
    """A member's launch as the rules resolved it from its unit (and the version its server reports, if it does)."""

    member: Member
    resolved: Mapping[str, Any]
    env: Mapping[str, str] = field(default_factory=dict)
    version: str | None = None
    explicit: frozenset[str] = frozenset()  # the dests its unit writes itself (the rest are SGLang's defaults)


@dataclass(frozen=True)
class Mismatch:
    level: Level
    code: str
    message: str
    members: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "code": self.code, "message": self.message, "members": list(self.members)}


def launch_from_unit(
    member: Member, unit_text: str, version: str, *, server_version: str | None = None
) -> MemberLaunch:
    """A member's launch from its unit's text, resolved by `version`'s rules (UnitError: not an SGLang unit)."""
    from console.core.change import plan_for_version
    from console.sglang.unit import UnitFile

    report = plan_for_version(unit_text, unit_name=member.unit, version=version).report
    env = UnitFile.parse(unit_text, version).environment()
    return MemberLaunch(member, report.resolved, env, server_version, report.explicit)


def flag_of(dest: str) -> str:
    """`speculative_num_steps` -> `--speculative-num-steps` (SGLang's flags are their dests with dashes)."""
    return dest if dest.isupper() else "--" + dest.replace("_", "-")


def _value(launch: MemberLaunch, key: str) -> Any:
    return launch.env.get(key) if key.isupper() else launch.resolved.get(key)


def _show(value: Any) -> str:
    return "unset" if value is None or value == "" else str(value)


def _differ(launches: Sequence[MemberLaunch], keys: Iterable[str], code: str, level: Level, why: str) -> list[Mismatch]:
    """One Mismatch per key whose value is not the same on every launch: the values and who has which."""
    out = []
    for key in keys:
        groups: list[tuple[Any, list[str]]] = []
        for launch in launches:
            value = _value(launch, key)
            for known, names in groups:
                if values_equal(known, value) or (_show(known) == _show(value)):
                    names.append(launch.member.name)
                    break
            else:
                groups.append((value, [launch.member.name]))
        if len(groups) > 1:
            values = "; ".join(f"{', '.join(names)}: {_show(v)}" for v, names in groups)
            out.append(Mismatch(level, code, f"{flag_of(key)} differs ({values}): {why}",
                                tuple(launch.member.name for launch in launches)))  # fmt: skip
    return out


def _versions(launches: Sequence[MemberLaunch]) -> list[Mismatch]:
    known = [launch for launch in launches if launch.version]
    versions = {launch.version for launch in known}
    if len(versions) <= 1:
        return []
    said = "; ".join(f"{launch.member.name}: {launch.version}" for launch in known)
    return [Mismatch("error", "version", f"the members run different SGLang versions ({said}): run one version on "
                     "every member", tuple(launch.member.name for launch in known))]  # fmt: skip


def check_members(deployment: Deployment, launches: Sequence[MemberLaunch]) -> list[Mismatch]:
    """Every mismatch across the members' launches, errors first. A single host has nothing to match."""
    if deployment.kind == "single":
        return []
    found = _versions(launches)
    if deployment.kind == "multinode":
        found += _ranks(deployment, launches)
    else:
        found += _pd(launches)
    return sorted(found, key=lambda m: m.level != "error")


def _ranks(deployment: Deployment, launches: Sequence[MemberLaunch]) -> list[Mismatch]:
    found: list[Mismatch] = []
    nodes = len(deployment.ranks)
    for launch in launches:
        member = launch.member
        nnodes, rank = launch.resolved.get("nnodes"), launch.resolved.get("node_rank")
        if not values_equal(nnodes, nodes):
            found.append(Mismatch("error", "nnodes", f"{member.describe()} runs --nnodes {_show(nnodes)}: the "
                                  f"deployment has {nodes} ranks; set --nnodes {nodes}", (member.name,)))  # fmt: skip
        if not values_equal(rank, member.rank):
            found.append(Mismatch("error", "node-rank", f"{member.describe()} runs --node-rank {_show(rank)}, the "
                                  f"profile names it rank {member.rank}: set --node-rank {member.rank} in its unit, "
                                  "or correct the profile", (member.name,)))  # fmt: skip
        if not launch.resolved.get("dist_init_addr"):
            found.append(Mismatch("error", "dist-init-addr", f"{member.describe()} has no --dist-init-addr: every rank "
                                  "needs rank 0's address (--dist-init-addr HOST:PORT) to rendezvous",
                                  (member.name,)))  # fmt: skip
    found += _differ(launches, SAME_ON_RANKS, "ranks-differ", "error", "every rank runs the same model, parallelism, "
                     "KV cache, speculative setup and rendezvous")  # fmt: skip
    found += _differ(launches, SPECULATIVE_ENV, "ranks-differ", "error", "every rank runs the same speculative setup")
    rank0 = launches[0] if launches else None
    if rank0 is not None and "gated_launch_port" in rank0.resolved and rank0.resolved["gated_launch_port"] is None:
        found.append(Mismatch("warning", "no-gate", no_gate_text(deployment.name),
                              tuple(launch.member.name for launch in launches)))  # fmt: skip
    found += _explicit_differences(launches, set(SAME_ON_RANKS), "every node should run the same command but for "
                                   "--node-rank")  # fmt: skip
    return found


def _pd(launches: Sequence[MemberLaunch]) -> list[Mismatch]:
    found: list[Mismatch] = []
    for launch in launches:
        member = launch.member
        mode = launch.resolved.get("disaggregation_mode")
        if mode != member.role:
            found.append(Mismatch("error", "disaggregation-mode", f"{member.describe()} is a {member.role} server in "
                                  f"the profile but runs --disaggregation-mode {_show(mode)}: set "
                                  f"--disaggregation-mode {member.role}", (member.name,)))  # fmt: skip
        if member.role == "prefill" and launch.resolved.get("disaggregation_transfer_backend") == "fake":
            found.append(Mismatch("error", "fake-prefill", f"{member.describe()}: the fake transfer backend is for "
                                  "decode servers only (SGLang asserts on a prefill); use mooncake or nixl",
                                  (member.name,)))  # fmt: skip
    found += _differ(launches, SAME_ON_PD, "pd-differ", "error", "prefill and decode servers must agree on the "
                     "model, the KV cache's page size and dtype, and the transfer")  # fmt: skip
    found += _differ(launches, TRANSFER_ENV, "pd-differ", "error", "both sides of the transfer need it")
    decode_spec = {str(launch.resolved.get("speculative_algorithm") or "").upper() for launch in launches
                   if launch.member.role == "decode"}  # fmt: skip
    if decode_spec & EAGLE_LIKE:
        found += _differ(launches, (*SPECULATIVE, *SPECULATIVE_ENV), "pd-speculative", "error", "an EAGLE-family "
                         "decode needs its prefill to run the same speculative setup (the prefill ships the draft's "
                         "hidden states with the KV)")  # fmt: skip
    else:
        found += _differ(launches, SPECULATIVE, "pd-speculative", "warning", "a prefill's speculative setup is only "
                         "used by an EAGLE-family decode")  # fmt: skip
    for role in ("prefill", "decode"):
        same_role = [launch for launch in launches if launch.member.role == role]
        found += _explicit_differences(same_role, set(SAME_ON_PD) | set(SPECULATIVE), f"the {role} servers differ")
    return found


def _explicit_differences(launches: Sequence[MemberLaunch], checked: set[str], why: str) -> list[Mismatch]:
    """Warnings for the other flags a member's unit writes that another member resolves differently."""
    if len(launches) < 2:
        return []
    written = set().union(*(launch.explicit for launch in launches)) - checked - OWN
    return [
        Mismatch("warning", "differs", m.message, m.members)
        for m in _differ(launches, sorted(written), "differs", "warning", why)
    ]


def errors(mismatches: Iterable[Mismatch]) -> list[Mismatch]:
    return [m for m in mismatches if m.level == "error"]


# --- the gate (--gated-launch-port) -----------------------------------------------------------------------------

GATE_DEST = "gated_launch_port"


def no_gate_text(name: str) -> str:
    """The ranks run without the gate: what it would give, why it is not added for the operator, how to add it."""
    return (
        "the ranks run without --gated-launch-port: on a restart each rank loads its weights as soon as it has "
        "joined; with the gate they hold until every rank has joined and the console opens it. It is not added for "
        "you: SGLang's gate has no timeout, so a start without a console (a reboot, systemctl start) waits at it "
        f"for ever. To add it, knowing that: {hints.APPLY_GATE.line(DEPLOYMENT=name)} (a free port on rank 0's host; "
        "docs/deployments.md)"
    )


def gate_note(name: str, before: Any, after: Any) -> str | None:
    """What a change of the ranks' --gated-launch-port means, said before it is confirmed (None: no change of it)."""
    if before == after:
        return None
    if after is None:
        return (
            "--gated-launch-port removed: the ranks load their weights as soon as they have joined, and a start "
            "without a console (a reboot) no longer waits for one"
        )
    return (
        f"--gated-launch-port {after} on every rank: from now on each start of the ranks holds after they have "
        f"joined, before any weights, until a console opens the gate (POST /gate/activate on rank 0's port {after}); "
        "the console's restarts do it in the restart order. A start without one (a reboot, systemctl start, "
        "Restart= after a crash) waits there for ever, SGLang's gate having no timeout, until "
        f"{hints.RESTART_DEPLOYMENT.line(DEPLOYMENT=name)} opens it"
    )
