"""The host header, the GPU table and the server panel: renderers of a HostView (console.core.status.monitor).

Each value carries its age: a part that could not be refreshed keeps its last values, dimmed, with how old
they are; a screen that looks live is live."""

from __future__ import annotations

import io
from datetime import datetime
from typing import NamedTuple

from rich.console import Console
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message

from console.core.snapshot import ProductionStatus
from console.core.status import HostView, SetupValue
from console.sglang.specmode import is_speculative
from console.tui.config import Thresholds
from console.tui.format import DASH, LOAD, age, gib, level_style, num, sparkline, uptime
from console.tui.widgets.lines import LinePanel

CONNECTION_STYLE = {
    "connected": "bold green",
    "local": "bold green",
    "connecting": "yellow",
    "reconnecting": "bold red",
    "failed": "bold red",
    "closed": "dim",
    "idle": "dim",
}

RUNNING_STYLE = "bold black on yellow"  # load the console put on the host: the figures below are not production's


def render_header(view: HostView, now: datetime, running: str = "") -> Text:
    """The header's two lines (a Text compares equal to one that reads the same: the pane redraws on change).
    `running` marks what this console runs on the host now (a benchmark): right after the host's name, where 80
    columns still show it."""
    conn = view.connection
    line1 = Text(no_wrap=True, overflow="ellipsis")
    style = CONNECTION_STYLE.get(conn.phase, "yellow")
    if conn.phase == "reconnecting":
        line1.append(f"⟳ reconnecting (attempt {conn.attempt})", style=style)
        if conn.last_error:
            line1.append(f" — {conn.last_error}", style="red")
    elif conn.phase == "failed":
        line1.append(f"✖ {view.error or conn.last_error or 'cannot connect'}", style=style)
    else:
        line1.append(f"● {conn.phase}", style=style)
    if view.round_trip_ms is not None and conn.phase == "connected":
        line1.append(f" · rtt {view.round_trip_ms:,.0f} ms", style="dim")
    line1.append("  ")
    line1.append(view.label, style="bold")
    if running:
        line1.append("  ")
        line1.append(f" {running} ", style=RUNNING_STYLE)
    status = view.status
    if status is not None:
        svc = status.service
        stale = view.is_stale(view.service_at, now)
        dim = " dim" if stale else ""
        if svc.error is not None:
            line1.append(f"  {svc.unit}: {svc.error}", style="red" + dim)
        else:
            state_style = (
                "green" if svc.active_state == "active" else "bold red" if svc.active_state == "failed" else "yellow"
            )
            line1.append(f"  {svc.unit} ", style=dim.strip())
            line1.append(f"{svc.active_state}/{svc.sub_state}", style=state_style + dim)
            line1.append(
                f"  up {uptime(svc.uptime_s)}  restarts {svc.n_restarts}  {svc.unit_file_state}", style=dim.strip()
            )
            if svc.need_daemon_reload:
                line1.append("  unit changed on disk (not loaded)", style="yellow")
    line2 = Text(no_wrap=True, overflow="ellipsis")
    if status is not None:
        sg = status.sglang
        stale = view.is_stale(view.sglang_at, now)
        line2.append(f"SGLang {num(sg.version)}", style="bold dim" if stale else "bold")
        line2.append_text(production_text(status.production))
        line2.append(f"  {num(sg.model_path)}", style="dim" if stale else "")
        if view.sglang_gpu_memory_mib is not None:
            line2.append(f"  GPU memory {gib(view.sglang_gpu_memory_mib)} GiB", style="dim" if stale else "")
    refreshed = view.age_s(view.refreshed_at, now)
    if view.is_stale(view.refreshed_at, now) and status is not None:
        line2.append(f"  STALE: last refresh {age(refreshed)} ago", style="bold yellow")
    elif refreshed is not None:
        line2.append(f"  refreshed {age(refreshed)} ago", style="dim")
    return Text("\n").join((line1, line2))


def production_text(production: ProductionStatus | None) -> Text:
    """The host's production snapshot (opsconsole freeze) and the drift from it, computed by the core:
    `  ≠ steps 3, production v2 has 2` (drift), `  = production v2` (runs it), nothing without a snapshot."""
    if production is None:
        return Text()
    if production.in_sync is None:
        return Text(f"  production {production.snapshot} (unknown now)", style="dim")
    if production.in_sync:
        return Text(f"  = production {production.snapshot}", style="green")
    return Text(f"  ≠ {production.summary}", style="bold yellow")


