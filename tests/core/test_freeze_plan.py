"""The freeze's pure half: whether the server runs the unit on disk (each witness on its own), the snapshot and
document it builds, secrets kept out, and the edits that restore a snapshot."""

from __future__ import annotations

from datetime import timedelta

import pytest

from console.core.change import build_plan
from console.core.snapshot.freeze_plan import (
    FreezeRequest,
    build_freeze_plan,
    document_path,
    restore_edits,
    restored_matches,
    same_argv,
)
from console.errors import UsageError
from console.sglang.rules import check_launch
from console.sglang.unit import UnitFile
from tests.support.snapshots import (
    STARTED,
    VERSION,
    capture,
    environ,
    plan,
    record,
    server_info,
    snapshot,
    unit_text,
)

SECRET = "sk-live-7f3a9c1e5d2b"


def codes(p: object) -> list[str]:
    return [r.code for r in p.refusals]  # type: ignore[attr-defined]


def test_a_server_that_runs_the_unit_on_disk_is_frozen_without_refusal() -> None:
    frozen = plan("v2", note="steps 2 wins")
    assert codes(frozen) == [] and not frozen.refused and not frozen.unit_changed
    snap = frozen.snapshot
    assert snap.server.resolved["speculative_num_steps"] == 2
    assert snap.unit.flags[snap.unit.flags.index("--speculative-num-steps") + 1] == "2"
    assert snap.unit.environment == {"SGLANG_ENABLE_SPEC_V2": "1", "HF_HOME": "/var/lib/hf"}
    assert snap.host.document == "/home/ops/production_v2.md"
    assert snap.unit.launch_command.startswith("/usr/bin/python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B")


def test_a_pending_daemon_reload_is_refused() -> None:
    assert codes(plan(need_daemon_reload=True)) == ["daemon-reload"]


def test_an_edit_reloaded_but_not_restarted_shows_in_the_process_argv_and_the_resolved_values() -> None:
    running = unit_text(steps=2)
    on_disk = unit_text(steps=3)
    argv = tuple(UnitFile.parse(running, VERSION).exec_argv())
    p = plan(text=on_disk, info=server_info(running), process_argv=argv, process_env=environ(running))
    assert codes(p) == ["process-flags", "resolved"]
    flags = p.refusals[0].message
    assert "--speculative-num-steps: runs 2, the unit says 3" in flags
    assert "--speculative-num-draft-tokens: runs 3, the unit says 4" in flags
    assert "speculative_num_steps = 2 (the unit predicts 3)" in p.refusals[1].message


def test_without_the_process_argv_the_unit_files_mtime_against_the_start_stands_in() -> None:
    text = unit_text()
    newer = capture(text, process_argv=None)
    newer.process = type(newer.process)(None, newer.process.environ, STARTED + timedelta(minutes=5))
    assert codes(build_freeze_plan(newer, FreezeRequest("v2"))) == ["unit-newer"]
    # A process that renamed itself (setproctitle) has no argv to compare, and its environment is not trusted.
    title = ("sglang::tokenizer", "")
    renamed = capture(text, process_argv=title, process_env=environ(text, SGLANG_ENABLE_SPEC_V2="0"))
    renamed.process = type(renamed.process)(title, renamed.process.environ, STARTED - timedelta(minutes=5))
    p = build_freeze_plan(renamed, FreezeRequest("v2"))
    assert codes(p) == [] and "renamed itself" in p.snapshot.warnings[0]


def test_an_environment_the_unit_does_not_set_is_refused() -> None:
    text = unit_text()
    assert codes(plan(text=text, process_env=environ(text, SGLANG_ENABLE_SPEC_V2="0"))) == ["process-environment"]
    extra = plan(text=text, process_env=environ(text, SGLANG_DISABLE_CUDNN_CHECK="1"))
    assert codes(extra) == ["process-environment"]
    assert "set in the server but not in the unit: SGLANG_DISABLE_CUDNN_CHECK" in extra.refusals[0].message
    assert codes(plan(text=text, process_env=None)) == []  # unreadable: not compared (freeze.py notes it)


