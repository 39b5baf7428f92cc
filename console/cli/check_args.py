"""`opsconsole check-args`: validate SGLang launch flags the way a given SGLang version would.

    opsconsole check-args [--sglang-version V] [--env KEY=VALUE]... [--json] -- FLAG...
    opsconsole check-args [--sglang-version V] --unit FILE [--json]

Exit 0 when the server would start, 1 when it would refuse (or the unit is not an SGLang unit), 2 on
usage errors (unsupported version, malformed --env, no flags). This path must start fast: it imports
only the pure console.sglang modules (no textual, asyncssh, httpx, pydantic or rich;
benchmarks/cli_startup.py measures it). Secrets (API keys, tokens, passwords) never reach the output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from console import hints
from console.errors import ExitCode, UsageError
from console.names import is_env_name
from console.secrets import redact, secret_values
from console.sglang.flags import UnsupportedVersionError, resolve_version
from console.sglang.rules import CheckReport, Finding, check_launch
from console.sglang.vocabulary import View, dests

# Shown in the human report even when not set explicitly: what speculative tuning is about.
_KEY_DESTS = dests(View.CHECK_ARGS)


def parse_env(pairs: Iterable[str]) -> dict[str, str]:
    """`["K=V", ...]` -> dict; raises UsageError naming the bad item."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not is_env_name(key):
            raise UsageError(f"--env expects KEY=VALUE (for example --env SGLANG_ENABLE_SPEC_V2=1), got {pair!r}")
        env[key] = value
    return env


def _load_unit(path: str, extra_env: dict[str, str]) -> tuple[list[str], dict[str, str], str | None, list[Finding]]:
    from console.sglang.unit import UnitError, UnitFile

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise UsageError(f"cannot read the unit file {path}: {exc.strerror or exc}") from exc
    try:
        unit = UnitFile.parse(text)
        launch = unit.launch
        env = {**unit.environment(), **extra_env}
    except UnitError as exc:
        raise _UnitProblem(f"{path}: {exc}") from exc
    notes = [
        Finding(
            "environment-file-not-read",
            f"EnvironmentFile={f} lives on the host and was not read; pass its variables with --env KEY=VALUE.",
            (),
        )
        for f in unit.environment_files()
    ]
    # A launcher other than SGLang may say which SGLang version it behaves as (the stand-in's own option).
    return list(launch.flags), env, launch.sglang_version, notes


class _UnitProblem(Exception):
    pass


def run(args: argparse.Namespace, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        report, secrets = _check(args)
    except UsageError as exc:
        print(f"opsconsole check-args: {exc}", file=err)
        return ExitCode.USAGE
    except _UnitProblem as exc:
        print(f"opsconsole check-args: {exc}", file=err)
        return ExitCode.FAILED
    if args.json:
        out.write(json.dumps(redact(report.to_json(), secrets)) + "\n")
    else:
        out.write(redact(render_report(report), secrets))
    return ExitCode.OK if report.ok else ExitCode.FAILED


def _check(args: argparse.Namespace) -> tuple[CheckReport, set[str]]:
    env = parse_env(args.env or [])
    flags = list(args.flags or [])
    if flags and flags[0] == "--":
        flags = flags[1:]
    notes: list[Finding] = []
    version = args.sglang_version
    if args.unit:
        if flags:
            raise UsageError("give either --unit FILE or flags after --, not both")
        flags, env, launcher_version, notes = _load_unit(args.unit, env)
        version = version or launcher_version
    elif not flags:
        raise UsageError(
            "no flags to check: put SGLang's launch flags after --, for example "
            f"`{hints.CHECK_ARGS_EXAMPLE.line()}`, or use --unit FILE"
        )
    try:
        resolve_version(version)
    except UnsupportedVersionError as exc:
        raise UsageError(f"--sglang-version: {exc}") from exc
    report = check_launch(flags, env, version, architecture=args.architecture)
    report.warnings.extend(notes)
    return report, secret_values(flags, env)


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def render_report(report: CheckReport) -> str:
    """The human-readable report: verdict, errors, silent adjustments, warnings, key resolved values."""
    lines: list[str] = []
    if report.ok:
        lines.append(f"SGLang {report.sglang_version} would start with these flags.")
    else:
        count = len(report.errors)
        lines.append(f"SGLang {report.sglang_version} would refuse to start: {count} error{'s' * (count != 1)}.")
    for title, findings in (("error", report.errors), ("warning", report.warnings)):
        for finding in findings:
            flags = f" [{', '.join(finding.flags)}]" if finding.flags else ""
            lines.append(f"\n{title.upper()} {finding.code}{flags}")
            lines.append(f"  {finding.message}")
            if finding.sglang_log:
                lines.append(f"  SGLang says: {finding.sglang_log}")
    if report.adjustments:
        lines.append("\nSilent adjustments (SGLang changes these without failing):")
        for adj in report.adjustments:
            lines.append(f"  {adj.flag}: {_show(adj.from_value)} -> {_show(adj.to_value)}  ({adj.reason})")
    shown = [d for d in _KEY_DESTS if d in report.resolved]
    shown += sorted(d for d in report.explicit if d not in shown)
    lines.append("\nResolved:")
    for dest in shown:
        lines.append(f"  {dest} = {_show(report.resolved.get(dest))}")
    mode = report.spec_mode
    if mode is not None and mode.spec_v2 is not None:
        lines.append(f"  {mode.describe()}")
    lines.append("(--json prints every resolved value)")
    return "\n".join(lines) + "\n"
