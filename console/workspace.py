"""The workspace: profiles/ (host profiles and frozen snapshots), logs/ (benchmark results, audit log) and datasets/
(the operator's traffic files for `bench --dataset`, which also finds a bare file name there)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> Workspace:
        """--workspace, else $OPSCONSOLE_WORKSPACE, else the current folder."""
        chosen = explicit or os.environ.get("OPSCONSOLE_WORKSPACE") or os.getcwd()
        return cls(Path(chosen).expanduser().resolve())

    @property
    def profiles(self) -> Path:
        return self.root / "profiles"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def datasets(self) -> Path:
        return self.root / "datasets"

    def ensure(self) -> Workspace:
        self.profiles.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        return self
