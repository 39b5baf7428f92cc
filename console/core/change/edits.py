"""What to change in a unit, as the operator writes it (pure).

`parse_edits()` turns `--set/--unset/--env/--unset-env` (or the console's form, in the same syntax) into an
`EditRequest` of launch flags and environment variables: usage errors are EditError. `flag_kind` (the SGLang flag
registry of the host's version) tells boolean and list flags apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from console.errors import UsageError
from console.names import is_env_name

FlagKind = Literal["bool", "list", "value"]
FlagValue = str | list[str] | bool

_FLAG_NAME = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")
TRUE_WORDS = {"true", "yes", "on", "1"}
FALSE_WORDS = {"false", "no", "off", "0"}


class EditError(UsageError):
    """An edit is malformed (the CLI's --set/--unset/--env/--unset-env, or the console's edit fields): its field says
    which (set, unset, env, unset_env)."""


@dataclass(frozen=True)
class EditRequest:
    set_flags: tuple[tuple[str, FlagValue], ...] = ()  # flag names with their leading "--"
    unset_flags: tuple[str, ...] = ()
    set_env: tuple[tuple[str, str], ...] = ()
    unset_env: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.set_flags or self.unset_flags or self.set_env or self.unset_env)


def _flag_name(text: str, field: str, item: str) -> str:
    """A launch flag's name with its leading dashes (`--` added when none are written); EditError naming the input
    (`field`, `item`: set or unset and what was written there) for anything else."""
    name = text.strip()
    if not name.startswith("-"):
        name = "--" + name
    if not _FLAG_NAME.match(name):
        raise EditError("{field} {item}: {text!r} is not a launch flag name; write it like --speculative-num-steps",
                        field=field, item=item, text=text)  # fmt: skip
    if not name.startswith("--"):
        raise EditError("{field} {item}: short flag {text!r} is not supported; use the long --name form",
                        field=field, item=item, text=text)  # fmt: skip
    return name


def parse_edits(
    sets: Sequence[str],
    unsets: Sequence[str] = (),
    envs: Sequence[str] = (),
    unset_envs: Sequence[str] = (),
    *,
    flag_kind: Callable[[str], FlagKind | None] = lambda _flag: None,
) -> EditRequest:
    """Parse the edits (EditError names the input, by field: set, unset, env, unset_env).

    `--set FLAG=VALUE` (FLAG with or without its leading dashes); `--set FLAG` or `--set=--FLAG` alone sets a
    boolean flag; for a boolean flag `FLAG=false` (no/off/0) removes it and `FLAG=true` sets it; for a list
    flag (`--cuda-graph-bs`) the value is split on commas and spaces. `flag_kind` tells boolean and list flags
    apart (from the SGLang flag registry); unknown flags keep their value as text and the rules reject them.
    """
    set_flags: list[tuple[str, FlagValue]] = []
    unset_flags: list[str] = []
    for item in sets:
        raw_name, has_value, value = item.partition("=")
        name = _flag_name(raw_name, "set", item)
        kind = flag_kind(name)
        if not has_value:
            if kind not in (None, "bool"):
                raise EditError("{field} {item}: {name} takes a value; write {field} {name}=VALUE", field="set",
                                item=item, name=name)  # fmt: skip
            set_flags.append((name, True))
            continue
        if kind == "bool":
            lowered = value.strip().lower()
            if lowered in TRUE_WORDS:
                set_flags.append((name, True))
            elif lowered in FALSE_WORDS:
                unset_flags.append(name)
            else:
                raise EditError("{field} {item}: {name} is a boolean flag; write {name}=true or {name}=false",
                                field="set", item=item, name=name)  # fmt: skip
            continue
        if kind == "list":
            parts = [p for p in re.split(r"[,\s]+", value.strip()) if p]
            if not parts:
                raise EditError("{field} {item}: {name} needs at least one value, e.g. {name}=1,2,4,8", field="set",
                                item=item, name=name)  # fmt: skip
            set_flags.append((name, parts))
            continue
        if value == "":
            raise EditError("{field} {item}: empty value; use {unset} {name} to remove the flag", field="set",
                            item=item, name=name)  # fmt: skip
        set_flags.append((name, value))
    for item in unsets:
        unset_flags.append(_flag_name(item, "unset", item))
    env_pairs: list[tuple[str, str]] = []
    for item in envs:
        key, has_value, value = item.partition("=")
        if not has_value or not is_env_name(key):
            raise EditError("{field} {item!r}: expected KEY=VALUE with KEY like SGLANG_ENABLE_SPEC_V2", field="env",
                            item=item)  # fmt: skip
        env_pairs.append((key, value))
    for key in unset_envs:
        if not is_env_name(key):
            raise EditError("{field} {key!r}: expected a variable name like SGLANG_ENABLE_SPEC_V2", field="unset_env",
                            key=key)  # fmt: skip
    touched = [n for n, _ in set_flags]
    both = sorted(set(touched) & set(unset_flags))
    if both:
        raise EditError("{flags} is both set and unset; keep one of {field} and {unset}", field="set",
                        flags=", ".join(both))  # fmt: skip
    dupes = sorted({n for n in touched if touched.count(n) > 1})
    if dupes:
        raise EditError("{flags} is set more than once; give each flag one {field}", field="set",
                        flags=", ".join(dupes))  # fmt: skip
    env_both = sorted({k for k, _ in env_pairs} & set(unset_envs))
    if env_both:
        raise EditError("{names} is both set and unset; keep one of {field} and {unset_env}", field="env",
                        names=", ".join(env_both))  # fmt: skip
    return EditRequest(tuple(set_flags), tuple(unset_flags), tuple(env_pairs), tuple(unset_envs))
