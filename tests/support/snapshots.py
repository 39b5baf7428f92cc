"""Builders for the freeze's pure code: units, servers that resolve what the rules predict, captures, records.

The server answers are computed by the project's own rules for the unit (so a consistent host is consistent by
construction), and a test then makes one witness disagree."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from console.bench.records import BenchRecord, unit_hash
from console.core.snapshot import Snapshot
from console.core.snapshot.freeze_plan import (
    Capture,
    FreezePlan,
    FreezeRequest,
    HostFacts,
    ProcessView,
    build_freeze_plan,
)
from console.host.base import ServiceState
from console.host.gpu import GpuSample
from console.secrets import SecretMask, secrets_in_unit
from console.sglang.rules import check_launch
from console.sglang.unit import UnitFile

VERSION = "0.5.9"
AT = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
STARTED = AT - timedelta(hours=2)


def unit_text(
    steps: int = 2,
    draft: int | None = None,
    *,
    api_key: str | None = None,
    spec_v2: str = "1",
    install: bool = True,
    extra_env: str = "",
) -> str:
    draft = steps + 1 if draft is None else draft
    key = f" \\\n    --api-key {api_key}" if api_key else ""
    tail = "\n[Install]\nWantedBy=multi-user.target\n" if install else ""
    return (
        "[Unit]\nDescription=SGLang\n\n[Service]\n"
        f'Environment="SGLANG_ENABLE_SPEC_V2={spec_v2}" "HF_HOME=/var/lib/hf"{extra_env}\n'
        "ExecStart=/usr/bin/python3 -m sglang.launch_server \\\n"
        "    --model-path Qwen/Qwen3-8B \\\n"
        "    --speculative-algorithm EAGLE \\\n"
        "    --speculative-draft-model-path /models/draft \\\n"
        f"    --speculative-num-steps {steps} \\\n"
        "    --speculative-eagle-topk 1 \\\n"
        f"    --speculative-num-draft-tokens {draft}{key}\n"
        "Restart=on-failure\n" + tail
    )


def server_info(text: str, version: str = VERSION, **override: Any) -> dict[str, Any]:
    """/server_info of a server that runs `text` and resolved what the rules predict (masked like the client's)."""
    unit = UnitFile.parse(text, version)
    resolved = dict(check_launch(unit.flags(), unit.environment(), version).resolved)
    resolved.update(override)
    if resolved.get("api_key"):
        resolved["api_key"] = "***"
    return {**resolved, "version": version, "internal_states": [dict(resolved)], "status": "ready"}


def environ(text: str, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin", "INVOCATION_ID": "x", **UnitFile.parse(text, VERSION).environment(), **extra}


def state(**changes: Any) -> ServiceState:
    base = ServiceState(
        unit="sglang.service",
        active_state="active",
        sub_state="running",
        main_pid=4242,
        started_at=STARTED,
        n_restarts=0,
        result="success",
        unit_file_state="disabled",
        need_daemon_reload=False,
        fragment_path="/etc/systemd/system/sglang.service",
    )
    return replace(base, **changes)


def gpus(n: int = 2) -> list[GpuSample]:
    return [
        GpuSample(index=i, name="NVIDIA H200", uuid=f"GPU-{i}", memory_total_mib=143771.0, power_limit_w=700.0)
        for i in range(n)
    ]


def record(
    *,
    unit: str,
    steps: int = 2,
    concurrency: int = 1,
    label: str = "run",
    started: datetime = AT - timedelta(hours=1),
    throughput: float = 100.0,
    repeat: int = 0,
    version: str = VERSION,
    run_id: str | None = None,
) -> BenchRecord:
    return BenchRecord(
        run_id=run_id or f"{label}@{started:%H%M%S}",
        label=label,
        repeat_index=repeat,
        target="gpu1",
        started_at=started,
        ended_at=started + timedelta(seconds=30),
        sglang_version=version,
        server_args={"speculative_algorithm": "EAGLE", "speculative_num_steps": steps, "speculative_eagle_topk": 1},
        unit_hash=unit_hash(unit),
        max_concurrency=concurrency,
        completed=16,
        output_throughput=throughput,
        mean_request_output_throughput=throughput / concurrency,
        median_ttft_ms=20.0,
        median_tpot_ms=8.0,
        accept_length=2.5,
        workload={"name": "random", "input_len": 1024, "output_len": 256},
    )


def capture(
    text: str | None = None,
    *,
    info: dict[str, Any] | str | None = "consistent",
    process_argv: tuple[str, ...] | str | None = "consistent",
    process_env: dict[str, str] | str | None = "consistent",
    records: list[BenchRecord] | None = None,
    previous: Snapshot | None = None,
    label: str = "gpu1",
    healthy: bool = True,
    frozen_at: datetime = AT,
    **state_changes: Any,
) -> Capture:
    text = unit_text() if text is None else text
    unit = UnitFile.parse(text, VERSION)
    secrets = SecretMask()
    secrets.learn(secrets_in_unit(text))
    return Capture(
        label=label,
        unit_name="sglang.service",
        transport="ssh",
        state=state(**state_changes),
        unit_text=text,
        version=VERSION,
        healthy=healthy,
        server_info=server_info(text) if info == "consistent" else info,  # type: ignore[arg-type]
        server_error=None if info is not None else "connection refused",
        facts=HostFacts("gpu-01", "ops", "/home/ops"),
        process=ProcessView(
            argv=tuple(unit.exec_argv()) if process_argv == "consistent" else process_argv,  # type: ignore[arg-type]
            environ=environ(text) if process_env == "consistent" else process_env,  # type: ignore[arg-type]
        ),
        gpus=gpus(),
        driver_version="580.159.04",
        records=records or [],
        previous=previous,
        frozen_at=frozen_at,
        frozen_by="alice@laptop",
        opsconsole_version="0.1.0",
        document_template="~/production_{name}.md",
        secrets=secrets,
    )


def plan(name: str = "v2", note: str = "", force: str | None = None, **kwargs: Any) -> FreezePlan:
    return build_freeze_plan(capture(**kwargs), FreezeRequest(name, note, force=force))


def snapshot(name: str = "v1", **kwargs: Any) -> Snapshot:
    return plan(name, **kwargs).snapshot
