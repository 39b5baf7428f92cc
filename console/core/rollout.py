"""The pure half of `opsconsole apply`: what to change, whether it is allowed, and where an apply stands.

- `parse_edits()` turns `--set/--unset/--env/--unset-env` into an `EditRequest` (usage errors: EditError).
- `choose_version()` picks the SGLang version the rules check against: the running server's, else the
  profile's `sglang_version`, else the newest supported.
- `build_plan()` applies the edits to the unit through the unit model, diffs old and new, and runs the
  version rules on the new flags and environment (`Plan.ok` is False when the server would refuse them).
- `verify_resolved()` compares what the restarted server reports in /server_info with what the rules
  predicted, telling apart "as asked", "silently adjusted as predicted" and "not what we expected".
- `start_failure()` and `is_new_start()` judge a (re)start from the service state systemd reports.
- `Rollout` is the apply's state machine; illegal transitions are programming errors.

No I/O here: console/core/apply/run.py does the talking to hosts.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from console import hints
from console.errors import ExitCode, UsageError
from console.names import is_env_name
from console.secrets import REDACTED, SecretMask, is_secret_name
from console.sglang.vocabulary import View, dests

if TYPE_CHECKING:
    from console.host.base import ServiceState
    from console.sglang.rules import CheckReport

FlagKind = Literal["bool", "list", "value"]
FlagValue = str | list[str] | bool

_FLAG_NAME = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class EditError(UsageError):
    """An --set/--unset/--env/--unset-env argument (or an edit from the console) is malformed."""


@dataclass(frozen=True)
class EditRequest:
    set_flags: tuple[tuple[str, FlagValue], ...] = ()  # flag names with their leading "--"
    unset_flags: tuple[str, ...] = ()
    set_env: tuple[tuple[str, str], ...] = ()
    unset_env: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.set_flags or self.unset_flags or self.set_env or self.unset_env)


def _flag_name(text: str, where: str) -> str:
    name = text.strip()
    if not name.startswith("-"):
        name = "--" + name
    if not _FLAG_NAME.match(name):
        raise EditError(f"{where}: {text!r} is not a launch flag name; write it like --speculative-num-steps")
    if not name.startswith("--"):
        raise EditError(f"{where}: short flag {text!r} is not supported; use the long --name form")
    return name


def parse_edits(
    sets: Sequence[str],
    unsets: Sequence[str] = (),
    envs: Sequence[str] = (),
    unset_envs: Sequence[str] = (),
    *,
    flag_kind: Callable[[str], FlagKind | None] = lambda _flag: None,
) -> EditRequest:
    """Parse the apply options.

    `--set FLAG=VALUE` (FLAG with or without its leading dashes); `--set FLAG` or `--set=--FLAG` alone sets a
    boolean flag; for a boolean flag `FLAG=false` (no/off/0) removes it and `FLAG=true` sets it; for a list
    flag (`--cuda-graph-bs`) the value is split on commas and spaces. `flag_kind` tells boolean and list flags
    apart (from the SGLang flag registry); unknown flags keep their value as text and the rules reject them.
    """
    set_flags: list[tuple[str, FlagValue]] = []
    unset_flags: list[str] = []
    for item in sets:
        raw_name, has_value, value = item.partition("=")
        name = _flag_name(raw_name, f"--set {item}")
        kind = flag_kind(name)
        if not has_value:
            if kind not in (None, "bool"):
                raise EditError(f"--set {item}: {name} takes a value; write --set {name}=VALUE")
            set_flags.append((name, True))
            continue
        if kind == "bool":
            lowered = value.strip().lower()
            if lowered in _TRUE:
                set_flags.append((name, True))
            elif lowered in _FALSE:
                unset_flags.append(name)
            else:
                raise EditError(f"--set {item}: {name} is a boolean flag; write {name}=true or {name}=false")
            continue
        if kind == "list":
            parts = [p for p in re.split(r"[,\s]+", value.strip()) if p]
            if not parts:
                raise EditError(f"--set {item}: {name} needs at least one value, e.g. {name}=1,2,4,8")
            set_flags.append((name, parts))
            continue
        if value == "":
            raise EditError(f"--set {item}: empty value; use --unset {name} to remove the flag")
        set_flags.append((name, value))
    for item in unsets:
        unset_flags.append(_flag_name(item, f"--unset {item}"))
    env_pairs: list[tuple[str, str]] = []
    for item in envs:
        key, has_value, value = item.partition("=")
        if not has_value or not is_env_name(key):
            raise EditError(f"--env {item!r}: expected KEY=VALUE with KEY like SGLANG_ENABLE_SPEC_V2")
        env_pairs.append((key, value))
    for key in unset_envs:
        if not is_env_name(key):
            raise EditError(f"--unset-env {key!r}: expected a variable name like SGLANG_ENABLE_SPEC_V2")
    touched = [n for n, _ in set_flags]
    both = sorted(set(touched) & set(unset_flags))
    if both:
        raise EditError(f"{', '.join(both)} is both set and unset; keep one of --set and --unset")
    dupes = sorted({n for n in touched if touched.count(n) > 1})
    if dupes:
        raise EditError(f"{', '.join(dupes)} is set more than once; give each flag one --set")
    env_both = sorted({k for k, _ in env_pairs} & set(unset_envs))
    if env_both:
        raise EditError(f"{', '.join(env_both)} is both set and unset; keep one of --env and --unset-env")
    return EditRequest(tuple(set_flags), tuple(unset_flags), tuple(env_pairs), tuple(unset_envs))


VersionSource = Literal["server", "profile", "newest"]


def choose_version(server: str | None, profile: str | None, newest: str) -> tuple[str, VersionSource]:
    """The running server knows best; a profile's `sglang_version` is next; else the newest supported."""
    if server:
        return server, "server"
    if profile:
        return profile, "profile"
    return newest, "newest"


