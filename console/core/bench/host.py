"""Benchmark sweeps: on an open host session (its own port forward, its GPUs, its unit's hash), or on a URL.

    records = await bench_host(session, config, label="eagle3 s2 k1", on_event=show)

The records are appended to the workspace's logs/ (console.bench.records) as the sweep's levels finish;
a cancelled sweep keeps the levels that finished. The API key, when the server needs one, comes from the
profile's api_key_env or else the unit's --api-key (a session: Session.api_key), or the caller (--url:
$OPSCONSOLE_API_KEY); it is never printed or logged.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlparse

from console.bench.client import BenchClient
from console.bench.datasets import file_sha256
from console.bench.engine import BenchEngine, LevelProbe, SweepConfig, SweepRefused, SweepResult
from console.bench.events import ClientPlaced
from console.bench.records import BenchRecord, ClientLocation, append_records, records_from_sweep, unit_hash
from console.bench.remote import PROBE_SCRIPT, HostSweep, RemoteBenchError, parse_probe, python_candidates
from console.bench.telemetry import GpuSampler
from console.core.bench.tokens import HostTokenizer, count_lengths
from console.errors import UsageError
from console.host.base import HostError
from console.sglang.specmode import SpecMode, server_answered, spec_mode
from console.workspace import Workspace

if TYPE_CHECKING:
    from console.core.session import Session
    from console.host.connect import HostSession

API_KEY_ENV = "OPSCONSOLE_API_KEY"
ClientChoice = Literal["console", "host", "auto"]
# `--client auto` runs the load on the host above this round trip: on a LAN the forward costs nothing
# (benchmarks/bench_forward_cost.py), a closed loop through a link of a few ms already loses throughput to it.
AUTO_HOST_ABOVE_MS = 5.0


def parse_int_list(text: str, what: str) -> list[int]:
    """`1,8,32` -> [1, 8, 32]; UsageError otherwise, naming the field as the caller calls it (`what`)."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{what} must be comma-separated whole numbers, e.g. 1,8,32 (got {text!r})") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{what} must be whole numbers ≥ 1, e.g. 1,8,32 (got {text!r})")
    return values


def parse_float_list(text: str, what: str) -> list[float]:
    """`2,4.5` -> [2.0, 4.5], all positive; UsageError otherwise, naming the field as the caller calls it."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{what} must be comma-separated numbers, e.g. 2,4,8 (got {text!r})") from None
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{what} must be positive numbers (got {text!r})")
    return values


class _Sweep(Protocol):
    async def run(self) -> SweepResult: ...

    def result_so_far(self, stopped: str | None = None) -> SweepResult: ...


async def _keep_records(
    sweep: _Sweep,
    config: SweepConfig,
    *,
    label: str,
    target: str,
    client_location: ClientLocation,
    workspace: Workspace | None,
    unit_hash: str | None,
    link_round_trip_ms: float | None = None,
    unit_text: str | None = None,
) -> list[BenchRecord]:
    """Run the sweep (here or on the host) and append its records to the workspace's logs/ (when a workspace is
    given); cancelled, or cut off by a dropped link, append the records of the levels that finished."""
    started = datetime.now(UTC)
    run_id = f"{label}@{started:%Y%m%dT%H%M%S.%fZ}"
    hashing = _dataset_hash(config)

    async def keep(result: SweepResult) -> list[BenchRecord]:
        records = records_from_sweep(
            result,
            run_id=run_id,
            label=label,
            target=target,
            client_location=client_location,
            unit_hash=unit_hash,
            workload=await _workload_record(config, result, hashing),
            link_round_trip_ms=link_round_trip_ms,
            spec_v2=measured_spec_v2(result.server.server_args, result.server.version, unit_text),
        )
        if workspace is not None:
            append_records(workspace.logs, records)
        return records

    try:
        result = await sweep.run()
    except SweepRefused as exc:  # before anything was sent: the operator's to change (a dataset's long prompts)
        raise UsageError(str(exc)) from None
    except (asyncio.CancelledError, Exception):  # Ctrl-C, a dropped link: an hour-long sweep keeps what finished
        await asyncio.shield(keep(sweep.result_so_far()))
        raise
    return await keep(result)


def _dataset_hash(config: SweepConfig) -> asyncio.Future[str] | None:
    """A large dataset's sha256 is read beside the sweep (console.bench.datasets samples it without): started here,
    awaited when the records are written."""
    sample = config.workload.dataset
    if sample is None or sample.sha256 or not sample.source:
        return None
    return asyncio.ensure_future(asyncio.to_thread(file_sha256, sample.source))


async def _workload_record(
    config: SweepConfig, result: SweepResult, hashing: asyncio.Future[str] | None
) -> dict[str, Any]:
    """The workload as the records keep it: a dataset's requests as the server got them (those too long for its
    context left out, counted), with the file's sha256."""
    workload = config.workload
    if workload.dataset is not None:
        fitted = workload.dataset.within_context(result.server.context_length)
        if hashing is not None:
            try:
                fitted = replace(fitted, sha256=await hashing)
            except OSError:
                pass  # the file went away meanwhile: the record says no hash rather than losing the run
        workload = replace(workload, dataset=fitted)
    return workload.describe()


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
    link_round_trip_ms: float | None = None,
    unit_text: str | None = None,
    level_probe: LevelProbe | None = None,
) -> list[BenchRecord]:
    """Run the sweep from this machine and append its records to the workspace's logs/ (when a workspace is
    given); cancelled, append the records of the levels that finished. `level_probe`: read around each level's
    measured requests, kept in its record (console.bench.engine.LevelProbe)."""
    async with BenchClient(base_url, api_key=api_key) as client:
        engine = BenchEngine(client, config, on_event=on_event, gpu_sampler=gpu_sampler, level_probe=level_probe)
        return await _keep_records(
            engine,
            config,
            label=label,
            target=target,
            client_location=client_location,
            workspace=workspace,
            unit_hash=unit_hash,
            link_round_trip_ms=link_round_trip_ms,
            unit_text=unit_text,
        )


