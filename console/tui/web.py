"""`connect --web` and `demo --web`: the console in a browser, served through textual-serve.

textual-serve starts one console process per browser connection (its AppService, with Textual's web driver) and
relays its screen over a websocket to xterm.js in the page. It has no authentication and no limit of its own, and
its page template loads a web font from an outside host. What an operator's console needs is added here:

- A token made at each start: every path lives under /TOKEN/ (the page, its script, stylesheet and fonts, the
  websocket); any other path gets 403 and a page that says where the right address is. The token is a path
  segment, not a query parameter, because textual.js appends its own `?width=&height=` to the websocket address.
- A limit on connections (each is a console process with its own SSH connections to every host): past it, the page
  and the websocket get 503 and a page that says so.
- A page of our own: textual-serve's script, stylesheet and font, from this server only (nothing in the page may
  reach another host: many jump hosts reach nothing outside).
- Consoles that end with the server: each is asked to quit, then terminated; each runs in its own session (Ctrl-C in
  the server's terminal reaches the server, which stops them) and gets SIGTERM from the kernel if the server is
  killed outright (PR_SET_PDEATHSIG), which Textual's web driver takes as quit.

The pure parts (token check, connection slots, URL, the options' checks) come first; the server after them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import functools
import hmac
import html
import ipaddress
import json
import os
import secrets
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from console import hints
from console.errors import ExitCode, UsageError

DEFAULT_BIND = "127.0.0.1"
DEFAULT_MAX_CONNECTIONS = 4
QUIT_WAIT_S = 5.0  # a console asked to quit is terminated after this, and killed after as long again
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})


# --- pure parts ---------------------------------------------------------------------------------------------------


def new_token() -> str:
    """This start's token: 192 random bits, URL-safe (it is a path segment)."""
    return secrets.token_urlsafe(24)


def token_of(path: str) -> str:
    """The first segment of a request path: where the token must be ("/abc/ws" -> "abc", "/" -> "")."""
    return path.lstrip("/").split("/", 1)[0]


def token_matches(path: str, token: str) -> bool:
    """Whether the path starts with this start's token (compared in constant time)."""
    return hmac.compare_digest(token_of(path).encode(), token.encode())


@dataclass
class Slots:
    """Console processes running at once, at most `limit` (each browser connection runs one)."""

    limit: int
    in_use: int = 0

    @property
    def full(self) -> bool:
        return self.in_use >= self.limit

    def take(self) -> bool:
        """Take a slot for a new connection; False when all are in use."""
        if self.full:
            return False
        self.in_use += 1
        return True

    def give_back(self) -> None:
        self.in_use = max(0, self.in_use - 1)


def is_loopback(bind: str) -> bool:
    """Whether only this machine can reach the address (127.0.0.0/8, ::1, localhost)."""
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def page_url(bind: str, port: int, token: str, *, hostname: str) -> str:
    """The address to open: on a wildcard bind (all interfaces), this machine's name stands for the address."""
    host = hostname if bind in WILDCARD_BINDS else bind
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return f"http://{host}:{port}/{token}/"


def exposure_warning(bind: str, port: int, *, read_only: bool) -> str | None:
    """What an operator must know before serving the console beyond this machine (None on loopback)."""
    if is_loopback(bind):
        return None
    can = (
        "see every host's state and journal"
        if read_only
        else "restart production services (apply, restore, tune) and read their journals"
    )
    return (
        f"WARNING: serving on {bind or '*'}:{port}: whoever reaches this address with the token can {can}. "
        f"The default ({DEFAULT_BIND}) with an SSH tunnel (ssh -L {port}:127.0.0.1:{port} THIS-HOST) reaches only "
        "those who can log in here" + ("." if read_only else "; --read-only serves a console that changes nothing.")
    )


def check_options(args: argparse.Namespace) -> None:
    """UsageError for web options without --web, or out of range."""
    given = [
        name
        for name, value in (
            ("--bind", args.bind),
            ("--web-port", args.web_port),
            ("--max-connections", args.max_connections),
        )
        if value is not None
    ]
    if not args.web:
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --web (the console in a browser)")
        return
    if args.web_port is not None and not 0 <= args.web_port <= 65535:
        raise UsageError(f"--web-port must be between 1 and 65535 (0: a free one), not {args.web_port}")
    if args.max_connections is not None and args.max_connections < 1:
        raise UsageError(f"--max-connections must be 1 or more, not {args.max_connections}")


