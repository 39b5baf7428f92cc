"""The pure half of `opsconsole freeze` and `restore`: whether the running server runs what the unit on disk
says, the snapshot and document a freeze writes, and the edits that bring a snapshot back. No I/O here:
console/core/snapshot/freeze.py reads the host into a `Capture` and carries the plan out.

Does the server run the unit on disk? Four independent witnesses, each a refusal when it disagrees:
- systemd's NeedDaemonReload: the file on disk is not what systemd loaded (an edit written, never applied);
- the main process's argv (/proc/PID/cmdline) against the unit's ExecStart: an edit daemon-reloaded but not
  restarted shows here, and so does a drop-in that overrides ExecStart. Where the argv cannot be read (or the
  process renamed itself), the unit file's mtime against the process's start time stands in;
- the main process's environment (/proc/PID/environ) against the unit's Environment= (and no SGLANG_* variable
  the unit does not set), when it can be read;
- /server_info against what the version's rules predict for the unit on disk (console.core.change).
Plus the obvious: the service is active and /health answers 200. `--force REASON` freezes anyway and records
the reason and what it overrode.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from console import hints
from console.bench.records import BenchRecord, unit_hash
from console.core.change import (
    RESTART_CHECKED,
    EditRequest,
    Expectation,
    FlagValue,
    unified_diff,
    values_equal,
    verify_resolved,
)
from console.core.snapshot.diff import FlagGroup, flag_map, table_for
from console.core.snapshot.doc import render_document
from console.core.snapshot.model import (
    RESOLVED_KEYS,
    ComparisonRow,
    Forced,
    Snapshot,
    SnapshotGpu,
    SnapshotHost,
    SnapshotServer,
    SnapshotUnit,
    bench_entry,
    benchmarks_of_setup,
    check_name,
    comparison_rows,
    server_args_of,
)
from console.errors import UsageError
from console.host.base import ServiceState
from console.host.gpu import GpuSample
from console.secrets import REDACTED, SecretMask, is_secret_name, redact_argv

DEFAULT_DOCUMENT = "~/production_{name}.md"
INSTALL_SECTION = "[Install]\nWantedBy=multi-user.target\n"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class FreezeRequest:
    name: str
    note: str = ""
    document: str | None = None  # where the document goes on the host; None: the profile's, else DEFAULT_DOCUMENT
    force: str | None = None  # freeze despite the refusals, for this reason (recorded)

    def checked(self) -> FreezeRequest:
        check_name(self.name)
        if self.document is not None:
            check_document_path(self.document)
        if self.force is not None and not self.force.strip():
            raise UsageError("{field} needs a reason (it is recorded in the snapshot and the document)", field="force")
        return self


def check_document_path(path: str) -> str:
    """An absolute path or one in the SSH user's home (`~/...`); `{name}` is replaced by the snapshot's name."""
    if _CONTROL.search(path):
        raise UsageError("the document path must not contain control characters or newlines")
    if not (path.startswith("/") or path.startswith("~/")) or path.endswith("/") or path in ("/", "~/"):
        raise UsageError(
            f"document path {path!r}: give a file as an absolute path or under the SSH user's home, "
            "e.g. ~/production_{name}.md or /srv/sglang/production.md"
        )
    return path


def document_path(template: str, name: str, home: str | None) -> str:
    """The document's absolute path on the host."""
    path = check_document_path(template).replace("{name}", name)
    if path.startswith("~/"):
        if not home or not home.startswith("/"):
            raise UsageError(
                "the host did not say the SSH user's home, so {template!r} cannot be placed; give {field} /ABSOLUTE",
                field="document",
                template=template,
            )
        path = home.rstrip("/") + path[1:]
    return path


@dataclass(frozen=True)
class Refusal:
    code: str  # not-active | unhealthy | no-server-info | daemon-reload | process-flags | unit-newer |
    #           process-environment | resolved
    message: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class HostFacts:
    hostname: str | None = None
    user: str | None = None
    home: str | None = None


@dataclass(frozen=True)
class ProcessView:
    """What the running main process was started with, as far as the host lets us read it."""

    argv: tuple[str, ...] | None = None  # /proc/PID/cmdline
    environ: Mapping[str, str] | None = None  # /proc/PID/environ
    unit_mtime: datetime | None = None  # the unit file's mtime (used when argv is unknown)
    notes: tuple[str, ...] = ()  # why a part could not be read


