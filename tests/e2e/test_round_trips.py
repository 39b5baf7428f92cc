"""Round trips over a long link, counted from what the console sends and waits for (console.host.linkmeter: channels
opened, exec requests, commands of the host's command shell, HTTP requests through the forward), not timed: the
testbed host behind a 150-ms-each-way ProxyCommand (tests/support/delayproxy.py), so that exchanges sent together
really are in flight together.

- A steady refresh on an open connection: at most 2 round trips (it takes 1: the unit and the GPUs in one
  command, the HTTP reads side by side through the forward), no channel opened; the full one (every 10 s: the
  server's settings too) at most 2.
- `apply` steps 2 -> 3 on an open session, as the CLI runs it: the round trips outside the server's own start (from
  the plan to the restart, and from the healthy answer to the end) plus the start's detection (a poll of state and
  /health together: at most 2) stay within 5: the lock's channel opened beside the version's read (1), the lock
  answering with the unit (1), the switch (state, journal cursor, write, daemon-reload, restart: 1 command), and the
  verification's /server_info read beside the /health that answers ready (0). It was 9 (bound 10) with the version
  read before the lock, the write, daemon-reload and restart as three commands, and /server_info read after.
- A tune's start on an open session (the lock with its restore guard, the unit, the version, the model's
  architecture; then let go unconfirmed): at most TUNE_START_MAX.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from console.core.apply import edits_by_version, plan_apply
from console.core.change import ApplyState
from console.core.events import ApplyEvent, StepChanged
from console.core.session import Session, open_session
from console.core.status import HostView, HostWatcher, read_status
from console.core.tune import SpaceRequest, TuneRequest, plan_tune
from console.host.linkmeter import CHANNEL_OPEN, EXEC, MeterReading
from console.host.ssh import SshTransport
from console.workspace import Workspace
from tests.support.farlink import add_far_alias
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

STEADY_REFRESH_MAX = 2
APPLY_MAX = 5
DETECTION_MAX = 2  # state and /health polled together: a probe sent after the server turned healthy sees it
TUNE_START_MAX = 5  # was 6 while the guard asked for the unit file in a command of its own


@pytest.fixture
def far(pristine_gpu_host: GpuHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[GpuHost, str]]:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    yield pristine_gpu_host, add_far_alias(pristine_gpu_host, delay_ms=150)


def meter(session: Session) -> MeterReading:
    transport = session.host.transport
    assert isinstance(transport, SshTransport)
    return transport.meter.reading()


async def test_a_steady_refresh_costs_one_round_trip_and_no_channel(far: tuple[GpuHost, str]) -> None:
    host, alias = far
    async with open_session(alias, Workspace(host.workspace), ssh_config=str(host.ssh_config)) as session:
        rtt = await session.measure_round_trip(3)
        assert rtt is not None and rtt > 0.25  # the proxy's 300 ms are really there
        await read_status(session)  # the first refresh opens what later ones reuse
        await read_status(session, light=True)
        costs = []
        for _ in range(5):
            before = meter(session)
            status = await read_status(session, light=True)
            costs.append(meter(session) - before)
            assert status.sglang.healthy and status.service.active_state == "active" and len(status.gpus) == 4
        full_before = meter(session)
        await read_status(session)  # the full refresh (every 10 s in the console): /server_info and /model_info too
        full = meter(session) - full_before
    print(f"steady refreshes over 300 ms: {costs}; full: {full}")
    for cost in costs:
        assert cost.depth <= STEADY_REFRESH_MAX, costs
        assert cost.counts.get(CHANNEL_OPEN, 0) == 0 and cost.counts.get(EXEC, 0) == 0, costs
    assert max(c.depth for c in costs) == 1, costs
    # five requests at once where three connections were open: two opened beside the others, one round trip more
    assert full.depth <= STEADY_REFRESH_MAX, full


async def test_apply_costs_at_most_five_round_trips_beyond_the_servers_start(far: tuple[GpuHost, str]) -> None:
    host, alias = far
    readings: dict[str, MeterReading] = {}
    async with open_session(alias, Workspace(host.workspace), ssh_config=str(host.ssh_config)) as session:

        def on_event(event: ApplyEvent) -> None:
            if isinstance(event, StepChanged) and event.state in (ApplyState.STARTING, ApplyState.HEALTHY):
                readings[event.state.value] = meter(session)

        await read_status(session)  # the shells and the forward up, as on a console's open session: none in flight
        start = meter(session)
        edits = edits_by_version(["speculative-num-steps=3", "speculative-num-draft-tokens=4"])  # as `apply` does
        async with await plan_apply(session, edits, timeout_s=120) as pending:
            result = await pending.execute(on_event=on_event)
        end = meter(session)
    assert result.ok, (result.state, result.error)
    before_start = readings["starting"] - start
    after_healthy = end - readings["healthy"]
    outside = before_start.depth + after_healthy.depth
    print(f"apply over 300 ms: {before_start} before the start, {after_healthy} after healthy")
    assert outside + DETECTION_MAX <= APPLY_MAX, (before_start, after_healthy)
    assert after_healthy.depth == 0, after_healthy  # the verification's read went beside the last /health


async def test_the_consoles_view_of_the_host_carries_the_links_round_trip(far: tuple[GpuHost, str]) -> None:
    """What the header shows (console/tui/widgets/panels.py): the round trip the watcher measured on this link."""
    host, alias = far
    views: list[HostView] = []
    watcher = HostWatcher(alias, Workspace(host.workspace), on_view=views.append, ssh_config=str(host.ssh_config))
    async with open_session(alias, Workspace(host.workspace), ssh_config=str(host.ssh_config)) as session:
        first = await watcher.refresh(session)  # the first refresh is a full one: it pings the host too
        steady = await watcher.refresh(session)
    assert first.round_trip_ms is not None and 280 < first.round_trip_ms < 1000, first.round_trip_ms
    assert steady.round_trip_ms == first.round_trip_ms  # kept between pings


async def test_a_tune_start_finds_the_unit_file_in_the_guards_own_command(far: tuple[GpuHost, str]) -> None:
    host, alias = far
    request = TuneRequest(SpaceRequest(algorithms=("EAGLE",), steps=(1, 2), spec_v2=(True,)), concurrencies=(1,))
    async with open_session(alias, Workspace(host.workspace), ssh_config=str(host.ssh_config)) as session:
        await read_status(session)  # the connection and the version known, as in the console
        before = meter(session)
        pending = await plan_tune(session, request)
        planned = meter(session) - before
        assert len(pending.space.candidates) == 2
        await pending.abort()
    print(f"a tune's start over 300 ms: {planned}")
    assert planned.depth <= TUNE_START_MAX, planned
