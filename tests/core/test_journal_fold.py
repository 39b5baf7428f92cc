"""The console's refresh loop (HostWatcher) against the demo host, whose SGLang stand-in logs every request as
uvicorn does: the access lines of the watcher's own requests reach the journal sink marked as the console's
(ConsoleRequest, folded by the journal pane); another client's lines from the same host are not."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from console.core.console_requests import CLOCK_SKEW_S, ConsoleRequest, is_loopback, parse_access
from console.core.session import open_session
from console.core.status import HostView, HostWatcher
from console.host.base import JournalEntry
from console.workspace import Workspace
from tests.support.demo import Demo, until

REFRESHES = 12


async def test_the_watchers_own_requests_are_marked_and_another_clients_are_not(shared_demo: Demo) -> None:
    workspace = Workspace.resolve(shared_demo.workspace)
    views: list[HostView] = []
    entries: list[JournalEntry] = []
    watcher = HostWatcher("demo", workspace, on_view=views.append, on_journal=entries.extend, interval_s=0.2)
    tasks = [asyncio.create_task(watcher.run()), asyncio.create_task(watcher.follow_journal())]
    try:
        await until(lambda: any(v.status is not None for v in views), "the first refresh")
        first = next(v.at for v in views if v.status is not None)
        # Lines of requests made before the watcher (the fixture's, an earlier test's) are left out: within the
        # match window of its first requests one of them may be taken for the watcher's (console_requests says
        # so), so the test looks at what comes once that window has passed.
        await until(lambda: datetime.now(UTC) - first > timedelta(seconds=CLOCK_SKEW_S + 1), "the window to pass")
        started = datetime.now(UTC)
        async with open_session("demo", workspace) as other:  # another client on the same host
            client = await other.sglang()
            for _ in range(3):
                assert (await client.http.get("/v1/models")).status_code == 200
                assert (await client.http.get("/metrics")).status_code == 200
        counted = len(views)
        await until(lambda: len(views) > counted + REFRESHES, f"{REFRESHES} more refreshes")
        ended = datetime.now(UTC)
        async with open_session("demo", workspace) as other:  # a last line: the journal has come this far
            assert (await (await other.sglang()).http.get("/v1/models?end")).status_code == 200
        await until(lambda: any("/v1/models?end" in e.message for e in entries), "the journal to follow")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    window = [e for e in entries if started <= e.timestamp <= ended]
    access = [(e, parse_access(e.message)) for e in window]
    mine = [e for e, line in access if line is not None and line.target != "/v1/models" and is_loopback(line.peer)]
    models = [e for e, line in access if line is not None and line.target == "/v1/models"]
    marked = [e for e in window if isinstance(e, ConsoleRequest)]
    assert len(models) == 3 and not any(isinstance(e, ConsoleRequest) for e in models)
    assert len(marked) >= REFRESHES  # a /metrics line at least per refresh
    assert set(marked) <= set(mine)  # only access lines are marked
    # every polled line but the other client's three /metrics (whichever three of them) is the watcher's
    assert len(mine) - len(marked) == 3, [e.message for e in mine if not isinstance(e, ConsoleRequest)]
    assert not any(isinstance(e, ConsoleRequest) for e in window if parse_access(e.message) is None)
