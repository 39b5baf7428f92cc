"""What smg (the Shepherd Model Gateway, 1.x: the router in front of the fleet's workers) says of each worker, read
from its Prometheus metrics: whether it routes to it, and if not, why (pure: the caller brings the samples).

smg leaves a worker out of routing with no API call and nothing in its worker list (where it stays `ready`):
- `smg_worker_health{worker}` 0: its health checks failed (--health-failure-threshold in a row);
- `smg_worker_cb_state{worker}` 1 (open): its circuit breaker opened after failures (10 in 120 s by default), for 60 s;
  2 (half-open): trial requests only;
- `smg_worker_stalled{worker, reason}` 1: a liveness veto (no contact after a transport failure, a wedged queue, a
  silent event stream);
- overloaded: `smg_workers_overloaded{model}` counts the workers of a model it leaves out because their engine's
  queue or KV use is at or above --worker-overload-waiting-requests (8) / --worker-overload-token-usage (0.8);
  smg exports the count per model only, so the worker is the one of that model whose engine figures, as smg polled
  them (`smg_engine_waiting_requests`, `smg_engine_token_usage`), are at or above those thresholds.

Each series is aggregated by smg's `worker` label (the worker's URL, which names a host by its address) and joined
into the fleet's one query (console.fleet.promql); with two smg instances in front of the same workers the worst
state wins (health: min; circuit: max).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# figure -> PromQL; each sample keeps `worker` (and `reason`, `model` where named), except overloaded (by model).
ROUTER_FIGURES: Mapping[str, str] = {
    "router_health": "min by (worker) (smg_worker_health)",
    "router_circuit": "max by (worker) (smg_worker_cb_state)",
    "router_stalled": "max by (worker, reason) (smg_worker_stalled)",
    "router_waiting": "sum by (worker, model) (smg_engine_waiting_requests)",
    "router_token_usage": "avg by (worker, model) (smg_engine_token_usage)",
    "router_overloaded": "sum by (model) (smg_workers_overloaded)",
}
WORKER_LABEL = "worker"
CIRCUIT = {0: "closed", 1: "open", 2: "half_open"}
# smg's defaults for --worker-overload-waiting-requests / --worker-overload-token-usage ([fleet] can say others)
OVERLOAD_WAITING = 8
OVERLOAD_TOKEN_USAGE = 0.8


@dataclass(frozen=True)
class WorkerAtRouter:
    """One worker as smg sees it."""

    url: str
    healthy: bool | None = None
    circuit: str | None = None  # closed | open | half_open
    stalled: tuple[str, ...] = ()  # the liveness veto's reasons, while it is set
    waiting: float | None = None  # its engine's queue, as smg polled it
    token_usage: float | None = None  # its engine's KV use (0..1), as smg polled it
    model: str | None = None
    overloaded: bool = False  # its model has overloaded workers and this one is over the thresholds

    @property
    def out(self) -> list[str]:
        """Why smg does not route to it now (empty: it does)."""
        why = []
        if self.healthy is False:
            why.append("unhealthy")
        if self.circuit == "open":
            why.append("circuit open")
        elif self.circuit == "half_open":
            why.append("circuit half-open (trial requests only)")
        why.extend(f"stalled ({reason})" if reason else "stalled" for reason in self.stalled)
        if self.overloaded:
            load = [f"queue {self.waiting:.0f}" if self.waiting is not None else "",
                    f"KV {self.token_usage * 100:.0f} %" if self.token_usage is not None else ""]  # fmt: skip
            why.append(f"overloaded ({', '.join(x for x in load if x)})" if any(load) else "overloaded")
        return why

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "healthy": self.healthy,
            "circuit": self.circuit,
            "stalled": list(self.stalled),
            "waiting": self.waiting,
            "token_usage": self.token_usage,
            "model": self.model,
            "overloaded": self.overloaded,
            "out": self.out,
        }


@dataclass(frozen=True)
class RouterSample:
    """A sample of one ROUTER_FIGURES figure, as promql.parse_vector gave it (figure, its labels, value)."""

    figure: str
    labels: Mapping[str, str]
    value: float


def workers_at_router(
    samples: Iterable[RouterSample],
    *,
    overload_waiting: float = OVERLOAD_WAITING,
    overload_token_usage: float = OVERLOAD_TOKEN_USAGE,
) -> tuple[dict[str, WorkerAtRouter], dict[str, int]]:
    """Each worker URL's state at the router, and the count of overloaded workers per model."""
    fields: dict[str, dict[str, Any]] = {}
    overloaded: dict[str, int] = {}
    for sample in samples:
        if sample.figure == "router_overloaded":
            if sample.value > 0:
                name = sample.labels.get("model", "")
                overloaded[name] = overloaded.get(name, 0) + round(sample.value)
            continue
        url = sample.labels.get(WORKER_LABEL)
        if not url:
            continue
        entry = fields.setdefault(url, {"stalled": []})
        if sample.labels.get("model"):
            entry["model"] = sample.labels["model"]
        if sample.figure == "router_health":
            entry["healthy"] = sample.value >= 1
        elif sample.figure == "router_circuit":
            entry["circuit"] = CIRCUIT.get(round(sample.value), f"state {sample.value:g}")
        elif sample.figure == "router_stalled" and sample.value >= 1:
            entry["stalled"].append(sample.labels.get("reason", ""))
        elif sample.figure == "router_waiting":
            entry["waiting"] = sample.value
        elif sample.figure == "router_token_usage":
            entry["token_usage"] = sample.value
    workers = {}
    for url, entry in fields.items():
        waiting, usage = entry.get("waiting"), entry.get("token_usage")
        model: str | None = entry.get("model")
        over = bool(overloaded.get(model or "", 0)) and (
            (waiting is not None and waiting >= overload_waiting)
            or (usage is not None and usage >= overload_token_usage)
        )
        workers[url] = WorkerAtRouter(url, entry.get("healthy"), entry.get("circuit"), tuple(sorted(entry["stalled"])),
                                      waiting, usage, model, over)  # fmt: skip
    return workers, overloaded
