"""The demo supervisor behaves like systemd for one unit: real processes, real signals, a real socket."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.host.base import HostError, ServiceManager
from console.sglang.unit import UnitFile
from console.sim.supervisor import (
    DEFAULT_RESTART_S,
    DEFAULT_TIMEOUT_STOP_S,
    DemoServiceManager,
    UnitSupervisor,
    parse_exec,
    serve_control,
)

SERVICE = """\
import signal, sys, time
def bye(*_):
    print("got SIGTERM", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, {handler})
print("service starting", flush=True)  # after the handler: a stop from here on goes through it
print("to stderr", file=sys.stderr, flush=True)
while True:
    time.sleep(0.05)
"""


def unit(script: Path, *, extra: str = "", env: str = 'Environment="GREETING=hello world" MODE=test') -> str:
    return (
        "[Unit]\nDescription=test\n\n[Service]\n"
        f"{env}\n"
        f"ExecStart={sys.executable} -u \\\n    {script}\n"
        f"TimeoutStopSec=0.5\n{extra}\n[Install]\nWantedBy=multi-user.target\n"
    )


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[tuple[DemoServiceManager, UnitSupervisor, Path]]:
    script = tmp_path / "service.py"
    script.write_text(SERVICE.format(handler="bye"))
    unit_path = tmp_path / "demo.service"
    unit_path.write_text(unit(script))
    sup = UnitSupervisor("demo.service", unit_path, tmp_path / "backups")
    sock = tmp_path / "c.sock"
    runner = await serve_control(sup, sock)
    client = DemoServiceManager(sock, "demo.service")
    try:
        yield client, sup, tmp_path
    finally:
        await sup.close()
        await runner.cleanup()


async def wait_state(client: DemoServiceManager, active: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while (await client.state()).active_state != active:
        assert time.monotonic() < deadline, f"never reached {active}: {await client.state()}"
        await _tick()


async def _tick() -> None:
    import asyncio

    await asyncio.sleep(0.02)


async def journal_messages(client: DemoServiceManager) -> list[str]:
    return [e.message async for e in client.journal(lines=1000)]


def test_parse_exec_reads_continuations_environment_and_timeouts() -> None:
    spec = parse_exec(unit(Path("/x/y.py"), extra="Restart=on-failure\nRestartSec=2s"))
    assert spec.argv == [sys.executable, "-u", "/x/y.py"]
    assert spec.env == {"GREETING": "hello world", "MODE": "test"}
    assert spec.timeout_stop_s == 0.5 and spec.restart == "on-failure" and spec.restart_s == 2.0
    with pytest.raises(HostError, match="ExecStart"):
        parse_exec("[Service]\nType=simple\n")


def test_parse_exec_defaults_are_systemds() -> None:
    spec = parse_exec("[Service]\nExecStart=/bin/sleep 1\n")
    assert (spec.cwd, spec.env, spec.restart) == (None, {}, "no")
    assert spec.timeout_stop_s == DEFAULT_TIMEOUT_STOP_S == 90.0 and spec.restart_s == DEFAULT_RESTART_S == 0.1
    forever = parse_exec("[Service]\nExecStart=/bin/sleep 1\nTimeoutStopSec=infinity\nWorkingDirectory=-/srv\n")
    assert forever.timeout_stop_s == math.inf and forever.cwd == "/srv"


def test_parse_exec_reads_the_demo_unit_as_the_unit_model_does(tmp_path: Path) -> None:
    from console.sim.demo import unit_text

    text = unit_text(
        python="/opt/py/bin/python",
        port=31000,
        profile="tiny-test",
        time_scale=0.05,
        state_dir=tmp_path,
        workdir=tmp_path,
    )
    spec = parse_exec(text)
    model = UnitFile.parse(text)
    assert spec.argv == model.exec_argv()
    assert spec.argv[:3] == ["/opt/py/bin/python", "-m", "console.sim"] and spec.argv[-2:] == [
        "--sim-state-dir",
        str(tmp_path),
    ]
    assert "--port" in spec.argv and spec.argv[spec.argv.index("--port") + 1] == "31000"
    assert spec.env == {"SGLANG_ENABLE_SPEC_V2": "False"} and spec.cwd == str(tmp_path)
    assert (spec.timeout_stop_s, spec.restart) == (30.0, "no")


def test_parse_exec_reads_the_testbed_unit() -> None:
    from tests.testbed.recipe import PYTHONPATH, sglang_unit

    spec = parse_exec(sglang_unit())
    assert spec.argv[:3] == ["/usr/bin/python3", "-m", "console.sim"] and spec.argv[-2:] == ["--sim-time-scale", "0.01"]
    assert spec.env["PYTHONPATH"] == PYTHONPATH and spec.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert (spec.cwd, spec.restart, spec.restart_s, spec.timeout_stop_s) == ("/var/lib/sglang", "on-failure", 2.0, 30.0)


def test_parse_exec_quotes_escapes_and_a_broken_line_the_systemd_way() -> None:
    spec = parse_exec('[Service]\nExecStart=/bin/echo "two words" 100%% $$HOME \'a "b"\'\n')
    assert spec.argv == ["/bin/echo", "two words", "100%", "$HOME", 'a "b"']
    with pytest.raises(HostError, match="cannot be run: unbalanced") as broken:
        parse_exec('[Service]\nExecStart=/bin/run --api-key "sk-secret-9\n')
    assert "sk-secret-9" not in str(broken.value)


async def test_start_stop_state_and_journal(manager: tuple[DemoServiceManager, UnitSupervisor, Path]) -> None:
    client, sup, _ = manager
    assert isinstance(client, ServiceManager)
    assert (await client.state()).active_state == "inactive"
    await client.daemon_reload()
    await sup.start()
    state = await client.state()
    assert state.active_state == "active" and state.sub_state == "running" and state.main_pid
    assert state.started_at is not None and state.fragment_path.endswith("demo.service")
    deadline = time.monotonic() + 10
    while "service starting" not in await journal_messages(client):
        assert time.monotonic() < deadline
        await _tick()
    assert "to stderr" in await journal_messages(client)
    pid = state.main_pid
    await client.stop()
    state = await client.state()
    assert (state.active_state, state.sub_state, state.result, state.main_pid) == ("inactive", "dead", "success", None)
    assert "got SIGTERM" in await journal_messages(client)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_environment_reaches_the_process(manager: tuple[DemoServiceManager, UnitSupervisor, Path]) -> None:
    client, _sup, tmp = manager
    script = tmp / "env.py"
    script.write_text("import os\nprint('GREETING=' + os.environ['GREETING'], flush=True)\n")
    await client.write_unit(unit(script))
    await client.daemon_reload()
    await client.restart()
    await wait_state(client, "inactive")
    assert "GREETING=hello world" in await journal_messages(client)


async def test_sigkill_after_timeout_stop_sec(manager: tuple[DemoServiceManager, UnitSupervisor, Path]) -> None:
    client, _sup, tmp = manager
    stubborn = tmp / "stubborn.py"
    stubborn.write_text(SERVICE.format(handler="signal.SIG_IGN"))
    await client.write_unit(unit(stubborn))
    await client.daemon_reload()
    await client.restart()
    await wait_state(client, "active")
    # Wait until the script has installed its handler (it says so after), or SIGTERM would kill it at once.
    deadline = time.monotonic() + 10
    while "service starting" not in await journal_messages(client):
        assert time.monotonic() < deadline
        await _tick()
    started = time.monotonic()
    await client.stop()
    assert time.monotonic() - started >= 0.5
    assert any("timed out. Killing." in m for m in await journal_messages(client))
    state = await client.state()  # as systemd leaves a unit whose stop had to be finished with SIGKILL
    assert (state.active_state, state.result, state.properties["ExecMainStatus"]) == ("failed", "timeout", "9")


async def test_failure_is_reported_like_systemd(manager: tuple[DemoServiceManager, UnitSupervisor, Path]) -> None:
    client, _sup, tmp = manager
    failing = tmp / "fail.py"
    failing.write_text("import sys\nprint('ValueError: boom', flush=True)\nsys.exit(1)\n")
    await client.write_unit(unit(failing))
    await client.daemon_reload()
    await client.restart()
    await wait_state(client, "failed")
    state = await client.state()
    assert state.sub_state == "failed" and state.result == "exit-code"
    messages = await journal_messages(client)
    assert "ValueError: boom" in messages
    assert any("status=1/FAILURE" in m for m in messages)


async def test_write_unit_backs_up_and_needs_reload_then_restore(
    manager: tuple[DemoServiceManager, UnitSupervisor, Path],
) -> None:
    client, _sup, tmp = manager
    await client.daemon_reload()
    original = await client.read_unit()
    backup = await client.write_unit(original.replace("MODE=test", "MODE=changed"))
    assert Path(backup.path).read_text() == original
    assert "MODE=changed" in await client.read_unit()
    assert (await client.state()).need_daemon_reload is True
    await client.daemon_reload()
    assert (await client.state()).need_daemon_reload is False
    await client.restore_unit(backup)
    assert await client.read_unit() == original
    with pytest.raises(HostError, match="not a backup"):
        await client.restore_unit(type(backup)(str(tmp / "service.py")))
    await client.enable()
    assert (await client.state()).unit_file_state == "enabled"


async def test_journal_follow_resumes_after_cursor(manager: tuple[DemoServiceManager, UnitSupervisor, Path]) -> None:
    client, sup, _ = manager
    await client.daemon_reload()
    entries = [e async for e in client.journal(lines=10)]
    assert entries and entries[-1].message == "Reloading."
    cursor = entries[-1].cursor
    await sup.start()
    seen: list[str] = []
    async for entry in client.journal(follow=True, after_cursor=cursor):
        seen.append(entry.message)
        if entry.message == "service starting":
            break
    assert "Reloading." not in seen and seen[0].startswith("Started demo.service")


async def test_client_explains_a_demo_that_is_not_running(tmp_path: Path) -> None:
    with pytest.raises(HostError, match="opsconsole demo"):
        await DemoServiceManager(tmp_path / "nope.sock").state()


async def test_restart_on_failure_counts_restarts_until_stopped(
    manager: tuple[DemoServiceManager, UnitSupervisor, Path],
) -> None:
    client, _sup, tmp = manager
    failing = tmp / "crash.py"
    failing.write_text("import sys\nsys.exit(2)\n")
    await client.write_unit(unit(failing, extra="Restart=on-failure\nRestartSec=50ms"))
    await client.daemon_reload()
    await client.restart()
    deadline = time.monotonic() + 20
    while (await client.state()).n_restarts < 2:
        assert time.monotonic() < deadline
        await _tick()
    await client.stop()
    stopped = await client.state()
    assert stopped.active_state in ("inactive", "failed") and stopped.sub_state != "auto-restart"
    count = stopped.n_restarts
    await _tick()
    await _tick()
    assert (await client.state()).n_restarts == count  # no restart after stop
    assert any("Scheduled restart job, restart counter is at 1." in m for m in await journal_messages(client))


# SGLang 0.5.17 on SIGTERM: drain, then kill its process tree with itself in it (exit status 137).
SELF_KILLER = """\
import os, signal, sys, time
def bye(*_):
    print("SIGTERM received. Draining requests and shutting down...", flush=True)
    time.sleep(0.1)
    os.kill(os.getpid(), signal.SIGKILL)