def spec_v2_of(unit_text: str | None, version: str | None) -> bool | None:
    """Whether that SGLang version runs the spec-v2 worker with this unit (the version's rules on the unit's flags
    and environment), for a record whose server did not say; None when it cannot be told."""
    mode = _unit_rules(unit_text, version)
    return mode.spec_v2 if mode is not None else None


def _unit_rules(unit_text: str | None, version: str | None) -> SpecMode | None:
    if unit_text is None or not version:
        return None
    from console.core.status import unit_ask

    try:
        return unit_ask(unit_text, version).rules
    except Exception:  # provenance is best effort: an unknown version or an odd unit must not lose the records
        return None


def measured_spec_v2(server_args: Mapping[str, Any], version: str | None, unit_text: str | None) -> bool | None:
    """The records' spec-v2 worker: decided from the server's resolved args where it reported them (its
    version and `disable_overlap_schedule`), else by the version's rules on the unit
    (console.sglang.specmode.spec_mode, the dashboard's verdict)."""
    answered = server_answered(version, server_args)
    mode = spec_mode(version, server_args) if answered else _unit_rules(unit_text, version)
    return mode.spec_v2 if mode is not None else None


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
    level_probe: LevelProbe | None = None,
) -> list[BenchRecord]:
    """Benchmark the server at base_url. On this machine's loopback the server runs here, so this machine's
    GPUs are sampled (gpu_command: nvidia-smi or a stand-in), when one probe finds any; elsewhere, or without
    GPUs, the records carry no telemetry. A loopback URL that is an SSH tunnel to another host would be
    credited with this machine's GPUs; on a console without GPUs the probe finds none."""
    config = await count_lengths(config, base_url, api_key=api_key, workspace=workspace, on_event=on_event)
    if not is_loopback_url(base_url):
        return await run_bench(
            base_url, config, label=label, target=target, workspace=workspace, on_event=on_event, api_key=api_key,
            level_probe=level_probe,
        )  # fmt: skip
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
            level_probe=level_probe,
        )
    finally:
        await session.close()


async def bench_host(
    session: Session,
    config: SweepConfig,
    *,
    label: str,
    on_event: Any = None,
    client: ClientChoice = "auto",
) -> list[BenchRecord]:
    """Benchmark the session's host, its unit's hash as provenance. First the link's round trip is measured and
    the load generator placed (ClientPlaced says where and why): `console` runs it here, through the session's
    port forward, sampling the GPUs over the connection once a second; `host` carries the engine to the host over
    the connection and runs it there with a Python the host has (console.bench.remote), sampling the GPUs with
    the host's nvidia-smi; `auto` (default) chooses the host when the round trip is above AUTO_HOST_ABOVE_MS and
    the host has a Python to run it (else here, saying why). A local target runs here (`on-host`). A sweep given no
    SLO takes the profile's [slo], if it has one."""
    emit = on_event or (lambda _event: None)
    if config.slo is None and session.target.slo:  # the profile's [slo], when the sweep was given none
        config = replace(config, slo=dict(session.target.slo))
    try:
        unit_text: str | None = await session.service.read_unit()
    except Exception:
        unit_text = None  # provenance is best effort; the benchmark does not need the unit
    hashed = unit_hash(unit_text) if unit_text is not None else None
    if config.workload.dataset is not None:  # its lengths in the model's tokens, before anything is sent
        tokenizer = HostTokenizer(session.host.transport, unit_text) if unit_text is not None else None
        config = await count_lengths(
            config,
            await session.sglang_url(),
            api_key=await session.api_key(),
            workspace=session.workspace,
            host=tokenizer,
            on_event=on_event,
        )
    try:
        round_trip = await session.measure_round_trip(samples=3)
    except HostError:
        round_trip = None
    rtt_ms = round(round_trip * 1000, 1) if round_trip is not None else None
    placement, python = await _place(session, client, rtt_ms, unit_text)
    emit(placement)
    if python is not None:
        return await _bench_on_host(session, config, label, on_event, python, hashed, rtt_ms, unit_text)
    base_url = await session.sglang_url()
    location: ClientLocation = "console" if session.target.transport == "ssh" else "on-host"
    return await run_bench(
        base_url,
        config,
        label=label,
        target=session.label,
        client_location=location,
        workspace=session.workspace,
        on_event=on_event,
        gpu_sampler=await _gpu_sampler(session.host),
        unit_hash=hashed,
        api_key=await session.api_key(),
        link_round_trip_ms=rtt_ms,
        unit_text=unit_text,
    )


