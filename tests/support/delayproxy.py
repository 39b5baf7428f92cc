"""A long link for SSH: an ssh_config ProxyCommand that relays stdin/stdout to HOST:PORT, holding every byte
for a fixed delay in each direction (no loss, no bandwidth cap, order kept).

    Host gpu1-far
        HostName 10.200.1.2
        ProxyCommand /usr/bin/python3 /repo/tests/support/delayproxy.py --delay-ms 150 %h %p

150 ms each way is a 300 ms round trip, a laptop in one region and the GPU host in another. OpenSSH runs the
command through a shell, asyncssh splits it into argv; both work. The relay ends when either side ends (after
the data in flight was delivered), so killing it is a dropped link that both ends notice.

Standard library only; run as a script (`python3 delayproxy.py ...`) or as `python -m tests.support.delayproxy`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import time


class _Delayed:
    """One direction: chunks are written out `delay` after they came in, in order."""

    def __init__(self, delay: float, write: asyncio.WriteTransport | asyncio.Transport) -> None:
        self.delay = delay
        self._write = write
        self._queue: collections.deque[tuple[float, bytes | None]] = collections.deque()
        self._wake = asyncio.Event()
        self.done = asyncio.Event()

    def put(self, data: bytes | None) -> None:  # None: end of stream
        self._queue.append((time.monotonic() + self.delay, data))
        self._wake.set()

    async def pump(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            due, data = self._queue[0]
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._queue.popleft()
            if data is None:
                if self._write.can_write_eof():
                    self._write.write_eof()
                self.done.set()
                return
            self._write.write(data)


class _Reader(asyncio.Protocol):
    def __init__(self, sink: _Delayed, ended: asyncio.Event) -> None:
        self.sink = sink
        self.ended = ended

    def data_received(self, data: bytes) -> None:
        self.sink.put(data)

    def eof_received(self) -> bool:
        self.sink.put(None)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.sink.put(None)
        self.ended.set()


async def relay(host: str, port: int, delay_s: float) -> None:
    loop = asyncio.get_running_loop()
    stdout_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", buffering=0))
    ended = asyncio.Event()
    to_stdout = _Delayed(delay_s, stdout_transport)  # type: ignore[arg-type]
    sock_transport, _ = await loop.create_connection(lambda: _Reader(to_stdout, ended), host, port)
    to_socket = _Delayed(delay_s, sock_transport)
    await loop.connect_read_pipe(lambda: _Reader(to_socket, ended), os.fdopen(0, "rb", buffering=0))
    pumps = [asyncio.ensure_future(to_stdout.pump()), asyncio.ensure_future(to_socket.pump())]
    # Either side ending ends the relay once what was in flight towards the other side arrived.
    await asyncio.wait([asyncio.ensure_future(to_stdout.done.wait()), asyncio.ensure_future(to_socket.done.wait())],
                       return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
    await asyncio.sleep(delay_s)
    for pump in pumps:
        pump.cancel()
    sock_transport.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=float, default=150.0, help="added in each direction")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    try:
        asyncio.run(relay(args.host, args.port, args.delay_ms / 1000))
    except (ConnectionError, OSError) as exc:
        print(f"delayproxy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
