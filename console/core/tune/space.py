"""The search space of `opsconsole tune`: which speculative setups to try, pruned and merged by the version rules.

Pure: no I/O. The operator asks for axes (algorithm, steps, topk, draft tokens, spec v2) or lists setups
(`SpaceRequest`); `build_space()` turns each point into the unit it would run (the original unit with that
point's edits, through the unit model) and asks the SGLang version's rules (console/sglang/rules.py
check_launch) what the server would do with it:

- refused at startup (an error finding): the point is *pruned*, listed with SGLang's own reason, never
  restarted; so is a tree that cannot hold its draft tokens (SGLang's own tuner skips those, issue #6309);
- silently turned into another point (the rules resolve both to the same server arguments, e.g. topk 1 with
  draft tokens 5 -> 2, or spec v2 with topk 2 on 0.5.12 -> spec v1): the point is *merged* into the first
  one with the same resolved values, with the rules' reason;
- otherwise it is a *candidate*: its unit text, the resolved server arguments (`config`, SGLang's names) and
  a short name ("EAGLE3 topk 1 + spec v2", "steps 3", "no speculation") made from the axes that vary.

How "spec v2" is asked for depends on the version (console/sglang/rules.py rule_overlap_and_spec_v2):
up to 0.5.12 it is the environment variable SGLANG_ENABLE_SPEC_V2 (true/false); from 0.5.14 the variable is
gone and the V2 worker always runs, so "off" means `--disable-overlap-schedule` (the synchronous path).
"auto" draft tokens are steps + 1 for a chain (topk 1, what SGLang sets anyway) and steps × topk for a tree
(the tree's width at every depth; at most steps × topk + 1 fit).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from console.core.change import EditRequest, plan_for_version
from console.errors import UsageError
from console.sglang.rules import CheckReport, check_launch
from console.sglang.setup import AXES, SpecSetup
from console.sglang.specmode import SpecMode
from console.sglang.vocabulary import View, dests

NO_SPECULATION = "none"
# The server arguments a setup is described by (SGLang's ServerArgs names), in this order.
CONFIG_KEYS = dests(View.TUNE_CONFIG)
# Algorithms that always run a separate draft model (EAGLE/NEXTN may use the checkpoint's own MTP layers).
NEEDS_DRAFT_MODEL = ("EAGLE3", "STANDALONE")
# Warnings that mean the point should not be run although SGLang would start it.
_PRUNING_WARNINGS = ("draft-tokens-exceed-tree",)


@dataclass(frozen=True, slots=True)
class Setting(SpecSetup):
    """One point of the space, as asked for: the setup it asks SGLang to run (algorithm None = no speculation), and
    whether its draft tokens were left to auto (then they are SpecSetup.auto_draft_tokens)."""

    auto_draft: bool = False

    @classmethod
    def asked(
        cls,
        algorithm: str | None,
        steps: int = 1,
        topk: int = 1,
        draft_tokens: int | None = None,
        spec_v2: bool = False,
        draft_model_path: str | None = None,
    ) -> Setting:
        """The point the operator asked for; draft_tokens None = auto."""
        if algorithm is None:
            return cls(None)
        auto = draft_tokens is None
        draft = cls.auto_draft_tokens(steps, topk) if draft_tokens is None else draft_tokens
        return cls(algorithm, steps, topk, draft, spec_v2, draft_model_path, auto_draft=auto)

    @property
    def draft_said(self) -> str:
        return "auto" if self.auto_draft else str(self.draft_tokens)

    def requested_config(self) -> dict[str, Any]:
        """What this point asks for, in SGLang's server-argument names (before SGLang resolves anything)."""
        return {**self.server_args(), "disable_overlap_schedule": self.speculative and not self.spec_v2}


# SpaceRequest's field for an axis whose name it puts in the plural (the rest are called as the axis).
_REQUEST_FIELDS = {"algorithm": "algorithms", "topk": "topks"}