def console_argv(
    workspace: Path,
    targets: list[str],
    *,
    read_only: bool,
    refresh: float | None,
    ssh_config: str | None,
    prometheus: str | None = None,
) -> list[str]:
    """The command each browser connection runs: `opsconsole connect` with the same targets and options."""
    argv = [sys.executable, "-m", "console", "--workspace", str(workspace), "connect", *targets]
    if read_only:
        argv.append("--read-only")
    if refresh is not None:
        argv += ["--refresh", repr(refresh)]
    if ssh_config is not None:
        argv += ["--ssh-config", ssh_config]
    if prometheus is not None:
        argv += ["--prometheus", prometheus]
    return argv


# --- the page -----------------------------------------------------------------------------------------------------

# textual-serve's static files that the page uses, served by name (nothing else of that folder is reachable).
STATIC_FILES = {
    "textual.js": ("js/textual.js", "text/javascript"),
    "xterm.css": ("css/xterm.css", "text/css"),
    "RobotoMono.ttf": ("fonts/RobotoMono-VariableFont_wght.ttf", "font/ttf"),
    "RobotoMono-Italic.ttf": ("fonts/RobotoMono-Italic-VariableFont_wght.ttf", "font/ttf"),
}

# Every address in it is relative to /TOKEN/. textual.js reads the websocket address from data-session-websocket-url
# at window.onload; the inline script sets it from the page's own address (right behind a tunnel or a proxy).
PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="icon" href="data:,">
<link rel="preload" href="static/RobotoMono.ttf" as="font" type="font/ttf" crossorigin>
<link rel="stylesheet" href="static/xterm.css">
<style>
@font-face {{ font-family: "Roboto Mono"; font-style: normal; font-weight: 100 700;
  src: url("static/RobotoMono.ttf") format("truetype"); }}
@font-face {{ font-family: "Roboto Mono"; font-style: italic; font-weight: 100 700;
  src: url("static/RobotoMono-Italic.ttf") format("truetype"); }}
