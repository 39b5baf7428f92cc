"""Snapshot sets: one group freeze (`opsconsole freeze @GROUP --name NAME`) keeps a snapshot per host, named
NAME.HOST (what `restore @GROUP NAME --rolling` looks for), and an index naming them:
`profiles/snapshot-sets/NAME.toml`.

    [set]
    name = "v2"
    group = "prod"
    frozen_at = 2025-...
    complete = true                     # every host of the group was frozen
    [members]
    gpu-a = "v2.gpu-a"
    gpu-b = "v2.gpu-b"
    [not_frozen]
    gpu-c = "refused: the server is not healthy"   # only when some host was not frozen

Each member is an ordinary snapshot: the host's production snapshot (its latest freeze), so `status` (and the
overview's alerts) say each host's drift from its part of the set.
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from console import hints
from console.core.snapshot.model import SnapshotError, check_name
from console.errors import UsageError
from console.tomlwrite import dumps
from console.workspace import Workspace

SETS_DIR = "snapshot-sets"  # under the workspace's profiles/, beside snapshots/


def member_name(name: str, host: str) -> str:
    """The snapshot of `host` in set `name`: NAME.HOST (a UsageError when that is no snapshot name)."""
    try:
        return check_name(f"{name}.{host}")
    except UsageError:
        raise UsageError(
            f"snapshot set {name!r}: {host}'s snapshot would be named {name}.{host!r}, which is no snapshot name "
            "(1-64 letters, digits, '.', '_' or '-'); choose a shorter set name"
        ) from None


def member_names(name: str, hosts: Sequence[str]) -> dict[str, str]:
    check_name(name)
    return {host: member_name(name, host) for host in hosts}


@dataclass(frozen=True)
class SnapshotSet:
    name: str
    group: str
    frozen_at: datetime
    members: dict[str, str]  # host -> its snapshot's name, for the hosts frozen
    not_frozen: dict[str, str] = field(default_factory=dict)  # host -> why not

    @property
    def complete(self) -> bool:
        return not self.not_frozen and bool(self.members)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "frozen_at": self.frozen_at.isoformat(),
            "complete": self.complete,
            "members": dict(self.members),
            "not_frozen": dict(self.not_frozen),
        }

    def to_toml(self) -> str:
        data: dict[str, Any] = {
            "set": {"name": self.name, "group": self.group, "frozen_at": self.frozen_at, "complete": self.complete},
            "members": dict(self.members),
        }
        if self.not_frozen:
            data["not_frozen"] = dict(self.not_frozen)
        header = f"# opsconsole snapshot set {self.name!r} of @{self.group}, written by `{hints.verb('freeze')}`.\n"
        return header + dumps(data)

    @classmethod
    def from_toml(cls, text: str, *, where: str) -> SnapshotSet:
        try:
            data = tomllib.loads(text)
            head = data["set"]
            members, not_frozen = data.get("members", {}), data.get("not_frozen", {})
            if not all(isinstance(v, str) for v in (*members.values(), *not_frozen.values())):
                raise TypeError("members and not_frozen map hosts to text")
            return cls(str(head["name"]), str(head["group"]), head["frozen_at"], dict(members), dict(not_frozen))
        except (tomllib.TOMLDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise SnapshotError(f"{where}: not a snapshot set ({exc})") from None


def snapshot_set_of(
    name: str, group: str, frozen_at: datetime, outcomes: Mapping[str, tuple[bool, str]]
) -> SnapshotSet:
    """The set from each host's freeze (host -> (frozen, why not)), in the group's order."""
    members = {host: member_name(name, host) for host, (frozen, _why) in outcomes.items() if frozen}
    missing = {host: why or "not frozen" for host, (frozen, why) in outcomes.items() if not frozen}
    return SnapshotSet(name, group, frozen_at, members, missing)


def sets_dir(workspace: Workspace) -> Path:
    return workspace.profiles / SETS_DIR


def set_path(workspace: Workspace, name: str) -> Path:
    return sets_dir(workspace) / f"{check_name(name)}.toml"


def load_snapshot_set(workspace: Workspace, name: str) -> SnapshotSet | None:
    """The set by name; None when there is none, SnapshotError when its file cannot be read as one."""
    path = set_path(workspace, name)
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: cannot be read ({exc})") from None
    return SnapshotSet.from_toml(text, where=str(path))


def save_snapshot_set(workspace: Workspace, snapshot_set: SnapshotSet) -> Path:
    """Write the set's index (temp file + link: never over an existing set; a name is a piece of history)."""
    path = set_path(workspace, snapshot_set.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = snapshot_set.to_toml()
    SnapshotSet.from_toml(text, where=str(path))  # what is written must read back
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{snapshot_set.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.link(tmp, path)  # FileExistsError if the name was taken meanwhile
    finally:
        os.unlink(tmp)
    return path
