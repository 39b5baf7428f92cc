"""Which members carry an edit (pure): the edit of a deployment as one edit per member.

    edits = member_edits(deployment, EditRequest(...), only=("decode",))
    edits.per_member["rank1"]          # the EditRequest that member's unit gets (absent: it is not touched)
    edits.notes                        # what was widened, and why

- ranks of one model: every rank gets the whole edit (every node runs the same command but for --node-rank); the
  edit cannot be narrowed;
- prefill and decode servers: every member gets it, unless `only` names members or roles; a narrowed edit of a flag
  that must match across the members (console.core.deployment.checks: the model, the KV cache, the transfer, the
  speculative setup) goes to every member anyway, and a note says so;
- a single host: its edit.

A member's own flags (--node-rank, --nnodes, --disaggregation-mode, --disaggregation-bootstrap-port, --port) are
refused as an edit of the deployment: each member has its own, from the profile's roles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from console.core.change import EditError, EditRequest
from console.core.deployment.checks import SAME_ON_PD, SPECULATIVE, SPECULATIVE_ENV, TRANSFER_ENV
from console.core.deployment.model import Deployment, Member

OWN_FLAGS = ("--node-rank", "--nnodes", "--disaggregation-mode", "--disaggregation-bootstrap-port", "--port")
_MUST_MATCH_PD = frozenset(SAME_ON_PD) | frozenset(SPECULATIVE)
_MUST_MATCH_PD_ENV = frozenset(SPECULATIVE_ENV) | frozenset(TRANSFER_ENV)


@dataclass(frozen=True)
class MemberEdits:
    per_member: Mapping[str, EditRequest]
    notes: tuple[str, ...] = field(default_factory=tuple)


def dest_of(flag: str) -> str:
    """`--speculative-num-steps` -> `speculative_num_steps` (an alias such as --nccl-init-addr is not known here: the
    checks on the units the edit makes still hold it to the others)."""
    return flag.lstrip("-").replace("-", "_")


def member_edits(deployment: Deployment, edits: EditRequest, *, only: Sequence[str] = ()) -> MemberEdits:
    """The edit per member; EditError for a member's own flag, a narrowing of ranks, or an `only` that names no
    member or role of the deployment."""
    if deployment.is_single:
        if only:
            raise EditError("{field}: a single host has no members to choose from", field="only")
        return MemberEdits({deployment.members[0].name: edits})
    touched = [name for name, _ in edits.set_flags] + list(edits.unset_flags)
    own = sorted({flag for flag in touched if flag in OWN_FLAGS})
    if own:
        raise EditError(
            "{field} {flags}: each member of {deployment} has its own (from the profile's roles and ranks); edit "
            "profiles/deployments/{deployment}.toml and the member's unit instead",
            field="set",
            flags=", ".join(own),
            deployment=deployment.name,
        )
    if deployment.kind == "multinode":
        if only:
            raise EditError(
                "{field}: every rank of {deployment} runs the same command; an edit goes to all of them",
                field="only",
                deployment=deployment.name,
            )
        return MemberEdits({m.name: edits for m in deployment.members})
    chosen = _chosen(deployment, only)
    if len(chosen) == len(deployment.members):
        return MemberEdits({m.name: edits for m in deployment.members})
    shared = EditRequest(
        tuple((n, v) for n, v in edits.set_flags if dest_of(n) in _MUST_MATCH_PD),
        tuple(n for n in edits.unset_flags if dest_of(n) in _MUST_MATCH_PD),
        tuple((k, v) for k, v in edits.set_env if k in _MUST_MATCH_PD_ENV),
        tuple(k for k in edits.unset_env if k in _MUST_MATCH_PD_ENV),
    )
    per_member = {m.name: (edits if m in chosen else shared) for m in deployment.members}
    per_member = {name: e for name, e in per_member.items() if not e.empty}
    notes: tuple[str, ...] = ()
    if not shared.empty:
        widened = sorted({*(n for n, _ in shared.set_flags), *shared.unset_flags, *(k for k, _ in shared.set_env),
                          *shared.unset_env})  # fmt: skip
        others = [m.name for m in deployment.members if m not in chosen]
        notes = (
            f"{', '.join(widened)} must match on every prefill and decode server: also applied to {', '.join(others)}",
        )
    return MemberEdits(per_member, notes)


def _chosen(deployment: Deployment, only: Sequence[str]) -> list[Member]:
    if not only:
        return list(deployment.members)
    chosen: list[Member] = []
    for word in only:
        matched = [m for m in deployment.members if word in (m.name, m.role, m.host)]
        if not matched:
            names = ", ".join(m.name for m in deployment.members)
            raise EditError(
                "{field} {word}: not a member or role of {deployment} (its members: {names}; roles prefill, decode)",
                field="only",
                word=word,
                deployment=deployment.name,
                names=names,
            )
        chosen.extend(m for m in matched if m not in chosen)
    return chosen
