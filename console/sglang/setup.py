"""A speculative setup as one typed value: what a server runs, a tune tries and a prediction is about (pure).

    SpecSetup.from_server_args(record.server_args, record.spec_mode)   # what a benchmark measured
    SpecSetup.from_config(candidate.config, candidate.spec_mode)       # a tune's candidate (the same keys)
    setup.name()         -> "EAGLE3 steps 2 topk 1 + spec v2", "no speculation"
    setup.name({"topk", "spec_v2"}) -> "topk 1 + spec v2" (only the axes that tell a tune's setups apart)
    setup.describe()     -> "EAGLE3 steps 2 topk 1 draft tokens 3 spec v2 on" (every axis)
    setup.details()      -> (("steps", "2"), ("topk", "1"), ("draft tokens", "3"), ("draft model", "/m/eagle3"))
    setup.key            -> "eagle3-s2-k1-n3-v2", "nospec"
    setup.server_args()  -> {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 2, ...}
    setup.edits("0.5.9") -> the unit's flags and environment that make that version run it

AXES names its fields: the tune's axes (`tune --steps`, the Tune form's fields, a --space file's keys) are these.

The algorithm is SGLang's resolved one (NEXTN runs as EAGLE: the same draft, the checkpoint's MTP layers), the draft
tokens are the resolved ones (a chain's steps + 1), and spec v2 means the overlap path (the spec-v2 worker with the
overlap scheduler on), as tune's axis and the demo say it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from console.sglang.flags import flag_table, version_at_least
from console.sglang.specmode import SpecMode, is_speculative
from console.sglang.vocabulary import SPEC_V2_ENV, flag_of, term

# The setup's own values and the server arguments that hold them (SGLang's names); spec v2 is the rules' verdict on
# the worker and the overlap (console.sglang.specmode), no one argument.
_DESTS = {
    "algorithm": "speculative_algorithm",
    "steps": "speculative_num_steps",
    "topk": "speculative_eagle_topk",
    "draft_tokens": "speculative_num_draft_tokens",
}
_DRAFT_MODEL = "speculative_draft_model_path"
_OVERLAP = "disable_overlap_schedule"
_ADAPTIVE = ("speculative_adaptive", "speculative_adaptive_config")  # 0.5.23: steps switched at run time
_NUMBERS = tuple(_DESTS)[1:]  # steps, topk, draft tokens
_SHORT = {"draft_tokens": "draft"}  # how a name says them ("EAGLE3 steps 2 topk 4 draft 8"); the rest as the axis


class SetupEdits(NamedTuple):
    """Edits of a unit, in console.core.change.EditRequest's order (flag names with their leading "--")."""

    set_flags: tuple[tuple[str, str | bool], ...] = ()  # True: a switch
    unset_flags: tuple[str, ...] = ()
    set_env: tuple[tuple[str, str], ...] = ()
    unset_env: tuple[str, ...] = ()