def lock_owner(user: str, host: str, pid: int, at: datetime, *, verb: str = hints.verb("apply")) -> str:
    """What the unit's lock records about its holder, for the operator whose apply it refuses."""
    return f"{user}@{host} ({verb}, pid {pid}) since {at.strftime('%Y-%m-%d %H:%M:%S %Z')}".strip()


def held_by(holder: str, host: str, pid: int) -> bool:
    """Whether a lock holder (as lock_owner wrote it) is the process `pid` on `host`: this very console, whose
    previous lock the host has not let go of yet (a release takes up to one heartbeat there)."""
    return f"@{host} (" in holder and f", pid {pid}) since " in holder


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
    return True if text in _TRUE else False if text in _FALSE else None


def is_new_start(before: ServiceState, now: ServiceState) -> bool:
    """Whether `now` describes a different process than `before` (a restart took place)."""
    if now.main_pid is not None and now.main_pid != before.main_pid:
        return True
    return now.started_at is not None and now.started_at != before.started_at


def start_failure(
    state: ServiceState, baseline_restarts: int, *, seen_running: bool = True, before: ServiceState | None = None
) -> str:
    """Why this state means the start failed, or "" while it may still come up.

    `inactive` right after a restart can be the moment before the new process is spawned, so it counts only
    once the service has been seen running since the restart (seen_running). With `before` (the state read
    before the restart) a `failed`/`inactive` state counts only when the unit entered it after the restart:
    a stop that ended in SGLang's own SIGKILL leaves the unit `failed` (Result=signal), and that is the old
    process's end, not the new one's."""
    from console.core.exits import describe, entered_inactive_since

    stale = state.active_state in ("failed", "inactive") and before is not None
    if stale and before is not None and not entered_inactive_since(before, state):
        if not seen_running:
            return ""
        return f"the service did not start again: it is still {describe(state)} from before the restart"
    if state.active_state == "failed":
        return f"the service failed (result: {state.result})"
    if state.sub_state == "auto-restart" or state.n_restarts > baseline_restarts:
        return f"the service is restarting in a loop (NRestarts {state.n_restarts}, result: {state.result})"
    if state.active_state == "inactive" and seen_running:
        return f"the service stopped (result: {state.result})"
    return ""


