"""Every `opsconsole ...` line that README.md and docs/*.md show runs as written on the demo (issue 43): a documented
command that fails fails here.

The lines are read out of the pages (tests/support/doc_commands.py); synopses and verb mentions are held to the CLI's
parser instead (tests/test_docs_commands.py). What a line names is mapped to the demo's, and what it needs is made
first, generically (tests/support/doc_runs.py): its hosts are profiles of the one demo host, its @GROUP a group of
them, its files made under the names it gives, its run labels and snapshots recorded first. The line's own words
are run as they are, after `--workspace` (the run's own folder); the only words added are the size overrides of
doc_runs.OVERRIDES, each with why, which the test's name and any failure show.

The demo host is shared by the module: `opsconsole demo --no-ui`, its unit then set up (behind the console's back,
as tests/tune/simhost.py does) with the stand-in 20x faster than the profile (`--sim-speedup 20 --stream-interval
8`: a level of a benchmark takes a second, not a minute) and with `--collect-tokens-histogram` (SGLang 0.5.9 records
the token histograms `--shape-from-server` reads only with it, as docs/traffic.md says a host must run). Lines that
watch the server's traffic get requests sent to it meanwhile, as a production host has.

The console's lines (connect, demo) are checked to start and draw: in a real terminal (tmux), then quit with q, exit
0; `--web` served, a browser tab's websocket gets the console drawn, then Ctrl-C, exit 0; `demo --no-ui` until it
says it is up, then Ctrl-C, exit 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from console.sglang.unit import UnitFile
from console.sim.datasets import chat_conversations, code_prompts, mooncake_trace
from tests.sim.test_demo_leaves_nothing import read_until
from tests.support.cli_run import finish_cli, run_cli, start_cli
from tests.support.demo import OPSCONSOLE, Demo, running_demo
from tests.support.doc_commands import doc_commands
from tests.support.doc_runs import CannotRun, Plan, plan
from tests.tui.test_e2e import Terminal
from tests.tune.simhost import install
from tests.web.support import first_screen, serving

pytestmark = pytest.mark.system

SPEEDUP = "20"
DRAWN = re.compile(r"\.service active/running")  # the dashboard's header once it has read its host's unit
RUN_TIMEOUT_S = 240.0
START_S = 90.0  # a console or a demo host drawn / up
EXIT_LINE = re.compile(r"\[exit status (\d+)\]")
RECORDS_LINE = re.compile(r"(?m)^records appended to (.*)$")
# A verb that runs until stopped: what it says once it is up, and its exit status after Ctrl-C (console.errors: the
# demo stops what it started and ends 0; logs -f ends as interrupted, 130).
READY = {"demo": ("Ctrl-C stops the demo", 0), "logs": ("\n", 130)}
# The lines that wait long on real time (tests/tiers.py), by verb: a tune's restarts and levels. Measured on the 2-core
# VM beside other work: docs/tune.md's grid 83 s, the README's predict strategy 51 s, the others 10-25 s.
LONG_S = {"tune": 85}


def _runs() -> list[object]:
    """One pytest param per distinct run: lines that run the same on the demo (hosts' names aside) run once."""
    grouped: dict[tuple[str, ...], list[Plan]] = {}
    params: list[object] = []
    for command in doc_commands():
        if command.kind != "run":
            continue
        try:
            made = plan(command)
        except (CannotRun, AssertionError) as exc:
            params.append(pytest.param(None, exc, id=command.where))
            continue
        grouped.setdefault(made.key, []).append(made)
    for same in grouped.values():
        first = same[0]
        marks = [pytest.mark.long(LONG_S[first.verb])] if first.verb in LONG_S else []
        params.append(pytest.param(same, None, id=f"{first.command.where}-{first.verb}", marks=marks))
    return params


@dataclass
class Site:
    """The shared demo host: its workspace's profile and unit, the server's URL."""

    demo: Demo
    profile: str
    url: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with running_demo(tmp_path_factory.mktemp("docs-demo") / "ws") as demo:
        asyncio.run(install(demo, _fast_with_histograms))
        profile = (demo.workspace / "profiles" / "demo.toml").read_text()
        port = re.search(r"(?m)^port = (\d+)$", profile)
        assert port, profile
        yield Site(demo, profile, f"http://127.0.0.1:{port.group(1)}")


def _fast_with_histograms(text: str) -> str:
    unit = UnitFile.parse(text, "0.5.9")
    unit.set_flag("--sim-speedup", SPEEDUP)
    unit.set_flag("--stream-interval", "8")
    unit.set_flag("--collect-tokens-histogram", True)
    return unit.render()


@pytest.mark.parametrize(("runs", "unplannable"), _runs())
def test_a_documented_command_runs_on_the_demo(
    runs: list[Plan] | None, unplannable: Exception | None, site: Site, tmp_path: Path
) -> None:
    if unplannable is not None:
        raise unplannable
    assert runs
    made = runs[0]
    workspace = _workspace(made, site, tmp_path)
    argv = [str(OPSCONSOLE), "--workspace", str(workspace), *_mapped(made.words, site)]
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    what = made.describe() + "".join(f"; also {p.command.where}" for p in runs[1:])
    if made.mode == "terminal":
        _drawn_in_a_terminal(argv, env, what)
    elif made.mode == "web":
        _drawn_in_a_browser_tab(argv, what)
    elif made.mode == "until-ready":
        _up_then_stopped(argv, env, *READY[made.verb], what)
    else:
        with _traffic(site.url) if made.traffic else _nothing():
            stdout, stderr, status = _run(argv, env, workspace, answer_yes=made.answers_yes)
        said = f"{what}\nexit {status}\nstdout (end):\n{stdout[-3000:]}\nstderr (end):\n{stderr[-3000:]}"
        assert status == made.exit_status, said
        assert "Traceback" not in stderr, said
        if made.unknown_host:
            assert stderr.startswith(f"opsconsole {made.verb}: ") and made.unknown_host in stderr, said
        if made.args.json and status == 0:
            json.loads(stdout)
        for path in RECORDS_LINE.findall(stderr):  # a file it names is there, its name whole (not cut by a wrap)
            assert Path(path).is_file(), said


def _run(argv: list[str], env: dict[str, str], workspace: Path, *, answer_yes: bool) -> tuple[str, str, int]:
    if not answer_yes:
        done = run_cli(argv, env=env, cwd=workspace, timeout=RUN_TIMEOUT_S)
        return done.stdout, done.stderr, done.returncode
    import pty

    primary, secondary = pty.openpty()  # its question goes to a terminal, where the operator types yes
    try:
        proc = start_cli(argv, env=env, cwd=workspace, stdin=secondary)
        os.write(primary, b"yes\n")
        stdout, stderr = finish_cli(proc, timeout=RUN_TIMEOUT_S)
    finally:
        os.close(primary)
        os.close(secondary)
    return stdout, stderr, proc.returncode


def _mapped(words: list[str], site: Site) -> list[str]:
    """The line's words with a server URL (`--url http://...`) the demo server's."""
    out = list(words)
    for i, word in enumerate(out[:-1]):
        if word == "--url":
            out[i + 1] = site.url
    return [f"--url={site.url}" if w.startswith("--url=") else w for w in out]


def _workspace(made: Plan, site: Site, tmp_path: Path) -> Path:
    """The run's own workspace: the demo host under the line's names, its files, its runs and snapshots."""
    workspace = tmp_path / "ws"
    profiles = workspace / "profiles"
    profiles.mkdir(parents=True)
    (workspace / "logs").mkdir()
    (tmp_path / "home").mkdir()
    if made.verb != "demo":  # `demo` starts a demo host of its own in its workspace
        for name in ("demo", *made.hosts):
            (profiles / f"{name}.toml").write_text(site.profile)
    if made.groups:
        (profiles / "groups.toml").write_text(
            "".join(f"{name} = {json.dumps(members)}\n" for name, members in made.groups.items())
        )
    for name, kind in made.files.items():
        _make_file(workspace / name, kind, site)
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    for target, label in made.labels:
        _first(env, workspace, "bench", target, "--concurrency", "1", "--requests", "4", "--label", label)
    for target, name in made.snapshots:
        _first(env, workspace, "freeze", target, "--name", name, "--yes")
    return workspace


def _first(env: dict[str, str], workspace: Path, *words: str) -> None:
    """What a line needs made first, by the CLI itself."""
    done = run_cli([str(OPSCONSOLE), "--workspace", str(workspace), *words], env=env, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, f"making `opsconsole {shlex.join(words)}` first failed:\n{done.stderr[-3000:]}"


def _make_file(path: Path, kind: str, site: Site) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "trace":  # two bursts 20 minutes apart: `--trace-window 10m` replays the first, `20m-30m` the second
        early, late = mooncake_trace(20, 1, rate=8.0), mooncake_trace(20, 2, rate=8.0)
        for record in late:
            record["timestamp"] += 20 * 60 * 1000 + 1000
        path.write_text("".join(json.dumps(r) + "\n" for r in early + late))
    elif kind == "sharegpt":
        path.write_text(json.dumps(chat_conversations(40, 1)))
    elif kind == "prompts":
        path.write_text("".join(json.dumps(r) + "\n" for r in code_prompts(40, 1)))
    elif kind == "space":
        path.write_text("steps = [1, 2]\ntopk = [1]\n")
    elif kind == "unit":
        path.write_text((site.demo.workspace / ".demo" / "sglang-demo.service").read_text())
    else:
        raise CannotRun(f"{path.name}: no maker for a {kind} file")


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def _traffic(url: str) -> Iterator[None]:
    """Requests sent to the server the whole time, one after another, as a production host gets them."""
    stop = threading.Event()

    def send() -> None:
        body = json.dumps(
            {"text": "Tell me about the weather " * 8, "sampling_params": {"max_new_tokens": 24, "ignore_eos": True}}
        ).encode()
        while not stop.is_set():
            request = urllib.request.Request(f"{url}/generate", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                answer.read()

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        yield
    finally:
        stop.set()
        sender.join(timeout=60)


def _drawn_in_a_terminal(argv: list[str], env: dict[str, str], what: str) -> None:
    """In tmux: the console draws the host's dashboard; q quits it with exit 0."""
    script = f'{shlex.join(argv)}; echo "[exit status $?]"; exec cat'  # the pane stays to show the status
    term = Terminal(["sh", "-c", script], env)
    try:
        term.wait_until(
            lambda s: DRAWN.search(s) is not None or EXIT_LINE.search(s) is not None, f"{what} to draw", START_S
        )
        term.keys("q")
        screen = term.wait_until(lambda s: EXIT_LINE.search(s) is not None, f"{what} to quit on q", START_S)
        found = EXIT_LINE.search(screen)
        assert found and found.group(1) == "0", f"{what} ended so:\n{screen}"
    finally:
        term.close()


def _drawn_in_a_browser_tab(argv: list[str], what: str) -> None:
    """Served: a browser tab's connection gets the console drawn; Ctrl-C ends the server with exit 0."""
    with serving(argv) as run:

        async def one_tab() -> None:
            async with aiohttp.ClientSession() as http, http.ws_connect(run.websocket + "?width=120&height=40") as tab:
                await first_screen(tab, b".service", START_S)

        asyncio.run(one_tab())
        run.proc.send_signal(signal.SIGINT)
        assert run.proc.wait(60) == 0, f"{what}:\n{run.read_rest()[-3000:]}"


def _up_then_stopped(argv: list[str], env: dict[str, str], ready: str, status: int, what: str) -> None:
    """A verb that runs until stopped: it says it is up, and Ctrl-C ends it with `status`."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        read_until(proc.stdout.fileno(), ready, START_S, seen)
        proc.send_signal(signal.SIGINT)
        ended = proc.wait(60)
        rest = proc.stdout.read().decode("utf-8", "replace")
        assert ended == status, f"{what}: exit {ended} after Ctrl-C, not {status}:\n{(''.join(seen) + rest)[-3000:]}"
        assert "Traceback" not in rest, f"{what}:\n{rest[-3000:]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