def test_resolved_values_the_rules_do_not_predict_are_refused() -> None:
    text = unit_text()
    p = plan(text=text, info=server_info(text, max_running_requests=64))
    assert codes(p) == ["resolved"] and "max_running_requests = 64 (the unit predicts 48)" in p.refusals[0].message


def test_a_server_that_is_down_or_unhealthy_is_refused() -> None:
    assert codes(plan(healthy=False)) == ["unhealthy"]
    assert codes(plan(info=None)) == ["no-server-info"]
    assert "not-active" in codes(plan(active_state="failed", sub_state="failed", healthy=False, info=None))


def test_force_records_the_reason_and_what_it_overrode() -> None:
    refused = plan(need_daemon_reload=True)
    assert refused.refused and not refused.forced
    forced = plan(need_daemon_reload=True, force="the old unit is gone; documenting what runs")
    assert not forced.refused and forced.forced
    assert forced.snapshot.forced is not None
    assert forced.snapshot.forced.reason == "the old unit is gone; documenting what runs"
    assert "NeedDaemonReload" in forced.snapshot.forced.overridden[0]
    assert "Frozen with --force" in forced.document


def test_a_unit_without_install_section_gets_one_and_only_that_changes() -> None:
    p = plan(text=unit_text(install=False))
    assert p.unit_changed and codes(p) == []
    assert p.new_text == unit_text(install=False) + "\n[Install]\nWantedBy=multi-user.target\n"
    assert "+[Install]" in p.unit_diff and "+WantedBy=multi-user.target" in p.unit_diff


def test_no_secret_reaches_the_snapshot_the_document_or_the_diff() -> None:
    text = unit_text(api_key=SECRET, install=False, extra_env=f' "HF_TOKEN={SECRET}x"')
    p = plan(text=text)
    assert codes(p) == []
    written = p.snapshot.to_toml() + p.document + p.unit_diff + repr(p.refusals)
    assert SECRET not in written
    assert "--api-key ***" in p.snapshot.unit.launch_command
    assert p.snapshot.unit.environment["HF_TOKEN"] == "***"
    assert p.snapshot.server.server_args["api_key"] == "***"
    # the raw text is kept only to be written back to the host
    assert SECRET in p.new_text


def test_benchmarks_of_this_setup_latest_run_per_level_with_the_comparison_to_the_previous_production() -> None:
    text = unit_text()
    old = unit_text(steps=1)
    at = STARTED
    records = [
        record(unit=text, concurrency=1, label="early", started=at, throughput=90.0),
        record(
            unit=text, concurrency=1, label="late", started=at + timedelta(minutes=30), throughput=120.0, run_id="l"
        ),
        record(
            unit=text,
            concurrency=1,
            label="late",
            started=at + timedelta(minutes=31),
            throughput=124.0,
            repeat=1,
            run_id="l",
        ),
        record(unit=text, concurrency=8, label="early", started=at, throughput=500.0),
        record(unit=old, steps=1, concurrency=1, label="other-unit", started=at + timedelta(hours=1)),
        record(unit=text, steps=3, concurrency=1, label="other-steps", started=at + timedelta(hours=1)),
        record(unit=text, concurrency=1, label="other-version", version="0.5.6", started=at + timedelta(hours=1)),
    ]
    previous = snapshot("v1", text=old, info=server_info(old), records=[record(unit=old, steps=1, throughput=80.0)])
    p = plan("v2", records=records, previous=previous)
    kept = [(e["label"], e["max_concurrency"], e["repeat_index"]) for e in p.snapshot.benchmarks]
    assert kept == [("late", 1, 0), ("late", 1, 1), ("early", 8, 0)]
    assert p.snapshot.previous == "v1"
    tput = next(r for r in p.snapshot.comparison if r.metric == "output_throughput" and r.level == "C=1")
    assert (tput.previous, tput.value, tput.verdict) == (80.0, 122.0, "better")
    assert tput.delta_pct == pytest.approx(52.5)
    assert "| C = 8 | 500.0 |" in p.document and "### Against the previous production snapshot, v1" in p.document


