"""Hosts for the console's Pilot and snapshot tests: HostViews built from the core's own models and the core's
own Monitor, fed to the app by a scripted source in place of the SSH/HTTP watcher (the end-to-end tests use
the real HostWatcher against the demo host and the testbed)."""

from __future__ import annotations

import argparse
import asyncio
import io
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from textual.app import App
from textual.pilot import Pilot
from textual.widget import Widget

from console.cli.connect import build_app
from console.core.status import ConnectionStatus, HostStatus, HostView, Monitor, ServiceStatus, SglangStatus, UnitAsk
from console.host.base import JournalEntry
from console.host.gpu import GpuProcess, GpuSample
from console.host.ssh import ConnectionState
from console.sglang.histograms import ITL, TTFT, Histogram
from console.tui.app import ConsoleOptions, OpsConsoleApp
from console.tui.config import ConsoleConfig
from console.tui.runners import Runners
from console.tui.screens.edit import EditScreen
from console.workspace import Workspace

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def gpu(
    index: int, *, util: float = 87.0, power: float = 412.0, temp: float = 63.0, throttle: tuple[str, ...] = ()
) -> GpuSample:
    return GpuSample(
        index=index,
        name="NVIDIA H200",
        uuid=f"GPU-{index:04d}",
        utilization_gpu=util,
        utilization_memory=40.0,
        memory_used_mib=131000.0,
        memory_total_mib=143771.0,
        power_draw_w=power,
        power_limit_w=700.0,
        temperature_gpu=temp,
        clocks_sm_mhz=1980.0,
        clocks_mem_mhz=3201.0,
        pstate="P0",
        throttle_reasons=list(throttle),
    )


def status(
    label: str = "gpu-a",
    *,
    gpus: int = 4,
    active: str = "active",
    healthy: bool = True,
    gpu_error: str | None = None,
    service_error: str | None = None,
    draft_tokens: int = 3,
    **gpu_kwargs: Any,
) -> HostStatus:
    service = (
        ServiceStatus(unit="sglang.service", error=service_error)
        if service_error
        else ServiceStatus(
            unit="sglang.service",
            active_state=active,
            sub_state="running" if active == "active" else "failed",
            main_pid=4242 if active == "active" else None,
            started_at=NOW - timedelta(hours=3, minutes=7, seconds=9),
            uptime_s=3 * 3600 + 7 * 60 + 9.0 if active == "active" else None,
            n_restarts=1,
            result="success" if active == "active" else "exit-code",
            unit_file_state="enabled",
            need_daemon_reload=False,
            fragment_path="/etc/systemd/system/sglang.service",
        )
    )
    sglang = SglangStatus(
        url="http://127.0.0.1:41000",
        healthy=healthy,
        version="0.5.9",
        model_path="Qwen/Qwen3.5-122B-A10B-FP8",
        served_model_name="qwen3.5-122b",
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/qwen-eagle3",
        speculative_num_steps=2,
        speculative_eagle_topk=1,
        speculative_num_draft_tokens=draft_tokens,
        disable_overlap_schedule=False,
        max_running_requests=48,
        effective_max_running_requests_per_dp=48,
        max_total_num_tokens=1511067,
        avg_spec_accept_length=2.61,
        last_gen_throughput=1234.5,
        num_running_reqs=12,
        num_queue_reqs=0,
        gen_throughput=1234.5,
        spec_accept_length=2.6,
        spec_accept_rate=0.8,
        token_usage=0.34,
        cache_hit_rate=0.12,
    )
    samples = [] if gpu_error else [gpu(i, **gpu_kwargs) for i in range(gpus)]
    return HostStatus(
        target=label,
        connection=ConnectionStatus(transport="ssh", state="connected", detail="connected"),
        service=service,
        sglang=sglang,
        gpus=samples,
        gpu_processes=[
            GpuProcess(
                gpu_uuid=f"GPU-{i:04d}", pid=4300 + i, process_name="sglang::scheduler", used_memory_mib=128000.0
            )
            for i in range(len(samples))
        ],
        gpu_error=gpu_error,
        refresh_ms=42.0,
    )


