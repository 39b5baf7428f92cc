"""The console end to end: the real HostWatcher against the demo host (Pilot, in-process) and against a testbed
GPU host (real sshd + systemd) in a real terminal (tmux), where sshd is killed under it and comes back."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli.connect import build_app
from console.core.session import open_session
from console.core.status import read_status
from console.workspace import Workspace
from tests.support.demo import Demo, running_demo
from tests.testbed.host import GpuHost
from tests.tui.support import screen_text, wait_until


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    with running_demo(tmp_path_factory.mktemp("tui-demo") / "ws") as running:
        yield running


def _args(workspace: Path, *targets: str, **extra: object) -> argparse.Namespace:
    values = {
        "workspace": str(workspace),
        "ssh_config": None,
        "refresh": None,
        "read_only": False,
        "targets": list(targets),
    }
    values.update(extra)
    return argparse.Namespace(**values)


async def test_the_dashboard_shows_what_the_demo_host_really_runs(demo: Demo) -> None:
    async with open_session("demo", Workspace.resolve(demo.workspace)) as session:
        truth = await read_status(session)
    app = build_app(_args(demo.workspace, "demo", refresh=0.5), ["demo"])
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot, lambda: "● local" in screen_text(app) and "SGLang 0.5.9" in screen_text(app), "a refresh", 30
        )
        await wait_until(pilot, lambda: "fired up and ready to roll" in screen_text(app), "the journal", 30)
        text = screen_text(app)
    sg = truth.sglang
    assert f"SGLang {sg.version}" in text and str(sg.model_path) in text
    assert f"steps {sg.speculative_num_steps}  topk {sg.speculative_eagle_topk}" in text
    assert f"draft tokens {sg.speculative_num_draft_tokens}" in text
    assert f"{truth.service.unit} active/running" in text
    gpu_rows = [line for line in text.splitlines() if "°C" in line]
    assert len(gpu_rows) == len(truth.gpus) == 4


async def test_an_unreachable_target_is_said_in_its_tab_and_the_others_live_on(demo: Demo, tmp_path: Path) -> None:
    # a profile whose demo control socket does not exist: that host cannot be read, the demo tab stays live
    profiles = Path(demo.workspace) / "profiles"
    (profiles / "gone.toml").write_text('[host]\ntransport = "demo"\ncontrol = "/nonexistent/control.sock"\n')
    app = build_app(_args(demo.workspace, "demo", "gone", refresh=0.5), ["demo", "gone"])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await wait_until(
            pilot,
            lambda: "the demo host is not running" in screen_text(app),
            "the error",
            30,
        )
        await pilot.press("1")
        await wait_until(pilot, lambda: "SGLang 0.5.9" in screen_text(app), "the live host", 30)


TMUX = shutil.which("tmux")


class Terminal:
    """A real terminal: tmux at a fixed size, keys sent with send-keys, the screen read with capture-pane."""

    def __init__(self, command: list[str], env: dict[str, str], size: tuple[int, int] = (120, 40)) -> None:
        assert TMUX, "tmux is needed for the real-terminal tests (scripts/system-deps.sh installs it)"
        # Its own tmux server (-L): a server started earlier would give the session its environment, not ours.
        self.tmux = [TMUX, "-L", f"ops-test-{uuid.uuid4().hex[:8]}"]
        shell = " ".join(_quote(a) for a in command)
        subprocess.run(
            [*self.tmux, "new-session", "-d", "-s", "console", "-x", str(size[0]), "-y", str(size[1]), shell],
            check=True,
            env={**env, "TERM": "xterm-256color"},
        )

    def screen(self) -> str:
        done = subprocess.run([*self.tmux, "capture-pane", "-p", "-t", "console"], capture_output=True, text=True)
        return done.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "console", *keys], check=True)

    def wait_for(self, what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if what in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what!r}; the screen:\n{screen}")
            time.sleep(0.1)  # polling a terminal's screen for a condition

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


OPSCONSOLE = str(Path(__import__("sys").executable).with_name("opsconsole"))


@pytest.mark.testbed
def test_in_a_real_terminal_a_killed_sshd_shows_reconnecting_and_the_tab_recovers(pristine_gpu_host: GpuHost) -> None:
    host = pristine_gpu_host
    term = Terminal([OPSCONSOLE, "connect", host.alias, "--refresh", "0.5"], host.client_env())
    try:
        term.wait_for("The server is fired up")
        screen = term.wait_for("sglang.service active/running")
        assert "● connected" in screen and "SGLang 0.5." in screen
        # sshd and every session it serves die: the console's connection with them
        host.root_run("systemctl stop ssh.socket ssh.service 2>/dev/null; pkill -KILL -x sshd; true")
        screen = term.wait_for("reconnecting (attempt")
        host.root_run("systemctl start ssh.service")
        term.wait_for("● connected", timeout=90)
        screen = term.wait_for("refreshed 0 s ago", timeout=30)
        assert "sglang.service active/running" in screen
    finally:
        term.close()
        host.root_run("systemctl start ssh.service", check=False)
