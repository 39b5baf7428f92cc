"""Records on disk: appended per day, read back, runs found by label (newest wins) or by file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.bench.records import BenchRecord, append_records, load_run


def rec(label: str, run: str, day: int, c: int = 1) -> BenchRecord:
    t = datetime(2026, 3, day, 12, tzinfo=UTC)
    return BenchRecord(run_id=run, label=label, target="gpu1", started_at=t, ended_at=t, max_concurrency=c)


def test_label_finds_the_newest_run_across_days(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    append_records(logs, [rec("a", "a@1", 1), rec("a", "a@1", 1, c=8)])
    path = append_records(logs, [rec("a", "a@2", 2), rec("b", "b@1", 2)])
    assert sorted(p.name for p in logs.iterdir()) == ["bench-2026-03-01.jsonl", "bench-2026-03-02.jsonl"]
    assert [r.run_id for r in load_run("a", logs)] == ["a@2"]
    assert [r.max_concurrency for r in load_run("a@1", logs)] == [1, 8]
    assert path is not None and {r.label for r in load_run(str(path), logs)} == {"a", "b"}


def test_bad_lines_and_unknown_refs_say_what_is_wrong(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    append_records(logs, [rec("a", "a@1", 1)])
    with pytest.raises(LookupError, match="labels there: a"):
        load_run("zzz", logs)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"not": "a record"}\n')
    with pytest.raises(ValueError, match=r"broken\.jsonl:1: not a benchmark record"):
        load_run(str(broken), logs)
    with pytest.raises(LookupError, match="no such file"):
        load_run(str(tmp_path / "missing.jsonl"), logs)