def _hist(counts: list[float]) -> Histogram:
    bounds = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, math.inf)
    total = 0.0
    buckets = []
    for le, c in zip(bounds, counts + [0.0] * (len(bounds) - len(counts)), strict=True):
        total += c
        buckets.append((le, total))
    return Histogram(tuple(buckets))


def view(label: str = "gpu-a", *, samples: int = 40, at: datetime = NOW, **kwargs: Any) -> HostView:
    """A host after `samples` one-second refreshes, through the core's own Monitor (history, latency, marks)."""
    monitor = Monitor(label)
    asked = UnitAsk(
        {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 2, "speculative_num_draft_tokens": 8}, True
    )
    result = None
    for i in range(samples):
        load = 0.5 + 0.5 * math.sin(i / 5)
        s = status(label, util=round(40 + 55 * load), power=round(250 + 400 * load), **kwargs)
        hist = {TTFT: _hist([0, 2 * i, 10 * i, 3 * i, i]), ITL: _hist([5 * i, 40 * i, 6 * i])}
        result = monitor.refreshed(
            s,
            histograms=hist,
            asked=asked,
            connection=ConnectionState("connected"),
            at=at - timedelta(seconds=samples - 1 - i),
            clock=float(i),
        )
    assert result is not None
    return result


def journal_lines(
    n: int, *, start: datetime = NOW, prefix: str = "Decode batch, #running-req: 12"
) -> list[JournalEntry]:
    return [
        JournalEntry(
            cursor=f"c{start.timestamp()}-{i}", timestamp=start + timedelta(seconds=i), message=f"{prefix}, line {i}"
        )
        for i in range(n)
    ]


STARTUP = [
    "[2026-11-30 11:58:01 TP0] Load weight begin. avail mem=139.01 GB",
    "[2026-11-30 11:58:40 TP0] Load weight end. type=Qwen3_5MoeForConditionalGeneration",
    "[2026-11-30 11:58:41 TP0] KV Cache is allocated. #tokens: 1511067",
    "[2026-11-30 11:58:42 TP0] Capture cuda graph begin. This can take up to several minutes.",
    "[2026-11-30 11:59:10 TP0] Capture cuda graph end. Time elapsed: 28.10 s",
    "[2026-11-30 11:59:12] WARNING: the draft model's vocabulary differs from the target's",
    "[2026-11-30 11:59:13] server_args=ServerArgs(model_path='Qwen/Qwen3.5-122B-A10B-FP8', api_key='***')",
    "[2026-11-30 11:59:20] The server is fired up and ready to roll!",
]


def startup_journal() -> list[JournalEntry]:
    return [
        JournalEntry(cursor=f"s{i}", timestamp=NOW - timedelta(minutes=2) + timedelta(seconds=i), message=m)
        for i, m in enumerate(STARTUP)
    ]


class ScriptedHost:
    """A HostSource that shows what the test hands it (push a view, push journal lines). Without a session it is a
    host that has not connected yet; with one (a FixedSession) the actions that need a connected host open."""

    def __init__(
        self,
        label: str,
        on_view: Callable[[HostView], None],
        on_journal: Callable[[list[JournalEntry]], None],
        session: Any = None,
    ) -> None:
        self.label = label
        self.session = session
        self.on_view = on_view
        self.on_journal = on_journal
        self.refreshes = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        await self._stop.wait()

    async def follow_journal(self) -> None:
        await self._stop.wait()

    def refresh_now(self) -> None:
        self.refreshes += 1