def spec_v2_edits(version: str, on: bool) -> SetupEdits:
    """What asks `version` for spec v2 on or off: up to 0.5.12 the variable SGLANG_ENABLE_SPEC_V2; from 0.5.14 the
    variable is gone and the V2 worker always runs, so off is `--disable-overlap-schedule` (the synchronous path)."""
    overlap = flag_of(_OVERLAP)
    if version_at_least(version, "0.5.14"):  # 0.5.14 logs a removal notice for the variable
        if on:
            return SetupEdits(unset_flags=(overlap,), unset_env=(SPEC_V2_ENV,))
        return SetupEdits(set_flags=((overlap, True),), unset_env=(SPEC_V2_ENV,))
    return SetupEdits(unset_flags=(overlap,), set_env=((SPEC_V2_ENV, "True" if on else "False"),))


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass(frozen=True, slots=True)
class SpecSetup:
    """One speculative setup; algorithm None = no speculation (then the other fields are 0/1/False/None)."""

    algorithm: str | None
    steps: int = 0
    topk: int = 1
    draft_tokens: int = 1
    spec_v2: bool = False
    draft_model_path: str | None = None

    @classmethod
    def from_server_args(cls, args: Mapping[str, Any], mode: SpecMode | None = None) -> SpecSetup:
        """From SGLang's resolved server arguments (/server_info, a record's server_args, the rules' resolved
        values) and the spec-v2 verdict (console.sglang.specmode); spec v2 off where the verdict is missing."""
        algorithm = args.get("speculative_algorithm")
        if not is_speculative(algorithm):
            return cls(None)
        name = str(algorithm).upper()
        steps = _int(args.get("speculative_num_steps"), 1)
        topk = _int(args.get("speculative_eagle_topk"), 1)
        draft = _int(args.get("speculative_num_draft_tokens"), steps + 1)
        path = args.get("speculative_draft_model_path")
        return cls(
            algorithm="EAGLE" if name == "NEXTN" else name,
            steps=steps,
            topk=topk,
            draft_tokens=steps + 1 if topk == 1 else draft,
            spec_v2=mode is not None and mode.overlap_path,
            draft_model_path=str(path) if path else None,
        )

    from_config = from_server_args  # a tune candidate's config holds the same keys

    @staticmethod
    def auto_draft_tokens(steps: int, topk: int) -> int:
        """The draft tokens the steps and topk already say: a chain's steps + 1 (what SGLang sets anyway), a tree's
        steps × topk (its width at every depth; at most steps × topk + 1 fit)."""
        return steps + 1 if topk == 1 else steps * topk

    @property
    def speculative(self) -> bool:
        return self.algorithm is not None

    @property
    def depth(self) -> int:
        """The most drafts one verify round can accept: the chain's steps, or a tree's depth its budget allows."""
        if not self.speculative:
            return 0
        return self.steps if self.topk == 1 else min(self.steps, self.draft_tokens - 1)

    @property
    def verify_tokens(self) -> int:
        """Tokens per request in one target forward: the draft tokens (the bonus position included), else 1."""
        return self.draft_tokens if self.speculative else 1

    @property
    def draft(self) -> tuple[str | None, str | None]:
        """Which draft proposes: the algorithm and its draft model (None: the checkpoint's own layers)."""
        return self.algorithm, self.draft_model_path

    @property
    def key(self) -> str:
        if not self.speculative:
            return "nospec"
        v2 = "v2" if self.spec_v2 else "v1"
        return f"{self.algorithm}-s{self.steps}-k{self.topk}-n{self.draft_tokens}-{v2}".lower()

    @property
    def draft_implied(self) -> bool:
        """Its draft tokens are those its steps and topk already say (auto_draft_tokens)."""
        return self.draft_tokens == self.auto_draft_tokens(self.steps, self.topk)

    def name(self, axes: Collection[str] | None = None) -> str:
        """For people: "EAGLE3 steps 2 topk 1 + spec v2" (the draft tokens when a tree sets them). `axes`: only those
        of AXES, what tells a tune's setups apart ("topk 1 + spec v2", "steps 3"); the algorithm is said when among
        them, or when none of the numbers is."""
        if not self.speculative:
            return "no speculation"
        if axes is None:  # a chain's draft tokens go without saying
            axes = set(AXES) - ({"draft_tokens"} if self.topk == 1 else set())
        numbers = [axis for axis in _NUMBERS if axis in axes]
        parts = [str(self.algorithm)] if "algorithm" in axes or not numbers else []
        parts += [f"{_SHORT.get(axis, axis)} {getattr(self, axis)}" for axis in numbers]
        return " ".join(parts) + (" + spec v2" if "spec_v2" in axes and self.spec_v2 else "")

    @property
    def draft_said(self) -> str:
        """The draft tokens as describe() says them."""
        return str(self.draft_tokens)

    def describe(self) -> str:
        """Every axis, in words: "EAGLE3 steps 2 topk 4 draft tokens 8 spec v2 on"."""
        if not self.speculative:
            return "no speculation"
        v2 = "on" if self.spec_v2 else "off"
        return f"{self.algorithm} steps {self.steps} topk {self.topk} draft tokens {self.draft_said} spec v2 {v2}"

    def details(self) -> tuple[tuple[str, str], ...]:
        """Its numbers and its draft model, one (name, value) each in the vocabulary's words (nothing without
        speculation)."""
        if not self.speculative:
            return ()
        numbers = tuple((term(_DESTS[axis]).name, str(getattr(self, axis))) for axis in _NUMBERS)
        model = ((term(_DRAFT_MODEL).name, self.draft_model_path),) if self.draft_model_path else ()
        return numbers + model

    def server_args(self) -> dict[str, Any]:
        """Its own values under SGLang's names (algorithm, steps, topk, draft tokens; None each without speculation)."""
        return {dest: getattr(self, axis) if self.speculative else None for axis, dest in _DESTS.items()}

    def edits(self, version: str) -> SetupEdits:
        """The edits that make a unit of SGLang `version` run this setup, every axis set or removed explicitly.
        Without speculation the spec-v2 variable means nothing and the overlap scheduler is SGLang's default. A setup
        is static: where the release has --speculative-adaptive it is taken off (with its config), else a unit that
        ran adaptive would switch this setup's steps at run time (tune's trials measured the tiers, not the setup)."""
        adaptive = tuple(flag_of(dest) for dest in _ADAPTIVE if dest in flag_table(version).by_dest)
        if not self.speculative:
            unset = (*(flag_of(dest) for dest in _DESTS.values()), flag_of(_DRAFT_MODEL), flag_of(_OVERLAP))
            return SetupEdits(unset_flags=(*unset, *adaptive), unset_env=(SPEC_V2_ENV,))
        sets: list[tuple[str, str | bool]] = [
            (flag_of(dest), str(getattr(self, axis))) for axis, dest in _DESTS.items()
        ]
        if self.draft_model_path:
            sets.append((flag_of(_DRAFT_MODEL), self.draft_model_path))
        v2 = spec_v2_edits(version, self.spec_v2)
        return v2._replace(set_flags=(*sets, *v2.set_flags), unset_flags=(*v2.unset_flags, *adaptive))


# The setup's fields, in order: the names of tune's axes everywhere they are typed or read.
AXES: tuple[str, ...] = tuple(f.name for f in fields(SpecSetup))