@dataclass(frozen=True)
class SpaceRequest:
    """What the operator asked to try: the product of the axes, plus explicitly listed setups."""

    algorithms: tuple[str | None, ...] = ()
    steps: tuple[int, ...] = (1, 2, 3)
    topks: tuple[int, ...] = (1,)
    draft_tokens: tuple[int | None, ...] = (None,)
    spec_v2: tuple[bool, ...] = ()
    draft_model_path: str | None = None  # for EAGLE3/STANDALONE points (and any point, if the unit has none)
    explicit: tuple[Setting, ...] = ()  # setups listed one by one (a --space file's [[candidate]] tables)
    include_grid: bool = True  # False when only the explicit setups are wanted

    def with_axes(self, values: Mapping[str, tuple[Any, ...]]) -> SpaceRequest:
        """This request with the axes in `values` (AXES -> parse_axis's values) instead of its own."""
        fields: dict[str, Any] = {_REQUEST_FIELDS.get(axis, axis): v for axis, v in values.items()}
        return replace(self, **fields)

    def settings(self) -> list[Setting]:
        """Every point, no speculation at most once (the other axes mean nothing without it), in order."""
        out: list[Setting] = []
        if self.include_grid:
            for algorithm in self.algorithms:
                if algorithm is None:
                    out.append(Setting.asked(None))
                    continue
                path = self.draft_model_path if algorithm in NEEDS_DRAFT_MODEL else None
                for steps, topk, draft, v2 in itertools.product(
                    self.steps, self.topks, self.draft_tokens, self.spec_v2
                ):
                    out.append(Setting.asked(algorithm, steps, topk, draft, v2, path))
        out.extend(self.explicit)
        unique: list[Setting] = []
        for setting in out:
            if setting not in unique:
                unique.append(setting)
        return unique


@dataclass(frozen=True)
class Candidate:
    """A setup the tune will run: its unit, what SGLang resolves, and what it is called."""

    key: str  # short, unique, for labels and ids ("eagle3-s2-k1-n3-v2")
    name: str  # for people ("EAGLE3 topk 1 + spec v2")
    setting: Setting
    unit_text: str = field(repr=False)  # the original unit with this setup's edits (never shown: may hold keys)
    edits: EditRequest
    config: dict[str, Any]  # CONFIG_KEYS -> resolved value
    # the rules' verdict on the spec-v2 worker and the overlap (console.sglang.specmode; None: no speculation)
    spec_mode: SpecMode | None
    warnings: tuple[str, ...] = ()
    merged: tuple[Setting, ...] = ()  # other points SGLang resolves to this one
    draft_model_path: str | None = None  # the resolved draft model (the request's or the unit's)

    @property
    def setup(self) -> SpecSetup:
        """The typed setup (console.sglang.setup) SGLang runs for this point."""
        return SpecSetup.from_config({**self.config, "speculative_draft_model_path": self.draft_model_path},
                                     self.spec_mode)  # fmt: skip

    @property
    def spec_v2(self) -> bool | None:
        """Does it run the spec-v2 worker (the rules' verdict)."""
        return self.spec_mode.spec_v2 if self.spec_mode is not None else None

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "config": dict(self.config)}


@dataclass(frozen=True)
class Pruned:
    """A point never restarted: the version's SGLang would refuse it (reason quotes SGLang), or it is pointless."""

    setting: Setting
    config: dict[str, Any]
    reason: str
    code: str

    def to_json(self) -> dict[str, Any]:
        return {"config": dict(self.config), "reason": self.reason}


@dataclass(frozen=True)
class Merged:
    """A point SGLang would silently turn into another one (same resolved values): run once, as `into`."""

    setting: Setting
    into: str  # the candidate's key
    into_name: str
    reason: str


@dataclass
class Space:
    sglang_version: str
    candidates: list[Candidate]
    pruned: list[Pruned]
    merged: list[Merged]

    def candidate(self, key: str) -> Candidate:
        return next(c for c in self.candidates if c.key == key)


