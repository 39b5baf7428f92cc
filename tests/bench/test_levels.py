"""A level's key, typed (console/bench/levels.py): the same text as before, one order for every table, and records
on disk unchanged (the key is not stored: it comes from the record's numbers). Pure."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from console.bench.comparison import compare_runs
from console.bench.levels import LevelKey
from console.bench.records import BenchRecord
from console.bench.runs import summarize

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def record(label: str, **level: float) -> BenchRecord:
    return BenchRecord(run_id=label + "@1", label=label, target="t", started_at=T0, ended_at=T0, completed=10,
                       output_throughput=100.0, **level)  # type: ignore[arg-type]  # fmt: skip


def test_the_keys_text_is_the_one_compare_and_exports_have_always_written() -> None:
    assert str(record("a", max_concurrency=8).level) == "C=8"
    assert str(record("a", max_concurrency=8, request_rate=2.5).level) == "rate=2.5"  # the cap is not the key
    assert str(record("a", request_rate=4.0).level) == "rate=4"
    assert str(record("a", trace_speed=1.0).level) == "trace=1"
    assert record("a", max_concurrency=8).level_key == "C=8"  # the rolling gate's baseline names it so


def test_closed_loops_sort_first_then_rates_then_traces_in_every_table() -> None:
    """compare used to put traces among the rates by their number (trace=1 before rate=4), the runs table after."""
    runs = [
        [record("a", max_concurrency=64), record("a", request_rate=4.0), record("a", trace_speed=1.0)],
        [record("b", max_concurrency=1), record("b", trace_speed=2.0)],
    ]
    order = ["C=1", "C=64", "rate=4", "trace=1", "trace=2"]
    assert [str(lv.level) for lv in compare_runs(runs).levels] == order
    assert [lv["level"] for lv in compare_runs(runs).as_dict()["levels"]] == order
    assert [str(key) for key in summarize(runs[0] + runs[1]).levels] == ["C=1", "C=64", "rate=4", "trace=1", "trace=2"]
    assert summarize(runs[0]).levels_text == "C=64 rate=4 trace=1"
    assert summarize([record("c", max_concurrency=c) for c in (32, 1, 8)]).levels_text == "C=1,8,32"


def test_a_record_on_disk_is_unchanged_and_reads_back_to_the_same_key() -> None:
    line = record("a", request_rate=2.5, max_concurrency=16).model_dump_json()
    assert "level" not in json.loads(line)  # nothing new in logs/: older files read as they always did
    assert BenchRecord.model_validate_json(line).level == LevelKey("rate", 2.5)
