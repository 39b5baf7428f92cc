"""The speculative keys of SGLang's per-request `meta_info`, per release, and how the load client reads them (pure).

SGLang's tokenizer manager adds them to a request's last (finished) chunk only, when a speculative algorithm is set
(`_calculate_spec_decoding_metrics`). Their names changed twice (read from each release's wheel; the suite holds
RELEASE_KEYS to the wheels' source, tests/sglang/test_spec_meta_wheels.py):

- 0.5.6 to 0.5.10: spec_accept_token_num / spec_draft_token_num; no histogram before 0.5.9's spec_accept_histogram;
- 0.5.11 (not supported; verl-project/verl#7543): spec_accepted_drafts / spec_proposed_drafts;
- 0.5.12 to 0.5.17: spec_num_correct_drafts / spec_num_proposed_drafts / spec_correct_drafts_histogram, with the
  0.5.11 names and spec_accept_histogram as aliases;
- 0.5.23: the new names alone.

A reader that knew one spelling kept nothing on the others (a 0.5.23 server's histograms were lost to records that
read only `spec_accept_histogram`), so `read_spec_meta` reads every spelling, newest first, and says which keys it
found; the benchmark record keeps that (`spec_meta_keys`, `spec_spelling`).

Standard library only, Python 3.10: the load generator that runs on a GPU host imports it (console.bench.remote).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Every spec key each supported release's tokenizer manager can write into meta_info (the wheel's source).
# DSpark's keys (cap length, block accept length, cap-lens histogram) come only with DSPARK and its ragged modes.
_OLD = frozenset({"spec_accept_rate", "spec_accept_length", "spec_verify_ct"})
_0_5_6 = _OLD | {"spec_accept_token_num", "spec_draft_token_num"}
_0_5_12 = _OLD | {
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_accepted_drafts",
    "spec_proposed_drafts",
    "spec_correct_drafts_histogram",
    "spec_accept_histogram",
}
DSPARK_KEYS = frozenset({"spec_cap_length", "spec_block_accept_length", "spec_cap_lens_histogram"})
RELEASE_KEYS: Mapping[str, frozenset[str]] = {
    "0.5.6": _0_5_6,
    "0.5.9": _0_5_6 | {"spec_accept_histogram"},
    "0.5.12": _0_5_12,
    "0.5.14": _0_5_12,
    "0.5.17": _0_5_12 | DSPARK_KEYS,
    "0.5.23": _OLD
    | {"spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_correct_drafts_histogram"}
    | DSPARK_KEYS,
}

# Each figure's spellings, newest first: the first one present is read.
HISTOGRAM_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")
CORRECT_KEYS = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
PROPOSED_KEYS = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")

# The spellings by name, each named by the releases that send it (what a record's `spec_spelling` says): the first
# whose keys are all there.
SPELLINGS: tuple[tuple[str, frozenset[str]], ...] = (
    ("0.5.12-0.5.17", frozenset({"spec_num_correct_drafts", "spec_accepted_drafts"})),
    ("0.5.23", frozenset({"spec_num_correct_drafts"})),
    ("0.5.11", frozenset({"spec_accepted_drafts"})),
    ("0.5.6-0.5.10", frozenset({"spec_accept_token_num"})),
)


@dataclass(frozen=True)
class SpecMeta:
    """What one finished request's meta_info said about its speculation; None where it did not say."""

    verify_ct: int | None = None
    correct_drafts: int | None = None
    proposed_drafts: int | None = None
    histogram: list[int] | None = None  # verify rounds by drafts accepted (index), bonus token excluded
    keys: tuple[str, ...] = ()  # the spec_* keys it carried, in its order

    @property
    def histogram_key(self) -> str | None:
        return next((k for k in HISTOGRAM_KEYS if k in self.keys), None) if self.histogram is not None else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first(meta: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in meta:
            return meta[key]
    return None


def read_spec_meta(meta: Mapping[str, Any]) -> SpecMeta:
    """The speculative figures of a final meta_info, in whichever release's spelling it came."""
    histogram = _first(meta, HISTOGRAM_KEYS)
    ok = isinstance(histogram, list) and all(_int(n) is not None for n in histogram)
    return SpecMeta(
        verify_ct=_int(meta.get("spec_verify_ct")),
        correct_drafts=_int(_first(meta, CORRECT_KEYS)),
        proposed_drafts=_int(_first(meta, PROPOSED_KEYS)),
        histogram=list(histogram) if ok else None,
        keys=tuple(k for k in meta if k.startswith("spec_")),
    )


def spelling_of(keys: frozenset[str] | set[str]) -> str | None:
    """The name of the spelling these keys are in (SPELLINGS), None when they carry no draft counts."""
    for name, marks in SPELLINGS:
        if marks <= keys:
            return name
    return None
