"""What the restarted server resolves, held to what the rules predicted (pure): "as asked", "silently adjusted as
predicted", or "not what we expected".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from console.core.change.edits import FALSE_WORDS, TRUE_WORDS
from console.secrets import REDACTED, is_secret_name


@dataclass(frozen=True)
class Expectation:
    dest: str
    requested: Any  # the value the edit asked for (before SGLang's silent adjustment)
    expected: Any  # what the rules say the server resolves it to
    adjustment_reason: str | None = None


VerifyStatus = Literal["as_requested", "adjusted", "mismatch", "not_reported", "secret"]


@dataclass(frozen=True)
class VerifiedValue:
    dest: str
    requested: Any
    expected: Any
    actual: Any
    status: VerifyStatus
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "expected": self.expected,
            "actual": self.actual,
            "status": self.status,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Verification:
    values: tuple[VerifiedValue, ...]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def mismatches(self) -> list[VerifiedValue]:
        return [v for v in self.values if v.status == "mismatch"]

    @property
    def adjusted(self) -> list[VerifiedValue]:
        return [v for v in self.values if v.status == "adjusted"]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "values": {v.dest: v.to_json() for v in self.values}}


def server_value(server_info: Mapping[str, Any], dest: str) -> tuple[bool, Any]:
    """(found, value) of a server arg in /server_info: top level (all versions), else internal_states[0]."""
    if dest in server_info:
        return True, server_info[dest]
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict) and dest in states[0]:
        return True, states[0][dest]
    return False, None


def verify_resolved(expectations: Mapping[str, Expectation], server_info: Mapping[str, Any]) -> Verification:
    values: list[VerifiedValue] = []
    for dest, exp in sorted(expectations.items()):
        found, actual = server_value(server_info, dest)
        status: VerifyStatus
        if is_secret_name(dest):
            # A key is not comparable: the server shows it masked ('***'), and so do we.
            values.append(
                VerifiedValue(dest, REDACTED, REDACTED, REDACTED, "secret", "a secret: not shown, so not compared")
            )
            continue
        if not found:
            status = "not_reported"
        elif not values_equal(actual, exp.expected):
            status = "mismatch"
        elif values_equal(actual, exp.requested):
            status = "as_requested"
        else:
            status = "adjusted"
        values.append(VerifiedValue(dest, exp.requested, exp.expected, actual, status, exp.adjustment_reason))
    return Verification(tuple(values))


def values_equal(a: Any, b: Any) -> bool:
    """Equal as SGLang values: "3" == 3 == 3.0, lists elementwise, None only equals None (or "None")."""
    if a is None or b is None:
        return (a is None or a == "None") and (b is None or b == "None")
    if isinstance(a, str) and isinstance(b, str) and a == b:
        return True  # also "nan" == "nan", which as floats would differ
    if isinstance(a, bool) or isinstance(b, bool):
        return _as_bool(a) is not None and _as_bool(a) == _as_bool(b)
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        if not (isinstance(a, list | tuple) and isinstance(b, list | tuple)) or len(a) != len(b):
            return False
        return all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    fa, fb = _as_float(a), _as_float(b)
    if fa is not None and fb is not None:
        return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12)
    return str(a) == str(b)


def _as_float(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return True if text in TRUE_WORDS else False if text in FALSE_WORDS else None
