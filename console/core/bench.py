"""`opsconsole bench`: run a sweep, show progress, append the records to logs/, print a summary or JSON.

The base URL is `--url`, or for a TARGET the host layer's port forward on the SSH connection (a `local`
target: the server directly), with GPU telemetry from the host and the unit file's hash in every record.
A `--url` on this machine's loopback gets this machine's GPU telemetry (nvidia-smi) when it has GPUs.
The API key, when the server needs one, comes from $OPSCONSOLE_API_KEY with --url, or from the profile's
api_key_env for a TARGET; it is never printed or logged.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import ipaddress
import json
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from console.bench.client import BenchClient
from console.bench.engine import BenchEngine, SweepConfig, SweepResult
from console.bench.events import BenchEvent, LevelDone, LevelStarted, RequestDone, RunningFigures, SweepDone
from console.bench.records import BenchRecord, ClientLocation, append_records, records_from_sweep
from console.bench.telemetry import GpuSampler
from console.bench.workloads import WorkloadSpec
from console.host.base import HostError
from console.workspace import Workspace

if TYPE_CHECKING:
    from console.host.connect import HostSession

API_KEY_ENV = "OPSCONSOLE_API_KEY"


class UsageError(ValueError):
    pass


def parse_int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{what} must be comma-separated whole numbers, e.g. 1,8,32 (got {text!r})") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{what} must be whole numbers ≥ 1, e.g. 1,8,32 (got {text!r})")
    return values


def parse_float_list(text: str, what: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{what} must be comma-separated numbers, e.g. 2,4,8 (got {text!r})") from None
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{what} must be positive numbers (got {text!r})")
    return values


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    """The sweep the command line asks for; UsageError says what to fix."""
    if args.input_len < 1 or args.output_len < 1:
        raise UsageError("--input-len and --output-len must be at least 1")
    if args.temperature is not None and args.temperature < 0:
        raise UsageError("--temperature must be ≥ 0")
    workload = WorkloadSpec(
        name=args.workload,
        api=args.api,
        input_len=args.input_len,
        output_len=args.output_len,
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
        repeat=args.repeat,
        request_timeout=args.request_timeout,
        max_error_rate=args.max_error_rate,
        time_cap=args.time_cap,
    )
    try:
        config.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return config


def _check_url(url: str) -> str:
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
    ("accept length", "accept_length", "{:.2f}"),
    ("concurrency", "concurrency", "{:.1f}"),
    ("mean power W", "mean_power_w", "{:,.0f}"),
    ("tokens/J", "tokens_per_joule", "{:.2f}"),
)


def summary_table(records: list[BenchRecord]) -> Table:
    table = Table(title=f"bench {records[0].label}" if records else "bench", header_style="bold")
    table.add_column("")
    for r in records:
        table.add_column(r.level_key + (f" #{r.repeat_index + 1}" if r.repeat_index else ""), justify="right")
    for title, key, fmt in _SUMMARY_ROWS:
        values = [getattr(r, key) for r in records]
        if all(v is None for v in values):
            continue
        cells = ["-" if v is None else fmt.format(v) for v in values]
        if key == "failed":
            cells = [f"[red]{c}[/red]" if v else c for c, v in zip(cells, values, strict=True)]
        table.add_row(title, *cells)
    return table


async def run_bench(
    base_url: str,
    config: SweepConfig,
    *,
    label: str,
    target: str,
    client_location: ClientLocation = "direct",
    workspace: Workspace | None = None,
    on_event: Any = None,
    gpu_sampler: GpuSampler | None = None,
    unit_hash: str | None = None,
    api_key: str | None = None,
) -> list[BenchRecord]:
    """Run the sweep and append its records to the workspace's logs/ (when a workspace is given); cancelled,
    append the records of the levels that finished."""
    started = datetime.now(UTC)
    run_id = f"{label}@{started:%Y%m%dT%H%M%S.%fZ}"

    def keep(sweep: SweepResult) -> list[BenchRecord]:
        records = records_from_sweep(
            sweep,
            run_id=run_id,
            label=label,
            target=target,
            client_location=client_location,
            unit_hash=unit_hash,
            workload=config.workload.describe(),
        )
        if workspace is not None:
            append_records(workspace.logs, records)
        return records

    async with BenchClient(base_url, api_key=api_key) as client:
        engine = BenchEngine(client, config, on_event=on_event, gpu_sampler=gpu_sampler)
        try:
            sweep = await engine.run()
        except asyncio.CancelledError:  # Ctrl-C: an hour-long sweep keeps the levels that finished
            keep(engine.result_so_far())
            raise
    return keep(sweep)


def unit_hash(unit_text: str) -> str:
    """Short content hash of the unit file, so a record says exactly which setup it measured."""
    return "sha256:" + hashlib.sha256(unit_text.encode()).hexdigest()[:16]


async def _driver_version(transport: Any, gpu_command: tuple[str, ...] | None) -> str | None:
    """The NVIDIA driver version on the host (one nvidia-smi query), or None when it cannot be read."""
    argv = [*(gpu_command or ("nvidia-smi",)), "--query-gpu=driver_version", "--format=csv,noheader"]
    try:
        result = await transport.run(argv, timeout=20)
    except Exception:
        return None
    lines = [line.strip() for line in (result.stdout or "").splitlines() if line.strip()]
    return lines[0] if result.exit_status == 0 and lines else None


async def _gpu_sampler(session: HostSession) -> GpuSampler:
    """The host's GPUs once per call (NVML or nvidia-smi, as the host layer reads them); the driver version
    rides along on each sample, for the records' provenance."""
    driver = await _driver_version(session.transport, session.target.gpu_command)

    async def sampler() -> list[Any]:
        return [{**gpu.model_dump(), "driver_version": driver} for gpu in (await session.gpus()).gpus]

    return sampler


