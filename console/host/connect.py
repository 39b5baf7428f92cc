"""Open a host for the verbs: TARGET -> transport + service manager + SGLang client.

    session = await open_host(target, logs_dir=workspace.logs)
    state = await session.service.state()
    client = await session.sglang()          # through a port forward on the same SSH connection
    await session.close()

`ssh` targets get an SshTransport and SystemdService; `local` a LocalTransport and SystemdService
(GPU telemetry through NVML when available); any other transport (`demo`) a LocalTransport and the
service manager that the package providing it registered in console.host.registry (this layer imports
nothing from that package).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.host.audit import AuditLog
from console.host.base import HostError, ServiceManager, ServiceState, Transport
from console.host.gpu import GPU_POLL_SCRIPT, GpuSnapshot, NvmlUnavailable, parse_snapshot, read_gpus, read_nvml
from console.host.linkmeter import MeterReading
from console.host.local import LocalTransport
from console.host.registry import service_provider
from console.host.ssh import ConnectionState, SshTransport
from console.host.systemd import SHOW_MARKER, SHOW_SCRIPT, SystemdService, parse_show
from console.host.targets import Target
from console.sglang.client import SglangClient


@dataclass(frozen=True)
class HostPoll:
    """One poll of the host: the unit's state (or why it could not be read) and the GPUs."""

    state: ServiceState | None
    service_error: str | None
    gpus: GpuSnapshot


def parse_poll(stdout: str, stderr: str, exit_status: int, unit: str, label: str) -> HostPoll:
    """The output of the combined poll (SHOW_SCRIPT + GPU_POLL_SCRIPT) -> HostPoll. Pure."""
    show, found, rest = stdout.partition(SHOW_MARKER + " ")
    if not found:
        why = (stderr.strip() or f"exit status {exit_status}").splitlines()[0]
        return HostPoll(None, f"{label}: reading the unit and the GPUs failed: {why}", GpuSnapshot(error=why))
    status_line, _newline, gpu_text = rest.partition("\n")
    state: ServiceState | None = None
    error: str | None = None
    if status_line.strip() != "0":
        error = f"{label}: `systemctl show {unit}` failed: {show.strip()[:500]}"
    else:
        try:
            state = parse_show(show, unit)
        except HostError as exc:
            error = str(exc)
    return HostPoll(state, error, parse_snapshot(gpu_text, stderr, exit_status))