html, body {{ margin: 0; height: 100%; background: #0c181f; overflow: hidden; }}
#terminal {{ position: absolute; inset: 0; }}
#ended {{ display: none; position: absolute; inset: 0; z-index: 10; align-items: center; justify-content: center;
  flex-direction: column; background: rgba(12, 24, 31, 0.9); color: #eee; font: 16px "Roboto Mono", monospace; }}
body.-closed #ended {{ display: flex; }}
#ended button {{ margin: 16px; padding: 12px 28px; font: inherit; color: #eee; background: #1e5a7a; border: 0; }}
</style>
<script src="static/textual.js"></script>
</head>
<body>
<div id="ended"><div>This console has ended.</div>
<button type="button" onclick="location.reload()">Open a new one</button></div>
<div id="terminal" class="textual-terminal" data-font-size="{font_size}"></div>
<script>
const ws = new URL("ws", location.href);
ws.protocol = location.protocol === "https:" ? "wss:" : "ws:";
ws.search = "";
document.getElementById("terminal").dataset.sessionWebsocketUrl = ws.href;
// Keys go to the console without a click first; and Textual draws its footer only while the app has focus. Once
// the console has drawn (textual.js marks the body -first-byte), focus xterm's input.
new MutationObserver((_changes, observer) => {{
  if (!document.body.classList.contains("-first-byte")) return;
  observer.disconnect();
  const input = document.querySelector(".xterm-helper-textarea");
  if (input) input.focus();
}}).observe(document.body, {{ attributes: true, attributeFilter: ["class"] }});
</script>
</body>
</html>
"""

NOTICE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body {{ background: #0c181f; color: #eee; font: 16px monospace; margin: 48px; max-width: 80ch; }}</style>
</head><body><h1>{title}</h1><p>{text}</p></body></html>
"""

WRONG_TOKEN = (
    f"This console needs its full address, with the token that <code>{hints.CONNECT_WEB.line()}</code> (or "
    f"<code>{hints.DEMO_WEB.line()}</code>) printed when it started. Each start makes a new token: after a restart, "
    "use the address it printed then."
)


def notice(title: str, text: str) -> str:
    return NOTICE.format(title=html.escape(title), text=text)


def full_text(limit: int) -> str:
    return (
        f"All {limit} console sessions of this server are in use: each browser tab holds a console process with its "
        "own connections to the hosts. Close a tab that has this console open (or press q there), then reload; "
        "or restart the server with a larger --max-connections."
    )


# --- the server ---------------------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None) if sys.platform == "linux" else None


def _end_with_server(server_pid: int) -> Callable[[], None]:
    """For each console process, between fork and exec: SIGTERM from the kernel when the server dies. The kernel
    sends it when the forking *thread* ends: the server forks from its event loop, on the main thread."""

    def in_child() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != server_pid:  # the server died before the request took effect
            os._exit(1)

    return in_child


@functools.cache
def _console_process_class() -> type[Any]:
    """textual-serve's AppService, starting the console from an argv (no shell) in its own session, tied to the
    server's life. Made here so that textual_serve is imported only when --web is used."""
    from textual_serve.app_service import AppService

    class ConsoleProcess(AppService):
        def __init__(self, argv: list[str], **kwargs: Any) -> None:
            super().__init__(" ".join(argv), **kwargs)
            self.argv = argv
            self.process: asyncio.subprocess.Process | None = None

        async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._build_environment(width=width, height=height),
                start_new_session=True,
                preexec_fn=_end_with_server(os.getpid()),
            )
            assert self.process.stdin is not None
            self._process, self._stdin = self.process, self.process.stdin  # what AppService.run() reads from
            return self.process

    return ConsoleProcess


class WebConsole:
    """The web server: the page and one console process per websocket, all under the token, at most
    max_connections at once. start() listens; close() ends every console and stops listening."""

    def __init__(
        self,
        argv: list[str],
        *,
        token: str | None = None,
        bind: str = DEFAULT_BIND,
        port: int = 0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        title: str = "opsconsole",
    ) -> None:
        self.argv = argv
        self.token = token or new_token()
        self.bind = bind
        self.port = port
        self.title = title
        self.slots = Slots(max_connections)
        self._websockets: set[Any] = set()
        self._all_ended = asyncio.Event()
        self._all_ended.set()
        self._runner: Any = None

    def application(self) -> Any:
        """The aiohttp application: every route under /TOKEN/, the guard in front of all of them."""
        from aiohttp import web

        @web.middleware
        async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
            if not token_matches(request.path, self.token):
                return _html(notice("opsconsole: wrong address", WRONG_TOKEN), 403)
            response: web.StreamResponse = await handler(request)
            return response

        async def to_folder(_request: web.Request) -> web.StreamResponse:
            raise web.HTTPFound(f"/{self.token}/")  # the page's addresses are relative to the folder

        app = web.Application(middlewares=[guard])
        prefix = f"/{self.token}"
        app.router.add_get(prefix, to_folder)
        app.router.add_get(prefix + "/", self._page)
        app.router.add_get(prefix + "/ws", self._websocket)
        app.router.add_get(prefix + "/static/{name}", self._static)
        return app

    async def start(self) -> int:
        """Listen; returns the port (a free one when port is 0)."""
        from aiohttp import web

        runner = web.AppRunner(self.application(), access_log=None)  # no log line carries the token
        await runner.setup()
        site = web.TCPSite(runner, self.bind, self.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.port

    def url(self) -> str:
        return page_url(self.bind, self.port, self.token, hostname=socket.gethostname())

    async def close(self) -> None:
        """End every console (its websocket closed, the console asked to quit, then terminated), stop listening."""
        for websocket in list(self._websockets):
            with contextlib.suppress(Exception):
                await websocket.close(code=1001, message=b"the server stops")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._all_ended.wait(), 3 * QUIT_WAIT_S)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _full(self) -> Any:
        return _html(notice("opsconsole: all sessions in use", full_text(self.slots.limit)), 503)

    async def _page(self, request: Any) -> Any:
        if self.slots.full:
            return self._full()
        size = request.query.get("fontsize", "")
        font_size = int(size) if size.isdigit() and 6 <= int(size) <= 64 else 16
        return _html(PAGE.format(title=html.escape(self.title), font_size=font_size))

    async def _static(self, request: Any) -> Any:
        from aiohttp import web

        entry = STATIC_FILES.get(request.match_info["name"])
        if entry is None:
            raise web.HTTPNotFound()
        path, content_type = entry
        return web.FileResponse(_static_root() / path, headers={"Content-Type": content_type})

    async def _websocket(self, request: Any) -> Any:
        """One browser connection: a slot, a console process, the relay between them until either ends."""
        from aiohttp import WSMsgType, web
        from textual_serve.download_manager import DownloadManager

        if not self.slots.take():
            return self._full()
        self._all_ended.clear()
        websocket = web.WebSocketResponse(heartbeat=15)
        console = _console_process_class()(
            self.argv,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=DownloadManager(),
        )
        self._websockets.add(websocket)
        watch: asyncio.Task[None] | None = None
        try:
            await websocket.prepare(request)
            await console.start(_size(request, "width", 80), _size(request, "height", 24))
            watch = asyncio.create_task(_close_when_ended(console, websocket))
            async for message in websocket:  # the browser's keys, size, focus (textual-serve's protocol)
                if message.type == WSMsgType.TEXT:
                    with contextlib.suppress(ValueError):  # not JSON: not from textual.js, ignored
                        await _relay(json.loads(message.data), console, websocket)
        finally:
            await asyncio.shield(_end(console))
            if watch is not None:
                watch.cancel()
            await websocket.close()
            self._websockets.discard(websocket)
            self.slots.give_back()
            if self.slots.in_use == 0:
                self._all_ended.set()
        return websocket


def _html(text: str, status: int = 200) -> Any:
    from aiohttp import web

    return web.Response(text=text, status=status, content_type="text/html", headers={"Cache-Control": "no-store"})


async def _close_when_ended(console: Any, websocket: Any) -> None:
    """A console that ended by itself (q, or a crash) ends its browser session: the page says so."""
    await console.process.wait()
    await websocket.close()


async def _relay(envelope: object, console: Any, websocket: Any) -> None:
    """One message of textual.js to its console: ["stdin", text], ["resize", {width, height}], ["ping", x],
    ["blur"], ["focus"]; anything else is ignored."""
    if not isinstance(envelope, list) or not envelope:
        return
    kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
    if kind == "stdin" and isinstance(data, str):
        await console.send_bytes(data.encode("utf-8"))
    elif kind == "resize" and isinstance(data, dict):
        width, height = data.get("width"), data.get("height")
        if isinstance(width, int) and isinstance(height, int) and 0 < width < 1000 and 0 < height < 1000:
            await console.set_terminal_size(width, height)
    elif kind == "ping":
        await websocket.send_json(["pong", data])
    elif kind == "blur":
        await console.blur()
    elif kind == "focus":
        await console.focus()


async def _end(console: Any) -> None:
    """Ask the console to quit; terminate it if it has not after QUIT_WAIT_S, kill it after as long again."""
    process = console.process
    if process is None:
        return
    with contextlib.suppress(Exception):
        await asyncio.wait_for(console.stop(), QUIT_WAIT_S)
    for stop in (process.terminate, process.kill):
        if process.returncode is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            stop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), QUIT_WAIT_S)


