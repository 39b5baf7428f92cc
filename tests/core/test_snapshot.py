"""Snapshots as data: the TOML file round trip, which snapshot is production, drift, the diff of two, the store."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from console.core.snapshot import Snapshot, SnapshotError, production_names, production_of, setup_text
from console.core.snapshot.diff import diff_snapshots, group_flags, table_for
from console.core.snapshot.drift import compute_drift, production_status
from console.core.snapshot.store import load_snapshot, load_snapshots, production_for_status, save_snapshot
from console.workspace import Workspace
from tests.support.snapshots import AT, record, server_info, snapshot, unit_text


def running(snap: Snapshot, **changes: object) -> dict[str, object]:
    values = {**snap.resolved, "version": snap.server.version}
    values.update(changes)
    return values


def test_the_toml_file_reads_back_as_the_same_snapshot() -> None:
    text = unit_text()
    snap = snapshot("v1", records=[record(unit=text)], text=text)
    written = snap.to_toml()
    back = Snapshot.from_toml(written, where="v1.toml")
    assert back.resolved == snap.resolved and back.unit == snap.unit and back.host == snap.host
    assert back.bench_records()[0] == snap.bench_records()[0]
    assert Snapshot.from_toml(back.to_toml(), where="again") == back  # stable after the first write
    data = tomllib.loads(written)
    assert data["format"] == 1 and data["server"]["resolved"]["speculative_num_steps"] == 2
    assert data["unit"]["text"] == text  # the unit file, readable as it is


def test_a_damaged_or_newer_file_is_refused_with_its_name() -> None:
    with pytest.raises(SnapshotError, match=r"x\.toml: not valid TOML"):
        Snapshot.from_toml("name = ", where="x.toml")
    with pytest.raises(SnapshotError, match="not an opsconsole snapshot"):
        Snapshot.from_toml('name = "v1"\n', where="x.toml")
    with pytest.raises(SnapshotError, match="newer"):
        Snapshot.from_toml("format = 99\n", where="x.toml")


def test_production_is_the_latest_freeze_of_each_host() -> None:
    v1 = snapshot("v1", frozen_at=AT)
    v2 = snapshot("v2", frozen_at=AT + timedelta(hours=1))
    other = snapshot("b1", frozen_at=AT - timedelta(days=1), label="gpu2")
    assert production_of([v1, v2, other], "gpu1", "sglang.service") == v2
    assert production_of([v1, v2, other], "gpu3", "sglang.service") is None
    assert production_names([v1, v2, other]) == {"v2", "b1"}


def test_drift_says_what_differs_from_production_and_how() -> None:
    v2 = snapshot("v2")
    assert compute_drift(v2, running(v2)) == []
    items = compute_drift(v2, running(v2, speculative_num_steps=3, disable_overlap_schedule=True))
    assert [i.text for i in items] == ["steps 3, production v2 has 2", "overlap off, production v2 has on"]
    assert compute_drift(v2, running(v2, version=None)) == []  # an unknown version is no difference
    status = production_status(v2, running(v2, speculative_num_steps=3))
    assert (status.in_sync, status.summary) == (False, "steps 3, production v2 has 2")
    assert production_status(v2, dict.fromkeys(running(v2))).in_sync is None  # server not answering: unknown


def test_setup_text() -> None:
    assert setup_text(snapshot().resolved) == "EAGLE steps 2, topk 1, draft tokens 3, overlap on"
    assert setup_text({"speculative_algorithm": None}) == "no speculative decoding"


def test_the_diff_of_two_snapshots_names_flags_environment_resolved_values_and_benchmarks() -> None:
    a_text, b_text = unit_text(steps=1), unit_text(steps=3, spec_v2="0")
    a = snapshot("v1", text=a_text, info=server_info(a_text), records=[record(unit=a_text, steps=1, throughput=100.0)])
    b = snapshot("v2", text=b_text, info=server_info(b_text), records=[record(unit=b_text, steps=3, throughput=150.0)])
    diff = diff_snapshots(a, b)
    flags = {c.key: (c.a, c.b) for c in diff.flags}
    assert flags == {"--speculative-num-steps": ("1", "3"), "--speculative-num-draft-tokens": ("2", "4")}
    assert [(c.key, c.a, c.b) for c in diff.environment] == [("SGLANG_ENABLE_SPEC_V2", "1", "0")]
    resolved = {c.key for c in diff.resolved}
    assert {"speculative_num_steps", "speculative_num_draft_tokens", "disable_overlap_schedule"} <= resolved
    assert not diff.same_setup
    text = "\n".join(diff.lines())
    assert "--speculative-num-steps         1  ->  3" in text
    assert "C=1: output tok/s 100.0 -> 150.0 (+50.0 %, better)" in text
    assert diff.to_json()["benchmarks"]["runs"] == ["v1", "v2"]
    same = diff_snapshots(a, a)
    assert same.same_setup and "run the same setup" in same.lines()[0]


def test_flags_are_grouped_as_sglang_reads_them() -> None:
    table = table_for("0.5.9")
    groups = group_flags(
        ["--speculative-num-s=3", "--enable-metrics", "stray", "--cuda-graph-bs", "1", "2", "--sim-x", "a", "b"], table
    )
    assert [(g.name, g.values) for g in groups] == [
        ("--speculative-num-steps", ("3",)),
        ("--enable-metrics", ()),
        ("--cuda-graph-bs", ("1", "2")),
        ("--sim-x", ("a", "b")),
    ]


def test_the_store_keeps_names_unique_and_reports_unreadable_files(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    v1 = snapshot("v1", frozen_at=AT)
    path = save_snapshot(workspace, v1)
    assert path == tmp_path / "profiles" / "snapshots" / "v1.toml"
    assert load_snapshot(workspace, "v1").name == "v1"
    with pytest.raises(FileExistsError, match="choose another name"):
        save_snapshot(workspace, v1)
    with pytest.raises(LookupError, match=r"no snapshot 'v9'.*there: v1"):
        load_snapshot(workspace, "v9")
    (path.parent / "broken.toml").write_text("name = ")
    found, problems = load_snapshots(workspace)
    assert [s.name for s in found] == ["v1"] and "broken.toml: not valid TOML" in problems[0]
    prod = production_for_status(workspace, "gpu1", "sglang.service", running(v1, speculative_num_steps=3))
    assert prod is not None and prod.snapshot == "v1" and prod.drift[0]["text"] == "steps 3, production v1 has 2"
    assert production_for_status(workspace, "gpu2", "sglang.service", running(v1)) is None
    assert list(path.parent.glob(".*tmp")) == []  # no temp file left


def test_a_file_renamed_by_hand_is_not_taken_for_another_snapshot(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    path = save_snapshot(workspace, snapshot("v1"))
    path.rename(path.with_name("v7.toml"))
    found, problems = load_snapshots(workspace)
    assert found == [] and "names itself 'v1'" in problems[0]


def test_the_next_name_follows_the_hosts_versions_and_is_never_taken() -> None:
    from console.core.snapshot import next_name

    assert next_name([], "gpu1") == "v1"
    mine = [snapshot("v1"), snapshot("v2"), snapshot("prod-x")]
    assert next_name(mine, "gpu1") == "v3"
    other = [snapshot("v3", label="gpu2")]
    assert next_name([*mine, *other], "gpu1") == "v4" and next_name(other, "gpu2") == "v4"
