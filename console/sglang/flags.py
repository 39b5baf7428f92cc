"""SGLang launch flags per release: the registry the argv parser, the unit model and the rules use.

The tables in flagdata/sglang-X.Y.Z.json are generated from the released wheels by running SGLang's
own `ServerArgs.add_cli_args` (flagdata/extract.py), so they hold *every* flag of that release with
argparse's own option strings, dest, type, nargs, choices and defaults. That completeness matters:
"unrecognized arguments" and "ambiguous option" (prefix abbreviation) errors depend on the whole set.

A version between two supported releases gets the rules and flags of the nearest lower one
(`resolve_version("0.5.10") == "0.5.9"`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

SUPPORTED_VERSIONS: tuple[str, ...] = ("0.5.6", "0.5.9", "0.5.12", "0.5.14", "0.5.17", "0.5.23")
NEWEST_VERSION = SUPPORTED_VERSIONS[-1]

_FLAGDATA = Path(__file__).resolve().parent / "flagdata"
_VERSION_RE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?([.\-+]?[A-Za-z0-9.+\-]*)?\s*$")


class UnsupportedVersionError(ValueError):
    """The version string is malformed or older than the oldest supported release."""


def parse_version(text: str) -> tuple[int, int, int]:
    """`"0.5.6.post2"` -> (0, 5, 6); raises UnsupportedVersionError on anything else."""
    match = _VERSION_RE.match(text)
    if match is None:
        raise UnsupportedVersionError(
            f"{text!r} is not an SGLang version; give one like 0.5.9 (supported: {', '.join(SUPPORTED_VERSIONS)})"
        )
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def resolve_version(text: str | None) -> str:
    """The supported release whose flags and rules apply to SGLang `text` (nearest lower; None = newest)."""
    if text is None:
        return NEWEST_VERSION
    wanted = parse_version(text)
    applicable = [v for v in SUPPORTED_VERSIONS if parse_version(v) <= wanted]
    if not applicable:
        raise UnsupportedVersionError(
            f"SGLang {text} is older than the oldest supported release {SUPPORTED_VERSIONS[0]}; "
            f"supported: {', '.join(SUPPORTED_VERSIONS)} (and versions between them)"
        )
    return applicable[-1]


def version_at_least(version: str, minimum: str) -> bool:
    return parse_version(version) >= parse_version(minimum)


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One argparse action of SGLang's launch parser.

    `action` is one of store, store_true, store_false, boolean_optional (`--x` / `--no-x`),
    store_const (stores `const`), deprecated_ignore (accepted, warns, changes nothing).
    `type` is int, float, str or json for value-taking actions, None otherwise.
    """

    options: tuple[str, ...]
    dest: str
    action: str
    type: str | None
    nargs: int | str | None
    choices: tuple[Any, ...] | None
    default: Any
    const: Any
    required: bool
    deprecated: bool

    @property
    def name(self) -> str:
        """The canonical spelling: the option named after the dest if there is one, else the first."""
        canonical = "--" + self.dest.replace("_", "-")
        return canonical if canonical in self.options else self.options[0]

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(o for o in self.options if o != self.name)

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0 and self.action in ("store", "store_const")

    @property
    def is_list(self) -> bool:
        return self.nargs in ("+", "*") or (isinstance(self.nargs, int) and self.nargs > 1)

    @property
    def is_boolean(self) -> bool:
        return not self.takes_value


@dataclass(frozen=True)
class FlagTable:
    """All flags of one SGLang release, indexed by option string and by dest."""

    version: str
    flags: tuple[FlagSpec, ...]
    prog: str
    by_option: dict[str, FlagSpec] = field(init=False, repr=False)
    by_dest: dict[str, FlagSpec] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_option: dict[str, FlagSpec] = {}
        by_dest: dict[str, FlagSpec] = {}
        for spec in self.flags:
            for option in spec.options:
                by_option[option] = spec
            # Several actions can share a dest (deprecated aliases, --x/--no-x): the
            # non-deprecated one is the flag's real definition.
            if spec.dest not in by_dest or (by_dest[spec.dest].deprecated and not spec.deprecated):
                by_dest[spec.dest] = spec
        object.__setattr__(self, "by_option", by_option)
        object.__setattr__(self, "by_dest", by_dest)

    def defaults(self) -> dict[str, Any]:
        """{dest: default} for every dest, the values argparse puts in the namespace before parsing."""
        return {dest: spec.default for dest, spec in self.by_dest.items()}

    def prefix_matches(self, prefix: str) -> list[str]:
        """Option strings that start with `prefix`, in parser order (argparse's abbreviation rule)."""
        return [option for spec in self.flags for option in spec.options if option.startswith(prefix)]

    def lookup(self, option: str) -> FlagSpec | None:
        """Exact option string, or an unambiguous prefix of one; None when unknown or ambiguous."""
        if option in self.by_option:
            return self.by_option[option]
        if not option.startswith("--"):
            return None
        matches = self.prefix_matches(option)
        return self.by_option[matches[0]] if len(matches) == 1 else None

    def spec_for(self, name: str) -> FlagSpec | None:
        """A flag by option (`--tp`, `--tp-size`) or by dest (`tp_size`)."""
        if name.startswith("-"):
            return self.lookup(name)
        return self.by_dest.get(name)


def _prog_for(version: str) -> str:
    # 0.5.6/0.5.9 build `argparse.ArgumentParser()` (prog = launch_server.py); from 0.5.12 on
    # prepare_server_args uses `ArgumentParser(prog="sglang serve")`. [server_args.py prepare_server_args]
    return "launch_server.py" if not version_at_least(version, "0.5.12") else "sglang serve"


def _spec_from_row(row: dict[str, Any]) -> FlagSpec:
    choices = row["choices"]
    return FlagSpec(
        options=tuple(row["options"]),
        dest=row["dest"],
        action=row["action"],
        type=row["type"],
        nargs=row["nargs"],
        choices=tuple(choices) if choices is not None else None,
        default=row["default"],
        const=row["const"],
        required=row["required"],
        deprecated=row["deprecated"],
    )


@cache
def flag_table(version: str | None = None) -> FlagTable:
    """The flags of the supported release that applies to `version` (None = newest)."""
    resolved = resolve_version(version)
    # A plain path next to this module: importlib.resources would cost more import time than the whole check.
    text = (_FLAGDATA / f"sglang-{resolved}.json").read_text("utf-8")
    rows = json.loads(text)["flags"]
    return FlagTable(version=resolved, flags=tuple(_spec_from_row(r) for r in rows), prog=_prog_for(resolved))


@cache
def server_fields(version: str | None = None) -> tuple[tuple[str, Any], ...] | None:
    """Every ServerArgs field of the release that applies to `version`, in declaration order, with its default:
    the keys (and order) of its `/server_info`. None for tables generated before extract.py recorded them."""
    resolved = resolve_version(version)
    data = json.loads((_FLAGDATA / f"sglang-{resolved}.json").read_text("utf-8"))
    fields = data.get("fields")
    return None if fields is None else tuple((f["name"], f["default"]) for f in fields)


def flag_versions(option: str) -> tuple[str, ...]:
    """The supported releases in which the exact option string `option` exists."""
    return tuple(v for v in SUPPORTED_VERSIONS if option in flag_table(v).by_option)