def is_loopback_url(url: str) -> bool:
    """Whether the URL's host is this machine (loopback, or the unspecified address, which connects here)."""
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


async def bench_url(
    base_url: str,
    config: SweepConfig,
    *,
    label: str,
    target: str,
    workspace: Workspace | None = None,
    on_event: Any = None,
    api_key: str | None = None,
    gpu_command: tuple[str, ...] = ("nvidia-smi",),
) -> list[BenchRecord]:
    """Benchmark the server at base_url. On this machine's loopback the server runs here, so this machine's
    GPUs are sampled (gpu_command: nvidia-smi or a stand-in), when one probe finds any; elsewhere, or without
    GPUs, the records carry no telemetry. A loopback URL that is an SSH tunnel to another host would be
    credited with this machine's GPUs; on a console without GPUs the probe finds none."""
    if not is_loopback_url(base_url):
        return await run_bench(
            base_url, config, label=label, target=target, workspace=workspace, on_event=on_event, api_key=api_key
        )
    from console.host.connect import open_host
    from console.host.targets import Target

    session = await open_host(Target(label="local", transport="local", gpu_command=gpu_command))
    try:
        # One probe: without GPUs the levels run without a failing nvidia-smi every second beside the load.
        try:
            found = bool((await session.gpus()).gpus)
        except Exception:
            found = False  # telemetry is best effort; a GPU reader failing must not stop the benchmark
        sampler = await _gpu_sampler(session) if found else None
        return await run_bench(
            base_url,
            config,
            label=label,
            target=target,
            workspace=workspace,
            on_event=on_event,
            gpu_sampler=sampler,
            api_key=api_key,
        )
    finally:
        await session.close()


async def bench_target(
    target_text: str,
    config: SweepConfig,
    *,
    label: str,
    workspace: Workspace,
    ssh_config: str | None = None,
    on_event: Any = None,
) -> list[BenchRecord]:
    """Benchmark a TARGET through the host layer: SGLang via the SSH port forward (or directly for a local
    target), GPU telemetry from the host's nvidia-smi/NVML once a second, the unit's hash as provenance."""
    from console.host.connect import open_host
    from console.host.targets import resolve_target
    from console.sim.plugin import register as register_sim

    register_sim()  # composition root: the demo transport and the stand-in launcher (console.sim registers them)

    target = resolve_target(target_text, profiles_dir=workspace.profiles, ssh_config=ssh_config)
    session = await open_host(target, logs_dir=workspace.logs)
    try:
        base_url = await session.sglang_url()
        try:
            hashed: str | None = unit_hash(await session.service.read_unit())
        except Exception:
            hashed = None  # provenance is best effort; the benchmark does not need the unit

        location: ClientLocation = "console" if target.transport == "ssh" else "on-host"
        return await run_bench(
            base_url,
            config,
            label=label,
            target=target.label,
            client_location=location,
            workspace=workspace,
            on_event=on_event,
            gpu_sampler=await _gpu_sampler(session),
            unit_hash=hashed,
            api_key=target.sglang.api_key(),
        )
    finally:
        await session.close()


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    try:
        config = config_from_args(args)
        if args.url:
            base_url = _check_url(args.url)
            target = args.target or base_url
        elif not args.target:
            raise UsageError("give a TARGET or --url http://HOST:PORT")
        if args.on_host:
            raise UsageError(
                "--on-host (the load generator on the GPU host) is not built: the SSH forward's cost was not "
                "measured above 2 %; run without it"
            )
    except UsageError as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    if config.requests is not None and not config.request_rates and config.requests < max(config.concurrencies):
        err.print(
            f"[yellow]note: --requests {config.requests} is below the highest concurrency "
            f"{max(config.concurrencies)}: that level cannot reach it (see 'concurrency' in the results)[/yellow]"
        )
    workspace = Workspace.resolve(args.workspace).ensure()
    where = urlparse(base_url).netloc if args.url else args.target
    label = args.label or f"{where}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    show_progress = not args.json and sys.stderr.isatty()
    renderer = ProgressRenderer(err) if show_progress else None
    if args.url:
        coro = bench_url(
            base_url,
            config,
            label=label,
            target=target,
            workspace=workspace,
            on_event=renderer,
            api_key=os.environ.get(API_KEY_ENV) or None,
        )
    else:
        coro = bench_target(
            args.target, config, label=label, workspace=workspace, ssh_config=args.ssh_config, on_event=renderer
        )
    try:
        if renderer:
            with renderer.progress:
                records = asyncio.run(coro)
        else:
            records = asyncio.run(coro)
    except HostError as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 1
    except KeyboardInterrupt:
        err.print(f"interrupted: the records of the levels that finished (if any) are in {workspace.logs}")
        return 130
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot reach the server: {exc}")
        return 1
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
    else:
        Console(width=None if sys.stdout.isatty() else 160).print(summary_table(records))
        if records:
            err.print(f"records appended to {workspace.logs}/bench-{records[0].started_at:%Y-%m-%d}.jsonl")
    if not records or any(r.stopped for r in records):
        for r in records:
            if r.stopped:
                err.print(f"[red]stopped at {r.level_key}: {r.stopped}[/red]")
        if not records:
            err.print("[red]no level completed[/red]")
        return 1
    return 0
