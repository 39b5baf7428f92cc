"""The console end to end: the real HostWatcher against the demo host (Pilot, in-process) and against a testbed
GPU host (real sshd + systemd) in a real terminal (tmux), where sshd is killed under it and comes back."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.cli.connect import build_app
from console.core.session import open_session
from console.core.status import read_status
from console.tui.widgets.journal import JournalView
from console.workspace import Workspace
from tests.support.budget import inner_timeout
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
        await wait_until(pilot, lambda: len(_gpu_rows(screen_text(app))) == len(truth.gpus), "the GPU rows", 30)
        text = screen_text(app)
    sg = truth.sglang
    assert f"SGLang {sg.version}" in text and str(sg.model_path) in text
    assert f"steps {sg.speculative_num_steps}  topk {sg.speculative_eagle_topk}" in text
    # the demo's unit asks NEXTN (MTP), which SGLang runs as EAGLE by design: said so, not marked as a drift
    assert sg.speculative_algorithm == "EAGLE" and "speculative  NEXTN (runs as EAGLE)" in text
    assert "unit asks NEXTN" not in text
    assert f"draft tokens {sg.speculative_num_draft_tokens}" in text
    assert f"{truth.service.unit} active/running" in text
    assert len(truth.gpus) == 4
    for gpu, row in zip(truth.gpus, _gpu_rows(text), strict=True):
        assert row.split()[0] == str(gpu.index) and f"/{gpu.power_limit_w:.0f}" in row


async def test_the_journal_folds_the_consoles_own_polling_into_a_count_and_p_shows_it(demo: Demo) -> None:
    """The stand-in logs every request as SGLang does: the console's refreshes (twice a second here) would fill
    the journal pane; their lines fold into the status line's count, and `p` shows them."""
    app = build_app(_args(demo.workspace, "demo", refresh=0.5), ["demo"])
    async with app.run_test(size=(120, 40)) as pilot:
        journal = app.query_one(JournalView)

        def shown(what: str) -> int:
            return sum(what in line.text for line in journal.log_widget.lines)

        await wait_until(pilot, lambda: journal.console_requests >= 10, "the console's requests in the journal", 60)
        metrics_lines = shown('"GET /metrics')  # those of other clients before this console (the fixture's)
        folded = journal.console_requests
        await wait_until(pilot, lambda: journal.console_requests >= folded + 10, "ten more", 60)
        assert shown('"GET /metrics') == metrics_lines  # ten refreshes later: not one more line in the pane
        await wait_until(pilot, lambda: "console requests folded (p: show)" in screen_text(app), "the count", 30)
        await pilot.press("p")
        await wait_until(pilot, lambda: shown('"GET /metrics') >= metrics_lines + 10, "the console's lines", 30)
        assert "console requests shown (p: fold)" in screen_text(app)