@dataclass
class HostSession:
    target: Target
    transport: Transport
    service: ServiceManager
    _clients: list[SglangClient] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def connection(self) -> ConnectionState:
        if isinstance(self.transport, SshTransport):
            return self.transport.state
        return ConnectionState("local")

    async def sglang_url(self) -> str:
        endpoint = self.target.sglang
        port = await self.transport.forward_port(endpoint.host, endpoint.port)
        return f"http://127.0.0.1:{port}"

    def peer_address(self) -> str | None:
        """The address the SSH connection reached (what a router in front of the host knows it by); None without a
        link (local, demo) or while it is down."""
        return self.transport.peer_address if isinstance(self.transport, SshTransport) else None

    @property
    def client(self) -> SglangClient | None:
        """The SGLang client once made (sglang() makes it), else None."""
        return self._clients[0] if self._clients else None

    async def sglang(self, *, timeout_s: float = 10.0) -> SglangClient:
        """The session's client for the host's SGLang API (one per session, closed with it).

        The local port of the forward survives reconnects, so the client's URL stays valid."""
        if self._clients:
            return self._clients[0]
        client = SglangClient(await self.sglang_url(), api_key=self.target.sglang.api_key(), timeout_s=timeout_s)
        self._clients.append(client)
        return client

    @property
    def link(self) -> MeterReading | None:
        """The round trips and exchanges on the SSH link so far (None when there is no link: local, demo)."""
        return self.transport.meter.reading() if isinstance(self.transport, SshTransport) else None

    @property
    def round_trip_s(self) -> float | None:
        """The link's round trip as last measured (None before the first ping, and without a link)."""
        return self.transport.meter.round_trip_s if isinstance(self.transport, SshTransport) else None

    async def measure_round_trip(self, samples: int = 3) -> float | None:
        """Ping the host now (SSH only; None for local and demo hosts, which have no link)."""
        if isinstance(self.transport, SshTransport):
            return await self.transport.round_trip(samples)
        return None

    def gpu_command(self) -> Sequence[str] | None:
        """The host's `nvidia-smi` (the profile's gpu_command, a registered host's, else None: nvidia-smi)."""
        command = self.target.gpu_command
        provider = service_provider(self.target.transport)
        if command is None and provider is not None:  # e.g. the demo's simulated GPUs
            command = provider.gpu_command
        return command

    async def poll(self) -> HostPoll:
        """The unit's state and the GPUs. Over SSH both in one remote command (one round trip on a command
        shell); elsewhere (NVML here, the demo's supervisor) the two reads run side by side."""
        service = self.service
        if isinstance(service, SystemdService) and isinstance(self.transport, SshTransport):
            gpu_command = list(self.gpu_command() or ["nvidia-smi"])
            argv = ["sh", "-c", SHOW_SCRIPT + GPU_POLL_SCRIPT, "sh", *service.show_script_args(), *gpu_command]
            try:
                result = await self.transport.run(argv, timeout=30)
            except HostError as exc:
                return HostPoll(None, str(exc), GpuSnapshot(error=str(exc)))
            return parse_poll(result.stdout, result.stderr, result.exit_status, service.unit, self.label)
        state, gpus = await asyncio.gather(service.state(), self.gpus(), return_exceptions=True)
        if isinstance(gpus, BaseException):
            if not isinstance(gpus, Exception):
                raise gpus
            gpus = GpuSnapshot(error=str(gpus))
        if isinstance(state, BaseException):
            if not isinstance(state, HostError):
                raise state
            return HostPoll(None, str(state), gpus)
        return HostPoll(state, None, gpus)

    async def gpus(self) -> GpuSnapshot:
        if self.target.transport == "local" and self.target.gpu_command is None:
            try:
                # NVML calls block (~18 ms a poll on an H200): keep them off the loop that may be driving a benchmark
                return await asyncio.to_thread(read_nvml)
            except NvmlUnavailable:
                pass  # no NVML library here: nvidia-smi (or its stand-in) instead
        return await read_gpus(self.transport, self.gpu_command())

    async def close(self) -> None:
        for client in self._clients:
            await client.close()
        self._clients.clear()
        await self.transport.close()


async def open_host(
    target: Target,
    *,
    logs_dir: Path | None = None,
    on_state: Callable[[ConnectionState], None] | None = None,
) -> HostSession:
    """Build the session; an SSH connection is opened now so that host-key problems surface first."""
    audit = AuditLog.in_logs(logs_dir) if logs_dir is not None else None
    transport: Any
    if target.transport == "ssh":
        transport = SshTransport(target, audit=audit, on_state=on_state)
        await transport.connect()  # also starts the host's command shells, in the background
        # The SGLang forward now, so that its first connection is open (a spare) when the first read comes.
        await transport.forward_port(target.sglang.host, target.sglang.port)
        service: ServiceManager = SystemdService(transport, target.unit, sudo=target.sudo)
    elif target.transport == "local":
        transport = LocalTransport(target.label, audit=audit)
        service = SystemdService(transport, target.unit, sudo=target.sudo)
    else:
        transport = LocalTransport(target.label, audit=audit)
        service = _registered_service(target)
    return HostSession(target=target, transport=transport, service=service)


def _registered_service(target: Target) -> ServiceManager:
    """The service manager another package registered for this transport (the demo host's, for `demo`)."""
    provider = service_provider(target.transport)
    if provider is None:
        raise HostError(
            f"{target.label}: the {target.transport} host is not available in this build "
            f"(nothing registered a service manager for transport {target.transport!r})"
        )
    return provider.factory(target)
