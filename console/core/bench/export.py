"""A comparison of benchmark runs written out: Markdown (the table a production document carries) and JSON (the
same data), beside the records in logs/ or where the operator says."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from console.bench.sidebyside import SideBySide, to_markdown


def default_stem(logs: Path, now: datetime | None = None) -> Path:
    """logs/compare-YYYYMMDD-HHMMSS (the two files add .md and .json)."""
    return logs / f"compare-{(now or datetime.now(UTC)):%Y%m%d-%H%M%S}"


def export_paths(where: str | Path, logs: Path) -> tuple[Path, Path]:
    """The Markdown and JSON files for what the operator typed: a stem (`~/cmp/kimi`), a .md or a .json path (the
    other file beside it), or a folder (compare-DATE in it). A relative path is under the workspace's logs/."""
    path = Path(str(where)).expanduser()
    if not path.is_absolute():
        path = logs / path
    if path.is_dir():
        path = default_stem(path)
    if path.suffix in (".md", ".json"):
        path = path.with_suffix("")
    return path.with_name(path.name + ".md"), path.with_name(path.name + ".json")


def export_comparison(sbs: SideBySide, where: str | Path, logs: Path) -> tuple[Path, Path]:
    """Write the comparison as Markdown and JSON; returns the two paths. OSError (a folder that cannot be made,
    no permission) propagates with the path in it, nothing half written under the final names."""
    md, js = export_paths(where, logs)
    md.parent.mkdir(parents=True, exist_ok=True)
    for path, text in ((md, to_markdown(sbs)), (js, json.dumps(sbs.to_json(), indent=2) + "\n")):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return md, js
