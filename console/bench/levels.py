"""A level's key: what a comparison lines up across runs, typed (pure).

    LevelKey.of(concurrency=8)              C=8       a closed loop at 8 requests in flight
    LevelKey.of(8, request_rate=2.5)        rate=2.5  an open loop at 2.5 requests/s (its cap on concurrency apart)
    LevelKey.of(None, trace_speed=1.0)      trace=1   a trace replayed at 1x its own pace (console.bench.traces)

Its text (`str(key)`) is what the JSON of compare, an export and a snapshot's comparison rows hold; the records
themselves keep the numbers (max_concurrency, request_rate, trace_speed), so nothing on disk changed when the key
became typed. Keys sort closed loops first, then rates, then traces, each by its number, which is also the axis a
plot and a crossing use (`value`, `kind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LevelKind = Literal["C", "rate", "trace"]
_ORDER: dict[str, int] = {"C": 0, "rate": 1, "trace": 2}


@dataclass(frozen=True)
class LevelKey:
    kind: LevelKind
    value: float  # the concurrency, the requests/s, or the trace's speed

    @classmethod
    def of(
        cls, concurrency: int | None = None, request_rate: float | None = None, trace_speed: float | None = None
    ) -> LevelKey:
        """The key of a level as a record or a sweep's Level holds it: the trace's speed, else the rate, else the
        concurrency (a record with none of them is C=0)."""
        if trace_speed is not None:
            return cls("trace", trace_speed)
        if request_rate is not None:
            return cls("rate", request_rate)
        return cls("C", concurrency or 0)

    @property
    def number(self) -> str:
        """The value as the key writes it: 8 (a concurrency is whole), 2.5, 1."""
        if self.kind == "C" and float(self.value).is_integer():
            return str(int(self.value))
        return f"{self.value:g}"

    def __str__(self) -> str:
        return f"{self.kind}={self.number}"

    @property
    def order(self) -> tuple[int, float]:
        return (_ORDER[self.kind], self.value)

    def __lt__(self, other: LevelKey) -> bool:
        return self.order < other.order