def scripted_app(
    labels: tuple[str, ...] = ("gpu-a",),
    *,
    read_only: bool = False,
    config: ConsoleConfig | None = None,
    views: dict[str, HostView] | None = None,
    journal: dict[str, list[JournalEntry]] | None = None,
    clock: Callable[[], datetime] = lambda: NOW,
    workspace: Workspace | None = None,
    runners: Runners | None = None,
    sessions: dict[str, Any] | None = None,
    groups: tuple[str, ...] = (),
    deployments: tuple[Any, ...] = (),
    read_router: Any = None,
) -> OpsConsoleApp:
    """The console on scripted hosts; `views` and `journal` are shown as soon as the app is mounted. `runners`: what
    freeze, bench, restore, tune and a roll run (scripted ones); `sessions`: the hosts that are connected, and how;
    `groups`: the groups the hosts came from (`connect @trio`), for a roll over the overview's selection;
    `deployments`: `connect DEPLOYMENT`'s (its members the labels), `read_router` a scripted smg for a PD one."""
    sources: dict[str, ScriptedHost] = {}

    def make(
        label: str, on_view: Callable[[HostView], None], on_journal: Callable[[list[JournalEntry]], None]
    ) -> ScriptedHost:
        sources[label] = ScriptedHost(label, on_view, on_journal, (sessions or {}).get(label))
        if views and label in views:
            on_view(views[label])
        if journal and label in journal:
            on_journal(journal[label])
        return sources[label]

    options = ConsoleOptions(labels, config or ConsoleConfig(), read_only, workspace, runners or Runners(),
                             groups=groups, deployments=deployments, read_router=read_router)  # fmt: skip
    app = OpsConsoleApp(options, make, clock=clock)
    app.scripted = sources  # type: ignore[attr-defined]
    return app


