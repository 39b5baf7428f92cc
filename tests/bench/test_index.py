"""The records index (console/bench/index.py): kept per log file while its size and time hold, rebuilt for a file
that changed, files older than asked never opened, bad lines left out and named, a read-only logs/ still read."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.bench.index import INDEX_DIR, RecordIndex, slim
from console.bench.records import BenchRecord, append_records


def record(target: str, started: datetime, *, label: str = "run", version: str = "0.5.17") -> BenchRecord:
    args = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_draft_model_path": "/m/d",
            "disable_overlap_schedule": False, "max_running_requests": 48, "chunked_prefill_size": 8192}  # fmt: skip
    return BenchRecord(
        run_id=f"{target}-{started:%j%H%M%S}", label=label, target=target, started_at=started, ended_at=started,
        sglang_version=version, model="m", server_args=args, max_concurrency=1, completed=4,
        total_output_tokens=256, output_throughput=100.0, mean_tpot_ms=9.0,
        gpus=[{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1"}, {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-2"}],
    )  # fmt: skip


def test_the_index_is_kept_and_rebuilt_only_for_the_file_that_changed(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    day1, day2 = datetime(2026, 12, 1, 10, tzinfo=UTC), datetime(2026, 12, 2, 10, tzinfo=UTC)
    append_records(logs, [record("gpu-a", day1), record("gpu-b", day1)])
    append_records(logs, [record("gpu-a", day2)])
    index = RecordIndex(logs)
    first = index.entries()
    assert [e.target for e in first] == ["gpu-a", "gpu-b", "gpu-a"]
    assert sorted(index.rebuilt) == ["bench-2026-12-01.jsonl", "bench-2026-12-02.jsonl"]
    assert (logs / INDEX_DIR / "bench-2026-12-02.jsonl.json").exists()
    again = RecordIndex(logs)
    assert again.entries() == first and again.rebuilt == []  # read from the index, no log file parsed
    append_records(logs, [record("gpu-c", day2 + timedelta(hours=1))])
    third = RecordIndex(logs)
    assert [e.target for e in third.entries()] == ["gpu-a", "gpu-b", "gpu-a", "gpu-c"]
    assert third.rebuilt == ["bench-2026-12-02.jsonl"]


def test_a_slim_record_keeps_what_its_readers_use(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    full = record("gpu-a", datetime(2026, 12, 1, tzinfo=UTC))
    append_records(logs, [full])
    (entry,) = RecordIndex(logs).entries()
    loaded = entry.load()
    assert loaded.server_args == {k: v for k, v in full.server_args.items() if k != "chunked_prefill_size"}
    assert loaded.output_throughput == full.output_throughput and loaded.started_at == full.started_at
    assert loaded.spec_mode == full.spec_mode and len(loaded.gpus) == 1
    assert entry.gpu == "NVIDIA H100 80GB HBM3 x2" and entry.draft == "/m/d" and entry.model == "m"
    assert slim(full.model_dump(mode="json"))["gpus"] == [full.gpus[0]]


def test_files_older_than_asked_are_not_opened_and_records_keep_their_own_time(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    now = datetime.now(UTC)
    append_records(logs, [record("gpu-a", now - timedelta(days=30))])
    append_records(logs, [record("gpu-a", now - timedelta(days=2)), record("gpu-a", now)])
    old = f"bench-{now - timedelta(days=30):%Y-%m-%d}.jsonl"
    index = RecordIndex(logs)
    got = index.records(since=now - timedelta(days=14))
    assert len(got) == 2 and not index.problems
    assert old not in index.rebuilt and not (logs / INDEX_DIR / f"{old}.json").exists()  # never opened
    assert [r.started_at for r in index.records(since=now - timedelta(days=1))] == [now]
    assert len(index.records()) == 3


def test_a_bad_line_is_named_and_the_rest_kept(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    append_records(logs, [record("gpu-a", datetime(2026, 12, 1, tzinfo=UTC))])
    path = logs / "bench-2026-12-01.jsonl"
    with path.open("a") as f:
        f.write('{"not": "a record"}\n')
    index = RecordIndex(logs)
    assert len(index.entries()) == 1
    assert index.problems and index.problems[0].startswith("bench-2026-12-01.jsonl:2: not a benchmark record")
    again = RecordIndex(logs)  # from the index: the problems were kept with it
    again.entries()
    assert again.problems == index.problems


def test_a_logs_folder_that_cannot_be_written_is_read_all_the_same(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    append_records(logs, [record("gpu-a", datetime(2026, 12, 1, tzinfo=UTC))])
    (logs / INDEX_DIR).write_text("a file where the index's folder would go")
    index = RecordIndex(logs)
    assert len(index.entries()) == 1 and index.rebuilt == ["bench-2026-12-01.jsonl"]
    assert len(RecordIndex(logs).entries()) == 1


def test_an_index_of_another_version_or_a_broken_one_is_built_again(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    append_records(logs, [record("gpu-a", datetime(2026, 12, 1, tzinfo=UTC))])
    RecordIndex(logs).entries()
    cache = logs / INDEX_DIR / "bench-2026-12-01.jsonl.json"
    cache.write_text("{broken")
    index = RecordIndex(logs)
    assert len(index.entries()) == 1 and index.rebuilt == ["bench-2026-12-01.jsonl"]
    data = json.loads(cache.read_text())
    data["key"][0] = 0
    cache.write_text(json.dumps(data))
    again = RecordIndex(logs)
    again.entries()
    assert again.rebuilt == ["bench-2026-12-01.jsonl"]
    assert sorted(os.listdir(logs / INDEX_DIR)) == ["bench-2026-12-01.jsonl.json", "bench-2026-12-01.jsonl.slim"]
