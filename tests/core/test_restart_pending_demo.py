"""Issue 22, item 2 (second half): after a restart (a new main PID) the dashboard never shows the old process's
server values as what runs now. They are pending until the new server answers /server_info.

Before the fix, the full read that followed the new PID failed (the server was still starting) and the light reads
after it took /server_info from the last good read, the old process's, for up to a full-read interval: the
dashboard said "steps 1* (unit asks 2)" for about 10 s after the apply was verified.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from console.core.status import HostView, HostWatcher
from console.workspace import Workspace
from tests.support.demo import APPLY_TIMEOUT, OPSCONSOLE, Demo, until

pytestmark = pytest.mark.system


def _steps(view: HostView) -> object:
    return view.status.sglang.speculative_num_steps if view.status is not None else None


def _pid(view: HostView) -> int | None:
    return view.status.service.main_pid if view.status is not None else None


async def test_values_of_the_old_process_are_never_shown_for_the_new_one(restarting_demo: Demo) -> None:
    demo = restarting_demo
    views: list[HostView] = []
    watcher = HostWatcher("demo", Workspace.resolve(demo.workspace), on_view=views.append, interval_s=0.1)
    dashboard = asyncio.create_task(watcher.run())
    try:
        await until(lambda: bool(views) and _steps(views[-1]) == 1, "the dashboard to show steps 1")
        old_pid = _pid(views[-1])
        proc = await asyncio.create_subprocess_exec(
            str(OPSCONSOLE), "--workspace", str(demo.workspace), "apply", "demo", "--set", "speculative-num-steps=2",
            "--set", "speculative-num-draft-tokens=3", "--yes", "--json", "--timeout", APPLY_TIMEOUT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
        assert proc.returncode == 0 and json.loads(out)["state"] == "verified", (out[-2000:], err[-2000:])
        await until(lambda: _steps(views[-1]) == 2, "the dashboard to show steps 2")
    finally:
        dashboard.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await dashboard
    after = [v for v in views if _pid(v) not in (None, old_pid)]
    starting = [v for v in after if v.status is not None and not v.status.sglang.healthy]
    assert len(starting) >= 2, "the dashboard did not refresh while the new server started: nothing was tested"
    shown = [(_steps(v), v.status.sglang.healthy) for v in after if v.status is not None]
    assert all(steps in (None, 2) for steps, _healthy in shown), shown  # pending (None) or the new value