# (title, justify, width) of the GPU table's figures; the two history columns share what is left.
GPU_COLUMNS = (
    ("GPU", "right", 3),
    ("util", "right", 4),
    ("mem GiB", "right", 9),
    ("power W", "right", 9),
    ("temp", "right", 5),
    ("SM MHz", "right", 6),
    ("throttle", "left", 11),
)
GPU_FIXED_WIDTH = sum(width + 1 for _title, _justify, width in GPU_COLUMNS)
# nvidia-smi's clock event reasons, as short as a column allows
THROTTLE_SHORT = {
    "sw_power_cap": "power cap",
    "hw_slowdown": "HW slowdown",
    "sw_thermal_slowdown": "thermal",
    "hw_thermal_slowdown": "HW thermal",
    "hw_power_brake_slowdown": "power brake",
    "sync_boost": "sync boost",
    "applications_clocks_setting": "app clocks",
    "display_clock_setting": "display",
}


def _pct(used: float | None, total: float | None) -> float | None:
    if used is None or not total:
        return None
    return 100.0 * used / total


def _cell(text: str, width: int, justify: str) -> str:
    text = text if len(text) <= width else text[: width - 1] + "…"
    return text.rjust(width) if justify == "right" else text.ljust(width)


class GpuLines(NamedTuple):
    """The GPU table as its panel shows it: the figures and the histories side by side, a line per row (the column
    titles first), and a note below them across the whole width."""

    figures: Text
    history: Text  # the util and power histories of the same rows (empty when too narrow for them)
    note: Text  # waiting for the first refresh, no GPUs, the GPU tool's error; empty when none


def render_gpus(view: HostView, now: datetime, thresholds: Thresholds, *, history_width: int) -> GpuLines:
    """One line per GPU, columns padded by hand: a rich Table of 8 rows costs ~20 ms to draw, lines ~2 ms.
    Panels are plain Text, which Textual draws itself; anything else (a Group, a Table) goes through a rich
    console at several times the cost."""
    status = view.status
    if status is None:
        return GpuLines(Text(), Text(), Text("GPUs: waiting for the first refresh", style="dim"))
    stale = view.is_stale(view.gpus_at, now)
    figures = Text(no_wrap=True, overflow="ellipsis")
    history = Text(no_wrap=True, overflow="ellipsis")
    header = " ".join(_cell(title, width, justify) for title, justify, width in GPU_COLUMNS)
    if history_width > 0:
        header += " "  # the space between the table and its histories, bold as the titles
        history.append(
            _cell("util history", history_width, "left") + " " + _cell("power history", history_width, "left"),
            style="bold",
        )
    figures.append(header, style="bold")
    for gpu in status.gpus:
        mem_pct = _pct(gpu.memory_used_mib, gpu.memory_total_mib)
        power_pct = _pct(gpu.power_draw_w, gpu.power_limit_w)
        throttle = ",".join(THROTTLE_SHORT.get(r, r) for r in gpu.throttle_reasons if r != "gpu_idle") or DASH
        cells = (
            (str(gpu.index), ""),
            (num(gpu.utilization_gpu, 0, "%"), level_style(gpu.utilization_gpu, thresholds.util, LOAD)),
            (f"{gib(gpu.memory_used_mib)}/{gib(gpu.memory_total_mib, 0)}", level_style(mem_pct, thresholds.memory)),
            (f"{num(gpu.power_draw_w)}/{num(gpu.power_limit_w)}", level_style(power_pct, thresholds.power)),
            (num(gpu.temperature_gpu, 0, "°C"), level_style(gpu.temperature_gpu, thresholds.temperature)),
            (num(gpu.clocks_sm_mhz), ""),
            (throttle, "red" if throttle != DASH else "dim"),
        )
        figures.append("\n")
        if history_width > 0:
            history.append("\n")
        for (text, style), (_title, justify, width) in zip(cells, GPU_COLUMNS, strict=True):
            figures.append(_cell(text, width, justify), style=f"{style} dim".strip() if stale else style)
            figures.append(" ")
        if history_width > 0:
            history.append(sparkline(view.gpu_util.get(gpu.index, ()), history_width, hi=100.0), style="cyan")
            history.append(" ")
            power = sparkline(view.gpu_power.get(gpu.index, ()), history_width, hi=gpu.power_limit_w or None)
            history.append(power, style="magenta")
    note = Text(no_wrap=True, overflow="ellipsis")
    if status.gpu_error:
        error = f"GPUs: {status.gpu_error}"
        if view.gpus_at is not None and status.gpus:
            error += f" (values from {age(view.age_s(view.gpus_at, now))} ago)"
        note.append(error, style="yellow")
    elif not status.gpus:
        note.append("no GPUs reported", style="dim")
    return GpuLines(figures, history, note)


def _setup_cell(value: SetupValue | None) -> Text:
    if value is None:
        return Text(DASH)
    resolved = value.resolved
    shown = num(resolved) if not isinstance(resolved, bool) else ("yes" if resolved else "no")
    if value.dest == "disable_overlap_schedule" and isinstance(resolved, bool):
        shown = "off" if resolved else "on"
    if value.aliased:  # SGLang's own name for what the unit asks: said as such, not marked as a change
        return Text(f"{num(value.asked)} ").append(f"(runs as {shown})", style="dim")
    text = Text(shown)
    if value.changed:
        text.append("*", style="bold yellow")
        text.append(f" (unit asks {num(value.asked)})", style="yellow")
    return text


