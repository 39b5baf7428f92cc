"""Source files of each supported SGLang release, taken from its released wheel, and what they say SGLang sends.

    source = release_source("0.5.23", TOKENIZER_MANAGER)
    writes = spec_meta_writes(source)        # [SpecWrite("spec_verify_ct", guards=(...)), ...]

Where they come from: a cached copy in $OPSCONSOLE_CACHE (default ~/.cache/opsconsole)/sglang-<ver>/<path in the wheel>,
else the wheel that `pip download sglang==<ver> --no-deps` fetches, as bench_serving.py is fetched
(tests/support/sglang_bench.py). Only the files in MEMBERS are kept (a few hundred KB a release), not the wheels
(3.6 to 39 MB each, 91 MB for the six). `make test` fetches them before the suite starts (tests/suite_setup.py):
on a machine with pip's cache warm about 1.5 s a wheel, 9 s for the six; later a file exists check.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from console.sglang.flags import SUPPORTED_VERSIONS, version_at_least
from tests.support.sglang_bench import BenchUnavailable, cache_root, sglang_wheel

TOKENIZER_MANAGER = "sglang/srt/managers/tokenizer_manager.py"
LOAD_SNAPSHOT = "sglang/srt/managers/load_snapshot.py"  # /v1/loads' sections (0.5.23 on)
MEMBERS = (TOKENIZER_MANAGER,)
# The wheel each supported release's rules are read from (console/sglang/flagdata): the release itself.
WHEEL_OF = {version: version for version in SUPPORTED_VERSIONS}


def release_dir(version: str) -> Path:
    return cache_root() / f"sglang-{WHEEL_OF.get(version, version)}"


def is_cached(version: str) -> bool:
    return all((release_dir(version) / member).exists() for member in members_of(version))


def members_of(version: str) -> tuple[str, ...]:
    """The files kept of a release: MEMBERS, and from 0.5.23 on the module that shapes /v1/loads."""
    return (*MEMBERS, LOAD_SNAPSHOT) if version_at_least(version, "0.5.23") else MEMBERS


def fetch_release(version: str) -> bool:
    """Every file of members_of(version) of this release's wheel into the cache; True when it had to download it."""
    if is_cached(version):
        return False
    wheel_version = WHEEL_OF.get(version, version)
    with sglang_wheel(wheel_version, "to read its source") as wheel:
        names = set(wheel.namelist())
        for member in members_of(version):
            if member not in names:
                raise BenchUnavailable(f"{Path(str(wheel.filename)).name} has no {member}")
            target = release_dir(version) / member
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(wheel.read(member))
    return True


def fetch_all() -> list[str]:
    """Every supported release's files; the releases whose wheel had to be downloaded."""
    return [version for version in SUPPORTED_VERSIONS if fetch_release(version)]


def release_source(version: str, member: str = TOKENIZER_MANAGER) -> str:
    fetch_release(version)
    return (release_dir(version) / member).read_text(encoding="utf-8")


@dataclass(frozen=True)
class SpecWrite:
    """One `meta_info["<key>"] = ...` of the release's speculative metrics, with the `if` tests around it."""

    key: str
    value: str  # the right-hand side, as source
    guards: tuple[str, ...]

    @property
    def figure(self) -> str:
        """What the value is, read from its expression: histogram, cap_lens_histogram, correct, proposed, verify_ct,
        or "other" (rates and lengths, their defaults)."""
        if "cap_lens_histogram" in self.value:
            return "cap_lens_histogram"
        if "histogram" in self.value:
            return "histogram"
        if "/" in self.value or self.value in ("0", "0.0"):
            return "other"
        if "correct_drafts" in self.value or "accepted_tokens" in self.value:
            return "correct"
        if "proposed_drafts" in self.value or "total_draft_tokens" in self.value:
            return "proposed"
        if "spec_verify_ct" in self.value:
            return "verify_ct"
        return "other"

    @property
    def dspark_only(self) -> bool:
        """Written only with DSpark's verify-window counts (spec_num_cap_tokens, block accept, cap-lens histogram)."""
        return any(word in guard for guard in self.guards for word in ("cap_tokens", "block_accept", "cap_lens"))


def spec_meta_writes(source: str) -> list[SpecWrite]:
    """Every meta_info key `_calculate_spec_decoding_metrics` writes, in source order, read from its syntax tree."""
    tree = ast.parse(source)
    functions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "_calculate_spec_decoding_metrics"
    ]
    if len(functions) != 1:
        raise AssertionError(f"expected one _calculate_spec_decoding_metrics, found {len(functions)}")
    writes: list[SpecWrite] = []

    def visit(statements: list[ast.stmt], guards: tuple[str, ...]) -> None:
        for statement in statements:
            if isinstance(statement, ast.If):
                visit(statement.body, (*guards, ast.unparse(statement.test)))
                visit(statement.orelse, (*guards, f"not ({ast.unparse(statement.test)})"))
                continue
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if (
                        isinstance(target, ast.Subscript)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "meta_info"
                        and isinstance(target.slice, ast.Constant)
                        and isinstance(target.slice.value, str)
                    ):
                        writes.append(SpecWrite(target.slice.value, ast.unparse(statement.value), guards))
            for field in ("body", "orelse", "finalbody"):
                nested = getattr(statement, field, None)
                if isinstance(nested, list) and not isinstance(statement, ast.If):
                    visit(nested, guards)

    visit(functions[0].body, ())
    return writes


def spec_meta_keys(version: str) -> frozenset[str]:
    return frozenset(w.key for w in spec_meta_writes(release_source(version)))


def spec_meta_keys_without_dspark(version: str) -> frozenset[str]:
    """The keys a release sends for a speculative algorithm other than DSpark (what the stand-in runs)."""
    return frozenset(w.key for w in spec_meta_writes(release_source(version)) if not w.dspark_only)
