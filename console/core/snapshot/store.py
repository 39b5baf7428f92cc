"""The workspace's snapshots: `profiles/snapshots/NAME.toml`, read, listed and written (atomically).

`production_for_status` is what `status` (and the console's refresh, every second) asks: the host's production
snapshot against what the server runs now. Files are parsed again only when they change (by mtime and size), so
the question costs a directory listing.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from console.core.snapshot.drift import ProductionStatus, production_status
from console.core.snapshot.model import SNAPSHOTS_DIR, Snapshot, SnapshotError, check_name, production_of
from console.sglang.vocabulary import View, dests
from console.workspace import Workspace


def snapshots_dir(workspace: Workspace) -> Path:
    return workspace.profiles / SNAPSHOTS_DIR


def snapshot_path(workspace: Workspace, name: str) -> Path:
    return snapshots_dir(workspace) / f"{check_name(name)}.toml"


_cache: dict[Path, tuple[tuple[int, int], Snapshot | SnapshotError]] = {}
_cache_lock = threading.Lock()


def _read(path: Path) -> Snapshot:
    """One snapshot file (cached by mtime and size); SnapshotError says which file and what is wrong."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot be read ({exc.strerror})") from None
    key = (stat.st_mtime_ns, stat.st_size)
    with _cache_lock:
        cached = _cache.get(path)
    if cached is not None and cached[0] == key:
        found = cached[1]
    else:
        try:
            found = Snapshot.from_toml(path.read_text(encoding="utf-8"), where=str(path))
        except SnapshotError as exc:
            found = exc
        except (OSError, UnicodeDecodeError) as exc:
            found = SnapshotError(f"{path}: cannot be read ({exc})")
        with _cache_lock:
            _cache[path] = (key, found)
    if isinstance(found, SnapshotError):
        raise found
    if found.name != path.stem:
        raise SnapshotError(f"{path}: names itself {found.name!r}; a snapshot's file is named after it")
    return found


def load_snapshot(workspace: Workspace, name: str) -> Snapshot:
    """A snapshot by name; LookupError (with the names there are) when there is none."""
    path = snapshot_path(workspace, name)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in _files(workspace))) or "none yet"
        raise LookupError(f"no snapshot {name!r} in {snapshots_dir(workspace)} (there: {known})")
    return _read(path)


def _files(workspace: Workspace) -> list[Path]:
    folder = snapshots_dir(workspace)
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".toml" and p.is_file())
    except FileNotFoundError:
        return []


def load_snapshots(workspace: Workspace) -> tuple[list[Snapshot], list[str]]:
    """Every readable snapshot (oldest first), and what was wrong with the files that are not."""
    found, problems = [], []
    for path in _files(workspace):
        try:
            found.append(_read(path))
        except SnapshotError as exc:
            problems.append(str(exc))
    return sorted(found, key=lambda s: (s.frozen_at, s.name)), problems


def production_snapshot(workspace: Workspace, label: str, unit: str) -> Snapshot | None:
    snapshots, _problems = load_snapshots(workspace)
    return production_of(snapshots, label, unit)


def save_snapshot(workspace: Workspace, snapshot: Snapshot) -> Path:
    """Write the snapshot's file (temp file + rename: a reader sees the old file or the new one). Refuses to
    replace an existing snapshot: a name is a piece of history."""
    path = snapshot_path(workspace, snapshot.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists: snapshot {snapshot.name!r} was frozen before; choose another name")
    text = snapshot.to_toml()
    Snapshot.from_toml(text, where=str(path))  # what is written must read back
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{snapshot.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.link(tmp, path)  # fails if the name was taken meanwhile: never overwrite a snapshot
    finally:
        os.unlink(tmp)
    return path


# The server's values status compares with the production snapshot (SglangStatus fields; see
# console/core/snapshot/drift.py).
DRIFT_FIELDS = frozenset(dests(View.DRIFT))


def production_of_host(workspace: Workspace | None, label: str, unit: str, sglang: Any) -> ProductionStatus | None:
    """status's `production`: `sglang` is its SglangStatus; a server that did not say its version is unknown.
    A snapshot file that cannot be read is left out (the `snapshots` verb says what is wrong with it)."""
    running = {k: getattr(sglang, k, None) for k in DRIFT_FIELDS} if getattr(sglang, "version", None) else None
    try:
        return production_for_status(workspace, label, unit, running)
    except SnapshotError:
        return None


def production_for_status(
    workspace: Workspace | None, label: str, unit: str, running: Mapping[str, Any] | None
) -> ProductionStatus | None:
    """The host's production snapshot against the running values (None: the host has none, or no workspace)."""
    if workspace is None:
        return None
    snapshot = production_snapshot(workspace, label, unit)
    if snapshot is None:
        return None
    return production_status(snapshot, running)
