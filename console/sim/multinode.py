"""Multi-node SGLang in the stand-in: one model over several nodes, each node one `python -m console.sim` process.

What it offers (SGLang 0.5.23, ../shared/research/wave5-facts.md §4; the stand-in's side of issue #45):

- `--nnodes N --node-rank R --dist-init-addr HOST:PORT`: the ranks rendezvous over TCP at HOST:PORT (rank 0 listens
  there), in any start order, each blocking between "Init parallel begin." and "Init parallel ends." until every rank
  has joined. After `--dist-timeout` seconds (unset: 600) without the whole group a rank fails as a scheduler
  exception does: "Scheduler hit an exception", SIGQUIT to the main process, kill_process_tree, SIGKILL (exit 137).
  Without --dist-init-addr each node would rendezvous on a port of its own: they never meet and time out.
- A formed group takes no one in: a rank started again later finds nobody at the address (or a rank 0 that is about
  to die) and waits until its timeout. A rank cannot rejoin; every rank has to start again.
- `--gated-launch-port P`: after the rendezvous and before "Load weight begin", every rank waits until
  `POST /gate/activate` on rank 0's `--host:P` (`GET /health` there answers "OK"); rank 0 looks once a second and
  broadcasts what it saw, with 0.5.23's log lines. Works with one node too.
- Every rank reports "loaded" after its weights, KV cache and graphs; rank 0 binds its HTTP API only when all have
  (`all_loaded`). A rank >= 1 then serves a dummy server on its --host:--port (`serve_follower`): GET /ping, /health,
  /health_generate always 200 with an empty body, /metrics (empty) with --enable-metrics, nothing else (404). From
  then on it ignores SIGTERM ("waiting for the rank-0 ShutdownReq broadcast") and exits 0 when rank 0 shuts down
  (`shutdown`, after rank 0's drain).
- When a peer dies (its connection closes without a shutdown, or it is silent for --watchdog-timeout seconds) the
  rank's engine stops where it is (a collective that never completes) and, after `--sim-peer-loss-exit-s` seconds
  (default 2: the next collective), the rank dies as above. So killing any rank takes the whole deployment down.
  This holds from the rendezvous on: at the gate too (rank 0 broadcasts the gate's flag to every rank each second,
  a collective that fails once a peer is gone) and while the weights load.
- Ranks >= 1 show rank 0's batch on their simulated GPUs (rank 0 sends its load with each heartbeat).

The wire between ranks is the stand-in's own (JSON lines over the TCP connection each rank >= 1 keeps to rank 0),
standing for PyTorch's TCPStore and the CPU group's collectives; nothing outside the stand-in speaks it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from aiohttp import web

DEFAULT_DIST_TIMEOUT_S = 600.0  # --dist-timeout unset: PyTorch's default process-group timeout for NCCL, 10 minutes
DEFAULT_PEER_LOSS_EXIT_S = 2.0
HEARTBEAT_S = 1.0
GATE_POLL_S = 1.0  # gated_launch.py POLL_INTERVAL_SECONDS
GATE_LOG_S = 10.0  # gated_launch.py LOG_INTERVAL_SECONDS
DIAL_AGAIN_S = 0.1  # how often a rank >= 1 dials rank 0 again while nobody answers (TCPStore's client retries)
SHUTDOWN_WAIT_S = 15.0  # rank 0 waits this long for the others to go after its ShutdownReq


@web.middleware
async def fastapi_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """An HTTP error as SGLang's FastAPI answers it: {"detail": reason}, not aiohttp's text page."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        return web.json_response({"detail": e.reason}, status=e.status)


class GroupError(Exception):
    """The group did not form; the text is what PyTorch raises (the exception's type leads it)."""


Log = Callable[[str, str], None]  # (message, rank prefix such as "TP4" or "" for the main process)


