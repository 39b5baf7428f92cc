"""No secret in any event, result, exception text, journal line, status or record: the session masks them where
they enter (the unit when read, journal lines as they arrive, SGLang's JSON answers), not in a printer.

A key in the unit (--api-key), a token in an Environment= line, and a start that fails: everything the core
hands out is searched for both, and the raw journal is checked to really hold the key (so the test can fail).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from console.bench.engine import SweepConfig
from console.bench.workloads import WorkloadSpec
from console.core.apply import plan_apply
from console.core.bench import bench_host
from console.core.change import ApplyState, parse_edits
from console.core.events import ApplyEvent
from console.core.session import open_session
from console.core.status import read_status
from console.host.targets import SglangEndpoint, resolve_target
from console.workspace import Workspace
from tests.support.demo import Demo

KEY = "sk-live-Zq81x7Hc"
TOKEN = "hf_Ty62PmW0aaQ"


def _has_secret(text: str) -> bool:
    return KEY in text or TOKEN in text


async def test_a_key_a_token_and_a_failing_start_leave_no_trace(demo: Demo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCONSOLE_TEST_KEY", KEY)
    workspace = Workspace.resolve(demo.workspace)
    target = resolve_target("demo", profiles_dir=workspace.profiles)
    target = dataclasses.replace(
        target, sglang=SglangEndpoint(port=target.sglang.port, api_key_env="OPSCONSOLE_TEST_KEY")
    )
    seen: list[str] = []  # everything the core handed out, as text
    events: list[ApplyEvent] = []

    def keep(value: Any) -> None:
        seen.append(value if isinstance(value, str) else json.dumps(value, default=repr))

    async with open_session(target, workspace) as session:
        # 1. the key and the token go into the unit
        add = parse_edits(["api-key=" + KEY], envs=["HF_TOKEN=" + TOKEN])
        pending = await plan_apply(session, add, timeout_s=60)
        keep(pending.plan.diff)
        keep(pending.plan.report.to_json())
        keep(repr(pending.plan))
        result = await pending.execute(on_event=events.append)
        assert result.state is ApplyState.VERIFIED, result.error
        keep(result.to_json())

        # 2. a start that fails, rolled back to the unit that carries them
        broken = parse_edits(["speculative-draft-model-path=/models/gone"])
        pending = await plan_apply(session, broken, timeout_s=60)
        result = await pending.execute(on_event=events.append)
        assert result.state is ApplyState.HEALTHY_ON_OLD, result.error
        keep(result.to_json())
        keep(result.journal_excerpt())
        keep(repr(result))

        # 3. the journal, the status, a benchmark record
        journal = [entry.message async for entry in session.service.journal(lines=2000)]
        keep(journal)
        keep((await read_status(session)).to_json())
        config = SweepConfig(
            workload=WorkloadSpec(name="random", api="generate", input_len=16, output_len=8, seed=1),
            concurrencies=[1],
            requests=2,
            warmup=0,
        )
        records = await bench_host(session, config, label="secrets")
        keep([r.model_dump(mode="json") for r in records])

        raw = [entry.message async for entry in session.host.service.journal(lines=2000)]

    keep([repr(event) for event in events])
    assert any(KEY in line for line in raw), "the raw journal never held the key: this test would prove nothing"
    assert any("server_args=ServerArgs(" in line and "api_key='***'" in line for line in journal)
    leaks = [text[:200] for text in seen if _has_secret(text)]
    assert not leaks, leaks
    assert records and not records[0].stopped
