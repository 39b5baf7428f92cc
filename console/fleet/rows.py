"""How a host's figures from Prometheus read, in the console's overview and in `status @GROUP` (pure, plain text):
its state word and its figure cells, in the overview's columns."""

from __future__ import annotations

from console.fleet.router import WorkerAtRouter
from console.fleet.telemetry import FleetView, HostFigures

DASH = "–"
FIGURE_COLUMNS = ("gen tok/s", "run/queue", "accept", "KV %", "TTFT p99 ms", "ITL p99 ms", "GPU util %", "GPU mem %",
                  "power W", "temp °C")  # fmt: skip


def host_state(figures: HostFigures, *, prometheus_down: bool = False) -> str:
    """`down` while a scrape of the host fails, `stale` while its figures are old (or Prometheus cannot be asked
    now), else `up`."""
    if any(up == 0 for up in figures.up.values()):
        return "down"
    if figures.stale or prometheus_down:
        return "stale"
    return "up"


def _num(value: float | None, digits: int = 0) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def ms_cell(seconds: float | None) -> str:
    return _num(None if seconds is None else seconds * 1000)


def pct_cell(part: float | None, whole: float | None) -> str:
    return _num(part / whole * 100) if part is not None and whole else DASH


def figures_cells(f: HostFigures) -> list[str]:
    """The host's figures in FIGURE_COLUMNS' order, as the overview writes them."""
    running, queued = f.get("running"), f.get("queued")
    usage = f.get("token_usage")
    return [
        _num(f.get("throughput")),
        DASH if running is None else f"{running:.0f}/{_num(queued)}",
        _num(f.get("accept_length"), 2),
        _num(None if usage is None else usage * 100),
        ms_cell(f.get("ttft_p99")),
        ms_cell(f.get("itl_p99")),
        _num(f.get("gpu_util")),
        pct_cell(f.get("fb_used_mib"), f.get("fb_total_mib")),
        _num(f.get("power_w")),
        _num(f.get("temp_c")),
    ]


def router_note(state: WorkerAtRouter | None) -> str:
    """What smg says of the host's worker when it does not route to it ("" while it does, or knows none)."""
    if state is None or not state.out:
        return ""
    return "smg: " + ", ".join(state.out)


def taken_out_line(fleet: FleetView, limit: int = 6) -> str:
    """The hosts smg has taken out of routing, with why, on one line ("" when none)."""
    out = fleet.taken_out()
    if not out:
        return ""
    shown = [f"{host} ({', '.join(why)})" for host, why in list(out.items())[:limit]]
    more = f" (+{len(out) - limit})" if len(out) > limit else ""
    return f"smg routes around {len(out)}: {'; '.join(shown)}{more}"