def _gpu_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if "°C" in line]


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
        return self.wait_until(lambda screen: what in screen, repr(what), timeout)

    def wait_until(self, condition: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        timeout = inner_timeout(
            timeout
        )  # ends before the test's own timeout, with the screen (tests/support/budget.py)
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if condition(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}; the screen:\n{screen}")
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


def _demo_process_pids(workspace: Path) -> list[int]:
    """The processes of this workspace's demo host: the supervisor's service (console.sim) and its guard."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(workspace) in cmdline and "console.sim" in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.system
def test_opsconsole_demo_in_a_real_terminal_shows_the_demo_keys_help_and_palette(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    term = Terminal([OPSCONSOLE, "--workspace", str(workspace), "demo", "--time-scale", "0.005"], dict(os.environ))
    try:
        term.wait_for("fired up and ready to roll")
        term.wait_for("sglang-demo.service active/running")
        term.wait_for("SGLang 0.5.9")
        screen = term.wait_for("steps 1  topk 1")
        assert "draft tokens 2" in screen
        screen = term.wait_until(lambda s: len(_gpu_rows(s)) == 4, "four GPU rows")
        assert all("/600" in row for row in _gpu_rows(screen))
        term.keys("?")
        screen = term.wait_for("Keys — host demo")
        assert "Restart" in screen and "Freeze" in screen and "Next host" in screen
        term.keys("Escape")
        term.wait_for("journal (following)")
        term.keys("C-p")
        term.wait_for("Search for commands")  # the palette's own field (the footer always says "/ Search")
        term.keys("r", "e", "s", "t", "a", "r", "t")
        term.wait_for("Restart the service without edits")
        term.keys("Escape")
        term.wait_until(lambda screen: "Restart the service without edits" not in screen, "the palette to close")
        term.keys("e")
        term.wait_for("What the server will really run")
        # In one write, as a paste or a fast typist sends them: the field's own keys (end, ctrl+u, backspace, -)
        # apply in turn with the digits around them. "" · 45 · 44 (- steps down) · 4 · 47
        term.keys("End", "C-u", "4", "5", "-", "BSpace", "7")
        term.wait_until(lambda s: _editor_field(s, "steps") == "47", "steps 47 in the editor")
        term.keys("Escape")
        term.wait_for("journal (following)")
        assert _demo_process_pids(workspace), "the demo host's processes were not found: the check below proves nothing"
        term.keys("q")
        deadline = time.monotonic() + 30
        while _demo_process_pids(workspace):
            assert time.monotonic() < deadline, f"left running after q: {_demo_process_pids(workspace)}"
            time.sleep(0.1)  # polling for the processes to be gone
    finally:
        term.close()


@pytest.mark.system
def test_closing_the_terminal_of_opsconsole_demo_leaves_no_process(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    term = Terminal([OPSCONSOLE, "--workspace", str(workspace), "demo", "--time-scale", "0.005"], dict(os.environ))
    try:
        term.wait_for("sglang-demo.service active/running")
        assert _demo_process_pids(workspace)
    finally:
        term.close()  # the tmux server goes: the console gets SIGHUP, as when a window or SSH session closes
    deadline = time.monotonic() + 30
    while _demo_process_pids(workspace):
        assert time.monotonic() < deadline, f"left running: {_demo_process_pids(workspace)}"
        time.sleep(0.1)  # polling for the processes to be gone


@pytest.mark.testbed
def test_in_a_real_terminal_an_edit_is_applied_verified_and_a_broken_one_rolled_back(
    pristine_gpu_host: GpuHost,
) -> None:
    """e, + on steps, ctrl+s, y: the unit is rewritten, the service restarted and verified, and the dashboard
    shows what SGLang really runs (draft tokens raised with steps); then a missing draft model is rolled back."""
    host = pristine_gpu_host
    term = Terminal([OPSCONSOLE, "connect", host.alias, "--refresh", "0.5"], host.client_env())
    try:
        term.wait_for("sglang.service active/running")
        term.wait_until(lambda s: "steps 2  topk 1" in s and "draft tokens 3" in s, "the running setup")
        term.keys("e")
        term.wait_for("What the server will really run")
        term.keys("+")  # the steps field has focus when the editor opens
        term.wait_for("draft tokens 3 -> 4")
        term.keys("C-s")
        screen = term.wait_for("and restart sglang.service?")
        assert "--speculative-num-steps 3" in screen
        term.keys("y")
        screen = term.wait_for("✔ verified", timeout=120)
        assert "* by SGLang" in screen and "* draft_tokens: " in screen  # draft tokens: 3 asked, 4 run
        term.keys("Escape")
        term.wait_until(lambda s: "steps 3  topk 1" in s and "draft tokens 4" in s, "the new setup on the dashboard")
        unit = host.root_run("systemctl cat sglang.service").stdout
        assert "--speculative-num-steps 3" in unit

        term.keys("e")
        term.wait_for("What the server will really run")
        for _ in range(3):  # steps -> topk -> draft tokens -> draft model path (0.5.23 has no spec v2 switch)
            term.keys("Tab")
        term.keys("End", "C-u", "/models/missing-draft")  # in one write: the field's keys run in turn with the text
        term.wait_for("ctrl+s: apply")
        term.keys("C-s")
        term.wait_for("and restart sglang.service?")
        term.keys("y")
        screen = term.wait_for("The host is healthy on the previous unit", timeout=180)
        assert "✖" in screen and "missing-draft" in screen
        term.keys("Escape")
        term.wait_until(
            lambda s: "steps 3  topk 1" in s and "sglang.service active/running" in s, "the previous setup again"
        )
        assert "missing-draft" not in host.root_run("systemctl cat sglang.service").stdout
    finally:
        term.close()


def _editor_field(screen: str, title: str) -> str | None:
    """The value an editor field shows (its title in the first 26 columns, its value after)."""
    for line in screen.splitlines():
        if line[1:27].rstrip() == title:
            return line[27:70].strip()
    return None


def _field(screen: str, title: str) -> str | None:
    """The value a benchmark form field shows (its title in the first 15 columns, its 24-column box after)."""
    for line in screen.splitlines():
        if line[1:16].rstrip() == title:
            return line[16:40].strip()
    return None


@pytest.mark.system
def test_in_a_real_terminal_b_benchmarks_the_demo_host_and_c_shows_it_beside_an_earlier_run(tmp_path: Path) -> None:
    """b, the form's fields typed, ctrl+s: the sweep runs on the demo host and finishes; c from its view opens the
    runs with it picked, an earlier run is picked beside it, and the two panes and the crossover line show."""
    from console.bench.records import append_records
    from tests.support.bench_runs import NO_SPEC, run

    workspace = tmp_path / "ws"
    append_records(workspace / "logs", run("earlier no spec", {1: 60.0, 4: 600.0}, args=NO_SPEC))
    term = Terminal([OPSCONSOLE, "--workspace", str(workspace), "demo", "--time-scale", "0.005"], dict(os.environ))
    try:
        term.wait_for("sglang-demo.service active/running")
        term.wait_for("SGLang 0.5.9")
        term.keys("b")
        screen = term.wait_for("Benchmark demo")
        assert "eagle s1 k1 d2" in screen  # the label proposed from the running setup (NEXTN runs as EAGLE)
        term.wait_for("label: what compare calls this run")  # the label field has focus, the cursor at its end
        term.keys(" now")
        term.wait_for("eagle s1 k1 d2 now")
        # one field at a time: Tab's focus move is an action, and keys sent right behind it can reach the old field
        term.keys("Tab")
        term.wait_for("workload: random (forced lengths)")
        for title in ("dataset", "sample", "seed", "shape window", "rate scale"):  # the traffic fields, as they are
            term.keys("Tab")
            term.wait_for(f" {title}: ")
        for title, value in (("concurrency", "1,4"), ("request rates", ""), ("requests", "8"), ("duration s", ""),
                             ("input tokens", "64"), ("output tokens", "16")):  # fmt: skip
            term.keys("Tab")
            screen = term.wait_for(f" {title}: ")
            # ctrl+u only on a field with text, its effect seen before typing: it is a binding of the field, run
            # after plain letters typed right behind it, so on an empty field it would wipe what comes next
            if _field(screen, title):
                term.keys("C-u")
                term.wait_until(lambda s, t=title: _field(s, t) == "", f"{title} cleared")
            if value:
                term.keys(value)
                term.wait_until(lambda s, t=title, v=value: _field(s, t) == v, f"{title} = {value!r}")
        term.wait_for("output tokens  16")
        term.keys("C-s")
        screen = term.wait_for("finished: 2 level(s)", timeout=120)
        assert "C=1" in screen and "C=4" in screen and "8/8" in screen
        term.keys("c")
        term.wait_for("Benchmark runs (logs/bench-*.jsonl)")
        term.wait_for("picked 1/4: A eagle s1 k1 d2 now")
        term.keys("Down", "Space")
        term.wait_for("picked 2/4")
        term.keys("Enter")
        screen = term.wait_for("Side by side: 2 runs")
        assert "A eagle s1 k1 d2 now" in screen and "B earlier no spec" in screen and "crossover" in screen
        term.keys("Escape", "Escape")
        term.wait_until(lambda s: "Side by side" not in s and "Benchmark runs" not in s, "back to the dashboard")
        term.keys("q")
    finally:
        term.close()


@pytest.mark.system
def test_in_a_real_terminal_the_editor_predicts_from_a_benchmark_of_the_demo_host(tmp_path: Path) -> None:
    """`opsconsole demo`, e: no benchmark yet, and the editor says what would give one; a benchmark of the running
    setup (the CLI, beside the console, no restart); e again: the running setup measured, then steps 2 typed and
    predicted beside it, with its verdict."""
    workspace = tmp_path / "ws"
    term = Terminal([OPSCONSOLE, "--workspace", str(workspace), "demo", "--time-scale", "0.005"], dict(os.environ))
    try:
        term.wait_for("sglang-demo.service active/running")
        term.wait_for("SGLang 0.5.9")
        term.keys("e")
        screen = term.wait_for("No prediction: no benchmark of the running", timeout=30)
        assert "esc, then b" in screen
        term.keys("Escape")
        term.wait_until(lambda s: "Edit sglang-demo.service" not in s, "the dashboard")
        bench = [OPSCONSOLE, "--workspace", str(workspace), "bench", "demo", "--concurrency", "1,4", "--requests",
                 "8", "--input-len", "64", "--output-len", "32", "--repeat", "2"]  # fmt: skip
        done = subprocess.run(bench, capture_output=True, text=True, timeout=inner_timeout(240))
        assert done.returncode == 0, done.stderr
        term.keys("e")
        screen = term.wait_for("Now: EAGLE steps 1 topk 1, measured", timeout=60)
        assert "C=1:" in screen and "C=4:" in screen and "random 64/32" in screen
        term.keys("BSpace", "2")  # the steps field has focus as the editor opens
        screen = term.wait_for("Predicted: EAGLE steps 2 topk 1", timeout=30)
        assert "→" in screen and "tok/s" in screen
        # the verdict, whichever this benchmark gives (on a busy machine the bands can be wide)
        assert re.search(r"(not )?worth a restart: |unknown: ", screen), screen
        term.keys("Escape")
        term.wait_until(lambda s: "Edit sglang-demo.service" not in s, "the dashboard")
        term.keys("q")
    finally:
        term.close()
