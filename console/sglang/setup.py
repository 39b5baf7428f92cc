"""A speculative setup as one typed value: what a server runs, a tune tries and a prediction is about (pure).

    SpecSetup.from_server_args(record.server_args, record.spec_mode)   # what a benchmark measured
    SpecSetup.from_config(candidate.config, candidate.spec_mode)       # a tune's candidate (the same keys)
    setup.name()         -> "EAGLE3 steps 2 topk 1 + spec v2", "no speculation"
    setup.key            -> "eagle3-s2-k1-n3-v2", "nospec"

The algorithm is SGLang's resolved one (NEXTN runs as EAGLE: the same draft, the checkpoint's MTP layers), the draft
tokens are the resolved ones (a chain's steps + 1), and spec v2 means the overlap path (the spec-v2 worker with the
overlap scheduler on), as tune's axis and the demo say it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from console.sglang.specmode import SpecMode, is_speculative


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

    def name(self) -> str:
        """Every axis, for people: "EAGLE3 steps 2 topk 1 + spec v2" (draft tokens when a tree sets them)."""
        if not self.speculative:
            return "no speculation"
        text = f"{self.algorithm} steps {self.steps} topk {self.topk}"
        if self.topk > 1:
            text += f" draft {self.draft_tokens}"
        return text + (" + spec v2" if self.spec_v2 else "")