def edits_for(setting: Setting, version: str) -> EditRequest:
    """The edits that turn the original unit into this setup (every axis set or removed explicitly)."""
    return EditRequest(*setting.edits(version))


def _draft_path(report: CheckReport) -> str | None:
    path = report.resolved.get("speculative_draft_model_path")
    return str(path) if path and report.resolved.get("speculative_algorithm") else None


def resolved_config(report: CheckReport) -> dict[str, Any]:
    config = {key: report.resolved.get(key) for key in CONFIG_KEYS}
    config["disable_overlap_schedule"] = bool(config["disable_overlap_schedule"])
    return config


def _merge_key(report: CheckReport) -> tuple[tuple[str, str], ...]:
    """What SGLang ends up running, compared value by value (the whole resolved ServerArgs, and the worker)."""
    items = sorted((k, repr(v)) for k, v in report.resolved.items())
    return (*items, ("<spec_v2>", repr(report.spec_v2)), ("<overlap>", repr(report.overlap_schedule)))


def _reason_for_prune(report: CheckReport) -> tuple[str, str]:
    if report.errors:
        first = report.errors[0]
        says = f" SGLang says: {first.sglang_log}" if first.sglang_log else ""
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        return first.code, f"{first.message}{says}{more}"
    warning = next(w for w in report.warnings if w.code in _PRUNING_WARNINGS)
    return warning.code, warning.message


def _merge_reason(setting: Setting, report: CheckReport, into: Candidate, version: str) -> str:
    """Why SGLang runs this point as `into`: the rules' silent adjustments of the values it asked for."""
    asked = setting.requested_config()
    reasons = [
        f"{a.flag} {a.from_value} -> {a.to_value}: {a.reason}"
        for a in report.adjustments
        if a.flag in CONFIG_KEYS and asked.get(a.flag) != into.setting.requested_config().get(a.flag)
    ]
    if not reasons:
        reasons = [
            f"{a.flag} {a.from_value} -> {a.to_value}: {a.reason}"
            for a in report.adjustments
            if a.flag in CONFIG_KEYS and a.from_value != a.to_value
        ]
    why = "; ".join(dict.fromkeys(reasons)) or "the same resolved server arguments"
    return f"SGLang {version} runs it exactly as {into.name} ({why})"


def _changed_by_sglang(candidate: Candidate) -> int:
    """How many of the values this point asked for SGLang resolves differently (NEXTN -> EAGLE counts too, for
    every NEXTN point alike)."""
    asked = candidate.setting.requested_config()
    return sum(asked[k] != candidate.config[k] for k in CONFIG_KEYS)


def build_space(
    request: SpaceRequest,
    unit_text: str,
    *,
    unit_name: str,
    version: str,
    architecture: str | None = None,
) -> Space:
    """Every point of the request, checked with `version`'s rules against the original unit: candidates (in the
    request's order), pruned points with SGLang's reason, merged points. UnitError if the unit is not an
    SGLang unit; UsageError if nothing is left to run."""
    candidates: list[Candidate] = []
    pruned: list[Pruned] = []
    merges: list[tuple[Setting, int, CheckReport]] = []  # (point, index of the candidate it becomes, its report)
    reports: list[CheckReport] = []
    seen: dict[tuple[tuple[str, str], ...], int] = {}
    for setting in request.settings():
        edits = edits_for(setting, version)
        plan = plan_for_version(unit_text, edits, unit_name=unit_name, version=version, architecture=architecture)
        report = plan.report
        if report.errors or any(w.code in _PRUNING_WARNINGS for w in report.warnings):
            code, reason = _reason_for_prune(report)
            pruned.append(Pruned(setting, setting.requested_config(), reason, code))
            continue
        if report.resolved.get("speculative_algorithm") in NEEDS_DRAFT_MODEL and not report.resolved.get(
            "speculative_draft_model_path"
        ):
            reason = (
                f"{setting.algorithm} runs a separate draft model, and neither the unit nor the request names one "
                "(--speculative-draft-model-path); give it with --draft-model-path PATH"
            )
            pruned.append(Pruned(setting, setting.requested_config(), reason, "draft-model-missing"))
            continue
        candidate = Candidate(
            key="",
            name="",
            setting=setting,
            unit_text=plan.new_text,
            edits=edits,
            config=resolved_config(report),
            spec_mode=report.spec_mode,
            warnings=tuple(w.message for w in report.warnings),
            draft_model_path=_draft_path(report),
        )
        key = _merge_key(report)
        if key not in seen:
            seen[key] = len(candidates)
            candidates.append(candidate)
            reports.append(report)
            continue
        index = seen[key]
        if _changed_by_sglang(candidate) < _changed_by_sglang(candidates[index]):
            # Keep the point SGLang runs as asked; the one it silently changes is the merged one.
            merges.append((candidates[index].setting, index, reports[index]))
            candidates[index], reports[index] = candidate, report
        else:
            merges.append((setting, index, report))
    named = _named(candidates)
    merged: list[Merged] = []
    for setting, index, report in merges:
        into = named[index]
        named[index] = replace(into, merged=(*into.merged, setting))
        merged.append(Merged(setting, into.key, into.name, _merge_reason(setting, report, into, version)))
    return Space(version, named, pruned, merged)


