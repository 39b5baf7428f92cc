"""The live picture of one host, as the console's dashboard shows it: refreshed on an interval, with history.

`Monitor` is pure state: each refresh (a HostStatus, the /metrics histograms, what the unit asks) goes in,
a frozen `HostView` comes out with everything a renderer needs and nothing it has to work out itself:
each part's age (a value is never shown as live when it is not), history for sparklines, latency
percentiles over the last window (from histogram buckets merged across ranks), every speculative value
marked where SGLang resolved something else than the unit asks, the SGLang processes' GPU memory, alerts.

`HostWatcher` keeps one host's session open for as long as the console runs: it connects (retrying with
backoff, showing why), refreshes after each refresh completes plus the interval (a slow host slows only
itself), re-reads the unit when the service restarted, and follows the journal across reconnects. The
actions (apply, restart, benchmark) use the same session.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from console.core.session import Session, open_session
from console.core.status.host import HostStatus, read_status
from console.host.base import AccessRefused, ConnectionDropped, HostError, JournalEntry
from console.host.profile import ProfileError
from console.host.ssh import ConnectionState
from console.host.targets import Target
from console.sglang.histograms import ITL, TTFT, Histogram, window_quantiles
from console.sglang.specmode import SpecMode, setup_short, spec_mode
from console.sglang.vocabulary import View, dests, runs_as
from console.workspace import Workspace

DEFAULT_INTERVAL_S = 1.0
HISTORY_SAMPLES = 300  # five minutes at 1 Hz
LATENCY_WINDOW_S = 60.0
QUANTILES = (0.5, 0.95, 0.99)
# The speculative setup the dashboard shows, in order, and the serving values beside it.
SETUP_KEYS = dests(View.DASHBOARD)
HOT_C = 85.0  # a GPU this hot is about to throttle
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown", "hw_power_brake_slowdown"})


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Latency:
    """Percentiles (ms) over the last window, from the merged histograms; None where nothing was observed."""

    ttft_ms: Mapping[float, float | None] = field(default_factory=dict)
    itl_ms: Mapping[float, float | None] = field(default_factory=dict)
    requests: float = 0.0  # requests that got a first token in the window
    window_s: float = 0.0


@dataclass(frozen=True)
class SetupValue:
    """A resolved server value beside what the unit asks for it."""

    dest: str
    asked: Any  # the unit's explicit value, or None when the unit leaves it to SGLang
    resolved: Any
    explicit: bool

    @property
    def aliased(self) -> bool:
        """SGLang runs what the unit asks under its own other name (NEXTN as EAGLE): the same setup, by design."""
        return self.explicit and self.resolved is not None and runs_as(self.dest, self.asked) == self.resolved

    @property
    def changed(self) -> bool:
        """SGLang runs something else than the unit explicitly asks (it adjusted it silently); not an alias."""
        from console.core.change import values_equal

        return (
            self.explicit
            and self.resolved is not None
            and not values_equal(self.asked, self.resolved)
            and not self.aliased
        )


@dataclass(frozen=True)
class HostView:
    """One host as the dashboard shows it at `at`."""

    label: str
    at: datetime
    connection: ConnectionState
    status: HostStatus | None = None  # the last refresh that reached the host
    refreshed_at: datetime | None = None
    service_at: datetime | None = None  # when each part was last read successfully
    sglang_at: datetime | None = None
    gpus_at: datetime | None = None
    setup: tuple[SetupValue, ...] = ()
    latency: Latency = Latency()
    gpu_util: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    gpu_power: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    throughput: tuple[float, ...] = ()
    accept_length: tuple[float, ...] = ()
    sglang_gpu_memory_mib: float | None = None
    # spec v2 worker and overlap: the server's resolved values where it answers, else the rules on the unit
    spec_mode: SpecMode | None = None
    alerts: tuple[str, ...] = ()
    error: str | None = None  # why the host cannot be reached at all (before the first refresh, or a refusal)
    interval_s: float = DEFAULT_INTERVAL_S
    round_trip_ms: float | None = None  # the SSH link's round trip (None: no link, or not measured yet)

    def age_s(self, part_at: datetime | None, now: datetime | None = None) -> float | None:
        if part_at is None:
            return None
        return max(0.0, ((now or _now()) - part_at).total_seconds())

    def is_stale(self, part_at: datetime | None, now: datetime | None = None) -> bool:
        """A value older than three refresh intervals (and at least 3 s) is not live: show its age, dimmed."""
        age = self.age_s(part_at, now)
        return age is None or age > max(3.0, 3 * self.interval_s)

    @property
    def connected(self) -> bool:
        return self.connection.phase in ("connected", "local")

    @property
    def spec_v2(self) -> bool | None:
        """Whether the setup runs the spec-v2 worker (None: no speculation, or unknown)."""
        return self.spec_mode.spec_v2 if self.spec_mode is not None else None


@dataclass(frozen=True)
class UnitAsk:
    """What the unit on disk asks for: its explicit values (SGLang's dest names), and whether the rules say
    that version runs the spec-v2 worker and the overlap scheduler with it (what the dashboard shows while
    the server does not answer)."""

    values: Mapping[str, Any]
    spec_v2: bool | None = None
    overlap: bool | None = None

    @property
    def rules(self) -> SpecMode | None:
        if self.spec_v2 is None and self.overlap is None:
            return None
        return SpecMode(self.spec_v2, self.overlap, "rules")


def unit_ask(unit_text: str, version: str) -> UnitAsk:
    from console.sglang.argv import parse_argv
    from console.sglang.flags import flag_table
    from console.sglang.rules import check_launch
    from console.sglang.unit import UnitFile

    unit = UnitFile.parse(unit_text, version)
    flags = unit.flags()
    parsed = parse_argv(flags, flag_table(version))
    report = check_launch(flags, unit.environment(), version)
    return UnitAsk({dest: parsed.values.get(dest) for dest in parsed.explicit}, report.spec_v2, report.overlap_schedule)


def setup_label(view: HostView) -> str:
    """A short name for the running speculative setup, e.g. `eagle3 s2 k1 d3 v2` or `no spec` (the runs table's
    form: console.sglang.specmode.setup_short)."""
    status = view.status
    if status is None or not status.sglang.version:
        return ""
    return setup_short(status.sglang.model_dump(), view.spec_mode)


def running_spec_mode(status: HostStatus, asked: UnitAsk | None) -> SpecMode | None:
    """The dashboard's verdict on the spec-v2 worker and the overlap: the server's resolved values where it
    answered this refresh, else the version's rules on the unit."""
    sg = status.sglang
    answered = sg.error is None and sg.url is not None
    return spec_mode(sg.version, sg.model_dump() if answered else None, rules=asked.rules if asked else None)


def setup_values(status: HostStatus, asked: Mapping[str, Any] | None) -> tuple[SetupValue, ...]:
    sg = status.sglang
    unit = asked or {}
    return tuple(SetupValue(k, unit.get(k), getattr(sg, k, None), k in unit) for k in SETUP_KEYS)


def sglang_gpu_memory(status: HostStatus) -> float | None:
    """GPU memory of the SGLang processes: the unit's main process and SGLang's own (`sglang::scheduler` ...)."""
    pid = status.service.main_pid
    used = [
        p.used_memory_mib
        for p in status.gpu_processes
        if p.used_memory_mib is not None and (p.pid == pid or (p.process_name or "").startswith("sglang"))
    ]
    return sum(used) if used else None


def alerts_for(view: HostView) -> tuple[str, ...]:
    """What an operator scanning many hosts must not miss. (Staleness is not among them: it grows with the
    clock, so the renderer says it at the moment it draws.)"""
    out: list[str] = []
    if view.error:
        out.append("unreachable")
    elif view.connection.phase == "reconnecting":
        out.append("reconnecting")
    status = view.status
    if status is None:
        return tuple(out)
    svc = status.service
    if svc.error is None and svc.active_state not in ("active", None):
        out.append(f"service {svc.active_state}")
    if svc.need_daemon_reload:
        out.append("unit changed on disk")
    if not status.sglang.healthy and svc.active_state == "active":
        out.append("unhealthy")
    for gpu in status.gpus:
        if THERMAL_REASONS & set(gpu.throttle_reasons):
            out.append(f"GPU {gpu.index} throttled")
        elif gpu.temperature_gpu is not None and gpu.temperature_gpu >= HOT_C:
            out.append(f"GPU {gpu.index} {gpu.temperature_gpu:.0f}°C")
    if status.gpu_error:
        out.append("no GPU data")
    production = status.production
    if production is not None and production.in_sync is False:  # each host against its own (a set's NAME.HOST)
        out.append(f"drift from {production.snapshot}")
    return tuple(out)


class Monitor:
    """The history and derived figures of one host, updated by each refresh (pure: the caller does the I/O)."""

    def __init__(self, label: str, *, interval_s: float = DEFAULT_INTERVAL_S, history: int = HISTORY_SAMPLES) -> None:
        self.label = label
        self.interval_s = interval_s
        self._history = history
        self._util: dict[int, deque[float]] = {}
        self._power: dict[int, deque[float]] = {}
        self._throughput: deque[float] = deque(maxlen=history)
        self._accept: deque[float] = deque(maxlen=history)
        self._scrapes: deque[tuple[float, Mapping[str, Histogram]]] = deque()
        self.view = HostView(label, _now(), ConnectionState("connecting"), interval_s=interval_s)

    def _series(self, store: dict[int, deque[float]], index: int) -> deque[float]:
        if index not in store:
            store[index] = deque(maxlen=self._history)
        return store[index]

    def connection(self, state: ConnectionState, *, error: str | None = None) -> HostView:
        self.view = _replace(self.view, at=_now(), connection=state, error=error)
        return self._with_alerts()

    def refreshed(
        self,
        status: HostStatus,
        *,
        histograms: Mapping[str, Histogram] | None = None,
        asked: UnitAsk | None = None,
        connection: ConnectionState | None = None,
        at: datetime | None = None,
        clock: float | None = None,
        round_trip_ms: float | None = None,
    ) -> HostView:
        """Take one refresh. `clock` is a monotonic time for the latency window (time.monotonic())."""
        at = at or _now()
        old = self.view
        for gpu in status.gpus:
            if gpu.utilization_gpu is not None:
                self._series(self._util, gpu.index).append(gpu.utilization_gpu)
            if gpu.power_draw_w is not None:
                self._series(self._power, gpu.index).append(gpu.power_draw_w)
        sg = status.sglang
        if sg.healthy:
            self._throughput.append(sg.gen_throughput or 0.0)
            accept = sg.spec_accept_length or sg.avg_spec_accept_length
            if accept:
                self._accept.append(accept)
        latency = self._latency(histograms, time.monotonic() if clock is None else clock) if histograms else old.latency
        service_ok = status.service.error is None
        sglang_ok = status.sglang.error is None and status.sglang.url is not None
        view = HostView(
            label=self.label,
            at=at,
            connection=connection or old.connection,
            status=status,
            refreshed_at=at,
            service_at=at if service_ok else old.service_at,
            sglang_at=at if sglang_ok else old.sglang_at,
            gpus_at=at if status.gpu_error is None else old.gpus_at,
            setup=setup_values(status, asked.values if asked else None),
            spec_mode=running_spec_mode(status, asked),
            latency=latency,
            gpu_util={i: tuple(d) for i, d in self._util.items()},
            gpu_power={i: tuple(d) for i, d in self._power.items()},
            throughput=tuple(self._throughput),
            accept_length=tuple(self._accept),
            sglang_gpu_memory_mib=sglang_gpu_memory(status),
            interval_s=self.interval_s,
            round_trip_ms=round_trip_ms if round_trip_ms is not None else old.round_trip_ms,
        )
        self.view = view
        return self._with_alerts()

    def _latency(self, histograms: Mapping[str, Histogram], clock: float) -> Latency:
        """Percentiles over the last LATENCY_WINDOW_S: against the oldest scrape inside the window."""
        self._scrapes.append((clock, dict(histograms)))
        while len(self._scrapes) > 2 and clock - self._scrapes[1][0] >= LATENCY_WINDOW_S:
            self._scrapes.popleft()
        then_clock, then = self._scrapes[0]
        if then_clock == clock:
            return Latency(window_s=0.0)
        q = window_quantiles(histograms, then, QUANTILES)
        ttft = histograms.get(TTFT)
        requests = ttft.minus(then.get(TTFT)).count if ttft is not None else 0.0
        return Latency(
            ttft_ms={k: None if v is None else v * 1000 for k, v in q.get(TTFT, {}).items()},
            itl_ms={k: None if v is None else v * 1000 for k, v in q.get(ITL, {}).items()},
            requests=requests,
            window_s=clock - then_clock,
        )

    def _with_alerts(self) -> HostView:
        self.view = _replace(self.view, alerts=alerts_for(self.view))
        return self.view


def _replace(view: HostView, **changes: Any) -> HostView:
    from dataclasses import replace

    return replace(view, **changes)


# --- the loop ------------------------------------------------------------------------------------------

ViewSink = Callable[[HostView], None]
JournalSink = Callable[[list[JournalEntry]], None]
CONNECT_RETRY_S = (1.0, 2.0, 5.0, 10.0, 30.0)
JOURNAL_BACKLOG = 200
JOURNAL_BATCH_S = 0.05  # lines arriving this close together reach the screen as one batch
FULL_REFRESH_S = 10.0  # the server's settings are read again at least this often


class HostWatcher:
    """One host for the whole life of the console: its session, its refresh loop, its journal."""

    def __init__(
        self,
        target: str | Target,
        workspace: Workspace,
        *,
        on_view: ViewSink,
        on_journal: JournalSink | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        ssh_config: str | None = None,
    ) -> None:
        self.target = target
        self.workspace = workspace
        self.label = target if isinstance(target, str) else target.label
        self.monitor = Monitor(self.label, interval_s=interval_s)
        self.interval_s = interval_s
        self.ssh_config = ssh_config
        self.session: Session | None = None
        self._on_view = on_view
        self._on_journal = on_journal or (lambda _lines: None)
        self._connected = asyncio.Event()
        self._asked: UnitAsk | None = None
        self._asked_for: tuple[Any, ...] | None = None  # (main pid, start time, fragment) the unit was read for
        self._last_version: str | None = None  # the SGLang version the server last reported
        self._told: set[str] = set()  # the session's notices already shown in the journal pane
        self._refresh_now = asyncio.Event()
        self._full_at = -math.inf

    def refresh_now(self) -> None:
        """Refresh at once instead of at the end of the interval (after an action, on the operator's key)."""
        self._refresh_now.set()

    async def wait_connected(self) -> Session:
        await self._connected.wait()
        assert self.session is not None
        return self.session

    def _connection_changed(self, state: ConnectionState) -> None:
        self._on_view(self.monitor.connection(state))

    async def run(self) -> None:
        """Connect (retrying), then refresh forever. Cancel to stop; the session closes with it."""
        attempt = 0
        while True:
            try:
                async with open_session(
                    self.target, self.workspace, ssh_config=self.ssh_config, on_connection=self._connection_changed
                ) as session:
                    self.session = session
                    self._connected.set()
                    attempt = 0
                    self._on_view(self.monitor.connection(session.connection))
                    await self._refresh_forever(session)
            except HostError as exc:
                attempt += 1
                permanent = _is_permanent(exc)
                state = ConnectionState("failed" if permanent else "reconnecting", attempt, str(exc))
                self._on_view(self.monitor.connection(state, error=str(exc)))
                if permanent:
                    return
                await asyncio.sleep(CONNECT_RETRY_S[min(attempt, len(CONNECT_RETRY_S)) - 1])
            finally:
                self._connected.clear()
                self.session = None

    async def _refresh_forever(self, session: Session) -> None:
        while True:
            await self.refresh(session)
            self._refresh_now.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await self._refresh_now.wait()

    async def refresh(self, session: Session) -> HostView:
        """One refresh. The server's settings (/server_info, /model_info) are read in full every
        FULL_REFRESH_S and whenever the service restarted; the figures that move are read every time."""
        now = time.monotonic()
        light = now - self._full_at < FULL_REFRESH_S and self._asked_for is not None
        if light:
            status = await read_status(session, light=True)
        else:  # the link's round trip is measured with each full read, side by side with it (no round trip more)
            status, _ = await asyncio.gather(read_status(session), _measure_round_trip(session))
        if not light or _restarted(status, self._asked_for):
            if light:  # the service restarted since the last full read: read its new settings now
                status = await read_status(session)
            self._full_at = now
        client = await _client_or_none(session)
        self._last_version = status.sglang.version or self._last_version
        told = [n for n in status.notices if n not in self._told]  # once per console, not once per reconnect
        if told:
            self._told.update(told)
            self._on_journal([journal_notice(f"opsconsole: {session.label}: {n}") for n in told])
        await self._read_unit_if_restarted(session, status)
        view = self.monitor.refreshed(
            status,
            histograms=client.last_histograms if client is not None else None,
            asked=self._asked,
            connection=session.connection,
            round_trip_ms=None if session.round_trip_s is None else session.round_trip_s * 1000,
        )
        self._on_view(view)
        return view

    async def _read_unit_if_restarted(self, session: Session, status: HostStatus) -> None:
        """What the unit asks, read again whenever the service (re)started or the unit changed on disk."""
        svc = status.service
        key = (svc.main_pid, svc.started_at, svc.need_daemon_reload, status.sglang.version)
        if key == self._asked_for:
            return
        self._asked_for = key  # read once per start: an unreadable unit is tried again when the service changes
        try:
            version, source = await session.sglang_version()
            if source == "newest" and self._last_version:
                # The server is (re)starting: the version it ran a moment ago is a far better guess than the newest.
                version = self._last_version
            self._asked = unit_ask(await session.service.read_unit(), version)
        except (HostError, ValueError):
            self._asked = None  # an unreadable or foreign unit: the setup is shown without marks

    async def follow_journal(self) -> None:
        """The journal's backlog, then new lines as they come, in batches; survives reconnects (by cursor)."""
        loop = asyncio.get_running_loop()
        after: str | None = None
        pending: list[JournalEntry] = []
        scheduled: asyncio.TimerHandle | None = None

        def flush() -> None:
            nonlocal scheduled
            scheduled = None
            if pending:
                self._on_journal(pending.copy())
                pending.clear()

        pause = 1.0
        told = ""  # the last failure shown in the journal, said once, not at every attempt
        while True:
            session = await self.wait_connected()
            started = loop.time()
            ended_by_itself = failed = False
            try:
                lines = JOURNAL_BACKLOG if after is None else 1000
                async for entry in session.service.journal(lines=lines, follow=True, after_cursor=after):
                    after = entry.cursor
                    pending.append(session.requests.tag(entry))  # the console's own requests, marked to fold
                    if scheduled is None:  # at most one batch per JOURNAL_BATCH_S, however fast lines come
                        scheduled = loop.call_later(JOURNAL_BATCH_S, flush)
                    told = ""
                ended_by_itself = True
            except ConnectionDropped:
                pass  # the session reconnects: follow again from the last cursor once it has
            except HostError as exc:  # the host refuses (sudo wants a password, no journal access): say so
                failed = True
                if str(exc) != told:
                    told = str(exc)
                    self._on_journal([journal_notice(f"opsconsole warning: cannot follow the journal: {exc}")])
            # A follow that keeps ending at once (journalctl fails or is refused) is retried less and less often,
            # up to every 30 s: a new channel every second per host costs the console CPU for nothing.
            quick = loop.time() - started < 5.0
            pause = min(pause * 2, 30.0) if quick and (failed or ended_by_itself) else 1.0
            await asyncio.sleep(pause)  # between attempts to follow again, not a wait for a condition


def journal_notice(message: str) -> JournalEntry:
    """A line of the console's own among the journal's (its cursor is never a journal cursor)."""
    now = datetime.now(UTC)
    return JournalEntry(cursor=f"opsconsole-notice-{now.timestamp()}", timestamp=now, message=message)


def _restarted(status: HostStatus, seen: tuple[Any, ...] | None) -> bool:
    """The service runs another process than at the last full read (or its unit was changed on disk)."""
    svc = status.service
    return seen is None or seen[:3] != (svc.main_pid, svc.started_at, svc.need_daemon_reload)


async def _measure_round_trip(session: Session) -> None:
    """One ping of the host (kept by the transport); a failed ping leaves the last figure in place."""
    with contextlib.suppress(HostError):
        await session.measure_round_trip(samples=1)


async def _client_or_none(session: Session) -> Any:
    try:
        return await session.sglang()
    except HostError:
        return None


def _is_permanent(exc: HostError) -> bool:
    """Errors no retry can fix: an unknown or changed host key, a refused login, a malformed target."""
    return isinstance(exc, AccessRefused | ProfileError)