def test_the_document_says_what_runs_why_when_by_whom_and_how_to_restore() -> None:
    doc = plan("v2", note="steps 2: +56 % at C = 32").document
    for expected in (
        "# Production setup v2 — gpu1 (gpu-01)",
        "by alice@laptop",
        "- **SGLang**: 0.5.9",
        "EAGLE steps 2, topk 1, draft tokens 3, overlap on",
        "2 × NVIDIA H200 (143,771 MiB each), driver 580.159.04",
        "/usr/bin/python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B",
        "SGLANG_ENABLE_SPEC_V2=1",
        "steps 2: +56 % at C = 32",
        "No benchmark of this exact setup",
        "opsconsole restore gpu1 v2",
        "WantedBy=multi-user.target",
    ):
        assert expected in doc, expected


def test_document_paths() -> None:
    assert document_path("~/production_{name}.md", "v2", "/home/ops") == "/home/ops/production_v2.md"
    assert document_path("/srv/sglang/{name}.md", "v2", None) == "/srv/sglang/v2.md"
    for bad in ("production.md", "~/", "/srv/", "/srv/a\nb.md", "../x.md"):
        with pytest.raises(UsageError):
            document_path(bad, "v2", "/home/ops")
    with pytest.raises(UsageError, match="home"):
        document_path("~/x.md", "v2", None)
    with pytest.raises(UsageError, match="snapshot name"):
        FreezeRequest("v2; rm -rf /").checked()
    with pytest.raises(UsageError, match="reason"):
        FreezeRequest("v2", force="  ").checked()


def test_same_argv_compares_the_program_by_name() -> None:
    assert same_argv(["python3", "-m", "x"], ["/usr/bin/python3", "-m", "x"])
    assert not same_argv(["python3", "-m", "x"], ["/usr/bin/python3", "-m", "y"])
    assert not same_argv(["python3"], ["python3", "-m"])


def _apply(edits: object, text: str) -> str:
    plan = build_plan(
        text,
        edits,  # type: ignore[arg-type]
        unit_name="sglang.service",
        version=VERSION,
        version_source="server",
        parse_unit=lambda t: UnitFile.parse(t, VERSION),
        check=check_launch,
    )
    return plan.new_text


def test_restore_edits_bring_the_flags_and_environment_back_and_keep_secrets_as_they_are() -> None:
    frozen = snapshot("v1", text=unit_text(steps=2, api_key=SECRET))
    now = unit_text(steps=3, api_key="another-key-123", extra_env=' "SGLANG_X=1"')
    restore = restore_edits(frozen, UnitFile.parse(now, VERSION), VERSION)
    assert ("--speculative-num-steps", "2") in restore.edits.set_flags
    assert restore.edits.unset_env == ("SGLANG_X",)
    assert any("--api-key kept as it is on the host" in n for n in restore.notes)
    restored = _apply(restore.edits, now)
    assert "--speculative-num-steps 2" in restored and "--speculative-num-draft-tokens 3" in restored
    assert "--api-key another-key-123" in restored and "SGLANG_X" not in restored
    assert restored_matches(frozen, UnitFile.parse(restored, VERSION), VERSION) == []
    assert restored_matches(frozen, UnitFile.parse(now, VERSION), VERSION) == [
        "--speculative-num-draft-tokens",
        "--speculative-num-steps",
        "SGLANG_X",
    ]


def test_restoring_onto_the_same_setup_changes_nothing() -> None:
    text = unit_text()
    restore = restore_edits(snapshot("v1", text=text), UnitFile.parse(text, VERSION), VERSION)
    assert _apply(restore.edits, text) == text