@dataclass
class Capture:
    """Everything a freeze reads from the host and the workspace (raw unit text: never shown unmasked)."""

    label: str
    unit_name: str
    transport: str
    state: ServiceState
    unit_text: str = field(repr=False)
    version: str
    healthy: bool
    server_info: dict[str, Any] | None  # masked by the client
    server_error: str | None
    facts: HostFacts
    process: ProcessView
    gpus: list[GpuSample]
    driver_version: str | None
    records: list[BenchRecord]
    previous: Snapshot | None
    frozen_at: datetime
    frozen_by: str
    opsconsole_version: str
    document_template: str
    secrets: SecretMask

    def parsed_unit(self) -> Any:
        from console.sglang.unit import UnitFile

        return UnitFile.parse(self.unit_text, self.version)

    def resolved(self) -> dict[str, Any]:
        from console.sglang.client import summarize

        if self.server_info is None:
            return {}
        summary = summarize(self.server_info)
        return {k: summary.get(k) for k in RESOLVED_KEYS}


# --- does it run what the unit says ---------------------------------------------------------------------


def looks_like_argv(argv: Sequence[str] | None) -> bool:
    """A process that renamed itself (setproctitle: `sglang::...`, one word, perhaps with spaces) shows no argv
    to compare, and its environment's memory may hold the title too."""
    return argv is not None and len(argv) >= 2 and "::" not in argv[0]


def renamed(process: ProcessView) -> bool:
    return process.argv is not None and not looks_like_argv(process.argv)


def same_argv(running: Sequence[str], unit: Sequence[str]) -> bool:
    """systemd runs ExecStart's words as they are; a program given without its path is found on PATH, so the
    first word is compared by name."""
    if len(running) != len(unit) or not running:
        return False
    return running[0].rsplit("/", 1)[-1] == unit[0].rsplit("/", 1)[-1] and list(running[1:]) == list(unit[1:])


def flag_differences(running: Sequence[str], unit: Sequence[str], version: str, secrets: SecretMask) -> list[str]:
    """`--speculative-num-steps: runs 2, the unit says 3` for each flag that differs (values masked)."""
    table = table_for(version)
    now, disk = flag_map(running, table), flag_map(unit, table)
    out = []
    for name in sorted(set(now) | set(disk)):
        a, b = now.get(name), disk.get(name)
        if a is not None and b is not None and a.values == b.values:
            continue
        shown_a = "absent" if a is None else _masked_group(a, secrets)
        shown_b = "absent" if b is None else _masked_group(b, secrets)
        out.append(f"{name}: runs {shown_a}, the unit says {shown_b}")
    return out


def _masked_group(group: FlagGroup, secrets: SecretMask) -> str:
    if is_secret_name(group.name):
        return REDACTED
    return secrets.text(group.shown)


def find_refusals(capture: Capture, unit: Any) -> list[Refusal]:
    """Why this is not a setup to freeze as it stands (empty: it is). `unit` is the parsed unit on disk."""
    from console.sglang.rules import check_launch

    state, name = capture.state, capture.unit_name
    out: list[Refusal] = []
    if state.active_state != "active":
        out.append(Refusal("not-active", f"{name} is {state.active_state}/{state.sub_state}: freeze a setup that runs"))
    if not capture.healthy:
        out.append(Refusal("unhealthy", "the server does not answer /health with 200: freeze a setup that serves"))
    if capture.server_info is None:
        why = capture.server_error or "no answer"
        out.append(Refusal("no-server-info", f"/server_info could not be read ({why}): what runs is unknown"))
    if state.need_daemon_reload:
        out.append(
            Refusal(
                "daemon-reload",
                f"the unit file on disk is not what systemd loaded (NeedDaemonReload=yes): an edit of {name} was "
                f"written but never applied. Apply it ({hints.RESTART.line(HOST=capture.label)}) or put the unit "
                "back, then freeze",
            )
        )
    out += _process_refusals(capture, unit)
    if capture.server_info is not None:
        report = check_launch(unit.flags(), unit.environment(), capture.version)
        expected = {
            k: Expectation(k, report.resolved[k], report.resolved[k]) for k in RESTART_CHECKED if k in report.resolved
        }
        verification = verify_resolved(expected, capture.server_info)
        wrong = [f"{v.dest} = {v.actual!r} (the unit predicts {v.expected!r})" for v in verification.mismatches]
        if wrong:
            out.append(
                Refusal(
                    "resolved",
                    f"the server does not resolve what SGLang {capture.version}'s rules predict for the unit on "
                    f"disk: {'; '.join(wrong)}. It runs another setup; restart it on the unit, then freeze",
                )
            )
    return [Refusal(r.code, capture.secrets.text(r.message)) for r in out]


