"""The setups applied from this console, kept in the workspace (logs/applied.jsonl) so the editor can offer
them again: one JSON line per verified apply, with the host, the unit and the editor's field values.

No secret is written: the editor's fields hold none (keys and tokens are not editor fields), and a value
that looks like one is masked on the way in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.secrets import is_secret_name, redact

FILE = "applied.jsonl"


@dataclass(frozen=True)
class AppliedSetup:
    host: str
    unit: str
    at: datetime
    values: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "unit": self.unit, "at": self.at.isoformat(), "values": self.values}


def record_applied(logs: Path, host: str, unit: str, values: dict[str, str], secrets: set[str]) -> AppliedSetup:
    clean = {k: str(redact(v, secrets)) for k, v in values.items() if not is_secret_name(k)}
    entry = AppliedSetup(host, unit, datetime.now(UTC), clean)
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / FILE).open("a") as out:
        out.write(json.dumps(entry.to_json()) + "\n")
    return entry


def applied_setups(logs: Path, host: str, unit: str, *, limit: int = 5) -> list[AppliedSetup]:
    """The last `limit` distinct setups applied to this host's unit, newest first."""
    path = logs / FILE
    if not path.is_file():
        return []
    found: list[AppliedSetup] = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            entry = AppliedSetup(row["host"], row["unit"], datetime.fromisoformat(row["at"]), dict(row["values"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a crash: skip it, keep the rest
        if entry.host == host and entry.unit == unit:
            found.append(entry)
    out: list[AppliedSetup] = []
    for entry in reversed(found):
        if all(entry.values != seen.values for seen in out):
            out.append(entry)
        if len(out) == limit:
            break
    return out