# The server panel's rows that give way when it is short (80×24 leaves it 14 lines with 4 GPUs, 10 with 8), the
# first first: after the latency window's line, the draft model's path (the editor has it), the cache figures,
# the request limit, the accept length, the load. Health, the setup and TTFT/ITL always show.
GIVE_WAY = ("draft model", "usage", "max running", "accept len", "requests", "generation")


def render_server(
    view: HostView, now: datetime, *, history_width: int, width: int = 50, height: int | None = None
) -> Text:
    """The server panel in `width` cells, and within `height` lines when given: the rows of least use at a glance
    give way (GIVE_WAY), so that health, the setup and the latency lines always show."""
    status = view.status
    if status is None:
        return Text("server: waiting for the first refresh", style="dim")
    sg = status.sglang
    stale = view.is_stale(view.sglang_at, now)
    setup = {v.dest: v for v in view.setup}
    rows: list[tuple[str, Text]] = []
    if stale and view.sglang_at is not None:
        last = "healthy" if sg.healthy else "unhealthy"
        health = Text(f"● unknown: last seen {last} {age(view.age_s(view.sglang_at, now))} ago", style="bold yellow")
    elif sg.healthy:
        health = Text("● healthy", style="bold green")
    elif sg.no_api:
        health = Text("● no API of its own: a rank ≥ 1's /health is a dummy 200; its health is rank 0's")
        health.stylize("bold yellow")
    elif sg.error:
        health = Text(f"● not answering: {sg.error}", style="bold red")
    else:
        health = Text("● unhealthy (/health is not 200)", style="bold red")
    rows.append(("health", health))
    if is_speculative(sg.speculative_algorithm):
        rows.append(("speculative", _setup_cell(setup.get("speculative_algorithm"))))
        row = Text("steps ")
        row.append_text(_setup_cell(setup.get("speculative_num_steps")))
        row.append("  topk ")
        row.append_text(_setup_cell(setup.get("speculative_eagle_topk")))
        rows.append(("", row))
        rows.append(("", Text("draft tokens ").append_text(_setup_cell(setup.get("speculative_num_draft_tokens")))))
        overlap = Text("spec v2 ")
        overlap.append(num(view.spec_v2) if view.spec_v2 is not None else "?", style="cyan" if view.spec_v2 else "")
        overlap.append("  overlap ")
        overlap.append_text(_setup_cell(setup.get("disable_overlap_schedule")))
        rows.append(("", overlap))
        if sg.speculative_draft_model_path:
            rows.append(("draft model", Text(str(sg.speculative_draft_model_path), style="dim")))
    else:
        rows.append(("speculative", Text("off", style="dim") if sg.version else Text(DASH)))
    running = _setup_cell(setup.get("max_running_requests"))
    value = setup.get("max_running_requests")
    if value is not None and not value.explicit and sg.max_running_requests is not None:
        running.append(" (unit: unset)", style="dim")
    effective = sg.effective_max_running_requests_per_dp
    if effective is not None and effective != sg.max_running_requests:
        running.append(f"  effective {effective}", style="yellow")
    rows.append(("max running", running))
    rows.append(("requests", Text(f"running {num(sg.num_running_reqs)}  queued {num(sg.num_queue_reqs)}")))
    spark = max(history_width, 0)
    throughput = Text(f"{num(sg.gen_throughput, 0)} tok/s ")
    if spark:
        throughput.append(sparkline(view.throughput, spark, hi=None), style="cyan")
    rows.append(("generation", throughput))
    accept_value = sg.spec_accept_length or sg.avg_spec_accept_length
    accept = Text(f"{num(accept_value, 2)} ")
    if spark:
        accept.append(sparkline(view.accept_length, spark, lo=1.0, hi=None), style="cyan")
    rows.append(("accept len", accept))
    if sg.speculative_adaptive and sg.adaptive_num_steps is not None:
        # the tier SGLang's adaptive rule runs now, with the accept length it gets there (the decode window's)
        tier = Text(f"steps {sg.adaptive_num_steps}", style="bold")
        tier.append(f" (launch {num(sg.speculative_num_steps)})  accept len {num(sg.spec_accept_length, 2)}", style="")
        rows.append(("adaptive", tier))
    usage = f"tokens {num(_times100(sg.token_usage), 0, '%')}  cache hit {num(_times100(sg.cache_hit_rate), 0, '%')}"
    rows.append(("usage", Text(usage)))
    lat = view.latency
    rows.append(("TTFT ms", Text(_quantiles(lat.ttft_ms))))
    rows.append(("ITL ms", Text(_quantiles(lat.itl_ms))))
    window = f"last {lat.window_s:.0f} s, {lat.requests:.0f} requests" if lat.window_s else "from the next refresh"
    window_row = ("", Text(window, style="dim"))
    rows.append(window_row)
    if height is not None:
        by_label = {label: row for row in rows if (label := row[0])}
        order = [window_row, *(by_label[label] for label in GIVE_WAY if label in by_label)]
        rows = fit_rows(rows, order, width, height)
    return two_columns(rows, width)