class ApplyState(StrEnum):
    VALIDATED = "validated"
    REFUSED = "refused"  # the rules found errors: nothing touched
    UNCHANGED = "unchanged"  # the edit changes nothing: nothing touched
    ABORTED = "aborted"  # the operator said no: nothing touched
    BACKED_UP = "backed_up"
    WRITTEN = "written"
    DAEMON_RELOADED = "daemon_reloaded"
    RESTARTING = "restarting"
    STARTING = "starting"  # the new process runs; phases follow
    HEALTHY = "healthy"
    VERIFIED = "verified"
    MISMATCH = "mismatch"  # healthy, but /server_info differs from what the rules predicted: kept, reported
    FAILED = "failed"  # the new unit did not come up: roll back
    ROLLING_BACK = "rolling_back"
    RESTORED = "restored"
    HEALTHY_ON_OLD = "healthy_on_old"
    ROLLBACK_FAILED = "rollback_failed"
    WRITE_FAILED = "write_failed"  # the unit could not be written; the old one is still in place
    RESTART_FAILED = "restart_failed"  # a restart without edits did not come up (nothing to roll back to)


_S = ApplyState
TRANSITIONS: dict[ApplyState, frozenset[ApplyState]] = {
    _S.VALIDATED: frozenset({_S.REFUSED, _S.UNCHANGED, _S.ABORTED, _S.BACKED_UP, _S.WRITE_FAILED}),
    _S.BACKED_UP: frozenset({_S.WRITTEN, _S.WRITE_FAILED}),
    _S.WRITTEN: frozenset({_S.DAEMON_RELOADED, _S.FAILED}),
    _S.DAEMON_RELOADED: frozenset({_S.RESTARTING, _S.FAILED}),
    _S.RESTARTING: frozenset({_S.STARTING, _S.FAILED}),
    _S.STARTING: frozenset({_S.HEALTHY, _S.FAILED}),
    _S.HEALTHY: frozenset({_S.VERIFIED, _S.MISMATCH, _S.FAILED}),
    _S.FAILED: frozenset({_S.ROLLING_BACK}),
    _S.ROLLING_BACK: frozenset({_S.RESTORED, _S.ROLLBACK_FAILED}),
    _S.RESTORED: frozenset({_S.HEALTHY_ON_OLD, _S.ROLLBACK_FAILED}),
}
# A restart without edits: nothing is written, so a failed start has nothing to roll back to.
RESTART_TRANSITIONS: dict[ApplyState, frozenset[ApplyState]] = {
    _S.VALIDATED: frozenset({_S.RESTARTING, _S.ABORTED}),
    _S.RESTARTING: frozenset({_S.STARTING, _S.RESTART_FAILED}),
    _S.STARTING: frozenset({_S.HEALTHY, _S.RESTART_FAILED}),
    _S.HEALTHY: frozenset({_S.VERIFIED, _S.MISMATCH, _S.RESTART_FAILED}),
}
TERMINAL = frozenset(
    {
        _S.REFUSED,
        _S.UNCHANGED,
        _S.ABORTED,
        _S.VERIFIED,
        _S.MISMATCH,
        _S.HEALTHY_ON_OLD,
        _S.ROLLBACK_FAILED,
        _S.WRITE_FAILED,
        _S.RESTART_FAILED,
    }
)
SUCCESS = frozenset({_S.VERIFIED, _S.UNCHANGED})


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True)
class Transition:
    state: ApplyState
    at: datetime
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"state": self.state.value, "at": self.at.isoformat(), "detail": self.detail}


@dataclass
class Rollout:
    """Where one apply stands; every step is recorded with its time."""

    history: list[Transition] = field(default_factory=list)
    restart_only: bool = False  # a restart without edits (RESTART_TRANSITIONS)

    @classmethod
    def start(cls, at: datetime, *, restart_only: bool = False) -> Rollout:
        return cls([Transition(ApplyState.VALIDATED, at)], restart_only)

    @property
    def state(self) -> ApplyState:
        return self.history[-1].state

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    @property
    def ok(self) -> bool:
        return self.state in SUCCESS

    @property
    def rolled_back(self) -> bool:
        return any(t.state is ApplyState.RESTORED for t in self.history)

    @property
    def touched_host(self) -> bool:
        return any(t.state is ApplyState.BACKED_UP for t in self.history)

    def advance(self, state: ApplyState, at: datetime, detail: str = "") -> Transition:
        table = RESTART_TRANSITIONS if self.restart_only else TRANSITIONS
        if state not in table.get(self.state, frozenset()):
            raise IllegalTransition(f"apply cannot go from {self.state.value} to {state.value}")
        transition = Transition(state, at, detail)
        self.history.append(transition)
        return transition

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.ok else ExitCode.FAILED
