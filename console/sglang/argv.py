"""Parse SGLang launch argv exactly the way SGLang's argparse parser (Python 3.11 argparse) does.

Behaviour reproduced, with the message text argparse prints:
- `--flag value`, `--flag=value`, store_true flags, `--x/--no-x`, list flags (`--cuda-graph-bs 1 2 4`);
- aliases and unambiguous prefix abbreviations (`--speculative-algo EAGLE`, `allow_abbrev=True`);
- "ambiguous option: --x could match --x-a, --x-b" (raised while classifying, so before anything else);
- "argument --port: expected one argument", "argument --tp-size/--tensor-parallel-size: invalid int value: 'x'",
  "argument --kv-cache-dtype: invalid choice: 'x' (choose from 'auto', ...)",
  "argument --enable-metrics: ignored explicit argument 'x'";
- "the following arguments are required: --model-path/--model";
- "unrecognized arguments: --foo bar" (every token nobody consumed, in order).
argparse stops at the first error; this parser keeps going so that a report can list every problem,
but `problems[0]` is the one argparse would print. Later occurrences of a flag override earlier ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from console.sglang.flags import FlagSpec, FlagTable

# argparse's `_negative_number_matcher`; SGLang has no option that looks like a negative number,
# so "-1" is a value, never an option.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass(frozen=True, slots=True)
class ArgvProblem:
    """One argparse error. `message` is argparse's text (without the `prog: error: ` prefix)."""

    # unknown-flag, ambiguous-prefix, invalid-value, invalid-choice, missing-value, unexpected-value,
    # missing-required
    code: str
    message: str
    flags: tuple[str, ...]


@dataclass
class ParsedArgs:
    """The namespace argparse would build: every dest of the version, defaults included."""

    values: dict[str, Any]
    explicit: set[str] = field(default_factory=set)  # dests given on the command line
    spelled: dict[str, str] = field(default_factory=dict)  # dest -> the full option string matched
    problems: list[ArgvProblem] = field(default_factory=list)


def is_option_like(token: str) -> bool:
    """argparse's 'O' classification for a token (ignoring whether the option exists)."""
    if not token or token[0] != "-" or len(token) == 1 or token == "--":
        return False
    return not _NEGATIVE_NUMBER.match(token) and " " not in token


@dataclass(frozen=True, slots=True)
class _Option:
    spec: FlagSpec | None  # None: unknown option
    option: str  # full option string matched (or the token when unknown)
    explicit_arg: str | None


def _classify(token: str, table: FlagTable) -> _Option | ArgvProblem | None:
    """argparse `_parse_optional`, step by step: None for a value token, an _Option, or the ambiguity error."""
    if not token or token[0] != "-":
        return None
    if token in table.by_option:
        return _Option(table.by_option[token], token, None)
    if len(token) == 1:
        return None
    if "=" in token:
        head, _, tail = token.partition("=")
        if head in table.by_option:
            return _Option(table.by_option[head], head, tail)
    if token.startswith("--"):
        head, sep, tail = token.partition("=")
        matches = table.prefix_matches(head)
        if len(matches) > 1:
            return ArgvProblem(
                "ambiguous-prefix", f"ambiguous option: {token} could match {', '.join(matches)}", (token,)
            )
        if len(matches) == 1:
            return _Option(table.by_option[matches[0]], matches[0], tail if sep else None)
    if _NEGATIVE_NUMBER.match(token) or " " in token:
        return None
    return _Option(None, token, None)


def is_option_token(token: str, table: FlagTable) -> bool:
    """Would SGLang's parser read `token` as an option (known, unknown or ambiguous) rather than a value?"""
    return _classify(token, table) is not None


def _action_name(spec: FlagSpec) -> str:
    return "/".join(spec.options)


def _convert(spec: FlagSpec, raw: str) -> Any:
    """argparse `_get_value` + `_check_value`; raises ValueError with argparse's message."""
    kind = spec.type or "str"
    try:
        if kind == "int":
            value: Any = int(raw)
        elif kind == "float":
            value = float(raw)
        elif kind == "json":
            value = json.loads(raw)
        else:
            value = raw
    except ValueError:
        type_name = {"json": "loads"}.get(kind, kind)
        raise ValueError(f"argument {_action_name(spec)}: invalid {type_name} value: {raw!r}") from None
    if spec.choices is not None and value not in spec.choices:
        choices = ", ".join(map(repr, spec.choices))
        raise ValueError(f"argument {_action_name(spec)}: invalid choice: {value!r} (choose from {choices})")
    return value


def _arg_count_error(spec: FlagSpec) -> str:
    nargs = spec.nargs
    if nargs is None:
        return f"argument {_action_name(spec)}: expected one argument"
    if nargs == "+":
        return f"argument {_action_name(spec)}: expected at least one argument"
    return f"argument {_action_name(spec)}: expected {nargs} arguments"


