"""`opsconsole bench TARGET|--url URL ...`: the core's sweep (console.core.bench) with a progress bar and a table."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any
from urllib.parse import urlparse

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from console.bench.datasets import describe_line
from console.bench.engine import SweepConfig, SweepField, say_problems
from console.bench.events import (
    BenchEvent,
    ClientPlaced,
    LevelDone,
    LevelStarted,
    RequestDone,
    RunningFigures,
    SweepDone,
)
from console.bench.levels import LevelKey
from console.bench.present import placement_text
from console.bench.records import BenchRecord
from console.bench.slo import Capacity, Slo, capacity
from console.bench.workloads import WorkloadSpec
from console.cli.common import said, workspace_of
from console.cli.traffic import DEFAULT_OUTPUT_LEN, read_dataset, read_shape, read_slo, resolve_lengths, with_traffic
from console.core.bench import (
    API_KEY_ENV,
    LengthsCounted,
    bench_host,
    bench_url,
    default_label,
    parse_float_list,
    parse_int_list,
)
from console.core.session import open_session
from console.errors import ExitCode, UsageError
from console.host.base import HostError
from console.sglang.traffic_shape import ShapeUnavailable

# The sweep's fields as the command line names them: its problems (SweepConfig.problems) say these options.
OPTIONS: dict[SweepField, str] = {
    "concurrencies": "--concurrency",
    "request_rates": "--request-rate",
    "requests": "--requests",
    "duration": "--duration",
    "warmup": "--warmup",
    "repeat": "--repeat",
    "max_error_rate": "--max-error-rate",
    "input_len": "--input-len",
    "output_len": "--output-len",
    "temperature": "--temperature",
}


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    """The sweep the options ask for; UsageError names every option to change and how."""
    workload = WorkloadSpec(
        name=args.workload,
        api=args.api or "generate",
        input_len=args.input_len,
        output_len=args.output_len if args.output_len is not None else DEFAULT_OUTPUT_LEN,
        temperature=args.temperature,
        seed=args.seed,
    )
    config = SweepConfig(
        workload=workload,
        concurrencies=parse_int_list(args.concurrency, "--concurrency"),
        request_rates=parse_float_list(args.request_rate, "--request-rate") if args.request_rate else [],
        requests=args.requests,
        duration=args.duration,
        warmup=args.warmup,
        warmup_settle=bool(getattr(args, "warmup_settle", False)),
        repeat=args.repeat,
        request_timeout=args.request_timeout,
        max_error_rate=args.max_error_rate,
        time_cap=args.time_cap,
    )
    problems = config.problems()
    if problems:
        raise UsageError("; ".join(say_problems(problems, OPTIONS)))
    return config


def check_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UsageError(f"--url must look like http://127.0.0.1:30000 (got {url!r})")
    return url.rstrip("/")


class ProgressRenderer:
    """Renders engine events as a rich progress bar (one bar per level) on stderr."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[figures]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._task: TaskID | None = None

    def __call__(self, event: BenchEvent) -> None:
        p = self.progress
        if isinstance(event, LevelStarted):
            name = event.level.label + (f" #{event.repeat_index + 1}" if event.repeat_index else "")
            self._task = p.add_task(name, total=event.planned_requests, figures="")
        elif isinstance(event, RequestDone) and self._task is not None:
            p.advance(self._task)
        elif isinstance(event, RunningFigures) and self._task is not None:
            figures = f"{event.output_throughput:,.0f} tok/s  TTFT {event.mean_ttft_ms:,.0f} ms"
            if event.failed:
                figures += f"  [red]{event.failed} failed[/red]"
            p.update(self._task, figures=figures)
        elif isinstance(event, LevelDone) and self._task is not None:
            m = event.metrics
            figures = f"{m['output_throughput']:,.0f} tok/s  TPOT {m['median_tpot_ms']:.1f} ms"
            if m.get("slo_met") is not None:
                mark = "[green]SLO ✔[/green]" if m["slo_met"] else "[red]SLO ✖[/red]"
                figures += f"  goodput {m.get('request_goodput', 0):,.2f} req/s {mark}"
            if m["failed"]:
                figures += f"  [red]{m['failed']} failed[/red]"
            p.update(self._task, total=m["completed"] + m["failed"], figures=figures)
        elif isinstance(event, SweepDone) and event.stopped:
            p.console.print(f"[red]stopped: {event.stopped}[/red]")


