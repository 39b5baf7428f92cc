"""Does a speculative setup run SGLang's spec-v2 worker, and is the overlap scheduler on? The one verdict that
the dashboard, the benchmark label and records, the runs table, tune, freeze and check-args share (pure).

    spec_mode("0.5.9", server_args)                     # the server answered: its resolved values decide
    spec_mode(None, None, rules=report.spec_mode)       # it did not: the version's rules on the unit decide

The server reports `disable_overlap_schedule` (/server_info) but not which worker runs; that follows from the
version, the resolved algorithm and the overlap (`spec_v2_worker`, which console/sglang/rules.py applies too).
So where the server answers, nothing is guessed: a unit whose environment was read with another version's
rules, or a unit changed on disk since the start, cannot make the verdict disagree with what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from console.sglang.flags import UnsupportedVersionError, version_at_least
from console.sglang.vocabulary import runs_as, setup_letters

# The EAGLE workers (NEXTN is EAGLE's alias, resolved before anything else) and the n-gram one.
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
NGRAM = "NGRAM"

# server: the running server's resolved values; rules: the version's rules on a unit (console.sglang.rules);
# record: what a benchmark record kept (the rules' verdict at the time) where its server args cannot tell.
Source = Literal["server", "rules", "record"]


@dataclass(frozen=True, slots=True)
class SpecMode:
    """How a speculative setup runs: the spec-v2 worker or not, the overlap scheduler on or off, and whence."""

    spec_v2: bool | None  # None: an algorithm whose worker the rules do not follow (DFLASH, ...)
    overlap: bool | None  # None: not known (a record that kept neither the verdict's source nor the overlap)
    source: Source

    @property
    def overlap_path(self) -> bool:
        """What tune and the demo call "spec v2 on": the spec-v2 worker with the overlap scheduler on."""
        return bool(self.spec_v2) and bool(self.overlap)

    def describe(self) -> str:
        """check-args' words: `spec v2 worker: no; overlap scheduler: off`."""
        worker = "?" if self.spec_v2 is None else ("yes" if self.spec_v2 else "no")
        overlap = "?" if self.overlap is None else ("on" if self.overlap else "off")
        return f"spec v2 worker: {worker}; overlap scheduler: {overlap}"


def is_speculative(algorithm: Any) -> bool:
    return bool(algorithm) and str(algorithm).upper() != "NONE"


def spec_v2_worker(version: str, algorithm: Any, overlap: bool) -> bool | None:
    """Whether SGLang `version` runs the spec-v2 worker for a resolved algorithm and overlap scheduler; None
    without speculation and for algorithms outside EAGLE/EAGLE3/STANDALONE/NEXTN and NGRAM.

    - 0.5.14+: always the V2 worker (the overlap only picks the synchronous path), NGRAM too;
    - 0.5.9-0.5.12: the V2 worker exactly when the overlap scheduler runs (SGLang turns it off for spec v1);
    - 0.5.6: only EAGLE has the (beta) V2 worker, with the overlap on;
    - NGRAM before 0.5.14: the V1 worker, overlap forced off.
    [rules.py rule_overlap_and_spec_v2, rule_ngram]"""
    if not is_speculative(algorithm):
        return None
    name = str(algorithm).upper()
    name = runs_as("speculative_algorithm", name) or name
    if name == NGRAM:
        return version_at_least(version, "0.5.14")
    if name not in EAGLE_FAMILY:
        return None
    if version_at_least(version, "0.5.14"):
        return True
    return overlap and (name == "EAGLE" or version_at_least(version, "0.5.9"))


def _known_version(version: str | None) -> bool:
    if not version:
        return False
    try:
        version_at_least(version, "0.0.0")
    except UnsupportedVersionError:
        return False
    return True


def server_answered(version: str | None, resolved: Mapping[str, Any] | None) -> bool:
    """The server's values can decide: its version is known and it reported `disable_overlap_schedule`."""
    if resolved is None or not isinstance(resolved.get("disable_overlap_schedule"), bool):
        return False
    return _known_version(version)


def spec_mode(
    version: str | None, resolved: Mapping[str, Any] | None, *, rules: SpecMode | None = None
) -> SpecMode | None:
    """THE verdict. From the server's resolved values (its version, `speculative_algorithm`,
    `disable_overlap_schedule`) where it answered; otherwise `rules`, the version's rules on the unit
    (CheckReport.spec_mode) or what a record kept. None: no speculative decoding, or nothing is known."""
    if version is not None and resolved is not None and server_answered(version, resolved):
        algorithm = resolved.get("speculative_algorithm")
        if not is_speculative(algorithm):
            return None
        overlap = not resolved["disable_overlap_schedule"]
        return SpecMode(spec_v2_worker(version, algorithm, overlap), overlap, "server")
    return rules


def setup_short(values: Mapping[str, Any], mode: SpecMode | None) -> str:
    """A speculative setup in one short line, the same on the dashboard, in the proposed benchmark label and in
    the runs table; `values` holds the resolved server arguments (SGLang's names), `mode` the verdict.

        eagle3 s2 k1 d3 v2              the spec-v2 worker, overlap on
        eagle3 s2 k1 d3 v2 no-overlap   the spec-v2 worker on its synchronous path (0.5.14+)
        eagle s2 k1 d3                  spec v1 (from 0.5.9 its overlap is off by SGLang's own rule)
        eagle3 s2 k1 d3 no-overlap      the worker unknown, the overlap off (a record without a version)
        no spec
    """
    algorithm = values.get("speculative_algorithm")
    if not is_speculative(algorithm):
        return "no spec"
    parts = [str(algorithm).lower()]
    for letter, dest in setup_letters():
        if values.get(dest) is not None:
            parts.append(f"{letter}{values[dest]}")
    spec_v2 = mode.spec_v2 if mode is not None else None
    overlap = mode.overlap if mode is not None else None
    if overlap is None and isinstance(values.get("disable_overlap_schedule"), bool):
        overlap = not values["disable_overlap_schedule"]
    if spec_v2:
        parts.append("v2")
    if overlap is False and spec_v2 is not False:
        parts.append("no-overlap")
    return " ".join(parts)
