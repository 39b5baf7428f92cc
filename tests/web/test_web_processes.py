"""The web server's processes: `connect --web` serves `connect` (one console process per connection, at most
--max-connections), and `demo --web` leaves nothing behind however it ends (like tests/sim/test_demo_leaves_nothing.py:
the simulator, the console processes of the open tabs, the SGLang and web ports), SIGKILL included: its consoles get
SIGTERM from the kernel (parent-death signal) and the demo's supervisor guard stops the simulator."""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path

import aiohttp
import pytest

from tests.sim.test_demo_leaves_nothing import GONE_DEADLINE_S, Proc, RunningDemo, inspect
from tests.support.demo import running_demo
from tests.web.support import OPSCONSOLE, WebRun, demo_web_argv, eventually, first_screen, serving

pytestmark = pytest.mark.system  # real processes (tests/tiers.py)

DRAW_DEADLINE_S = 90.0
SIZE = "?width=100&height=30"


def test_connect_web_serves_connect_up_to_the_limit(tmp_path: Path, leftovers: list[Proc]) -> None:
    with running_demo(tmp_path / "ws") as demo:  # its helpers run their own event loops: this test is not async
        argv = [*OPSCONSOLE, "--workspace", str(demo.workspace), "connect", "demo", "--web", "--max-connections", "1"]
        with serving(argv) as run:
            assert "(read-only)" not in "".join(run.output) and "WARNING" not in "".join(run.output)
            asyncio.run(tabs_of_connect_web(run, leftovers))
            run.proc.send_signal(signal.SIGTERM)
            assert run.proc.wait(GONE_DEADLINE_S) == 0


async def tabs_of_connect_web(run: WebRun, leftovers: list[Proc]) -> None:
    """One tab at a time: a second is refused, so is one without the token; a closed tab and a quit (q) end their
    consoles."""
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(run.websocket + SIZE) as tab:
            await first_screen(tab, b"sglang-demo.service", DRAW_DEADLINE_S)
            consoles = run.consoles()
            leftovers += consoles
            assert len(consoles) == 1
            argv_seen = Path(f"/proc/{consoles[0].pid}/cmdline").read_bytes().split(b"\0")
            assert argv_seen[-3:] == [b"connect", b"demo", b""] and b"--web" not in argv_seen
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(run.websocket + SIZE)
            assert refused.value.status == 503
            with pytest.raises(aiohttp.WSServerHandshakeError) as no_token:
                await http.ws_connect(run.origin.replace("http", "ws") + "ws" + SIZE)
            assert no_token.value.status == 403
        # the tab closed: its console ends, and once the server has its slot back (its page no longer says "all
        # sessions in use": the slot is given back after the process is reaped), a new tab gets one
        await eventually(lambda: not consoles[0].alive(), GONE_DEADLINE_S, lambda: "the console outlived its tab")
        deadline = asyncio.get_running_loop().time() + GONE_DEADLINE_S
        while True:
            async with http.get(run.url) as page:
                if page.status != 503:
                    break
            assert asyncio.get_running_loop().time() < deadline, "the slot of the closed tab never came back"
            await asyncio.sleep(0.05)
        async with http.ws_connect(run.websocket + SIZE) as tab:
            await first_screen(tab, b"sglang-demo.service", DRAW_DEADLINE_S)
            leftovers += run.consoles()
            # q in the tab: the console quits and the server closes the tab's connection
            await tab.send_json(["stdin", "q"])
            closed = await tab.receive(timeout=GONE_DEADLINE_S)
            while closed.type == aiohttp.WSMsgType.BINARY:
                closed = await tab.receive(timeout=GONE_DEADLINE_S)
            assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED), closed
        await eventually(lambda: not run.consoles(), GONE_DEADLINE_S, lambda: "the console did not quit")


def nobody_listens(port: int) -> bool:
    """No socket listens on the port. Connections closed there may wait in TIME_WAIT (the consoles polled the server
    until it went), which a plain bind counts as taken: SO_REUSEADDR tells the two apart, as a restarted server does."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def assert_nothing_left(demo: RunningDemo, web_port: int) -> None:
    running = lambda: [p.pid for p in demo.processes if p.alive()]  # noqa: E731
    await eventually(lambda: not running(), GONE_DEADLINE_S, lambda: f"still running: {running()}")
    for port in (demo.port, web_port):
        await eventually(lambda p=port: nobody_listens(p), GONE_DEADLINE_S, lambda p=port: f"port {p} still listens")


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
async def test_a_signalled_demo_web_leaves_no_process_behind(
    tmp_path: Path, sig: signal.Signals, leftovers: list[Proc]
) -> None:
    with serving(demo_web_argv(tmp_path)) as run:
        web_port = int(run.origin.rsplit(":", 1)[1].strip("/"))
        async with aiohttp.ClientSession() as http, http.ws_connect(run.websocket + SIZE) as tab:
            await first_screen(tab, b"sglang-demo.service", DRAW_DEADLINE_S)  # a console runs for this tab
            demo = inspect(run.proc.pid, tmp_path)
            leftovers += demo.processes
            assert run.consoles() and all(c.pid in [p.pid for p in demo.processes] for c in run.consoles())
            run.proc.send_signal(sig)
            code = run.proc.wait(GONE_DEADLINE_S)
        await assert_nothing_left(demo, web_port)
        rest = run.read_rest()
        if sig == signal.SIGKILL:
            assert code == -signal.SIGKILL
        else:  # stopped like Ctrl-C: consoles ended, the simulator stopped through the unit, the demo's files gone
            assert code == 0, rest
            assert "Stopping the consoles ..." in rest and "Demo host stopped." in rest, rest
            assert not (tmp_path / "profiles" / "demo.toml").exists()
