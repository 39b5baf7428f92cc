"""The production document a freeze writes on the host (Markdown; pure: a Snapshot in, the text out).

What runs (SGLang, model, GPUs, the unit, the exact launch command and environment, what the server resolved),
why (the operator's note, the benchmark table of this exact setup, the comparison against the previous
production snapshot), when and by whom, and how to restore it. Every value comes from the snapshot, which holds
nothing unmasked: a key shows as ***.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from console import hints
from console.core.snapshot.drift import show_value
from console.core.snapshot.model import RESOLVED_KEYS, Snapshot, setup_text

# The benchmark table's columns: (record field, title, decimals).
BENCH_COLUMNS = (
    ("output_throughput", "output tok/s", 1),
    ("mean_request_output_throughput", "tok/s per request", 1),
    ("median_ttft_ms", "median TTFT ms", 1),
    ("median_tpot_ms", "median TPOT ms", 2),
    ("p99_itl_ms", "p99 ITL ms", 1),
    ("accept_length", "accept length", 2),
    ("completed", "requests", 0),
    ("failed", "failed", 0),
)
METRIC_TITLES = {key: title for key, title, _ in BENCH_COLUMNS}


def _cell(value: Any, decimals: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{decimals}f}"
    return str(value).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _fence(text: str, lang: str = "") -> list[str]:
    fence = "```"
    while fence in text:
        fence += "`"
    return [f"{fence}{lang}", text.rstrip("\n"), fence]


def level_text(entry: dict[str, Any]) -> str:
    if entry.get("request_rate") is not None:
        return f"rate {entry['request_rate']:g}/s"
    return f"C = {entry.get('max_concurrency')}"


def bench_rows(snapshot: Snapshot) -> list[list[str]]:
    rows = []
    for entry in snapshot.benchmarks:
        repeat = entry.get("repeat_index") or 0
        level = level_text(entry) + (f" (repeat {repeat + 1})" if repeat else "")
        cells = [level] + [_cell(entry.get(key), decimals) for key, _title, decimals in BENCH_COLUMNS]
        rows.append([*cells, _cell(entry.get("label"))])
    return rows


def comparison_lines(snapshot: Snapshot) -> list[str]:
    if not snapshot.comparison:
        return []
    rows = []
    for row in snapshot.comparison:
        delta = "-" if row.delta_pct is None else f"{row.delta_pct:+.1f} %"
        noise = " (within noise)" if row.within_noise else ""
        rows.append(
            [
                row.level,
                METRIC_TITLES.get(row.metric, row.metric),
                _cell(row.previous, 2),
                _cell(row.value, 2),
                delta,
                row.verdict + noise,
            ]
        )
    return _table(["level", "metric", snapshot.previous or "previous", snapshot.name, "delta", "verdict"], rows)


def render_document(snapshot: Snapshot, *, restore_target: str | None = None) -> str:
    """The whole document. restore_target: the TARGET to name in the restore command (default: the host's)."""
    host, unit, server = snapshot.host, snapshot.unit, snapshot.server
    target = restore_target or host.label
    where = f"{host.label} ({host.hostname})" if host.hostname and host.hostname != host.label else host.label
    out = [f"# Production setup {snapshot.name} — {where}", ""]
    out += [
        f"Frozen {snapshot.frozen_at:%Y-%m-%d %H:%M:%S %Z} by {snapshot.frozen_by} with opsconsole "
        f"{snapshot.opsconsole_version}. The unit `{host.unit}` runs exactly this setup and is enabled, so it "
        "starts on boot.",
        "",
    ]
    if snapshot.forced is not None:
        out += [
            f"**Frozen with --force**: {snapshot.forced.reason}",
            "",
            *[f"- overridden: {why}" for why in snapshot.forced.overridden],
            "",
        ]
    out += ["## What runs", ""]
    gpus = snapshot.gpus
    gpu_text = "-"
    if gpus:
        names = sorted({g.name or "?" for g in gpus})
        memory = gpus[0].memory_total_mib
        gpu_text = f"{len(gpus)} × {', '.join(names)}" + (f" ({memory:,.0f} MiB each)" if memory else "")
    rows = [
        ["SGLang", _cell(server.version)],
        ["model", _cell(server.resolved.get("model_path"))],
        ["speculative decoding", setup_text(server.resolved, server.version)],
        ["GPUs", gpu_text + (f", driver {host.driver_version}" if host.driver_version else "")],
        ["host", f"{_cell(host.hostname)} (as {_cell(host.ssh_user)}, reached as {host.label})"],
        ["unit", f"`{host.unit}` at `{_cell(host.fragment_path)}`, {_cell(unit.unit_file_state)}, {unit.hash}"],
    ]
    out += [f"- **{what}**: {value}" for what, value in rows] + [""]
    out += ["### Launch command", "", *_fence(unit.launch_command, "sh"), ""]
    if unit.environment or unit.environment_files:
        env = "\n".join(f"{k}={v}" for k, v in unit.environment.items())
        files = "\n".join(f"EnvironmentFile={f}" for f in unit.environment_files)
        out += ["### Environment", "", *_fence("\n".join(p for p in (env, files) if p)), ""]
    out += ["### What the server resolved (/server_info)", ""]
    resolved_rows = [[f"`{k}`", show_value(k, server.resolved.get(k))] for k in RESOLVED_KEYS]
    out += [*_table(["value", "resolved"], resolved_rows), ""]
    out += ["## Why", ""]
    out += [snapshot.note.strip() if snapshot.note.strip() else "(no note was given: `freeze --note TEXT`)", ""]
    out += ["### Benchmarks of this exact setup", ""]
    if snapshot.benchmarks:
        out += [
            "The latest run per level whose records name this unit (by hash), this SGLang version and these "
            "resolved speculative values:",
            "",
        ]
        out += [*_table(["level", *(t for _, t, _ in BENCH_COLUMNS), "run"], bench_rows(snapshot)), ""]
        workload = snapshot.benchmarks[0].get("workload") or {}
        if workload:
            described = ", ".join(f"{k} {v}" for k, v in workload.items())
            out += [f"Workload: {described}.", ""]
    else:
        out += [f"No benchmark of this exact setup in the console's logs/ (`{hints.verb('bench')}` records them).", ""]
    if snapshot.previous:
        out += [f"### Against the previous production snapshot, {snapshot.previous}", ""]
        lines = comparison_lines(snapshot)
        out += (lines or [f"No level measured in both {snapshot.previous} and {snapshot.name}."]) + [""]
    if snapshot.warnings:
        out += ["### Warnings", "", *[f"- {w}" for w in snapshot.warnings], ""]
    out += ["## How to restore it", ""]
    out += [
        f"From a console with this snapshot (`profiles/snapshots/{snapshot.name}.toml`):",
        "",
        *_fence(hints.RESTORE.line(HOST=target, SNAPSHOT=snapshot.name), "sh"),
        "",
        "It writes the flags and environment above into the unit through the validated apply (the rules check "
        "them first; a start that fails is rolled back) and verifies what the server resolves.",
        "",
        f"By hand: put this unit file back at `{_cell(host.fragment_path)}` (values shown as *** are secrets: "
        "write the real ones), then `sudo systemctl daemon-reload && sudo systemctl restart "
        f"{host.unit} && sudo systemctl enable {host.unit}`.",
        "",
        *_fence(unit.text, "ini"),
        "",
    ]
    return "\n".join(out)