# --- names ---------------------------------------------------------------------------------------------------


def _named(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Keys and names from the axes that vary between the speculative candidates (what tells them apart); the
    algorithm is named whenever "no speculation" is among them."""
    setups = [c.setup for c in candidates]
    speculative = [s for s in setups if s.speculative]
    varying = {a for a in ("algorithm", "steps", "topk", "spec_v2") if len({getattr(s, a) for s in speculative}) > 1}
    if any(not s.draft_implied for s in speculative) and len({s.draft_tokens for s in speculative}) > 1:
        varying.add("draft_tokens")
    if len(speculative) < len(setups):
        varying.add("algorithm")
    out: list[Candidate] = []
    names: set[str] = set()
    keys: set[str] = set()
    for candidate, setup in zip(candidates, setups, strict=True):
        name = setup.name(varying)
        if name in names:  # two setups the varying axes cannot tell apart: say everything
            name = setup.name(AXES)
        key = setup.key
        while key in keys or name in names:
            key, name = key + "-b", name + "'"
        names.add(name)
        keys.add(key)
        out.append(replace(candidate, key=key, name=name))
    return out


# --- what the unit runs now, and the operator's axes ------------------------------------------------------------


@dataclass(frozen=True)
class UnitSpeculation:
    """The speculative settings of the unit as written (the algorithm as spelled there, e.g. NEXTN)."""

    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    spec_v2: bool | None
    draft_model_path: str | None


def unit_speculation(unit_text: str, version: str) -> UnitSpeculation:
    """Read the unit's speculative flags (as written) and whether it runs spec v2 (the rules' verdict)."""
    from console.sglang.argv import parse_argv
    from console.sglang.flags import flag_table
    from console.sglang.unit import UnitFile

    unit = UnitFile.parse(unit_text, version)
    flags, env = list(unit.flags()), dict(unit.environment())
    written = parse_argv(flags, flag_table(version)).values
    report = check_launch(flags, env, version)

    def count(dest: str) -> int | None:
        value = written.get(dest)
        return int(value) if isinstance(value, int | str) and str(value).isdigit() else None

    algorithm = written.get("speculative_algorithm")
    return UnitSpeculation(
        algorithm=str(algorithm) if algorithm else None,
        steps=count("speculative_num_steps"),
        topk=count("speculative_eagle_topk"),
        draft_tokens=count("speculative_num_draft_tokens"),
        spec_v2=(report.spec_mode is not None and report.spec_mode.overlap_path) if algorithm else None,
        draft_model_path=written.get("speculative_draft_model_path"),
    )


def space_from_file(data: Mapping[str, Any], where: str) -> SpaceRequest:
    """A --space file (TOML, already parsed): axes as lists (or comma-separated strings) and/or [[candidate]]
    tables, one setup each. UsageError says what is wrong and where."""
    known = {*AXES, "candidate"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; use {', '.join(sorted(known))}")

    def axis(key: str) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, list):
            return ",".join(_switch_text(v) for v in value)
        return _switch_text(value)

    explicit = tuple(
        _candidate_from(table, f"{where} [[candidate]] #{n}") for n, table in enumerate(data.get("candidate", []), 1)
    )
    texts = {k: axis(k) for k in AXES if k != "draft_model_path"}
    path = data.get("draft_model_path")
    base = SpaceRequest(
        draft_model_path=str(path) if path else None,
        explicit=explicit,
        include_grid=texts["algorithm"] is not None or not explicit,
    )
    return base.with_axes({k: parse_axis(k, text, f"{where} {k}") for k, text in texts.items() if text})


def _switch_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _candidate_from(table: Any, where: str) -> Setting:
    if not isinstance(table, Mapping):
        raise UsageError(f"{where}: expected a table with algorithm, steps, topk, draft_tokens, spec_v2")
    algorithms = parse_algorithms(str(table.get("algorithm", "")) or NO_SPECULATION)
    algorithm = algorithms[0]
    if algorithm is None:
        return Setting.asked(None)
    missing = [k for k in ("steps", "topk") if k not in table]
    if missing:
        raise UsageError(f"{where}: {algorithm} needs {' and '.join(missing)}")
    texts = {"draft_tokens": "auto", "spec_v2": "on"} | {k: _switch_text(v) for k, v in table.items() if k in AXES}
    values = {k: parse_axis(k, text, f"{where} {k}")[0] for k, text in texts.items() if k not in _NOT_NUMBERS}
    path = table.get("draft_model_path")
    return Setting.asked(algorithm, **values, draft_model_path=str(path) if path else None)


# --- parsing the operator's axes --------------------------------------------------------------------------------


_NOT_NUMBERS = ("algorithm", "draft_model_path")  # the axes of a [[candidate]] table that are not parsed one by one


def parse_axis(axis: str, text: str, what: str) -> tuple[Any, ...]:
    """The values of one axis of AXES but the draft model path, as the CLI's options, the Tune form's fields and a
    --space file give them (comma-separated); UsageError naming `what`."""
    if axis == "algorithm":
        return parse_algorithms(text)
    if axis == "spec_v2":
        return parse_switches(text, what)
    return parse_counts(text, what, allow_auto=axis == "draft_tokens")


def parse_algorithms(text: str) -> tuple[str | None, ...]:
    out: list[str | None] = []
    for part in _parts(text, "--algorithm"):
        out.append(None if part.lower() in (NO_SPECULATION, "off", "no") else part.upper())
    return tuple(out)


def parse_counts(text: str, what: str, *, allow_auto: bool = False) -> tuple[Any, ...]:
    out: list[int | None] = []
    for part in _parts(text, what):
        if allow_auto and part.lower() == "auto":
            out.append(None)
            continue
        try:
            value = int(part)
        except ValueError:
            auto = " or auto" if allow_auto else ""
            raise UsageError(f"{what} takes comma-separated whole numbers{auto}, e.g. 1,2,3 (got {part!r})") from None
        if value < 1:
            raise UsageError(f"{what} values must be at least 1 (got {value})")
        out.append(value)
    return tuple(out)


_ON = {"on", "true", "yes", "1", "v2"}
_OFF = {"off", "false", "no", "0", "v1"}


def parse_switches(text: str, what: str) -> tuple[bool, ...]:
    out: list[bool] = []
    for part in _parts(text, what):
        if part.lower() in _ON:
            out.append(True)
        elif part.lower() in _OFF:
            out.append(False)
        else:
            raise UsageError(f"{what} takes on and/or off, e.g. on,off (got {part!r})")
    return tuple(out)


def _parts(text: str, what: str) -> list[str]:
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise UsageError(f"{what} needs at least one value")
    return list(dict.fromkeys(parts))
