"""The edit made: the new unit text, its diff, and the rules' verdict on it for an SGLang version (pure).

- `choose_version()` picks the SGLang version the rules check against: the running server's, else the profile's
  `sglang_version`, else the newest supported.
- `build_plan()` applies the edits to the unit through the unit model, diffs old and new, and runs the version's
  rules on the new flags and environment (`Plan.ok` is False when the server would refuse them);
  `plan_for_version()` does it with that version's unit model and rules, or checks a whole replacement unit.
- `Plan.expectations()` says what the restarted server should then resolve (verify.py compares it).
- `mask_plan()` takes every secret out of a plan before anyone sees it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from console.core.change.edits import EditRequest
from console.core.change.verify import Expectation, values_equal
from console.secrets import REDACTED, SecretMask, is_secret_name
from console.sglang.vocabulary import View, dests

if TYPE_CHECKING:
    from console.sglang.rules import CheckReport

VersionSource = Literal["server", "profile", "newest"]


def choose_version(server: str | None, profile: str | None, newest: str) -> tuple[str, VersionSource]:
    """The running server knows best; a profile's `sglang_version` is next; else the newest supported."""
    if server:
        return server, "server"
    if profile:
        return profile, "profile"
    return newest, "newest"


def unified_diff(old: str, new: str, name: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"{name} (now)", tofile=f"{name} (new)"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass(frozen=True)
class Plan:
    """The edit, made: texts, diff, and the rules' verdict on the new unit (and on the old, to compare)."""

    old_text: str = field(repr=False)  # as on disk: only ever written back, never shown (the diff is masked)
    new_text: str = field(repr=False)
    diff: str
    sglang_version: str
    version_source: VersionSource
    report: CheckReport  # the rules' verdict on the new unit
    old_report: CheckReport  # the same for the unit as it is now

    @property
    def changed(self) -> bool:
        return self.old_text != self.new_text

    @property
    def ok(self) -> bool:
        return bool(self.report.ok)

    @property
    def speculative(self) -> bool:
        algo = self.report.resolved.get("speculative_algorithm")
        return bool(algo) and str(algo).upper() not in {"NONE", "NGRAM"}

    @property
    def cuda_graph(self) -> bool:
        return not bool(self.report.resolved.get("disable_cuda_graph", False))

    def expectations(self, *, everything: bool = False) -> dict[str, Expectation]:
        """What the restarted server should report, for the values this edit changes or the rules adjust
        (everything: every speculative value and the running-request cap, for a restart without edits)."""
        new, old = self.report.resolved, self.old_report.resolved
        if everything:
            keys = [k for k in RESTART_CHECKED if k in new]
            adjusted_all = {a.flag: a for a in self.report.adjustments}
            return {
                k: Expectation(
                    k,
                    adjusted_all[k].from_value if k in adjusted_all else new[k],
                    new[k],
                    adjusted_all[k].reason if k in adjusted_all else None,
                )
                for k in keys
            }
        adjusted = {a.flag: a for a in self.report.adjustments}
        # An adjustment the old unit got too (max running requests := 48 with speculation) is not this edit's.
        old_adjusted = {a.flag: (a.from_value, a.to_value) for a in self.old_report.adjustments}
        fresh = {dest for dest, a in adjusted.items() if old_adjusted.get(dest) != (a.from_value, a.to_value)}
        out: dict[str, Expectation] = {}
        for dest in sorted(new):
            if dest in fresh or not values_equal(new.get(dest), old.get(dest)):
                adjustment = adjusted.get(dest)
                requested = adjustment.from_value if adjustment is not None else new[dest]
                reason = adjustment.reason if adjustment is not None else None
                out[dest] = Expectation(dest, requested, new[dest], reason)
        return out


# What a restart without edits checks the server still resolves.
RESTART_CHECKED = dests(View.RESTART_CHECK)


def mask_report(report: CheckReport, secrets: SecretMask) -> CheckReport:
    """The report with every secret out of it: messages masked, secret-named resolved values replaced."""
    from console.sglang.rules import Adjustment, Finding

    def finding(f: Finding) -> Finding:
        log = secrets.text(f.sglang_log) if f.sglang_log else f.sglang_log
        return replace(f, message=secrets.text(f.message), sglang_log=log)

    def adjustment(a: Adjustment) -> Adjustment:
        secret = is_secret_name(a.flag)
        return replace(
            a,
            from_value=REDACTED if secret and a.from_value else secrets.data(a.from_value),
            to_value=REDACTED if secret and a.to_value else secrets.data(a.to_value),
            reason=secrets.text(a.reason),
        )

    return replace(
        report,
        errors=[finding(f) for f in report.errors],
        warnings=[finding(f) for f in report.warnings],
        adjustments=[adjustment(a) for a in report.adjustments],
        resolved=secrets.data(dict(report.resolved)),
    )


def mask_plan(plan: Plan, secrets: SecretMask) -> Plan:
    """The plan as anyone may see it: diff and reports masked; the raw texts stay only for writing back."""
    return replace(
        plan,
        diff=secrets.text(plan.diff),
        report=mask_report(plan.report, secrets),
        old_report=mask_report(plan.old_report, secrets),
    )


def build_plan(
    unit_text: str,
    edits: EditRequest,
    *,
    unit_name: str,
    version: str,
    version_source: VersionSource,
    parse_unit: Callable[[str], Any],
    check: Callable[[list[str], dict[str, str], str], CheckReport],
) -> Plan:
    """Apply the edits through the unit model and check the result the way `version` would.

    `parse_unit` is UnitFile.parse and `check` is rules.check_launch (injected so this stays testable on its
    own); the unit model keeps everything the edit does not touch byte-identical.
    """
    unit = parse_unit(unit_text)
    old = _launch(unit)
    for name, value in edits.set_flags:
        unit.set_flag(name, value)
    for name in edits.unset_flags:
        unit.unset_flag(name)
    for key, env_value in edits.set_env:
        unit.set_env(key, env_value)
    for key in edits.unset_env:
        unit.unset_env(key)
    return _checked_plan(unit_text, unit.render(), _launch(unit), old, unit_name, version, version_source, check)


def plan_for_version(
    unit_text: str,
    edits: EditRequest | None = None,
    *,
    unit_name: str,
    version: str,
    version_source: VersionSource = "server",
    architecture: str | None = None,
    replacement: str | None = None,
) -> Plan:
    """The plan with SGLang `version`'s unit model and rules: build_plan's edits of `unit_text`, or, given
    `replacement`, that whole unit text in its place (kept from before, e.g. the unit a tune started from; the
    edits are then ignored), checked the same way. `architecture` is the served model's, for the rules'
    auto-choice. UnitError when a text is not an SGLang unit."""
    from console.sglang.rules import check_launch
    from console.sglang.unit import UnitFile

    def parse_unit(text: str) -> Any:
        return UnitFile.parse(text, version)

    def check(argv: list[str], env: dict[str, str], checked_version: str) -> CheckReport:
        return check_launch(argv, env, checked_version, architecture=architecture)

    if replacement is not None:
        new, old = _launch(parse_unit(replacement)), _launch(parse_unit(unit_text))
        return _checked_plan(unit_text, replacement, new, old, unit_name, version, version_source, check)
    return build_plan(
        unit_text,
        EditRequest() if edits is None else edits,
        unit_name=unit_name,
        version=version,
        version_source=version_source,
        parse_unit=parse_unit,
        check=check,
    )


def _launch(unit: Any) -> tuple[list[str], dict[str, str]]:
    return list(unit.flags()), dict(unit.environment())


def _checked_plan(
    old_text: str,
    new_text: str,
    new: tuple[list[str], dict[str, str]],
    old: tuple[list[str], dict[str, str]],
    unit_name: str,
    version: str,
    version_source: VersionSource,
    check: Callable[[list[str], dict[str, str], str], CheckReport],
) -> Plan:
    """The plan for `old_text` -> `new_text`, with the rules' verdict on both launches (argv, environment)."""
    return Plan(
        old_text=old_text,
        new_text=new_text,
        diff=unified_diff(old_text, new_text, unit_name),
        sglang_version=version,
        version_source=version_source,
        report=check(*new, version),
        old_report=check(*old, version),
    )
