"""Issue 22, item 1, step by step on the demo host (default Qwen profile, SGLang 0.5.9, the unit's
`Environment="SGLANG_ENABLE_SPEC_V2=False"`): the dashboard runs, a second terminal runs
`opsconsole apply demo --set speculative-num-steps=2 --set speculative-num-draft-tokens=3 --yes`, and then the
dashboard's HostView, the benchmark label it proposes and a benchmark record must say what
`opsconsole check-args --sglang-version 0.5.9 --env SGLANG_ENABLE_SPEC_V2=False -- <the same flags>` says and the
server reports (`disable_overlap_schedule` true): spec v1, no overlap.

Before the fix the dashboard read the unit while the server restarted, with the newest version's rules (the
server did not answer its version), and kept "spec v2 on" after the 0.5.9 server answered; the proposed label
ended in "v2". The demo starts slowly enough here (time scale 0.02: a few seconds) for the dashboard, refreshing
every 0.1 s, to see the restart; the test checks that it did, so it cannot pass without going where it failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from console.bench.engine import SweepConfig
from console.bench.runs import list_runs
from console.bench.workloads import WorkloadSpec
from console.core.bench import bench_host, proposed_label
from console.core.session import open_session
from console.core.status import HostView, HostWatcher
from console.sglang.unit import UnitFile
from console.workspace import Workspace
from tests.support.demo import APPLY_TIMEOUT, OPSCONSOLE, Demo, until

pytestmark = pytest.mark.system

APPLY = ("--set", "speculative-num-steps=2", "--set", "speculative-num-draft-tokens=3")


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(OPSCONSOLE), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _healthy(view: HostView) -> bool:
    return view.status is not None and view.status.sglang.healthy


async def test_the_dashboard_the_label_and_a_record_agree_with_check_args_after_an_apply(
    restarting_demo: Demo,
) -> None:
    demo = restarting_demo
    workspace = Workspace.resolve(demo.workspace)
    views: list[HostView] = []
    watcher = HostWatcher("demo", workspace, on_view=views.append, interval_s=0.1)
    dashboard = asyncio.create_task(watcher.run())
    try:
        await until(lambda: bool(views) and _healthy(views[-1]), "the dashboard to show the healthy server")
        before = len(views)
        # The second terminal.
        code, out, err = await _cli("--workspace", str(demo.workspace), "apply", "demo", *APPLY, "--yes", "--json",
                                    "--timeout", APPLY_TIMEOUT)  # fmt: skip
        assert code == 0 and json.loads(out)["state"] == "verified", (out[-2000:], err[-2000:])
        restarting = [v for v in views[before:] if v.status is not None and not v.status.sglang.healthy]
        assert len(restarting) >= 2, "the dashboard did not refresh while the server restarted: nothing was tested"

        def shows_the_new_setup() -> bool:
            sg = views[-1].status.sglang if views[-1].status is not None else None
            return (
                sg is not None
                and sg.healthy
                and (sg.speculative_num_steps, sg.speculative_num_draft_tokens)
                == (
                    2,
                    3,
                )
            )

        await until(shows_the_new_setup, "the dashboard to show steps 2, draft tokens 3")
        view = views[-1]
    finally:
        dashboard.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await dashboard

    async with open_session("demo", workspace) as session:
        unit = UnitFile.parse(await session.service.read_unit(), "0.5.9")
        info = await (await session.sglang()).server_info()
        env = [f"--env={k}={v}" for k, v in unit.environment().items()]
        assert env == ["--env=SGLANG_ENABLE_SPEC_V2=False"]
        code, out, err = await _cli("check-args", "--sglang-version", "0.5.9", *env, "--", *unit.flags())
        assert code == 0, (out, err)
        check_args = next(line.strip() for line in out.splitlines() if "spec v2 worker:" in line)
        assert check_args == "spec v2 worker: no; overlap scheduler: off"
        assert info["disable_overlap_schedule"] is True and info["version"] == "0.5.9"

        # The dashboard.
        assert view.spec_v2 is False
        assert view.spec_mode is not None and view.spec_mode.describe() == check_args
        # The label it proposes for a benchmark, and a benchmark record of that setup.
        label = proposed_label(view, "demo")
        assert label == "eagle s2 k1 d3"
        config = SweepConfig(WorkloadSpec(input_len=16, output_len=8), concurrencies=[1], requests=2, warmup=0)
        records = await bench_host(session, config, label=label)

    assert records and records[0].spec_v2 is False
    mode = records[0].spec_mode
    assert mode is not None and mode.describe() == check_args
    # The runs table names the run's setup as the label did.
    runs, problems = list_runs(workspace.logs)
    assert not problems and [(r.label, r.setup) for r in runs] == [(label, label)]