async def wait_until(pilot: Pilot[Any], condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Let the app run until `condition` holds (a deadline, never a fixed sleep). The deadline only bounds how long
    a broken test takes to say so: on a loaded machine a condition that holds can take seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (condition() and laid_out(pilot.app)):
        if loop.time() > deadline:  # with what the terminal showed: a timeout on a busy CI machine says why
            shown = screen_text(cast(OpsConsoleApp, pilot.app))
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; the screen showed:\n{shown}")
        await pilot.pause(0.02)


async def without_cursor(pilot: Pilot[Any]) -> None:
    """Take focus off the form, so that no text cursor (whose blink, under load, can land either
    way) decides the picture; Pilot tests check where focus goes."""
    pilot.app.screen.set_focus(None)
    await wait_until(pilot, lambda: pilot.app.focused is None, "no focused field")


def laid_out(app: App[Any]) -> bool:
    """No layout pending on the screen or any widget of it. A widget whose content changed is drawn from the
    compositor at once, but at its old size until the layout that follows at the next idle: screen_text read in
    between can show what the terminal never does (a grown status's first line only; once, on a busy machine).
    Textual lays out before it paints, so a condition on what is shown is checked only then. A screen just pushed
    has no layout pending either until it resumes and is laid out the first time: until then its compositor has
    nothing to show (a confirmation read as having no rows, once, on a busy machine)."""
    screen = app.screen
    if screen._compositor.root is not screen:
        return False
    return not screen._layout_required and not any(widget._layout_required for widget in screen.walk_children(Widget))


def screen_text(app: OpsConsoleApp) -> str:
    """What the terminal shows now, as plain text (the compositor's own render of the screen)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def notices(app: OpsConsoleApp) -> str:
    """The toasts the app has up now (title and message), as text."""
    return "\n".join(f"{n.title}: {n.message}" for n in app._notifications)


def modal_rows(app: OpsConsoleApp) -> list[str]:
    """The lines of the modal box on top (between its left and right borders), stripped."""
    rows = []
    for line in screen_text(app).splitlines():
        if line.count("█") >= 2:
            rows.append(line[line.index("█") + 1 : line.rindex("█")].strip())
    return rows


# --- fixed hosts for the editor's and the progress screen's snapshots ------------------------------------

DEMO_UNIT = """[Unit]
Description=SGLang server

[Service]
Environment="SGLANG_ENABLE_SPEC_V2=False"
ExecStart=/usr/bin/python3 -m sglang.launch_server \\
    --model-path Qwen/Qwen3.5-122B-A10B-FP8 \\
    --tp-size 4 \\
    --speculative-algorithm EAGLE3 \\
    --speculative-draft-model-path /models/qwen-eagle3 \\
    --speculative-num-steps 2 \\
    --speculative-eagle-topk 1 \\
    --speculative-num-draft-tokens 3
"""


class FixedService:
    """The service part of a session, fixed: one unit, two backups."""

    unit = "sglang.service"

    def __init__(self, unit_text: str) -> None:
        self.unit_text = unit_text

    async def read_unit(self) -> str:
        return self.unit_text

    async def backups(self) -> list[Any]:
        from console.host.base import UnitBackup

        return [
            UnitBackup(
                "/etc/systemd/system/sglang.service.bak-20261129T221500Z", NOW - timedelta(hours=13, minutes=45)
            ),
            UnitBackup("/etc/systemd/system/sglang.service.bak-20261128T090000Z", NOW - timedelta(days=2, hours=3)),
        ]

    async def read_backup(self, backup: Any) -> str:
        return self.unit_text.replace("--speculative-num-steps 2", "--speculative-num-steps 1")


class FixedClient:
    """The SGLang client of a FixedSession: /server_info of a server that runs the unit as the rules resolve it."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    async def server_info(self) -> dict[str, Any]:
        return self.info


class FixedSession:
    """What the editor asks of a session, answered from fixed data (the snapshots need fixed screens). Without a
    workspace it has no logs/ (no records: the editor predicts nothing); with one, the records written there."""

    def __init__(
        self,
        unit_text: str = DEMO_UNIT,
        version: str = "0.5.9",
        slo: tuple[tuple[str, float], ...] = (),
        workspace: Workspace | None = None,
        label: str = "gpu-a",
    ) -> None:
        from types import SimpleNamespace

        from console.secrets import SecretMask

        self.service = FixedService(unit_text)
        self.version = version
        self.target = SimpleNamespace(slo=slo)  # the profile's [slo] (console.host.targets.Target.slo)
        self.workspace = workspace
        self.label = label
        self.secrets = SecretMask()

    async def sglang_version(self) -> tuple[str, str]:
        return self.version, "server"

    async def sglang(self) -> FixedClient:
        from tests.support.snapshots import server_info

        return FixedClient(server_info(self.service.unit_text, self.version))


START_LINES = [
    "[2026-11-30 11:58:01 TP0] Load weight begin. avail mem=139.01 GB",
    "[2026-11-30 11:58:40 TP0] Load weight end. type=Qwen3_5MoeForConditionalGeneration",
    "[2026-11-30 11:58:41 TP0] KV Cache is allocated. #tokens: 1511067",
    "[2026-11-30 11:58:42 TP0] Capture cuda graph begin. This can take up to several minutes.",
    "[2026-11-30 11:59:10 TP0] Capture cuda graph end. Time elapsed: 28.10 s",
    "[2026-11-30 11:59:11 TP0] Capture draft cuda graph begin.",
    "[2026-11-30 11:59:15 TP0] Capture draft cuda graph end.",
    "[2026-11-30 11:59:15 TP0] Capture draft extend cuda graph begin.",
    "[2026-11-30 11:59:18 TP0] Capture draft extend cuda graph end.",
    "[2026-11-30 11:59:19] INFO:     Uvicorn running on http://127.0.0.1:30000",
    "[2026-11-30 11:59:20] The server is fired up and ready to roll!",
]
FAIL_LINES = [
    "[2026-11-30 11:58:01 TP0] Load weight begin. avail mem=139.01 GB",
    "Traceback (most recent call last):",
    "OSError: /models/gone does not appear to have a file named config.json.",
    "sglang.service: Main process exited, code=exited, status=1/FAILURE",
    "sglang.service: Failed with result 'exit-code'.",
]


class ScriptedPending:
    """A PendingApply whose execute() plays a fixed apply through the core's own state machine and phase
    tracker (fixed times), for the progress screen's snapshots."""

    restart_only = False

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.aborted: str | None = None

    def request_abort(self, why: str = "") -> None:
        self.aborted = why

    async def execute(self, on_event: Callable[[Any], None]) -> Any:
        from console.core.apply.run import ApplyResult, StartWatch
        from console.core.change import ApplyState, EditRequest, Rollout, build_plan, verify_resolved
        from console.core.events import LogLine, PhaseChanged, StepChanged
        from console.core.phases import PhaseTracker
        from console.sglang.rules import check_launch
        from console.sglang.unit import UnitFile

        edits = EditRequest(set_flags=(("--speculative-num-steps", "3"),))
        plan = build_plan(
            DEMO_UNIT, edits, unit_name="sglang.service", version="0.5.9", version_source="server",
            parse_unit=lambda t: UnitFile.parse(t, "0.5.9"), check=check_launch,
        )  # fmt: skip
        rollout = Rollout.start(NOW)
        result = ApplyResult(rollout, plan, "gpu-a", "sglang.service")
        clock = [NOW]

        def step(state: ApplyState, detail: str = "") -> None:
            clock[0] += timedelta(seconds=1)
            rollout.advance(state, clock[0], detail)
            on_event(StepChanged(state, detail, clock[0]))

        def start(lines: list[str], kind: str) -> StartWatch:
            tracker = PhaseTracker.for_start(speculative=True)
            for i, line in enumerate(lines):
                at = NOW + timedelta(seconds=5 + 8 * i)
                entry = JournalEntry(cursor=f"{kind}{i}", timestamp=at, message=line)
                on_event(LogLine(entry, kind))  # type: ignore[arg-type]
                for event in tracker.feed(line, at):
                    phases = tuple(replace(p) for p in tracker.phases)
                    on_event(PhaseChanged(event.kind, event.phase, at, line, tracker.progress, phases, kind))  # type: ignore[arg-type]
            return StartWatch(healthy=tracker.ready, tracker=tracker)

        step(ApplyState.BACKED_UP, "/etc/systemd/system/sglang.service.bak-20261130T120001Z")
        step(ApplyState.WRITTEN)
        step(ApplyState.DAEMON_RELOADED)
        step(ApplyState.RESTARTING)
        step(ApplyState.STARTING)
        if self.outcome == "verified":
            result.start = start(START_LINES, "new")
            step(ApplyState.HEALTHY)
            info = {"speculative_num_steps": 3, "speculative_num_draft_tokens": 4, "max_running_requests": 48}
            result.verification = verify_resolved(plan.expectations(), info)
            step(ApplyState.VERIFIED)
        else:
            result.start = start(FAIL_LINES, "new")
            result.error = (
                "the service failed (result: exit-code): OSError: /models/gone does not appear to have a file"
            )
            step(ApplyState.FAILED, result.error)
            step(ApplyState.ROLLING_BACK)
            step(ApplyState.RESTORED)
            result.rollback = start(START_LINES, "rollback")
            step(ApplyState.HEALTHY_ON_OLD)
        return result


@asynccontextmanager
async def scripted_editor() -> AsyncIterator[tuple[OpsConsoleApp, Pilot[Any], EditScreen]]:
    """The editor on a scripted host (FixedSession: the demo unit, steps 2, two backups), open with its report."""
    app = scripted_app(views={"gpu-a": view()})
    async with app.run_test(size=(120, 40)) as pilot:
        editor = EditScreen(FixedSession(), label="gpu-a")  # type: ignore[arg-type]
        app.push_screen(editor)
        await wait_until(pilot, lambda: "Nothing to apply" in screen_text(app), "the editor")
        yield app, pilot, editor


@asynccontextmanager
async def demo_console(
    workspace: str,
    *,
    read_only: bool = False,
    size: tuple[int, int] = (120, 40),
    timeout: float = 60.0,
    version: str = "0.5.9",
) -> AsyncIterator[tuple[OpsConsoleApp, Pilot[Any]]]:
    """The real console (`opsconsole connect demo`, refresh 0.5 s) on a running demo host, once its server shows
    (as SGLang `version`: the demo's --sglang-version)."""
    args = argparse.Namespace(workspace=workspace, ssh_config=None, refresh=0.5, read_only=read_only, targets=["demo"])
    app = build_app(args, ["demo"])
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: f"SGLang {version}" in screen_text(app), "the dashboard", timeout)
        yield app, pilot
    await nothing_outlives_the_console(timeout)


async def nothing_outlives_the_console(timeout: float) -> None:
    """Every task the console started has ended once it exits: a poller left behind would poll the host for as
    long as the process lives (and, in a test, hold up the event loop's close without saying why)."""
    here = asyncio.current_task()
    left = {task for task in asyncio.all_tasks() if task is not here}
    if left:
        _ended, running = await asyncio.wait(left, timeout=timeout)
        if running:
            stacks = "\n".join(f"{task!r}\n{_stack(task)}" for task in running)
            raise AssertionError(f"{len(running)} task(s) running {timeout:g} s after the console ended:\n{stacks}")


def _stack(task: asyncio.Task[Any]) -> str:
    out = io.StringIO()
    task.print_stack(file=out)
    return out.getvalue()
