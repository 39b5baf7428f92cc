"""A command on this machine behind the same interface as SshTransport.interact (console.bench.remote's
RemoteProcess): for tests of the load generator's protocol without SSH in the way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence


class LocalProcess:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    def write(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode())

    async def drain(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.drain()

    def write_eof(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.write_eof()

    async def readline(self) -> str:
        assert self.process.stdout is not None
        return (await self.process.stdout.readline()).decode().rstrip("\n")

    async def stderr_tail(self, limit: int = 4000) -> str:
        assert self.process.stderr is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                return (await self.process.stderr.read()).decode(errors="replace")[-limit:]
        return ""


@contextlib.asynccontextmanager
async def local_process(argv: Sequence[str]) -> AsyncIterator[LocalProcess]:
    """Start argv with pipes; leaving the block closes its stdin (as a closed SSH channel does) and waits for it
    to end, killing it after 10 s."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        yield LocalProcess(process)
    finally:
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