async def _place(
    session: Session, choice: ClientChoice, rtt_ms: float | None, unit_text: str | None
) -> tuple[ClientPlaced, str | None]:
    """Where the load generator runs (see bench_host) and, on the host, with which interpreter. `host` asked for
    and impossible: UsageError for a target without SSH, HostError for a host without a Python to run it."""
    over_ssh = session.target.transport == "ssh"
    if not over_ssh:
        if choice == "host":
            raise UsageError("{field} host needs an SSH target; {host} is reached without SSH", field="client",
                             host=session.label)  # fmt: skip
        return ClientPlaced("on-host", None, None, "the console runs on the host itself"), None
    link = f"round trip {rtt_ms:g} ms" if rtt_ms is not None else "round trip not measured"
    if choice == "console":
        return ClientPlaced("console", rtt_ms, None, f"{link}; --client console"), None
    if choice == "auto" and (rtt_ms is None or rtt_ms <= AUTO_HOST_ABOVE_MS):
        why = f"{link}: at most {AUTO_HOST_ABOVE_MS:g} ms, the port forward costs nothing"
        return ClientPlaced("console", rtt_ms, None, why), None
    python = await _host_python(session, unit_text)
    why = f"{link}; --client host" if choice == "host" else f"{link}: above {AUTO_HOST_ABOVE_MS:g} ms"
    if python is None:
        problem = f"{session.label} has no Python 3.10+ to run the load generator (tried the unit's and python3)"
        if choice == "host":
            from console.core.session import HostInputError

            raise HostInputError("{field} host: {problem}; install one, or use {field} console", field="client",
                                 problem=problem)  # fmt: skip
        return ClientPlaced("console", rtt_ms, None, f"{why}, but {problem}: the load runs here"), None
    where = f"{python[0]} (Python {python[1]})"
    return ClientPlaced("host", rtt_ms, where, f"{why}: the load runs on the host"), python[0]


async def _host_python(session: Session, unit_text: str | None) -> tuple[str, str] | None:
    """The interpreter on the host that runs the load generator, and its version: SGLang's own (ExecStart), else
    python3 (one remote command tries them all)."""
    argv: list[str] | None = None
    if unit_text is not None:
        try:
            from console.sglang.unit import UnitFile

            argv = UnitFile.parse(unit_text).exec_argv()
        except ValueError:
            argv = None
    candidates = python_candidates(argv)
    try:
        result = await session.host.transport.run(["sh", "-c", PROBE_SCRIPT, "sh", *candidates], timeout=60)
    except HostError:
        return None
    return parse_probe(result.stdout) if result.ok else None


async def _bench_on_host(
    session: Session,
    config: SweepConfig,
    label: str,
    on_event: Any,
    python: str,
    hashed: str | None,
    rtt_ms: float | None,
    unit_text: str | None = None,
) -> list[BenchRecord]:
    transport = session.host.transport
    interact = getattr(transport, "interact", None)
    if interact is None:
        raise HostError(f"{session.label}: this connection cannot run a command interactively")
    endpoint = session.target.sglang
    sweep = HostSweep(
        interact,
        python,
        f"http://{endpoint.host}:{endpoint.port}",
        config,
        api_key=await session.api_key(),
        gpu_command=session.host.gpu_command() or ("nvidia-smi",),
        on_event=on_event,
    )
    try:
        return await _keep_records(
            sweep,
            config,
            label=label,
            target=session.label,
            client_location="host",
            workspace=session.workspace,
            unit_hash=hashed,
            link_round_trip_ms=rtt_ms,
            unit_text=unit_text,
        )
    except RemoteBenchError as exc:
        raise HostError(f"{session.label}: {session.secrets.text(str(exc))}") from None


def default_label(where: str, now: datetime | None = None) -> str:
    return f"{where}-{(now or datetime.now(UTC)):%Y%m%d-%H%M%S}"
