"""A TOML writer for the files opsconsole writes itself (snapshots); tomllib (stdlib) reads them back.

Why not a library: the standard library reads TOML but does not write it, and what we write is a small subset:
strings (multi-line ones as multi-line strings, so a unit file stays readable), integers, floats, booleans,
aware datetimes, arrays and tables (arrays of tables for lists of tables). A dependency for that would also
rebuild every testbed's site packages. tests/test_tomlwrite.py holds it to tomllib with a round-trip property.

TOML has no null: `dumps` refuses None (TypeError), so callers decide what a missing value means. Pure, stdlib.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def dumps(data: Mapping[str, Any]) -> str:
    """The document for `data` (a table). Tables and arrays of tables come after the plain values of their
    parent, each under its own header, in the order of the mapping."""
    lines: list[str] = []
    _table([], data, lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _key(key: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"TOML keys are strings, not {key!r}")
    return key if _BARE_KEY.fullmatch(key) else _basic(key)


def _path(path: Sequence[str]) -> str:
    return ".".join(_key(k) for k in path)


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(_is_table(v) for v in value)


def _table(path: list[str], table: Mapping[str, Any], lines: list[str], *, header: str | None = None) -> None:
    if header is not None:
        lines.append("")
        lines.append(header)
    nested: list[tuple[str, Any]] = []
    for key, value in table.items():
        if _is_table(value) or _is_table_array(value):
            nested.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in nested:
        sub = [*path, key]
        if _is_table(value):
            _table(sub, value, lines, header=f"[{_path(sub)}]")
        else:
            for item in value:
                _table(sub, item, lines, header=f"[[{_path(sub)}]]")


def _value(value: Any) -> str:
    if value is None:
        raise TypeError("TOML has no null value; leave the key out instead")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _multiline(value) if "\n" in value else _basic(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as TOML")


def _escape(text: str, *, keep_newlines: bool) -> str:
    out = []
    for ch in text:
        if keep_newlines and ch == "\n":
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def _basic(text: str) -> str:
    return '"' + _escape(text, keep_newlines=False) + '"'


def _multiline(text: str) -> str:
    # Every quote is escaped, so no run of them can close the string early; the newline after the opening
    # delimiter is dropped by TOML, so the text starts on the next line exactly as it is.
    return '"""\n' + _escape(text, keep_newlines=True) + '"""'
