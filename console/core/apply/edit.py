"""The parameter editor's model (pure): which fields, their kinds from the version's flag table, the values the
unit has, the edit a set of field values makes, and what the server will really run.

    form = editor_form(unit_text, version)           # fields (speculative first) with the unit's values
    preview = form.preview({"speculative_num_steps": "3", "speculative_num_draft_tokens": "4"})
    preview.plan.report.errors / .warnings / preview.changes ("draft tokens 8 -> 3", "overlap off", ...)
    preview.edits                                    # the EditRequest plan_apply takes

The console calls preview() on every keystroke (it is the rules of that SGLang version on the edited unit, no
I/O: a few milliseconds); the CLI's `apply --set` is the same edit written by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from console.core.change import EditRequest, FlagValue, Plan, plan_for_version, values_equal
from console.core.deployment import GATE_DEST
from console.sglang.vocabulary import CACHE_DIR_ENV, SPEC_V2_ENV, TERMS, View, runs_as, term, terms

FieldKind = Literal["int", "float", "text", "choice", "switch", "list"]
SPEC_V2_DEST = f"env:{SPEC_V2_ENV}"
NONE_CHOICE = "none"  # the algorithm field: no speculative decoding (the flag removed)

# (dest, label, group) in the order the editor shows them: speculative decoding first, then serving.
FIELDS: tuple[tuple[str, str, str], ...] = tuple((t.dest, t.label, t.group) for t in terms(View.EDITOR))
# How the silent changes read for a person (other settings: their dest with spaces).
LABELS = {t.dest: t.label for t in TERMS if t.flag is not None or t.env is not None}
ACCESS_LOG_SKIPS = "uvicorn_access_log_exclude_prefixes"
TOKEN_HISTOGRAMS = "collect_tokens_histogram"


# What each option that shortens a start does, and what it asks (wave5 §6; the rules check what SGLang refuses).
START_HINTS = {
    "load_format": "presharded: the first start also writes per-rank shards; later ones load them, no re-quantization",
    "model_loader_extra_config": 'presharded: {"presharded_path": DIR} where the model folder is read-only or not '
    "shared by every node",
    "weight_loader_prefetch_checkpoints": "checkpoint on network storage: each rank reads its share once "
    "(multi-threaded load off)",
    "startup_weight_load_mode": "overlap: graphs captured while the weights load; FP16/BF16 Llama, Qwen2, Qwen3 on "
    "TP 1-2, no speculation",
    "weight_cache_mode": "client: weights mapped from a standalone daemon over CUDA IPC, no disk read; not with "
    "speculation",
    "weight_cache_socket": "the daemon's socket (default /tmp/sglang_weight_cache_<GPU UUID>.sock); absent: a "
    "disk load",
    f"env:{CACHE_DIR_ENV}": "compiled kernels kept here for the next start (default ~/.cache/sglang): a folder "
    "that lasts",
}


# What the editor offers against the phase that takes most of a restart, in the order it tries them: each a field
# and the value that shortens that phase (wave5 §6). Offered only where the release has the field and the rules accept
# it on the form as it is: overlap not with speculation, the weight cache's client not with it either, ...
SHORTER_STARTS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "load_weights": (
        ("load_format", "presharded"),
        ("startup_weight_load_mode", "overlap"),
        ("weight_cache_mode", "client"),
    ),
    "cuda_graph": ((f"env:{CACHE_DIR_ENV}", "/var/cache/sglang"), ("startup_weight_load_mode", "overlap")),
    "draft_cuda_graph": ((f"env:{CACHE_DIR_ENV}", "/var/cache/sglang"),),
    "draft_extend_cuda_graph": ((f"env:{CACHE_DIR_ENV}", "/var/cache/sglang"),),
}


def field_hint(dest: str, version: str) -> str:
    """Why a field is offered, in one line under it ("" for most)."""
    if dest == ACCESS_LOG_SKIPS:
        from console.sglang.client import polled_paths

        return f"keep the console's polling out of the server's log: {' '.join(polled_paths(version))}"
    if dest == TOKEN_HISTOGRAMS:
        return "length histograms in /metrics, for bench --shape-from-server"
    return START_HINTS.get(dest, "")


@dataclass(frozen=True)
class FieldSpec:
    dest: str
    label: str
    group: str
    kind: FieldKind
    flag: str | None  # the option written in the unit; None for an environment variable
    choices: tuple[str, ...] = ()
    default: Any = None
    hint: str = ""  # why the field is offered, in a line under it

    def parse(self, text: str) -> FlagValue | None:
        """The typed-in text as the unit will hold it; None clears the field (the flag removed). Raises
        ValueError saying what to type."""
        value = text.strip()
        if value == "" or (self.kind == "choice" and value == NONE_CHOICE):
            return None
        if self.kind == "list":  # the values of a list option, as typed: spaces or commas between them
            return [word for word in value.replace(",", " ").split() if word]
        if self.kind == "int":
            try:
                return str(int(value))
            except ValueError:
                raise ValueError(f"{self.label}: a whole number, e.g. 3 (not {value!r})") from None
        if self.kind == "float":
            try:
                return str(float(value))
            except ValueError:
                raise ValueError(f"{self.label}: a number, e.g. 0.85 (not {value!r})") from None
        if self.kind == "switch":
            return "true" if value.lower() in ("1", "true", "yes", "on") else "false"
        if self.kind == "choice" and self.choices and value not in self.choices:
            raise ValueError(f"{self.label}: one of {', '.join(self.choices)} (not {value!r})")
        return value

    def step(self, text: str, delta: int) -> str:
        """`+`/`-` on a number field: the next value (never below 0; an empty field starts from the default)."""
        base = text.strip() or ("" if self.default is None else str(self.default))
        if self.kind == "int":
            return str(max(0, int(base or 0) + delta))
        if self.kind == "float":
            return f"{max(0.0, float(base or 0.0) + delta * 0.01):.2f}"
        return text


@dataclass(frozen=True)
class Preview:
    """What the form's values make of the unit: the edit, the plan (rules' verdict), and the silent changes."""

    edits: EditRequest
    plan: Plan | None
    problems: tuple[str, ...] = ()  # values that could not be read (the plan is then None)
    changes: tuple[str, ...] = ()  # "draft tokens 8 -> 3", "overlap off", "max running requests unset -> 48"

    @property
    def ok(self) -> bool:
        return not self.problems and self.plan is not None and self.plan.ok

    @property
    def changed(self) -> bool:
        return self.plan is not None and self.plan.changed


@dataclass(frozen=True)
class EditorForm:
    unit_text: str = field(repr=False)
    version: str
    fields: tuple[FieldSpec, ...]
    values: Mapping[str, str]  # what the unit has now, as the form shows it ("" for not set)
    unit_name: str = "sglang.service"

    def field(self, dest: str) -> FieldSpec:
        return next(f for f in self.fields if f.dest == dest)

    def preview(self, values: Mapping[str, str]) -> Preview:
        """The edit these form values make (only the fields that differ from the unit), checked by the rules."""
        sets: list[tuple[str, FlagValue]] = []
        unsets: list[str] = []
        set_env: list[tuple[str, str]] = []
        unset_env: list[str] = []
        problems: list[str] = []
        for spec in self.fields:
            text = values.get(spec.dest, self.values.get(spec.dest, ""))
            if text.strip() == self.values.get(spec.dest, "").strip():
                continue
            try:
                value = spec.parse(text)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            if spec.kind == "switch" and spec.flag is not None:  # a boolean flag: present or not
                value = True if value == "true" else None
            if spec.flag is None:  # an environment variable
                name = spec.dest.removeprefix("env:")
                if value is None:
                    unset_env.append(name)
                else:
                    set_env.append((name, "1" if value == "true" else "0" if value == "false" else str(value)))
            elif value is None:
                unsets.append(spec.flag)
            else:
                sets.append((spec.flag, value))
        edits = EditRequest(tuple(sets), tuple(unsets), tuple(set_env), tuple(unset_env))
        if problems:
            return Preview(edits, None, tuple(problems))
        plan = plan_for_version(self.unit_text, edits, unit_name=self.unit_name, version=self.version)
        return Preview(edits, plan, (), silent_changes(plan))


def shorter_start_offers(form: EditorForm, values: Mapping[str, str], dominant: str) -> tuple[tuple[str, str], ...]:
    """The (field, value) pairs that would shorten the phase that dominates this host's restarts, each one the rules
    accept on the form as it is and the form does not have yet; () for a phase none of them shortens."""
    offered = []
    dests = {spec.dest for spec in form.fields}
    for dest, value in SHORTER_STARTS.get(dominant, ()):
        if dest not in dests or values.get(dest, form.values.get(dest, "")).strip():
            continue  # not in this release, or already set to something: the operator's choice stands
        if form.preview({**values, dest: value}).ok:
            offered.append((dest, value))
    return tuple(offered)


# Fields offered only where they mean something (editor_form's `extra`), with why and what they cost.
GATE_LABEL = "gate port"
GATE_HINT = (
    "the ranks hold after joining, before weights, until the console opens it (its restarts do); a start without a "
    "console, a reboot, waits for ever: SGLang's gate has no timeout"
)
EXTRA_FIELDS = {GATE_DEST: (GATE_LABEL, "deployment", GATE_HINT)}


def editor_form(
    unit_text: str, version: str, *, unit_name: str = "sglang.service", extra: Sequence[str] = ()
) -> EditorForm:
    """The editor's fields for that SGLang version, filled with what the unit has. `extra`: fields offered only
    here (EXTRA_FIELDS: a rank of a multi-node deployment's gate), after the others, each with its hint. Raises
    UnitError."""
    from console.sglang.argv import parse_argv
    from console.sglang.flags import flag_table, version_at_least
    from console.sglang.rules import builtin_algorithms, spec_v2_env_default
    from console.sglang.traffic_shape import histograms_need_flag
    from console.sglang.unit import UnitFile

    table = flag_table(version)
    unit = UnitFile.parse(unit_text, version)
    parsed = parse_argv(unit.flags(), table)
    env = unit.environment()
    fields: list[FieldSpec] = []
    values: dict[str, str] = {}
    hints: dict[str, str] = {}
    offered = list(FIELDS)
    for dest in extra:
        label, group, hint = EXTRA_FIELDS[dest]
        offered.append((dest, label, group))
        hints[dest] = hint
    for dest, label, group in offered:
        if dest == SPEC_V2_DEST:
            if spec_v2_env_default(version) is None:
                continue  # the version no longer reads the variable
            fields.append(FieldSpec(dest, label, group, "switch", None, default=spec_v2_env_default(version)))
            raw = env.get(SPEC_V2_ENV)
            values[dest] = "" if raw is None else ("true" if raw.lower() in ("1", "true", "yes", "y") else "false")
            continue
        if dest.startswith("env:"):  # another variable the unit's environment sets: text, where the release reads it
            first = term(dest).first_version
            if first is not None and not version_at_least(version, first):
                continue
            fields.append(FieldSpec(dest, label, group, "text", None, hint=field_hint(dest, version)))
            values[dest] = env.get(dest.removeprefix("env:"), "")
            continue
        spec = table.spec_for(dest)
        if spec is None:
            continue  # not a flag of this version
        if dest == TOKEN_HISTOGRAMS and not histograms_need_flag(version):
            continue  # a no-op from 0.5.11: the histograms are always recorded
        kind: FieldKind
        if spec.action in ("store_true", "store_false"):
            kind = "switch"  # a boolean flag: on writes it, off removes it
        elif spec.choices:
            kind = "choice"
        elif spec.type == "int":
            kind = "int"
        elif spec.type == "float":
            kind = "float"
        else:
            kind = "text"
        choices = tuple(str(c) for c in spec.choices) if spec.choices else ()
        if dest == "speculative_algorithm":
            kind = "choice"
            # 0.5.12+: a free string; its built-in names (0.5.23 adds DSPARK and UNO)
            known = choices or builtin_algorithms(version)
            choices = (NONE_CHOICE, *known)
        elif spec.is_list and not choices:
            kind = "list"
        default = None if kind == "list" and not spec.default else spec.default  # [] reads as unset
        hint = hints.get(dest) or field_hint(dest, version)
        fields.append(FieldSpec(dest, label, group, kind, spec.name, choices, default, hint))
        value = parsed.values.get(dest)
        if dest not in parsed.explicit:
            values[dest] = ""
        elif kind == "switch":
            values[dest] = "true" if value else "false"
        elif kind == "list" and isinstance(value, list | tuple):
            values[dest] = " ".join(str(v) for v in value)  # as the unit writes them
        else:
            values[dest] = _shown(value)
    return EditorForm(unit_text, version, tuple(fields), values, unit_name)


def running_values(form: EditorForm, resolved: Mapping[str, Any]) -> dict[str, str]:
    """A preset: the form filled with what the running server resolved (its /server_info)."""
    out = dict(form.values)
    for spec in form.fields:
        if spec.flag is not None and spec.dest in resolved:
            value = resolved[spec.dest]
            out[spec.dest] = "" if value is None else _shown(value)
    return out


def silent_changes(plan: Plan) -> tuple[str, ...]:
    """The values SGLang will run differently from what the unit asks, as a person reads them."""
    out = []
    for adjustment in plan.report.adjustments:
        label = LABELS.get(adjustment.flag, adjustment.flag.replace("_", " "))
        before, after = adjustment.from_value, adjustment.to_value
        if adjustment.flag == "disable_overlap_schedule" and isinstance(after, bool):
            out.append(f"{label} {'off' if after else 'on'}")
            continue
        if runs_as(adjustment.flag, before) == after:  # SGLang's own name for it (NEXTN): as the dashboard says it
            out.append(f"{label} {_said(before)} (runs as {_said(after)})")
            continue
        out.append(f"{label} {_said(before)} -> {_said(after)}")
    return tuple(out)


def _said(value: Any) -> str:
    return "unset" if value is None else _shown(value)


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(value)
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def same_values(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Two form states show the same setup."""
    keys = set(a) | set(b)
    return all(values_equal(a.get(k, "") or None, b.get(k, "") or None) for k in keys)
