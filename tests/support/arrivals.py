"""A TCP relay in front of a server that notes when each HTTP request arrives: a neutral clock for two load
generators sent through it one after the other (ours, SGLang's bench_serving).

    with ArrivalRelay(sim.port) as relay:     # relay.url instead of sim.url
        ...
        relay.take()                          # perf_counter() of each POST to a generation route, in order

Each chunk a client sends is scanned for the request lines of SGLang's generation routes; a chunk that holds one is
stamped with the time it came in. HTTP/1.1 clients here send one request at a time per connection, its head in one
chunk, so one stamp a request. Runs on a thread of its own (its own event loop): no process.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from types import TracebackType

ROUTES = re.compile(rb"POST /(?:generate|v1/chat/completions|v1/completions) HTTP/1\.1\r\n")


class ArrivalRelay:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, port)
        self._stamps: list[float] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def take(self) -> list[float]:
        """The arrivals noted since the last take()."""
        with self._lock:
            stamps, self._stamps = self._stamps, []
        return stamps

    def __enter__(self) -> ArrivalRelay:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the arrival relay did not start")
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        for task in asyncio.all_tasks(self._loop):  # the connections still open: closed, not left pending
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*asyncio.all_tasks(self._loop), return_exceptions=True))
        self._loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, stamp: bool) -> None:
            try:
                while data := await src.read(65536):
                    if stamp:
                        found = len(ROUTES.findall(data))
                        if found:
                            now = time.perf_counter()
                            with self._lock:
                                self._stamps += [now] * found
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