# (title, record field, format) of the summary's rows; one column per level, so it fits 80 columns.
_SUMMARY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("completed", "completed", "{:,.0f}"),
    ("failed", "failed", "{:,.0f}"),
    ("output tok/s", "output_throughput", "{:,.1f}"),
    ("tok/s per request", "mean_request_output_throughput", "{:,.1f}"),
    ("median TTFT ms", "median_ttft_ms", "{:,.1f}"),
    ("p99 TTFT ms", "p99_ttft_ms", "{:,.1f}"),
    ("median TPOT ms", "median_tpot_ms", "{:,.2f}"),
    ("p99 TPOT ms", "p99_tpot_ms", "{:,.2f}"),
    ("p99 ITL ms", "p99_itl_ms", "{:,.2f}"),
    ("median E2E ms", "median_e2e_latency_ms", "{:,.0f}"),
    ("goodput req/s", "request_goodput", "{:,.2f}"),
    ("SLO attainment", "slo_attainment", "{:.0%}"),
    ("accept length", "accept_length", "{:.2f}"),
    ("concurrency", "concurrency", "{:.1f}"),
    ("mean power W", "mean_power_w", "{:,.0f}"),
    ("tokens/J", "tokens_per_joule", "{:.2f}"),
)


def summary_table(records: list[BenchRecord]) -> Table:
    table = Table(title=f"bench {records[0].label}" if records else "bench", header_style="bold")
    table.add_column("")
    for r in records:
        table.add_column(f"{r.level}" + (f" #{r.repeat_index + 1}" if r.repeat_index else ""), justify="right")
    for title, key, fmt in _SUMMARY_ROWS:
        values = [getattr(r, key) for r in records]
        if all(v is None for v in values):
            continue
        cells = ["-" if v is None else fmt.format(v) for v in values]
        if key == "failed":
            cells = [f"[red]{c}[/red]" if v else c for c, v in zip(cells, values, strict=True)]
        table.add_row(title, *cells)
    if any(r.slo_met is not None for r in records):
        marks = {True: "[green]✔[/green]", False: "[red]✖[/red]", None: "-"}
        table.add_row("meets the SLO", *(marks[r.slo_met] for r in records))
    return table


def capacity_json(records: list[BenchRecord]) -> dict[str, Any] | None:
    """The run's capacity at its SLO: the highest level that met it (levels in axis order)."""
    if not any(r.slo_met is not None for r in records):
        return None
    return _capacity(records).to_json()


def _capacity(records: list[BenchRecord]) -> Capacity:
    by_level: dict[LevelKey, list[BenchRecord]] = {}
    for r in records:
        by_level.setdefault(r.level, []).append(r)
    points = [
        (str(key), key.value, all(r.slo_met for r in rs), min(r.request_throughput for r in rs))
        for key, rs in by_level.items()
        if all(r.slo_met is not None for r in rs)
    ]
    return capacity(points)


def capacity_lines(records: list[BenchRecord], searched: bool) -> list[str]:
    """The SLO and the capacity at it, under the table (nothing for a run without an SLO)."""
    slo = next((r.slo for r in records if r.slo), None)
    if slo is None:
        return []
    lines = [f"SLO: {Slo.from_json(slo).text()}"]
    cap = _capacity(records)
    what = "capacity at the SLO (search over request rates)" if searched else "capacity at the SLO (highest level)"
    lines.append(f"{what}: {cap.text()}")
    return lines


Shape = tuple[float, list[float]] | None  # --shape-from-server's window (s) and --rate-scale, when asked


