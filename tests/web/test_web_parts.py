"""console/tui/web.py's pure parts (token, slots, addresses, options, the console's command line) and its guard, on
the aiohttp application in this process: every path outside the token is refused, a full server refuses the page
and the websocket with a page that says why. Starting consoles (a process per connection) is tests/web's system
tier."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from console.cli import build_parser
from console.errors import UsageError
from console.tui import web

TOKEN = "tok-" + "x" * 28


def test_a_new_token_each_start_long_enough_and_usable_in_a_path() -> None:
    tokens = {web.new_token() for _ in range(50)}
    assert len(tokens) == 50
    for token in tokens:
        assert len(token) >= 32 and re.fullmatch(r"[A-Za-z0-9_-]+", token)


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        (f"/{TOKEN}/", True),
        (f"/{TOKEN}", True),
        (f"/{TOKEN}/ws", True),
        (f"/{TOKEN}/static/textual.js", True),
        ("/", False),
        ("", False),
        ("/ws", False),
        (f"/{TOKEN[:-1]}/", False),
        (f"/{TOKEN}x/", False),
        (f"/static/{TOKEN}/", False),
        (f"//{TOKEN}/", True),  # aiohttp hands the path as sent; the first segment is still the token
    ],
)
def test_the_token_is_the_first_path_segment(path: str, ok: bool) -> None:
    assert web.token_matches(path, TOKEN) is ok


def test_slots_count_connections_up_to_the_limit() -> None:
    slots = web.Slots(2)
    assert slots.take() and slots.take()
    assert slots.full and not slots.take() and slots.in_use == 2
    slots.give_back()
    assert not slots.full and slots.take()
    for _ in range(5):
        slots.give_back()
    assert slots.in_use == 0


@pytest.mark.parametrize(
    ("bind", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True), ("0.0.0.0", False),
     ("::", False), ("10.1.2.3", False), ("gpu-jump", False)],
)  # fmt: skip
def test_only_loopback_addresses_stay_on_this_machine(bind: str, loopback: bool) -> None:
    assert web.is_loopback(bind) is loopback
    warning = web.exposure_warning(bind, 8080, read_only=False)
    if loopback:
        assert warning is None
    else:
        assert warning is not None and "restart production services" in warning and "--read-only" in warning


def test_the_warning_for_a_read_only_console_says_what_it_shows() -> None:
    warning = web.exposure_warning("0.0.0.0", 8080, read_only=True)
    assert warning is not None and "state and journal" in warning and "restart" not in warning


@pytest.mark.parametrize(
    ("bind", "url"),
    [
        ("127.0.0.1", f"http://127.0.0.1:8080/{TOKEN}/"),
        ("::1", f"http://[::1]:8080/{TOKEN}/"),
        ("0.0.0.0", f"http://jump1:8080/{TOKEN}/"),
        ("::", f"http://jump1:8080/{TOKEN}/"),
        ("10.0.0.5", f"http://10.0.0.5:8080/{TOKEN}/"),
    ],
)
def test_the_url_holds_the_token_and_a_reachable_name(bind: str, url: str) -> None:
    assert web.page_url(bind, 8080, TOKEN, hostname="jump1") == url


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["connect", "gpu1", "--bind", "0.0.0.0"], "--bind only apply with --web"),
        (
            ["demo", "--web-port", "8080", "--max-connections", "2"],
            "--web-port, --max-connections only apply with --web",
        ),
        (["connect", "gpu1", "--web", "--max-connections", "0"], "--max-connections must be 1 or more"),
        (["demo", "--web", "--web-port", "70000"], "--web-port must be between 1 and 65535"),
    ],
)
def test_web_options_are_checked_before_anything_starts(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        web.check_options(parse(*argv))


def test_web_options_with_web_pass() -> None:
    web.check_options(parse("connect", "a", "b", "--web", "--bind", "::1", "--web-port", "0", "--max-connections", "3"))
    web.check_options(parse("demo"))


def test_each_browser_tab_runs_connect_with_the_same_targets_and_options(tmp_path: Path) -> None:
    argv = web.console_argv(tmp_path, ["gpu1", "gpu2"], read_only=True, refresh=2.5, ssh_config="/etc/ssh_cfg")
    assert argv == [
        sys.executable, "-m", "console", "--workspace", str(tmp_path), "connect", "gpu1", "gpu2",
        "--read-only", "--refresh", "2.5", "--ssh-config", "/etc/ssh_cfg",
    ]  # fmt: skip
    plain = web.console_argv(tmp_path, ["demo"], read_only=False, refresh=None, ssh_config=None)
    assert plain[-2:] == ["connect", "demo"] and "--web" not in plain


def test_the_page_loads_nothing_from_another_host() -> None:
    """The page and every static file it uses: no absolute address (textual-serve's own template links a web font
    from outside; xterm.css names two sites in a comment, which a browser does not load)."""
    page = web.PAGE.format(title="t", font_size=16)
    assert not re.search(r"https?://|[\"'(=]\s*//", page)  # no absolute address, no scheme-relative one
    assert 'src="static/textual.js"' in page and 'url("static/RobotoMono.ttf")' in page
    for name, (path, _type) in web.STATIC_FILES.items():
        source = (web._static_root() / path).read_bytes()
        if name.endswith((".css", ".js")):
            text = source.decode()
            assert not re.search(r"url\(\s*[\"']?(https?:)?//", text), name
            assert not re.search(r"@import", text), name


async def client_for(server: web.WebConsole) -> TestClient:  # type: ignore[type-arg]
    client = TestClient(TestServer(server.application()))
    await client.start_server()
    return client


async def test_every_path_outside_the_token_is_refused_with_a_page_that_says_why() -> None:
    client = await client_for(web.WebConsole(["unused"], token=TOKEN, max_connections=1))
    try:
        for path in (
            "/",
            "/ws",
            "/static/textual.js",
            "/wrong/",
            f"/{TOKEN[:-1]}/",
            f"/{TOKEN[:-1]}/ws",
            "/favicon.ico",
        ):
            response = await client.get(path, allow_redirects=False)
            assert response.status == 403, path
            assert "full address, with the token" in await response.text()
        websocket_refused = await client.get("/x/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
        assert websocket_refused.status == 403

        page = await client.get(f"/{TOKEN}/")
        assert page.status == 200 and 'class="textual-terminal"' in await page.text()
        folder = await client.get(f"/{TOKEN}", allow_redirects=False)
        assert folder.status == 302 and folder.headers["Location"] == f"/{TOKEN}/"
        script = await client.get(f"/{TOKEN}/static/textual.js")
        assert script.status == 200 and script.headers["Content-Type"].startswith("text/javascript")
        assert (await client.get(f"/{TOKEN}/static/background.png")).status == 404  # only the files the page uses
        assert (await client.get(f"/{TOKEN}/static/..%2F..%2Fserver.py")).status == 404
    finally:
        await client.close()


async def test_a_full_server_refuses_the_page_and_the_websocket() -> None:
    server = web.WebConsole(["unused"], token=TOKEN, max_connections=2)
    client = await client_for(server)
    try:
        server.slots.in_use = 2  # two tabs hold their consoles
        page = await client.get(f"/{TOKEN}/")
        assert page.status == 503
        text = await page.text()
        assert "All 2 console sessions" in text and "--max-connections" in text
        upgrade = await client.get(f"/{TOKEN}/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade"})
        assert upgrade.status == 503
        assert server.slots.in_use == 2  # a refused connection takes no slot
        server.slots.give_back()
        assert (await client.get(f"/{TOKEN}/")).status == 200
    finally:
        await client.close()
