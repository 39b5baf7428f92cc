"""Drift: how the running setup differs from the host's production snapshot (pure: no I/O).

    items = compute_drift(snapshot, running)      # running: the server's resolved values now (status.sglang)
    [i.text for i in items] == ["steps 3, production v2 has 2"]

`status --json` carries it as the `production` key (ProductionStatus) and the console's header renders it. A
value the server does not report now (it is down, or not answering) is unknown, never drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, field_serializer

from console.core.change import values_equal
from console.core.snapshot.model import Snapshot
from console.sglang.vocabulary import View, terms

# What is watched, in the order it is told, with the name an operator reads.
WATCHED = tuple((t.dest, t.name) for t in terms(View.DRIFT))
_NAMES = dict(WATCHED)


def show_value(key: str, value: Any) -> str:
    """A value as the operator reads it: overlap as on/off, an absent value as `unset`."""
    if key == "disable_overlap_schedule" and value is not None:
        return "off" if values_equal(value, True) else "on"
    if value is None or value == "None":
        return "unset"
    return str(value)


@dataclass(frozen=True)
class DriftItem:
    key: str  # SGLang's name (version: the SGLang version)
    running: Any
    production: Any
    snapshot: str

    @property
    def name(self) -> str:
        return _NAMES.get(self.key, self.key)

    @property
    def text(self) -> str:
        """`steps 3, production v2 has 2`"""
        now, then = show_value(self.key, self.running), show_value(self.key, self.production)
        return f"{self.name} {now}, production {self.snapshot} has {then}"

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "running": self.running, "production": self.production, "text": self.text}


def production_values(snapshot: Snapshot) -> dict[str, Any]:
    """What the snapshot says runs: its resolved values and its SGLang version."""
    return {**snapshot.resolved, "version": snapshot.server.version}


def compute_drift(snapshot: Snapshot, running: Mapping[str, Any]) -> list[DriftItem]:
    """Every watched value that differs. `running` holds the server's values now (keys as in WATCHED); a key
    missing from it, or None for all keys (the server is not answering), is unknown and not reported."""
    frozen = production_values(snapshot)
    out = []
    for key, _name in WATCHED:
        if key not in running:
            continue
        now, then = running[key], frozen.get(key)
        if key == "version" and (now is None or then is None):
            continue  # an unknown version is no difference
        if not values_equal(now, then):
            out.append(DriftItem(key, now, then, snapshot.name))
    return out


class ProductionStatus(BaseModel):
    """`status --json`'s `production`: the host's production snapshot and how the running setup differs.

    in_sync is null when the server's values are unknown (it does not answer), so nothing can be compared."""

    model_config = ConfigDict(frozen=True)

    snapshot: str
    frozen_at: datetime
    document: str | None = None
    in_sync: bool | None = None
    drift: list[dict[str, Any]] = []

    @field_serializer("frozen_at")
    def _iso(self, value: datetime) -> str:
        return value.isoformat()

    @property
    def summary(self) -> str:
        """One line: `steps 3, production v2 has 2; topk 2, production v2 has 1`."""
        return "; ".join(str(d["text"]) for d in self.drift)


def production_status(snapshot: Snapshot, running: Mapping[str, Any] | None) -> ProductionStatus:
    """The host's production snapshot against the running values (None: the server could not be read)."""
    known = running is not None and any(v is not None for v in running.values())
    items = compute_drift(snapshot, running) if known and running is not None else []
    return ProductionStatus(
        snapshot=snapshot.name,
        frozen_at=snapshot.frozen_at,
        document=snapshot.host.document,
        in_sync=(not items) if known else None,
        drift=[i.to_json() for i in items],
    )