async def _shaped(
    config: SweepConfig, shape_ask: Shape, base_url: str, api_key: str | None, err: Console
) -> SweepConfig:
    """The sweep as given, or (with --shape-from-server) the server's traffic observed and the sweep drawn from it,
    the shape said before anything is sent."""
    if shape_ask is None:
        return config
    from console.core.bench import ShapeAsk, ShapeObserved, ShapeObserving, shape_the_sweep

    window, scales = shape_ask

    def say(event: ShapeObserving | ShapeObserved) -> None:
        err.print(event.text(), highlight=False, markup=False, soft_wrap=True)
        if isinstance(event, ShapeObserved):
            err.print(event.workload_text(), highlight=False, markup=False)

    return await shape_the_sweep(base_url, config, ShapeAsk(window, tuple(scales)), api_key=api_key, on_event=say)


async def _bench_target(
    args: argparse.Namespace,
    config: SweepConfig,
    label: str,
    renderer: Any,
    err: Console,
    shape_ask: Shape = None,
    target: Any = None,
) -> list[BenchRecord]:
    def on_event(event: BenchEvent | LengthsCounted) -> None:
        if isinstance(event, ClientPlaced):
            err.print(placement_text(event), highlight=False, markup=False, soft_wrap=True)
        elif isinstance(event, LengthsCounted):
            say_lengths(err, event)
        elif renderer is not None:
            renderer(event)

    async with open_session(target or args.target, workspace_of(args).ensure(), ssh_config=args.ssh_config) as session:
        if shape_ask is not None:
            config = await _shaped(config, shape_ask, await session.sglang_url(), await session.api_key(), err)
        return await bench_host(session, config, label=label, on_event=on_event, client=args.client)


def _deployment(args: argparse.Namespace) -> Any:
    """The deployment TARGET names (its front door is benchmarked: rank 0, or smg), or None for a host."""
    from console.core.deployment import is_deployment, load_deployment

    profiles = workspace_of(args).profiles
    if not args.target or not is_deployment(args.target, profiles):
        return None
    return load_deployment(args.target, profiles, ssh_config=args.ssh_config)


async def _bench_pd(
    deployment: Any,
    args: argparse.Namespace,
    config: SweepConfig,
    label: str,
    renderer: Any,
    err: Console,
    shape_ask: Shape,
    sides: list[dict[str, Any]],
) -> list[BenchRecord]:
    """A PD deployment through smg (its front door), each level's figures side by side in its record
    (console.core.bench.bench_deployment); the whole sweep's go into `sides`."""
    from console.core.bench import bench_deployment
    from console.core.status import open_members

    workspace = workspace_of(args).ensure()
    api_key = os.environ.get(API_KEY_ENV) or None
    config = await _shaped(config, shape_ask, deployment.router.url, api_key, err)

    def on_event(event: Any) -> None:
        if isinstance(event, LengthsCounted):
            say_lengths(err, event)
        elif renderer is not None:
            renderer(event)

    async with open_members(deployment, workspace, ssh_config=args.ssh_config) as opened:
        sessions = {n: s for n, s in opened.items() if not isinstance(s, HostError)}
        records, sweep = await bench_deployment(deployment, sessions, config, label=label, workspace=workspace,
                                                on_event=on_event, api_key=api_key)  # fmt: skip
    if sweep is not None:
        sides.append(sweep)
    return records


def say_lengths(err: Console, event: LengthsCounted) -> None:
    """The dataset's line once its lengths are counted: how (tokens, or words and why), then the sample."""
    err.print(f"dataset {describe_line(event.sample)}", highlight=False, markup=False, soft_wrap=True)
    style = "" if event.unit == "tokens" else "[yellow]"
    err.print(f"{style}{event.text()}", highlight=False, markup=bool(style), soft_wrap=True)