def _process_refusals(capture: Capture, unit: Any) -> list[Refusal]:
    process, state = capture.process, capture.state
    out: list[Refusal] = []
    unit_argv = unit.exec_argv()
    if looks_like_argv(process.argv):
        assert process.argv is not None
        if not same_argv(process.argv, unit_argv):
            launcher = len(unit.launch.launcher)
            diffs = flag_differences(process.argv[launcher:], unit_argv[launcher:], capture.version, capture.secrets)
            detail = "; ".join(diffs) if diffs else "the program or its options differ"
            out.append(
                Refusal(
                    "process-flags",
                    f"the server was started with other flags than the unit on disk says ({detail}). Restart it on "
                    f"the unit ({hints.RESTART.line(HOST=capture.label)}) or put the unit back, then freeze",
                )
            )
    elif process.unit_mtime is not None and state.started_at is not None and process.unit_mtime > state.started_at:
        out.append(
            Refusal(
                "unit-newer",
                f"the unit file was changed ({process.unit_mtime:%Y-%m-%d %H:%M:%S %Z}) after the server started "
                f"({state.started_at:%Y-%m-%d %H:%M:%S %Z}), and the process's own flags cannot be read to tell "
                "whether it runs the change. Restart it on the unit, then freeze",
            )
        )
    if process.environ is not None and not renamed(process):
        env = unit.environment()
        differ = sorted(k for k, v in env.items() if process.environ.get(k) != v)
        extra = (
            []
            if unit.environment_files()
            else sorted(k for k in process.environ if k.startswith("SGLANG_") and k not in env)
        )
        if differ or extra:
            parts = []
            if differ:
                parts.append(f"set differently in the unit: {', '.join(differ)}")
            if extra:
                parts.append(f"set in the server but not in the unit: {', '.join(extra)}")
            out.append(
                Refusal(
                    "process-environment",
                    f"the server's environment is not the unit's ({'; '.join(parts)}). Restart it on the unit, "
                    "then freeze",
                )
            )
    return out


# --- the plan ---------------------------------------------------------------------------------------------


def with_install_section(text: str, unit: Any) -> str:
    """The unit, able to start on boot: an [Install] WantedBy= is added when it has none (enable needs one)."""
    if unit.directives("WantedBy", "Install") or unit.directives("RequiredBy", "Install"):
        return text
    body = text if text.endswith("\n") or not text else text + "\n"
    return body + "\n" + INSTALL_SECTION


@dataclass(frozen=True)
class FreezePlan:
    """What a freeze will write: the snapshot, the document and where, and the unit (changed only to enable it)."""

    request: FreezeRequest
    snapshot: Snapshot
    document: str
    document_path: str
    old_text: str = field(repr=False)  # as on disk; written back only
    new_text: str = field(repr=False)
    unit_diff: str = ""  # masked
    refusals: tuple[Refusal, ...] = ()

    @property
    def unit_changed(self) -> bool:
        return self.old_text != self.new_text

    @property
    def refused(self) -> bool:
        return bool(self.refusals) and not self.request.force

    @property
    def forced(self) -> bool:
        return bool(self.refusals) and bool(self.request.force)


def build_freeze_plan(capture: Capture, request: FreezeRequest) -> FreezePlan:
    """The snapshot of what runs, its document, and the unit the freeze leaves on the host."""
    secrets = capture.secrets
    unit = capture.parsed_unit()
    refusals = tuple(find_refusals(capture, unit))
    new_text = with_install_section(capture.unit_text, unit)
    resolved = capture.resolved()
    version = (capture.server_info or {}).get("version") or None
    records = benchmarks_of_setup(
        capture.records,
        unit_hashes={unit_hash(capture.unit_text), unit_hash(new_text)},
        resolved=resolved,
        version=version,
    )
    comparison: list[ComparisonRow] = (
        comparison_rows(capture.previous, request.name, records) if capture.previous else []
    )
    launch = unit.launch
    doc_path = document_path(request.document or capture.document_template, request.name, capture.facts.home)
    warnings = list(capture.process.notes)
    if renamed(capture.process):
        warnings.append(
            "the main process renamed itself, so its flags and environment were not compared with the unit; the "
            "unit file's age against the process's start and the resolved values were"
        )
    from console.sglang.rules import check_launch

    report = check_launch(unit.flags(), unit.environment(), capture.version)
    if report.errors and capture.server_info is not None:
        warnings.append(
            f"SGLang {capture.version}'s rules report errors for this unit, yet the server runs it: "
            + "; ".join(e.message for e in report.errors)
        )
    forced = None
    if refusals and request.force:
        forced = Forced(reason=request.force.strip(), overridden=[r.message for r in refusals])
    snapshot = Snapshot(
        name=request.name,
        note=request.note,
        frozen_at=capture.frozen_at,
        frozen_by=capture.frozen_by,
        opsconsole_version=capture.opsconsole_version,
        previous=capture.previous.name if capture.previous else None,
        forced=forced,
        warnings=[secrets.text(w) for w in warnings],
        host=SnapshotHost(
            label=capture.label,
            unit=capture.unit_name,
            transport=capture.transport,
            hostname=capture.facts.hostname,
            ssh_user=capture.facts.user,
            fragment_path=capture.state.fragment_path,
            document=doc_path,
            driver_version=capture.driver_version,
        ),
        server=SnapshotServer(
            version=version,
            resolved=secrets.data({k: v for k, v in resolved.items() if v is not None}),
            server_args=secrets.data(server_args_of(capture.server_info or {})),
        ),
        unit=SnapshotUnit(
            hash=unit_hash(new_text),
            text=secrets.text(new_text),
            launcher=list(launch.launcher),
            flags=_masked_words(launch.flags, secrets),
            launcher_options=_masked_words(launch.own_options, secrets),
            environment=secrets.data(dict(unit.environment())),
            environment_files=unit.environment_files(),
            launch_command=secrets.text(shlex.join(redact_argv(unit.exec_argv()))),
            unit_file_state="enabled",  # what the freeze makes it; verified before the snapshot is kept
        ),
        gpus=[
            SnapshotGpu(
                index=g.index,
                name=g.name,
                uuid=g.uuid,
                memory_total_mib=g.memory_total_mib,
                power_limit_w=g.power_limit_w,
            )
            for g in capture.gpus
        ],
        benchmarks=[secrets.data(bench_entry(r)) for r in records],
        comparison=comparison,
    )
    return FreezePlan(
        request=request,
        snapshot=snapshot,
        document=render_document(snapshot),
        document_path=doc_path,
        old_text=capture.unit_text,
        new_text=new_text,
        unit_diff=secrets.text(unified_diff(capture.unit_text, new_text, capture.unit_name)),
        refusals=refusals,
    )