def parse_argv(argv: Sequence[str], table: FlagTable) -> ParsedArgs:
    """Parse SGLang launch flags (no launcher, none of its own options) against one release's table."""
    parsed = ParsedArgs(values=table.defaults())
    classified: list[_Option | ArgvProblem | None] = []
    after_double_dash = False
    for token in argv:
        if after_double_dash or token == "--":
            # After "--" everything is positional, and SGLang takes no positionals.
            classified.append(None)
            after_double_dash = True
            continue
        classified.append(_classify(token, table))
    # argparse raises the ambiguity while classifying, before consuming anything.
    parsed.problems.extend(c for c in classified if isinstance(c, ArgvProblem))

    extras: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(argv):
        token, kind = argv[i], classified[i]
        if token == "--":
            kind = None
        i += 1
        if isinstance(kind, ArgvProblem):
            # Already reported; its values belong to it, not to "unrecognized arguments".
            while i < len(argv) and classified[i] is None and argv[i] != "--":
                i += 1
            continue
        if kind is None:
            if token != "--":
                extras.append(token)
            continue
        if kind.spec is None:
            extras.append(token)
            continue
        spec = kind.spec
        # Consecutive value tokens following the option.
        values_start = i
        while i < len(argv) and classified[i] is None and argv[i] != "--":
            i += 1
        following = list(argv[values_start:i])
        try:
            raw_values, leftover = _take_values(spec, kind, following)
        except ValueError as error:
            parsed.problems.append(_problem_for(error, spec, kind.option))
            extras.extend(following)
            continue
        extras.extend(leftover)
        try:
            _store(parsed, spec, kind.option, raw_values)
        except ValueError as error:
            parsed.problems.append(_problem_for(error, spec, kind.option))
            continue
        seen.add(spec.dest)
    missing = [s for s in table.flags if s.required and s.dest not in seen]
    if missing:
        names = ", ".join(_action_name(s) for s in missing)
        parsed.problems.append(
            ArgvProblem(
                "missing-required",
                f"the following arguments are required: {names}",
                tuple(s.name for s in missing),
            )
        )
    if extras:
        unknown = tuple(t for t in extras if is_option_like(t))
        parsed.problems.append(
            ArgvProblem("unknown-flag", f"unrecognized arguments: {' '.join(extras)}", unknown or tuple(extras))
        )
    return parsed


def _problem_for(error: ValueError, spec: FlagSpec, option: str) -> ArgvProblem:
    message = str(error)
    if "invalid choice" in message:
        code = "invalid-choice"
    elif "ignored explicit argument" in message:
        code = "unexpected-value"
    elif "expected" in message:
        code = "missing-value"
    else:
        code = "invalid-value"
    return ArgvProblem(code, message, (spec.name,))


def _take_values(spec: FlagSpec, option: _Option, following: list[str]) -> tuple[list[str], list[str]]:
    """(values for this option, value tokens it leaves unconsumed) — argparse's `consume_optional`."""
    nargs = 0 if not spec.takes_value else spec.nargs
    if option.explicit_arg is not None:
        if nargs == 0:
            raise ValueError(f"argument {_action_name(spec)}: ignored explicit argument {option.explicit_arg!r}")
        return [option.explicit_arg], following
    if nargs is None:
        if not following:
            raise ValueError(_arg_count_error(spec))
        return following[:1], following[1:]
    if nargs == "?":
        return following[:1], following[1:]
    if nargs in ("+", "*"):
        if nargs == "+" and not following:
            raise ValueError(_arg_count_error(spec))
        return following, []
    if isinstance(nargs, int):
        if len(following) < nargs:
            raise ValueError(_arg_count_error(spec))
        return following[:nargs], following[nargs:]
    return [], following


def _store(parsed: ParsedArgs, spec: FlagSpec, option: str, raw_values: list[str]) -> None:
    if spec.action == "deprecated_ignore":
        return  # SGLang only prints a deprecation warning for these
    if spec.action == "store_true":
        value: Any = True
    elif spec.action == "store_false":
        value = False
    elif spec.action == "boolean_optional":
        value = not option.startswith("--no-")
    elif spec.action == "store_const":
        for raw in raw_values:
            _convert(spec, raw)
        value = spec.const
    elif spec.nargs == "?" and not raw_values:
        value = spec.const
    else:
        converted = [_convert(spec, raw) for raw in raw_values]
        value = converted if spec.is_list else converted[0]
    parsed.values[spec.dest] = value
    parsed.explicit.add(spec.dest)
    parsed.spelled[spec.dest] = option