def parse_addr(text: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` as SGLang's NetworkAddress.parse reads --dist-init-addr."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--dist-init-addr {text!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class GroupSpec:
    """What a node knows of its group from its flags (pure)."""

    nnodes: int
    node_rank: int
    dist_init_addr: tuple[str, int] | None
    timeout_s: float
    gate_port: int | None
    watchdog_s: float
    host: str
    port: int
    world_size: int  # tp_size × pp_size: the scheduler ranks over all nodes
    enable_metrics: bool = False
    peer_loss_exit_s: float = DEFAULT_PEER_LOSS_EXIT_S

    @classmethod
    def from_resolved(
        cls, resolved: Mapping[str, Any], *, peer_loss_exit_s: float = DEFAULT_PEER_LOSS_EXIT_S
    ) -> GroupSpec | None:
        """None for a plain single node (one node, no gate): nothing of this module runs then."""
        nnodes = int(resolved.get("nnodes") or 1)
        gate = resolved.get("gated_launch_port")
        if nnodes <= 1 and gate is None:
            return None
        addr = resolved.get("dist_init_addr")
        timeout = resolved.get("dist_timeout")
        return cls(
            nnodes=nnodes,
            node_rank=int(resolved.get("node_rank") or 0),
            dist_init_addr=parse_addr(str(addr)) if addr else None,
            timeout_s=float(timeout) if timeout else DEFAULT_DIST_TIMEOUT_S,
            gate_port=int(gate) if gate is not None else None,
            watchdog_s=float(resolved.get("watchdog_timeout") or 300),
            host=str(resolved.get("host") or "127.0.0.1"),
            port=int(resolved.get("port") or 30000),
            world_size=int(resolved.get("tp_size") or 1) * int(resolved.get("pp_size") or 1),
            enable_metrics=bool(resolved.get("enable_metrics")),
            peer_loss_exit_s=peer_loss_exit_s,
        )

    @property
    def ranks_per_node(self) -> int:
        return max(1, self.world_size // self.nnodes)

    @property
    def local_ranks(self) -> range:
        """This node's scheduler ranks (TP ranks): node 1 of a TP 8 over 2 nodes runs 4-7."""
        first = self.node_rank * self.ranks_per_node
        return range(first, first + self.ranks_per_node)

    @property
    def leader(self) -> bool:
        return self.node_rank == 0


def first_tp_rank(resolved: Mapping[str, Any]) -> int:
    """The first scheduler rank on this node: what its log lines carry ("[... TP4] ...")."""
    nnodes = max(1, int(resolved.get("nnodes") or 1))
    world = int(resolved.get("tp_size") or 1) * int(resolved.get("pp_size") or 1)
    return int(resolved.get("node_rank") or 0) * max(1, world // nnodes)


def gpus_per_node(resolved: Mapping[str, Any]) -> int | None:
    """GPUs a node of a multi-node deployment simulates: its share of TP × PP (None on one node: the profile's)."""
    nnodes = int(resolved.get("nnodes") or 1)
    if nnodes <= 1:
        return None
    return max(1, int(resolved.get("tp_size") or 1) * int(resolved.get("pp_size") or 1) // nnodes)


@dataclass
class _Peer:
    rank: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    last_seen: float = field(default_factory=time.monotonic)

    def send(self, message: dict[str, Any]) -> None:
        if self.writer.is_closing():
            return
        with contextlib.suppress(OSError, RuntimeError):
            self.writer.write(json.dumps(message).encode() + b"\n")


class Group:
    """One node's part in the group, from the rendezvous to its end (see the module docstring)."""

    def __init__(self, spec: GroupSpec, log: Log) -> None:
        self.spec = spec
        self.log = log
        self.lost = asyncio.Event()  # a peer died: this rank dies after peer_loss_exit_s
        self.lost_reason = ""
        self.shut_down = asyncio.Event()  # (ranks >= 1) rank 0 broadcast its ShutdownReq
        self.gate_open = asyncio.Event()
        self.ready = asyncio.Event()  # every rank loaded
        # (ranks >= 1) rank 0's batch as its last heartbeat said: running, busy, queued, used_tokens, token_usage,
        # gen_throughput, max_total_num_tokens (every TP rank computes the same batch)
        self.mirror: dict[str, float] | None = None
        self.load: Callable[[], dict[str, float]] = dict  # (rank 0) what its heartbeats carry
        self.gate_server: web.AppRunner | None = None
        self._gate_activated = False
        self._peers: dict[int, _Peer] = {}  # rank 0: the others; ranks >= 1: rank 0
        self._loaded: set[int] = set()
        self._all_loaded = asyncio.Event()
        self._leaving = False  # rank 0 is shutting the group down: closed connections are expected
        self._tasks: list[asyncio.Task[Any]] = []

    def _main_log(self, message: str) -> None:
        self.log(message, "")

    def _ranks_log(self, message: str) -> None:
        """A line every local scheduler logs, each with its own rank ({rank} in the text)."""
        for rank in self.spec.local_ranks:
            self.log(message.format(rank=rank), f"TP{rank}")

    # --- rendezvous ---------------------------------------------------------------------------------------------

    async def rendezvous(self) -> None:
        """Block until every rank has joined; GroupError after the timeout."""
        if self.spec.nnodes <= 1:
            return
        if self.spec.dist_init_addr is None:
            # Each node would use a port of its own (its --host and a free nccl_port): nobody is ever met.
            await asyncio.sleep(self.spec.timeout_s)
            raise GroupError(self._client_timeout_text(self.spec.host, 0))
        if self.spec.leader:
            await self._lead()
        else:
            await self._join()
        for peer in self._peers.values():
            self._tasks.append(asyncio.create_task(self._read(peer), name=f"peer-{peer.rank}"))
        self._tasks.append(asyncio.create_task(self._heartbeat(), name="heartbeat"))

    def _client_timeout_text(self, host: str, port: int) -> str:
        ms = int(self.spec.timeout_s * 1000)
        return (
            f"torch.distributed.DistNetworkError: The client socket has timed out after {ms}ms while trying to "
            f"connect to ({host}, {port})."
        )

    async def _lead(self) -> None:
        assert self.spec.dist_init_addr is not None
        host, port = self.spec.dist_init_addr
        joined: dict[int, _Peer] = {}
        complete = asyncio.Event()
        refused: list[str] = []

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                hello = json.loads(await reader.readline() or b"{}")
            except (ValueError, OSError):
                writer.close()
                return
            rank, nnodes = hello.get("hello"), hello.get("nnodes")
            problem = None
            if complete.is_set():
                writer.close()  # the group has formed: a late rank hears nothing and times out
                return
            if nnodes != self.spec.nnodes:
                problem = f"rank {rank} was started with --nnodes {nnodes}, this group has {self.spec.nnodes}"
            elif not isinstance(rank, int) or not 1 <= rank < self.spec.nnodes:
                problem = f"--node-rank {rank} is not in 1..{self.spec.nnodes - 1}"
            elif rank in joined and not joined[rank].writer.is_closing():
                problem = f"--node-rank {rank} joined twice"
            if problem is not None:
                refused.append(problem)
                writer.write(json.dumps({"refused": problem}).encode() + b"\n")
                with contextlib.suppress(OSError):
                    await writer.drain()
                writer.close()
                return
            joined[rank] = _Peer(rank, reader, writer)
            if len(joined) == self.spec.nnodes - 1 and all(not p.writer.is_closing() for p in joined.values()):
                complete.set()

        try:
            server = await asyncio.start_server(on_client, host, port, reuse_address=True)
        except OSError as e:
            raise GroupError(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                f"address. port: {port}, useIpv6: 0, code: -{e.errno or 98}, name: EADDRINUSE, message: {e.strerror}"
            ) from None
        try:
            await asyncio.wait_for(complete.wait(), self.spec.timeout_s)
        except TimeoutError:
            alive = 1 + sum(1 for p in joined.values() if not p.writer.is_closing())
            raise GroupError(
                f"torch.distributed.DistStoreError: Timed out after {self.spec.timeout_s:.0f} seconds waiting for "
                f"clients. {alive}/{self.spec.nnodes} clients joined."
            ) from None
        finally:
            server.close()  # no one joins a formed group (the handlers of open connections stay)
        self._peers = dict(joined)
        for peer in self._peers.values():
            peer.send({"welcome": self.spec.nnodes})

    async def _join(self) -> None:
        assert self.spec.dist_init_addr is not None
        host, port = self.spec.dist_init_addr
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.spec.timeout_s
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise GroupError(self._client_timeout_text(host, port))
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), left)
            except (OSError, TimeoutError):
                await asyncio.sleep(min(DIAL_AGAIN_S, max(0.0, deadline - loop.time())))
                continue
            writer.write(json.dumps({"hello": self.spec.node_rank, "nnodes": self.spec.nnodes}).encode() + b"\n")
            try:
                line = await asyncio.wait_for(reader.readline(), max(0.01, deadline - loop.time()))
            except (OSError, TimeoutError):
                line = b""
            answer = json.loads(line) if line.strip() else {}
            if "refused" in answer:
                writer.close()
                refused = answer["refused"]
                raise GroupError(f"RuntimeError: the rendezvous at {host}:{port} refused this rank: {refused}")
            if "welcome" in answer:
                self._peers = {0: _Peer(0, reader, writer)}
                return
            writer.close()  # rank 0 went away or the group had formed without us: dial again until the timeout
            await asyncio.sleep(min(DIAL_AGAIN_S, max(0.0, deadline - loop.time())))

    # --- the group's life -------------------------------------------------------------------------------------

    async def _read(self, peer: _Peer) -> None:
        while True:
            try:
                line = await peer.reader.readline()
            except (OSError, ValueError):
                line = b""
            if not line:
                break
            peer.last_seen = time.monotonic()
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "loaded" in message:
                self._loaded.add(peer.rank)
                if len(self._loaded) == self.spec.nnodes - 1:
                    self._all_loaded.set()
            elif "gate" in message:
                self.gate_open.set()
            elif "ready" in message:
                self.ready.set()
            elif "shutdown" in message:
                self.shut_down.set()
            elif "ping" in message and isinstance(message["ping"], dict):
                self.mirror = {k: float(v) for k, v in message["ping"].items()}
        if self._leaving or self.shut_down.is_set():
            return
        self._lose(peer)

    def _lose(self, peer: _Peer) -> None:
        if not self.lost.is_set():
            self.lost_reason = (
                "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
                f"[{self._peer_host(peer)}]:{self.spec.dist_init_addr[1] if self.spec.dist_init_addr else 0} "
                f"(node_rank {peer.rank})"
            )
            self.lost.set()

    def _peer_host(self, peer: _Peer) -> str:
        name = peer.writer.get_extra_info("peername")
        return str(name[0]) if name else "?"

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            now = time.monotonic()
            ping: Any = self.load() if self.spec.leader else True
            for peer in list(self._peers.values()):
                peer.send({"ping": ping})
                if now - peer.last_seen > self.spec.watchdog_s:
                    self._lose(peer)  # silent past the watchdog: a host that vanished sends no FIN

    # --- gate ---------------------------------------------------------------------------------------------------

    async def wait_gate(self) -> None:
        """--gated-launch-port: wait for `POST /gate/activate` on rank 0's gate server (no timeout of its own)."""
        if self.spec.gate_port is None:
            return
        if self.spec.leader:
            await self._serve_gate()
        self._ranks_log("Gated launch waiting for activation. rank={rank}")
        loop = asyncio.get_running_loop()
        started = loop.time()
        next_log = started + GATE_LOG_S
        while not self.gate_open.is_set():
            if self.spec.leader:
                if self._gate_activated:  # rank 0 broadcasts the flag it read, once a poll
                    for peer in self._peers.values():
                        peer.send({"gate": True})
                    self.gate_open.set()
                    break
                await asyncio.sleep(GATE_POLL_S)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.gate_open.wait(), max(0.0, next_log - loop.time()))
            now = loop.time()
            if not self.gate_open.is_set() and now >= next_log:
                elapsed = now - started
                self._ranks_log(f"Gated launch still waiting for activation. rank={{rank}} elapsed={elapsed:.0f} s")
                next_log = now + GATE_LOG_S
        self._ranks_log(f"Gated launch activated. elapsed={loop.time() - started:.2f} s")

    async def _serve_gate(self) -> None:
        assert self.spec.gate_port is not None

        async def health(request: web.Request) -> web.Response:
            return web.Response(text="OK")

        async def activate(request: web.Request) -> web.Response:
            self._gate_activated = True
            return web.Response(text="OK")

        app = web.Application(middlewares=[fastapi_errors])
        app.router.add_get("/health", health)
        app.router.add_post("/gate/activate", activate)
        self.gate_server = web.AppRunner(app, access_log=None, handle_signals=False)
        await self.gate_server.setup()
        await web.TCPSite(self.gate_server, self.spec.host, self.spec.gate_port, reuse_address=True).start()
        self.log(f"Gated launch control server started on {self.spec.host}:{self.spec.gate_port}", "")

    # --- loaded, shutdown ---------------------------------------------------------------------------------------

    async def all_loaded(self) -> None:
        """Every rank's schedulers are ready (the cross-node collectives of the load are done)."""
        if self.spec.nnodes <= 1:
            self.ready.set()
            return
        if self.spec.leader:
            await self._all_loaded.wait()
            for peer in self._peers.values():
                peer.send({"ready": True})
            self.ready.set()
        else:
            self._peers[0].send({"loaded": self.spec.node_rank})
            await self.ready.wait()

    async def shutdown(self) -> None:
        """(rank 0) The ShutdownReq broadcast: every other rank's schedulers stop and its main process exits; wait
        for them (SHUTDOWN_WAIT_S at most, then they are on their own)."""
        self._leaving = True
        for peer in self._peers.values():
            peer.send({"shutdown": True})
        waits = [asyncio.create_task(p.reader.read()) for p in self._peers.values()]
        if waits:
            await asyncio.wait(waits, timeout=SHUTDOWN_WAIT_S)
        for task in waits:
            task.cancel()
        await self.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for peer in self._peers.values():
            peer.writer.close()
        if self.gate_server is not None:
            await self.gate_server.cleanup()

    def watch(self, stop_engine: Callable[[], object], cleanup: Callable[[], None]) -> asyncio.Task[None]:
        """Die after peer_loss_exit_s once a peer is lost (the engine stops at once: its collective hangs)."""

        async def die_when_lost() -> None:
            await self.lost.wait()
            stop_engine()
            await asyncio.sleep(self.spec.peer_loss_exit_s)
            running_leader = self.spec.leader and self.ready.is_set()
            die_like_sglang(
                self.log, self.lost_reason, self.spec.local_ranks[0], cleanup, running_leader=running_leader
            )

        task = asyncio.create_task(die_when_lost(), name="peer-loss")
        self._tasks.append(task)
        return task


def die_like_sglang(
    log: Log, error: str, tp_rank: int, cleanup: Callable[[], None], *, running_leader: bool
) -> NoReturn:
    """A scheduler exception as SGLang handles it: the scheduler logs it and SIGQUITs its main process, whose handler
    (the launch-phase one, or the running-phase one of a rank 0 that serves) kills the process tree, itself
    included: SIGKILL (exit 137). For a lost peer, a group that did not form, a PD peer that does not match."""
    rank = tp_rank
    log(
        "Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 6364, in '
        "run_scheduler_process\n"
        f"{error}\n",
        f"TP{rank}",
    )
    if running_leader:
        log("SIGQUIT received. signum=None, frame=None. It usually means one child failed.", "")
    else:
        log("Received sigquit from a child process. It usually means the child failed.", "")
    pid = os.getpid()
    log(f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}", "")
    with contextlib.suppress(Exception):
        cleanup()
    sys.stdout.flush()
    os.kill(pid, signal.SIGKILL)
    raise SystemExit(137)  # not reached


# --- a rank >= 1 once loaded ------------------------------------------------------------------------------------


def dummy_app(
    enable_metrics: bool, scheduler_metrics: Callable[[], tuple[bytes, str]] | None = None
) -> web.Application:
    """launch_dummy_health_check_server: no tokenizer, no /generate, health that reflects nothing. Its /metrics shows
    this node's schedulers only with --enable-metrics-for-all-schedulers (`scheduler_metrics`): else only
    attention-TP rank 0 records them, and a node of ranks >= 1 has none."""

    async def ok(request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def metrics(request: web.Request) -> web.Response:
        if scheduler_metrics is not None:
            body, content_type = scheduler_metrics()
            return web.Response(body=body, headers={"Content-Type": content_type})
        return web.Response(body=b"", headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    app = web.Application(middlewares=[fastapi_errors])
    for path in ("/ping", "/health", "/health_generate"):
        app.router.add_get(path, ok)
    if enable_metrics:
        app.router.add_get("/metrics", metrics)
    return app


async def serve_follower(
    group: Group, on_exit: Callable[[], Any], scheduler_metrics: Callable[[], tuple[bytes, str]] | None = None
) -> int:
    """A rank >= 1 after every rank loaded: the dummy server until rank 0's ShutdownReq (exit 0) or a lost peer
    (the watch kills the process). SIGTERM is logged and ignored, as 0.5.23's non-zero ranks do."""
    spec = group.spec
    loop = asyncio.get_running_loop()

    def ignore_sigterm() -> None:
        group.log(
            f"SIGTERM received on node_rank {spec.node_rank}; waiting for the rank-0 ShutdownReq broadcast to stop "
            "the schedulers.",
            "",
        )

    loop.add_signal_handler(signal.SIGTERM, ignore_sigterm)
    app = dummy_app(spec.enable_metrics, scheduler_metrics)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, spec.host, spec.port, reuse_address=True).start()
    group.log(f"Dummy health check server started in background thread at {spec.host}:{spec.port}", "")
    try:
        await group.shut_down.wait()
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
    for rank in spec.local_ranks:
        group.log(f"Scheduler or DataParallelController {os.getpid() + 1 + rank} terminated with 0", "")
    result = on_exit()
    if asyncio.iscoroutine(result):
        await result
    await runner.cleanup()
    await group.close()
    group.log(f"Dummy health check server stopped at {spec.host}:{spec.port}", "")
    return 0