def _masked_words(words: Sequence[str], secrets: SecretMask) -> list[str]:
    return [secrets.text(w) for w in redact_argv(words)]


# --- restore ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreEdits:
    edits: EditRequest
    notes: tuple[str, ...] = ()  # what is kept as it is on the host, and why


def _group_value(group: FlagGroup) -> FlagValue:
    if not group.values:
        return True
    if group.is_list or (not group.known and len(group.values) > 1):
        return list(group.values)
    return group.values[0]


def restore_edits(snapshot: Snapshot, current: Any, version: str) -> RestoreEdits:
    """The edits that turn the unit on the host (`current`, parsed) into the snapshot's flags and environment.

    A secret (an API key) is kept as it is on the host: the snapshot holds it masked, so it cannot be put back."""
    table = table_for(version)
    now = flag_map([*current.flags(), *current.launch.own_options], table)
    then = flag_map([*snapshot.unit.flags, *snapshot.unit.launcher_options], table)
    notes: list[str] = []
    set_flags: list[tuple[str, FlagValue]] = []
    for name, group in then.items():
        if is_secret_name(name) or any(REDACTED in v for v in group.values):
            if name not in now:
                notes.append(f"{name} is a secret the snapshot holds masked, and the unit has none: set it by hand")
            else:
                notes.append(f"{name} kept as it is on the host (a secret: the snapshot holds it masked)")
            continue
        set_flags.append((name, _group_value(group)))
    unset_flags = [name for name in now if name not in then]
    env_now = current.environment()
    set_env: list[tuple[str, str]] = []
    for key, value in snapshot.unit.environment.items():
        if is_secret_name(key) or REDACTED in value:
            notes.append(f"{key} kept as it is on the host (a secret: the snapshot holds it masked)")
            continue
        if env_now.get(key) != value:
            set_env.append((key, value))
    unset_env = [key for key in env_now if key not in snapshot.unit.environment]
    edits = EditRequest(tuple(set_flags), tuple(unset_flags), tuple(set_env), tuple(unset_env))
    return RestoreEdits(edits, tuple(notes))


def restored_matches(snapshot: Snapshot, unit: Any, version: str) -> list[str]:
    """What still differs between a (planned) unit and the snapshot, secrets aside: empty when restored."""
    table = table_for(version)
    now = flag_map([*unit.flags(), *unit.launch.own_options], table)
    then = flag_map([*snapshot.unit.flags, *snapshot.unit.launcher_options], table)
    out = []
    for name in sorted(set(now) | set(then)):
        if is_secret_name(name):
            continue
        a, b = now.get(name), then.get(name)
        if a is None or b is None or not values_equal(list(a.values), list(b.values)):
            out.append(name)
    env = unit.environment()
    for key in sorted(set(env) | set(snapshot.unit.environment)):
        if not is_secret_name(key) and env.get(key) != snapshot.unit.environment.get(key):
            out.append(key)
    return out
