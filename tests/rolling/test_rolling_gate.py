"""The pure half of `--gate bench`: the canary's baseline (its newest run at the level, other hosts, open-loop levels
and the gate's own runs left out), the short benchmark drawn from it, and the usage errors that come before anything
changes (no record at the level, a workload the gate cannot send again, no canary)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from console.bench.records import BenchRecord
from console.cli.common import said
from console.core.roll import GateSpec, gate_baseline, gate_label, gate_sweep, plan_gate
from console.errors import UsageError

AT = datetime(2026, 12, 1, 12, tzinfo=UTC)
RANDOM = {"name": "random", "api": "generate", "input_len": 512, "output_len": 64, "ignore_eos": True,
          "temperature": 0.0, "seed": 7}  # fmt: skip


def record(
    run: str,
    *,
    host: str = "gpu-a",
    c: int | None = 8,
    rate: float | None = None,
    tok_s: float = 1000.0,
    repeat: int = 0,
    minutes: int = 0,
    label: str | None = None,
    workload: dict[str, Any] | None = None,
    completed: int = 30,
    failed: int = 2,
) -> BenchRecord:
    started = AT + timedelta(minutes=minutes, seconds=repeat)
    return BenchRecord(
        run_id=run, label=label or run, repeat_index=repeat, target=host, started_at=started, ended_at=started,
        max_concurrency=c, request_rate=rate, output_throughput=tok_s, workload=workload or RANDOM,
        completed=completed, failed=failed, client_location="console",
    )  # fmt: skip


def test_the_baseline_is_the_hosts_newest_run_at_the_level_with_all_its_repeats() -> None:
    records = [
        record("old", tok_s=900.0),
        record("new", tok_s=1010.0, minutes=10),
        record("new", tok_s=990.0, minutes=10, repeat=1),
        record("new", c=32, tok_s=3000.0, minutes=10),  # another level of the same run
        record("other-host", host="gpu-b", tok_s=50.0, minutes=20),
        record("open-loop", c=8, rate=2.0, tok_s=70.0, minutes=20),  # a request rate capped at 8 is another level
        record("g", label=gate_label("prod", "gpu-a"), tok_s=10.0, minutes=30),  # the gate's own run
    ]
    baseline = gate_baseline(records, "gpu-a", 8)
    assert baseline is not None
    assert (baseline.run_id, baseline.level, baseline.values, baseline.requests) == ("new", "C=8", (1010.0, 990.0), 32)
    assert gate_baseline(records, "gpu-a", 16) is None and gate_baseline(records, "gpu-c", 8) is None
    # Without a level: that of the host's newest closed-loop record (the gate's own runs left out).
    newest = gate_baseline([*records, record("newest", c=32, tok_s=2900.0, minutes=15)], "gpu-a", None)
    assert newest is not None and (newest.run_id, newest.level) == ("newest", "C=32")


def test_the_short_benchmark_sends_what_the_baseline_sent() -> None:
    baseline = gate_baseline([record("r", repeat=0), record("r", repeat=1), record("r", repeat=2)], "gpu-a", 8)
    assert baseline is not None
    config = gate_sweep(baseline)
    assert config.concurrencies == [8] and not config.request_rates
    assert (config.requests, config.repeat) == (32, 3)
    workload = config.workload
    assert (workload.name, workload.api, workload.input_len, workload.output_len, workload.seed) == (
        "random", "generate", 512, 64, 7,
    )  # fmt: skip
    assert workload.describe() == {**RANDOM}  # the gate's records say the same workload as the baseline's
    chat = {"name": "chat", "api": "chat", "input_len": None, "output_len": 128, "ignore_eos": False,
            "temperature": 0.7, "seed": 1}  # fmt: skip
    chat_base = gate_baseline([record("c", workload=chat)], "gpu-a", 8)
    assert chat_base is not None and gate_sweep(chat_base).workload.describe() == chat


def test_no_record_at_the_level_is_a_usage_error_naming_the_bench_command() -> None:
    records = [record("r", c=32)]
    with pytest.raises(UsageError, match=r"no benchmark record of gpu-a at C=8 .*`opsconsole bench gpu-a "
                       r"--concurrency 8 --repeat 3` first"):  # fmt: skip
        plan_gate(records, ["gpu-a"], GateSpec(concurrency=8))
    with pytest.raises(UsageError, match="no benchmark record of gpu-b at any concurrency"):
        plan_gate(records, ["gpu-a", "gpu-b"], GateSpec())
    dataset = {"name": "dataset", "output_len": 256, "dataset": {"file": "prompts.jsonl"}}
    with pytest.raises(UsageError, match="dataset workload, which the gate cannot send again"):
        plan_gate([record("d", workload=dataset)], ["gpu-a"], GateSpec(concurrency=8))
    with pytest.raises(UsageError) as none:
        plan_gate(records, [], GateSpec())
    assert said(none.value) == "--gate bench judges the canary: give --canary 1 or more"
    assert set(plan_gate(records, ["gpu-a"], GateSpec(concurrency=32))) == {"gpu-a"}