async def _bench_url(
    base_url: str, config: SweepConfig, shape_ask: Shape, err: Console, **options: Any
) -> list[BenchRecord]:
    config = await _shaped(config, shape_ask, base_url, options.get("api_key"), err)
    renderer = options.pop("on_event", None)

    def on_event(event: BenchEvent | LengthsCounted) -> None:
        if isinstance(event, LengthsCounted):
            say_lengths(err, event)
        elif renderer is not None:
            renderer(event)

    return await bench_url(base_url, config, on_event=on_event, **options)


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    try:
        cap = resolve_lengths(args)
        sample = read_dataset(args, cap)
        config = with_traffic(config_from_args(args), args, sample, read_slo(args))
        shape_ask = read_shape(args)
        if args.url:
            base_url = check_url(args.url)
            target = args.target or base_url
        elif not args.target:
            raise UsageError("give a TARGET or --url http://HOST:PORT")
        if args.url and config.find_capacity and not config.slo:
            raise UsageError("--find-capacity needs an SLO to hold the levels to: give --slo")
    except UsageError as exc:
        err.print(f"[red]error:[/red] {said(exc)}")
        return ExitCode.USAGE
    closed_loop = not config.request_rates and shape_ask is None  # the shape's levels are request rates
    if config.requests is not None and closed_loop and config.requests < max(config.concurrencies):
        err.print(
            f"[yellow]note: --requests {config.requests} is below the highest concurrency "
            f"{max(config.concurrencies)}: that level cannot reach it (see 'concurrency' in the results)[/yellow]"
        )
    workspace = workspace_of(args).ensure()
    label = args.label or default_label(urlparse(base_url).netloc if args.url else args.target)
    sides: list[dict[str, Any]] = []  # a PD deployment's per-side figures, once its sweep is over
    show_progress = not args.json and sys.stderr.isatty()
    renderer = ProgressRenderer(err) if show_progress else None
    if args.url:
        coro = _bench_url(
            base_url,
            config,
            shape_ask,
            err,
            label=label,
            target=target,
            workspace=workspace,
            on_event=renderer,
            api_key=os.environ.get(API_KEY_ENV) or None,
        )
    else:
        deployment = _deployment(args)
        if deployment is not None and deployment.kind == "pd":
            coro = _bench_pd(deployment, args, config, label, renderer, err, shape_ask, sides)
        else:
            front = deployment.front_door.target if deployment is not None and deployment.front_door else None
            coro = _bench_target(args, config, label, renderer, err, shape_ask, front)
    try:
        if renderer:
            with renderer.progress:
                records = asyncio.run(coro)
        else:
            records = asyncio.run(coro)
    except HostError as exc:
        err.print(f"[red]error:[/red] {said(exc)}")
        return ExitCode.FAILED
    except (UsageError, ShapeUnavailable) as exc:
        err.print(f"[red]error:[/red] {said(exc)}", highlight=False, soft_wrap=True)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        err.print(  # a path whole on one line, as written (no wrap at 80 columns in a log, no markup)
            f"interrupted: the records of the levels that finished (if any) are in {workspace.logs}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        return ExitCode.INTERRUPTED
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot reach the server: {exc}")
        return ExitCode.FAILED
    if args.json:
        dumped = [r.model_dump(mode="json") for r in records]
        # --find-capacity: one object, the records and the search's outcome; else the records as a list
        doc: Any = {"records": dumped, "capacity": capacity_json(records)} if config.find_capacity else dumped
        if sides:  # a PD deployment: one object, the records and the per-side figures
            doc = {**(doc if isinstance(doc, dict) else {"records": dumped}), "per_side": sides[0]}
        print(json.dumps(doc, indent=2))
    else:
        Console(width=None if sys.stdout.isatty() else 160).print(summary_table(records))
        for line in capacity_lines(records, config.find_capacity):
            err.print(line, highlight=False, markup=False, soft_wrap=True)
        if records:
            written = f"{workspace.logs}/bench-{records[0].started_at:%Y-%m-%d}.jsonl"
            err.print(f"records appended to {written}", highlight=False, markup=False, soft_wrap=True)
        if sides:
            from console.core.deployment import sides_lines

            for line in sides_lines(sides[0]):
                err.print(f"per side: {line}", highlight=False, markup=False, soft_wrap=True)
    if not records or any(r.stopped for r in records):
        for r in records:
            if r.stopped:
                err.print(f"[red]stopped at {r.level}: {r.stopped}[/red]")
        if not records:
            err.print("[red]no level completed[/red]")
        return ExitCode.FAILED
    return ExitCode.OK
