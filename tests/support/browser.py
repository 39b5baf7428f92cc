"""Headless Chromium (Debian's `chromium`, scripts/system-deps.sh) driven over the DevTools protocol, for the tests
of `--web` and the README's screenshot: open a page, read what it says, press keys, read the terminal's text,
save a screenshot, and list every request the page made.

A small client of our own on aiohttp (already a dependency): no driver, and nothing that downloads a browser.
Chromium runs with a new empty profile and without any of its own traffic (no update checks, sync or QUIC).

The terminal's text is read from xterm.js itself: textual.js keeps its terminal object in a closure, so the page's
one instance of textual.js's terminal class (the class with connect/sendSize/fit, found among the variables that
window.onresize's closure sees) is found with the DevTools' Runtime.queryObjects, and its xterm buffer read line by
line. That is the text xterm draws on the canvas: what the browser shows, not what the server sent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",  # tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-port=0",  # Chromium picks a free port and writes it to DevToolsActivePort
)
START_DEADLINE_S = 60.0

# Finds textual.js's terminal objects and keeps their xterm terminals in window.__terminals (see the docstring).
_IS_TERMINAL_CLASS = (
    "function () { const p = this.prototype; return !!(p && p.connect && p.sendSize && p.fit && p.onPong) }"
)
_SCREEN_TEXT = """(() => {
  const term = window.__terminals[0], buffer = term.buffer.active, lines = [];
  for (let row = 0; row < term.rows; row++) {
    const line = buffer.getLine(buffer.viewportY + row);
    lines.push(line ? line.translateToString(true) : "");
  }
  return lines.join("\\n");
})()"""


class CdpError(RuntimeError):
    pass


class Page:
    """One tab, attached through the browser's connection (its own session id)."""

    def __init__(self, browser: Browser, target_id: str, session_id: str) -> None:
        self.browser = browser
        self.target_id = target_id
        self.session_id = session_id
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.changed = asyncio.Event()
        self._has_terminal = False

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        return await self.browser.call(method, session_id=self.session_id, **params)

    async def open(self, url: str, *, deadline_s: float = 30.0) -> int:
        """Load the URL; the HTTP status of the document."""
        self.events.clear()
        await self.call("Page.navigate", url=url)
        await self.wait_for_event("Page.loadEventFired", deadline_s)
        statuses = [
            params["response"]["status"]
            for method, params in self.events
            if method == "Network.responseReceived" and params.get("type") == "Document"
        ]
        assert statuses, f"no document came back for {url}"
        return int(statuses[-1])

    async def wait_for_event(self, method: str, deadline_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + deadline_s
        while True:
            for name, params in self.events:
                if name == method:
                    return params
            left = deadline - time.monotonic()
            assert left > 0, f"no {method} within {deadline_s:.0f} s; events: {[m for m, _ in self.events]}"
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise CdpError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def text(self) -> str:
        """The page's text (a notice page's, for instance)."""
        return str(await self.evaluate("document.body.innerText"))

    def requested(self) -> list[str]:
        """Every address the page asked for: documents, scripts, styles, fonts, images, websockets."""
        urls = [params["request"]["url"] for method, params in self.events if method == "Network.requestWillBeSent"]
        return urls + [params["url"] for method, params in self.events if method == "Network.webSocketCreated"]

    async def _find_terminals(self) -> None:
        handler = await self.call("Runtime.evaluate", expression="window.onresize")
        assert handler["result"].get("objectId"), "the page has no terminal (window.onresize is not set)"
        props = await self.call("Runtime.getProperties", objectId=handler["result"]["objectId"], ownProperties=True)
        scopes = next(p for p in props.get("internalProperties", []) if p["name"] == "[[Scopes]]")
        listed = await self.call("Runtime.getProperties", objectId=scopes["value"]["objectId"], ownProperties=True)
        for scope in listed["result"]:
            if "objectId" not in scope["value"] or scope["name"] == "Global":
                continue
            variables = await self.call(
                "Runtime.getProperties", objectId=scope["value"]["objectId"], ownProperties=True
            )
            for variable in variables["result"]:
                value = variable.get("value", {})
                if value.get("type") != "function":
                    continue
                found = await self.call(
                    "Runtime.callFunctionOn",
                    objectId=value["objectId"],
                    functionDeclaration=_IS_TERMINAL_CLASS,
                    returnByValue=True,
                )
                if not found["result"].get("value"):
                    continue
                prototype = await self.call(
                    "Runtime.callFunctionOn",
                    objectId=value["objectId"],
                    functionDeclaration="function () { return this.prototype }",
                )
                instances = await self.call("Runtime.queryObjects", prototypeObjectId=prototype["result"]["objectId"])
                await self.call(
                    "Runtime.callFunctionOn",
                    objectId=instances["objects"]["objectId"],
                    functionDeclaration="function () { window.__terminals = this.map(t => t.terminal) }",
                )
                self._has_terminal = bool(await self.evaluate("window.__terminals.length"))
                return
        raise AssertionError("textual.js changed: no class with connect/sendSize/fit in window.onresize's closure")

    async def screen(self) -> str:
        """The terminal's rows as xterm holds them."""
        if not self._has_terminal:
            await self._find_terminals()
        return str(await self.evaluate(_SCREEN_TEXT))

    async def wait_for_screen(self, condition: Callable[[str], bool], deadline_s: float, what: str) -> str:
        """Read the terminal until condition(text) holds (every 0.1 s); fail with the last screen after the deadline."""
        deadline = time.monotonic() + deadline_s
        text = ""
        while time.monotonic() < deadline:
            with contextlib.suppress(CdpError):
                if not self._has_terminal:
                    await self._find_terminals()
                text = await self.screen()
                if condition(text):
                    return text
            await asyncio.sleep(0.1)
        raise AssertionError(f"after {deadline_s:.0f} s the browser does not show {what}; it shows:\n{text}")

    async def press(self, key: str) -> None:
        """One key into the terminal: a character, or a named key (Escape, Enter, Tab)."""
        await self.evaluate("window.__terminals[0].focus()")
        named = {"Escape": 27, "Enter": 13, "Tab": 9}
        if key in named:
            common = {"key": key, "code": key, "windowsVirtualKeyCode": named[key]}
            await self.call("Input.dispatchKeyEvent", type="rawKeyDown", **common)
            await self.call("Input.dispatchKeyEvent", type="keyUp", **common)
        else:
            await self.call("Input.dispatchKeyEvent", type="keyDown", key=key, text=key)
            await self.call("Input.dispatchKeyEvent", type="keyUp", key=key)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    async def close(self) -> None:
        await self.browser.call("Target.closeTarget", targetId=self.target_id)


class Browser:
    """Chromium with a new empty profile, and one DevTools connection to it."""

    def __init__(self, *, width: int = 1280, height: int = 800) -> None:
        self.width = width
        self.height = height
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._pages: dict[str, Page] = {}
        self._profile = Path(tempfile.mkdtemp(prefix="opsconsole-chromium-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={self.width},{self.height}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        active = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_DEADLINE_S
        while not (active.exists() and len(active.read_text().splitlines()) >= 2):
            assert self._proc.poll() is None, f"chromium exited ({self._proc.returncode}) before it listened"
            assert time.monotonic() < deadline, f"chromium did not listen within {START_DEADLINE_S:.0f} s"
            await asyncio.sleep(0.05)
        port, path = active.read_text().splitlines()[:2]
        self._http = aiohttp.ClientSession()
        self._ws = await self._http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = message.json()
            if "id" in data:
                waiting = self._waiting.pop(data["id"], None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(data)
            elif (page := self._pages.get(data.get("sessionId", ""))) is not None:
                page.events.append((data["method"], data.get("params", {})))
                page.changed.set()
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(CdpError("chromium closed the DevTools connection"))

    async def call(self, method: str, *, session_id: str | None = None, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session_id is not None:
            message["sessionId"] = session_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        await self._ws.send_json(message)
        reply = await asyncio.wait_for(future, 60)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply["result"]
        return result

    async def new_page(self) -> Page:
        target = await self.call("Target.createTarget", url="about:blank")
        attached = await self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        page = Page(self, target["targetId"], attached["sessionId"])
        self._pages[page.session_id] = page
        for domain in ("Page", "Network", "Runtime"):
            await page.call(f"{domain}.enable")
        await page.call(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        return page

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.call("Browser.close"), 10)
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._http is not None:
            await self._http.close()
        if self._proc is not None:
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:  # its own session: the zygote and renderers go with it
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)


@contextlib.asynccontextmanager
async def chromium(*, width: int = 1280, height: int = 800) -> AsyncIterator[Browser]:
    browser = Browser(width=width, height=height)
    try:
        await browser.start()
        yield browser
    finally:
        await browser.close()
