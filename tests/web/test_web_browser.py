"""`opsconsole demo --web` in headless Chromium, as an operator uses it: the address it printed opens the console,
keys work, the dashboard is live, the page asks nothing of any other server; the address without its token, or with
a wrong one, is refused; a tab past --max-connections is refused with a page that says why, and closing a tab ends
its console and frees its place. With --read-only the console in the browser is read-only."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.sim.test_demo_leaves_nothing import Proc
from tests.support.browser import chromium
from tests.web.support import demo_web_argv, eventually, serving

pytestmark = pytest.mark.system  # real processes: the demo host, the web server, its consoles, Chromium

DASHBOARD_DEADLINE_S = 90.0  # a console process starts (Python, Textual) and the demo server comes up
KEY_DEADLINE_S = 30.0


def dashboard(screen: str) -> bool:
    return "healthy" in screen and "speculative" in screen and "journal" in screen


async def test_the_demo_in_a_browser(tmp_path: Path, leftovers: list[Proc]) -> None:
    with serving(demo_web_argv(tmp_path, "--read-only", "--max-connections", "1")) as run:
        assert run.url.startswith("http://127.0.0.1:")
        assert "(read-only)" in "".join(run.output)
        async with chromium(width=1200, height=860) as browser:
            tab = await browser.new_page()
            assert await tab.open(run.url) == 200
            screen = await tab.wait_for_screen(dashboard, DASHBOARD_DEADLINE_S, "the dashboard")
            assert "demo" in screen.splitlines()[0]  # the header names the host
            # the page focused the console: keys need no click, and Textual draws the footer (only while focused)
            await tab.wait_for_screen(lambda s: "Help" in s.splitlines()[-1], KEY_DEADLINE_S, "the footer")
            leftovers += run.consoles()

            await tab.press("?")
            keys = await tab.wait_for_screen(lambda s: "Keys —" in s, KEY_DEADLINE_S, "the help screen")
            assert "read-only: restarting changes the host" in keys  # --read-only reached the console in the tab
            await tab.press("Escape")
            await tab.wait_for_screen(lambda s: dashboard(s) and "Keys —" not in s, KEY_DEADLINE_S, "the dashboard")
            shot = await tab.screenshot(tmp_path / "browser.png")
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

            # Everything the page loaded (page, script, stylesheet, font, websocket) came from this server,
            # under the token: nothing reaches another host.
            requested = tab.requested()
            assert any(u.endswith("/ws?" + u.split("?")[-1]) for u in requested if u.startswith("ws://")), requested
            outside = [u for u in requested if not u.split("://", 1)[-1].startswith(run.url.split("://", 1)[1])]
            assert not outside, outside

            other = await browser.new_page()
            assert await other.open(run.origin) == 403
            assert "full address, with the token" in await other.text()
            assert await other.open(run.origin + "not-the-token/") == 403
            assert await other.open(run.url.replace(run.url[-6:-1], "aaaaa")) == 403

            assert await other.open(run.url) == 503  # the first tab holds the one console allowed
            assert "All 1 console sessions of this server are in use" in await other.text()
            assert len(run.consoles()) == 1

            held = run.consoles()
            await tab.close()  # the tab goes: its console ends and its place is free
            await eventually(lambda: not any(p.alive() for p in held), 30, lambda: f"console still runs: {held}")
            # The server frees the place once it has seen its console end, a moment after the process is gone
            # (503 there once, with a core busy): asked again until then.
            deadline = time.monotonic() + 30
            while (status := await other.open(run.url)) == 503 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert status == 200
            await other.wait_for_screen(dashboard, DASHBOARD_DEADLINE_S, "the dashboard in the second tab")