def fit_rows(
    rows: list[tuple[str, Text]], give_way: list[tuple[str, Text]], width: int, height: int
) -> list[tuple[str, Text]]:
    """`rows` without the first of `give_way` (by identity) until they fit in `height` lines of `width` cells."""
    shown = list(rows)
    for row in give_way:
        if sum(_row_lines(value, width) for _label, value in shown) <= height:
            break
        shown = [kept for kept in shown if kept is not row]
    return shown


# The widest label of the server panel ("speculative", "draft model", "max running"); values start after it.
LABEL_WIDTH = 11
# Text.wrap takes a console; with the default justification it never uses it.
_WRAP_CONSOLE = Console(file=io.StringIO(), width=LABEL_WIDTH)


def _value_room(width: int) -> int:
    return max(width - LABEL_WIDTH - 2, 8)


def _wrapped(value: Text, width: int) -> list[Text]:
    room = _value_room(width)
    return list(value.wrap(_WRAP_CONSOLE, room, overflow="fold")) if value.cell_len > room else [value]


def _row_lines(value: Text, width: int) -> int:
    return 1 if value.cell_len <= _value_room(width) else len(_wrapped(value, width))


def two_columns(rows: list[tuple[str, Text]], width: int) -> Text:
    """Bold labels, then values wrapped under themselves within `width` cells. One Text, not a rich Table:
    Textual draws text without going through a console (a table of 15 rows cost 3x as much, every second)."""
    indent = " " * (LABEL_WIDTH + 2)
    out = Text(no_wrap=True, overflow="ellipsis")
    for index, (label, value) in enumerate(rows):
        if index:
            out.append("\n")
        out.append(label.ljust(LABEL_WIDTH), style="bold")
        out.append("  ")
        lines = _wrapped(value, width)
        for number, line in enumerate(lines):
            if number:
                out.append("\n" + indent)
            out.append_text(line)
    return out


def _times100(value: float | None) -> float | None:
    return None if value is None else value * 100


def _quantiles(values: object) -> str:
    got = dict(values) if isinstance(values, dict) else {}
    return "  ".join(f"p{int(q * 100)} {num(got.get(q), 0)}" for q in (0.5, 0.95, 0.99))


class HostHeader(LinePanel):
    """Connection, host, unit state, uptime, restarts, version, model, SGLang's GPU memory, freshness."""


class GpuPanel(Vertical):
    """One row per GPU with colour thresholds and sparklines (util and power). The figures and the histories are two
    panels side by side: Textual sends a changed line to the terminal from the left edge of the widget that holds
    it, so a history that moves (every second on a busy host) is sent from where the histories start, and the
    figures are not rendered again. A note (waiting, no GPUs, the GPU tool's error) takes the width below them."""

    DEFAULT_CSS = f"""
    GpuPanel > .gpu-rows {{
        height: auto;
    }}
    GpuPanel .gpu-figures {{
        width: {GPU_FIXED_WIDTH};
        max-width: 100%;
    }}
    GpuPanel .gpu-history {{
        width: 1fr;
    }}
    """

    def __init__(self, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.figures = LinePanel(classes="gpu-figures")
        self.history = LinePanel(classes="gpu-history")
        self.rows = Horizontal(self.figures, self.history, classes="gpu-rows")
        self.rows.display = False  # until there are rows: an empty panel is one blank line (the note's)
        self.note = LinePanel(classes="gpu-note")

    def compose(self) -> ComposeResult:
        yield self.rows
        yield self.note

    def show(self, lines: GpuLines, *, layout: bool = False) -> None:
        """`layout`: the number of rows or the note may have changed (the panel's height with them)."""
        self.rows.display = bool(lines.figures)
        self.history.display = bool(lines.history)
        self.note.display = bool(lines.note)
        self.figures.show(lines.figures, layout=layout)
        self.history.show(lines.history, layout=layout)
        self.note.show(lines.note, layout=layout)


class ServerPanel(LinePanel):
    """Health, the resolved speculative setup with SGLang's silent changes marked, load, latency percentiles."""

    class Resized(Message):
        """The panel's size changed: what it shows is fitted to it (render_server's width and height)."""

    def on_resize(self) -> None:
        self.post_message(self.Resized())
