"""The local transport: the console runs on the GPU host itself (TARGET `local` / `localhost`).

Same commands as over SSH, run with asyncio subprocesses (argv, no shell); sudo is `sudo -n` unless
the console already runs as root. The SGLang port is reached directly, without a forward.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from collections.abc import AsyncIterator, Sequence

from console.host.audit import AuditLog
from console.host.base import CommandResult, HostError
from console.host.commands import SUDO_PREFIX, shell_command, sudo_error, sudo_wants_password

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


class LocalTransport:
    """console.host.base.Transport for this machine."""

    def __init__(self, label: str = "local", *, audit: AuditLog | None = None) -> None:
        self.label = label
        self.audit = audit

    def _argv(self, argv: Sequence[str], sudo: bool) -> list[str]:
        shell_command(argv)  # the same validation as over SSH
        needs_sudo = sudo and os.geteuid() != 0
        return [*SUDO_PREFIX, *argv] if needs_sudo else list(argv)

    def _audit(self, argv: Sequence[str], exit_status: int | None, started: float, note: str = "") -> None:
        if self.audit is not None:
            self.audit.record(
                host=self.label, command=shlex.join(argv), exit_status=exit_status, started=started, note=note
            )

    async def run(
        self,
        argv: Sequence[str],
        *,
        sudo: bool = False,
        timeout: float | None = None,
        input: str | None = None,
    ) -> CommandResult:
        full = self._argv(argv, sudo)
        started = time.monotonic()
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *full,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # a group of its own, which _stop ends whole
            )
        )
        try:
            # Shielded: cancelled while its pipes connect, asyncio would kill only the command, not what it started
            process = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await _stop(await spawn, grace_s=2.0)
            raise
        except OSError as exc:  # as a shell reports it: 127 not found, 126 found but not runnable
            status, why = (
                (127, "command not found") if isinstance(exc, FileNotFoundError) else (126, exc.strerror or str(exc))
            )
            self._audit(full, status, started, note=why)
            return CommandResult(shlex.join(full), status, "", f"{full[0]}: {why}", 0.0)
        try:
            async with asyncio.timeout(timeout):
                out, err = await process.communicate(input.encode() if input is not None else None)
        except asyncio.CancelledError:
            # The caller gave up on it: stop the command and reap it now, so that neither it nor its pipes
            # outlive the event loop (a transport collected after the loop closed fails in its __del__).
            with contextlib.suppress(Exception):
                await _stop(process, grace_s=2.0)
            raise
        except TimeoutError:
            await _stop(process)
            self._audit(full, None, started, note="timeout")
            raise HostError(f"{self.label}: `{shlex.join(argv)}` did not finish within {timeout} s") from None
        status = process.returncode if process.returncode is not None else 255
        self._audit(full, status, started)
        stderr = err.decode("utf-8", "replace")
        if full[:1] == ["sudo"] and status != 0 and sudo_wants_password(stderr):
            raise sudo_error(self.label, os.environ.get("USER"), argv)
        return CommandResult(
            shlex.join(full), status, out.decode("utf-8", "replace"), stderr, time.monotonic() - started
        )

    async def stream(self, argv: Sequence[str], *, sudo: bool = False) -> AsyncIterator[str]:
        full = self._argv(argv, sudo)
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *full,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self._audit(full, None, started, note=f"stream not started: {exc.strerror}")
            raise HostError(f"{self.label}: cannot run {full[0]}: {exc.strerror}") from None
        assert process.stdout is not None and process.stderr is not None
        stderr_tail = asyncio.create_task(_tail(process.stderr))  # read along, so a chatty stderr never blocks
        try:
            async for raw in process.stdout:
                yield raw.decode("utf-8", "replace").rstrip("\n")
            await process.wait()
            # sudo that wants a password ends the stream at once with nothing on stdout: say why, as run() does
            if full[:1] == ["sudo"] and process.returncode != 0 and sudo_wants_password(await stderr_tail):
                raise sudo_error(self.label, os.environ.get("USER"), argv)
        finally:
            if process.returncode is None:
                await _stop(process)
            stderr_tail.cancel()
            self._audit(full, process.returncode, started)

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        if remote_host not in _LOOPBACK:
            raise HostError(f"the local transport reaches only this machine, not {remote_host}")
        return remote_port

    async def close(self) -> None:
        return None


async def _stop(process: asyncio.subprocess.Process, grace_s: float = 5.0) -> None:
    """End a command and what it started (its process group): a shell's child, the nvidia-smi under the GPU
    poll's `sh -c` hung on a wedged GPU, would otherwise run on after the shell, holding the command's pipes.
    SIGTERM first: sudo relays it to its (root-owned) child, which we may not signal ourselves; a SIGKILLed sudo
    would orphan `journalctl -f`, whose open pipe then never closes."""
    _signal_group(process, signal.SIGTERM)
    try:
        async with asyncio.timeout(grace_s):
            await process.wait()
    except TimeoutError:
        _signal_group(process, signal.SIGKILL)
        await process.wait()


def _signal_group(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    """The command leads a group of its own (start_new_session); the group outlives it while its children run."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def _tail(stream: asyncio.StreamReader, keep: int = 4096) -> str:
    """What a stream said last (its final `keep` bytes), read until it closes."""
    tail = b""
    while chunk := await stream.read(65536):
        tail = (tail + chunk)[-keep:]
    return tail.decode("utf-8", "replace")