def _size(request: Any, name: str, default: int) -> int:
    value = request.query.get(name, "")
    return int(value) if value.isdigit() and 0 < int(value) < 1000 else default


def _static_root() -> Path:
    import textual_serve

    return Path(textual_serve.__file__).resolve().parent / "static"


# --- running it ---------------------------------------------------------------------------------------------------

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def say(text: str, *, stream: TextIO | None = None) -> None:
    """Print to the operator's terminal, which may be gone (closed window, dropped SSH): serving goes on."""
    with contextlib.suppress(OSError):
        print(text, file=stream or sys.stdout, flush=True)


def server_for(args: argparse.Namespace, argv: list[str], *, title: str) -> WebConsole:
    return WebConsole(
        argv,
        bind=args.bind if args.bind is not None else DEFAULT_BIND,
        port=args.web_port or 0,
        max_connections=args.max_connections or DEFAULT_MAX_CONNECTIONS,
        title=title,
    )


async def serve(server: WebConsole, *, verb: str, read_only: bool) -> int:
    """Serve until Ctrl-C, SIGTERM or SIGHUP (the terminal closed), then end every console. Exit 1 when the address
    cannot be listened on (in use, not this machine's, a port below 1024 without the right)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            port = await server.start()
        except OSError as exc:
            say(
                f"opsconsole {verb}: cannot listen on {server.bind}:{server.port}: {exc.strerror or exc}; "
                "pick another --web-port (or leave it out for a free one) or --bind",
                stream=sys.stderr,
            )
            return ExitCode.FAILED
        warning = exposure_warning(server.bind, port, read_only=read_only)
        if warning:
            say(f"opsconsole {verb}: {warning}", stream=sys.stderr)
        say(f"The console in a browser{' (read-only)' if read_only else ''}: {server.url()}")
        say(
            f"  one console per browser tab, at most {server.slots.limit} at once (--max-connections); the address "
            "holds this start's token: give it only to those who may act on these hosts."
        )
        say("Ctrl-C stops the server and every console it started.")
        await stop.wait()
        say("Stopping the consoles ...")
        return ExitCode.OK
    finally:
        await server.close()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