signal.signal(signal.SIGTERM, bye)
print("service starting", flush=True)  # after the handler: a stop from here on goes through it
if len(sys.argv) > 1:  # "crash": die of SIGKILL without being stopped (the OOM killer, a kill -9)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)
while True:
    time.sleep(0.05)
"""


async def _run(client: DemoServiceManager, tmp: Path, *args: str) -> None:
    script = tmp / "self_killer.py"
    script.write_text(SELF_KILLER)
    text = unit(script, extra="TimeoutStopSec=30")  # the process ends itself, well before the supervisor would
    await client.write_unit(text.replace(f"{script}\n", f"{script} {' '.join(args)}\n"))
    await client.daemon_reload()
    await client.restart()
    deadline = time.monotonic() + 10
    while "service starting" not in await journal_messages(client):
        assert time.monotonic() < deadline
        await _tick()


async def test_a_stop_that_ends_in_the_process_own_sigkill_is_reported_as_systemd_does(
    manager: tuple[DemoServiceManager, UnitSupervisor, Path],
) -> None:
    from console.core.exits import STOPPED_BY_SIGKILL, describe, stopped_by_own_sigkill

    client, _sup, tmp = manager
    await _run(client, tmp)
    started = (await client.state()).started_at
    await client.stop()
    state = await client.state()
    # systemd: a main process killed by SIGKILL is not a clean exit, even on stop -> failed, Result=signal
    assert (state.active_state, state.sub_state, state.result, state.main_pid) == ("failed", "failed", "signal", None)
    assert (state.properties["ExecMainCode"], state.properties["ExecMainStatus"]) == ("2", "9")
    assert int(state.properties["ActiveExitTimestampMonotonic"]) < int(
        state.properties["ExecMainExitTimestampMonotonic"]
    )
    assert state.started_at == started  # ExecMainStartTimestamp stays after the process is gone
    assert stopped_by_own_sigkill(state) and describe(state) == STOPPED_BY_SIGKILL
    messages = await journal_messages(client)
    assert "demo.service: Main process exited, code=killed, status=9/KILL" in messages
    assert "demo.service: Failed with result 'signal'." in messages
    # The next start clears it, as systemd's does.
    await client.start()
    await wait_state(client, "active")
    assert (await client.state()).result == "success"


async def test_a_process_that_dies_of_sigkill_on_its_own_is_a_crash(
    manager: tuple[DemoServiceManager, UnitSupervisor, Path],
) -> None:
    from console.core.exits import describe, stopped_by_own_sigkill

    client, _sup, tmp = manager
    await _run(client, tmp, "crash")
    await wait_state(client, "failed")
    state = await client.state()
    assert (state.result, state.properties["ExecMainStatus"]) == ("signal", "9")
    assert not stopped_by_own_sigkill(state)
    assert describe(state) == "failed (result: signal, killed by signal 9)"
