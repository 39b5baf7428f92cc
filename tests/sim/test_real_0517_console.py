"""The console against a real SGLang 0.5.17 on an H200, replayed from what it recorded there.

scripts/real_sglang/gpu_session.py ran every verb through the real CLI on the GPU machine (status through the
local transport and through the demo supervisor, apply steps 2 -> 3, a refused change, a failed start rolled
back, the stop that ends in SGLang's own SIGKILL; bench_pair.py: `bench --url` next to bench_serving). Its
outputs are in fixtures/real-0.5.17/console/; these tests hold them to what must be true, and run the console's
pure parts (phase tracker, exit reading, old-process filter) again on the real journal.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from console.core.exits import STOPPED_BY_SIGKILL, OldProcessLines, describe, stopped_by_own_sigkill
from console.core.phases import PhaseState, PhaseTracker, exception_line
from console.host.base import ServiceState

HERE = Path(__file__).parent / "fixtures" / "real-0.5.17" / "console"
SESSION, BENCH = HERE / "session", HERE / "bench"


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def journal(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def service_state(recorded: dict[str, Any]) -> ServiceState:
    started = recorded["started_at"]
    return ServiceState(
        unit="sglang.service",
        active_state=recorded["active_state"],
        sub_state=recorded["sub_state"],
        main_pid=recorded["main_pid"],
        started_at=datetime.fromisoformat(started) if started else None,
        n_restarts=recorded["n_restarts"],
        result=recorded["result"],
        unit_file_state="enabled",
        need_daemon_reload=False,
        fragment_path=None,
        properties=recorded["properties"],
    )


def starts(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The journal cut at systemd's "Started" lines: one list per start, up to its ready line (or, for a start
    that failed, up to the next start)."""
    cuts = [i for i, r in enumerate(rows) if r["pid"] == 1 and r["message"].startswith("Started ")]
    runs = []
    for a, b in itertools.pairwise([*cuts, len(rows)]):
        ready = [i for i in range(a, b) if "ready to roll" in rows[i]["message"]]
        runs.append(rows[a : ready[0] + 1] if ready else rows[a:b])
    return runs


def track(rows: list[dict[str, Any]], old_pid: int | None = None) -> PhaseTracker:
    tracker = PhaseTracker.for_start(speculative=True)
    old = OldProcessLines(old_pid)
    for row in rows:
        if old.is_old(row["message"], row["pid"]):
            continue
        tracker.feed(row["message"], datetime.fromtimestamp(row["ts"], UTC))
    return tracker


# --- status ------------------------------------------------------------------------------------------------


def test_status_local_reads_the_real_server_and_nvml() -> None:
    status = load(SESSION / "status-local.json")
    assert status["connection"]["transport"] == "local"
    assert "systemctl" in status["service"]["error"]  # the GPU machine has no systemd: said, not hidden
    sglang = status["sglang"]
    assert sglang["healthy"] is True and sglang["version"] == "0.5.17"
    assert (sglang["speculative_algorithm"], sglang["speculative_num_steps"], sglang["speculative_eagle_topk"]) == (
        "EAGLE",
        2,
        1,
    )
    assert (sglang["speculative_num_draft_tokens"], sglang["max_running_requests"]) == (3, 48)
    (gpu,) = status["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["memory_total_mib"] == 143771 and gpu["memory_used_mib"] > 40000
    assert status["gpu_error"] is None


def test_nvml_process_names_were_missing_and_are_now_read() -> None:
    """Found on the real host: NVML's process list had no names (nvidia-smi shows sglang::scheduler); fixed in
    console.host.gpu.nvml_process_name and checked there again by the second GPU run."""
    before = load(SESSION / "status-local.json")["gpu_processes"]
    after = load(SESSION / "status-local-after-fix.json")["gpu_processes"]
    assert [p["process_name"] for p in before] == [None]
    assert [p["process_name"] for p in after] == ["sglang::scheduler"]
    assert load(SESSION / "status-demo.json")["gpu_processes"][0]["process_name"] == "sglang::scheduler"  # nvidia-smi


def test_status_through_the_supervisor_and_after_the_stop() -> None:
    running = load(SESSION / "status-demo.json")["service"]
    assert (running["active_state"], running["summary"], running["last_exit"]) == ("active", "active (running)", None)
    stopped = load(SESSION / "status-stopped.json")
    assert stopped["service"]["summary"] == STOPPED_BY_SIGKILL
    assert stopped["service"]["last_exit"] == {"code": "killed", "status": 9}
    assert (stopped["service"]["active_state"], stopped["service"]["result"]) == ("failed", "signal")
    assert stopped["sglang"]["healthy"] is False


def test_the_real_stop_ends_in_sigkill_and_reads_as_a_stop() -> None:
    stop = load(SESSION / "summary.json")["steps"]["stop"]
    state = service_state(stop["state"])
    assert (state.properties["ExecMainCode"], state.properties["ExecMainStatus"]) == ("2", "9")  # exit status 137
    assert stopped_by_own_sigkill(state) and describe(state) == STOPPED_BY_SIGKILL
    assert 3.0 < stop["stop_s"] < 10.0  # SIGTERM -> gone: 4-6 s measured before
    assert stop["gpu_apps_after"]["stdout_tail"] == ""  # nothing of SGLang left on the GPU
    rows = journal(SESSION / "journal.jsonl.gz")
    kills = [r["message"] for r in rows if "kill_process_tree called" in r["message"]]
    assert len(kills) == 3 and all("include_parent=True" in k for k in kills)  # every stop, as on the first capture


# --- the startup phases on the real log ---------------------------------------------------------------------


def test_every_phase_of_every_real_start_is_recognised_with_its_duration() -> None:
    runs = starts(journal(SESSION / "journal.jsonl.gz"))
    assert len(runs) == 4  # initial, steps 2 -> 3, the failing draft path, the rollback
    for run in (runs[0], runs[1], runs[3]):
        tracker = track(run)
        assert tracker.ready and not tracker.failed
        assert [p.name for p in tracker.phases] == [
            "load_weights",
            "kv_cache",
            "cuda_graph",
            "draft_cuda_graph",
            "draft_extend_cuda_graph",
            "warmup",
        ]
        assert all(p.state is PhaseState.DONE for p in tracker.phases)
        assert all(p.duration_s is not None and p.duration_s >= 0 for p in tracker.phases)
        assert tracker.phases[2].duration_s > 1.0  # five CUDA graphs, seconds on the H200


def test_the_failing_start_is_explained_by_its_own_exception() -> None:
    tracker = track(starts(journal(SESSION / "journal.jsonl.gz"))[2])
    assert tracker.failed and not tracker.ready
    assert exception_line(tracker.failure_lines) == (
        "OSError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/opt/sgm/no-such-draft'. "
        "Use `repo_type` argument if needed."
    )


def test_the_old_process_stop_is_not_taken_for_the_new_start_failing() -> None:
    rows = journal(SESSION / "journal.jsonl.gz")
    reload = next(i for i, r in enumerate(rows) if i > 2 and r["message"] == "Reloading.")  # the apply's cursor
    restart = rows[reload : next(i for i, r in enumerate(rows) if i > reload and "ready to roll" in r["message"]) + 1]
    old_pid = rows[3]["pid"]
    assert any("status=9/KILL" in r["message"] for r in restart)
    assert track(restart, old_pid=old_pid).failed is False  # the old process's SIGKILL lines are its own
    unfiltered = PhaseTracker.for_start(speculative=True)
    for row in restart:
        unfiltered.feed(row["message"], datetime.fromtimestamp(row["ts"], UTC))
    assert unfiltered.failed  # what apply would have believed without the filter


# --- apply --------------------------------------------------------------------------------------------------


def test_apply_steps_2_to_3_verified_against_the_real_server_info() -> None:
    result, step = load(SESSION / "apply-steps3.json"), load(SESSION / "summary.json")["steps"]["apply_steps3"]
    assert (
        result["state"] == "verified" and result["sglang_version"] == "0.5.17" and result["version_source"] == "server"
    )
    values = result["verified"]["values"]
    assert {k: (v["actual"], v["status"]) for k, v in values.items()} == {
        "speculative_num_steps": (3, "as_requested"),
        "speculative_num_draft_tokens": (4, "as_requested"),
    }
    assert step["server_info"]["speculative_num_steps"] == 3 and step["after"]["main_pid"] != step["before"]["main_pid"]
    assert all(p["state"] == "done" and p["duration_s"] is not None for p in result["phases"])


def test_a_refused_change_touched_nothing_on_the_real_host() -> None:
    result, step = load(SESSION / "apply-refused.json"), load(SESSION / "summary.json")["steps"]["apply_refused"]
    assert result["state"] == "refused" and result["backup"] is None
    assert [e["code"] for e in result["report"]["errors"]] == ["spec-params-partial"]
    assert step["unit_unchanged"] and step["same_process"] and step["no_new_backup"]


def test_a_failed_start_was_rolled_back_to_a_healthy_server() -> None:
    result, step = load(SESSION / "apply-bad-draft.json"), load(SESSION / "summary.json")["steps"]["apply_bad_draft"]
    assert result["state"] == "healthy_on_old" and result["rolled_back"] is True
    assert result["error"].startswith("the service failed (result: exit-code): OSError: Repo id must be")
    assert any("HFValidationError" in line for line in result["journal_excerpt"])
    assert all(p["state"] == "done" for p in result["rollback_phases"])
    assert step["unit_restored"] and step["server_info_steps"] == 3 and step["draft_path"] == "/opt/sgm/tiny-eagle"


# --- bench --url next to bench_serving ----------------------------------------------------------------------


def server_throughput_per_run(rows: list[dict[str, Any]]) -> list[float]:
    """The server's own steady-state decode throughput in each run: the mean of its "Decode batch" lines with all
    16 requests running, between one run's /flush_cache and the next (both tools flush after their warm-up)."""
    flushes = [r["ts"] for r in rows if "Cache flushed successfully" in r["message"]]
    decode = []
    for r in rows:
        match = re.search(r"#running-req: (\d+),.*gen throughput \(token/s\): ([\d.]+)", r["message"])
        if match:
            decode.append((r["ts"], int(match.group(1)), float(match.group(2))))
    bounds = [*flushes, float("inf")]
    return [statistics.mean(g for t, n, g in decode if a < t < b and n == 16) for a, b in itertools.pairwise(bounds)]


def test_bench_agrees_with_bench_serving_on_the_real_server() -> None:
    pairs = load(BENCH / "bench-pairs.json")
    runs = []
    for r in pairs["rounds"]:
        order = ("ours", "theirs") if r["round"] % 2 == 0 else ("theirs", "ours")
        runs += [(r["round"], side, r[side]) for side in order]
    server = server_throughput_per_run(journal(BENCH / "journal.jsonl.gz"))
    assert len(server) == len(runs) == 12
    relative: dict[str, list[float]] = {"ours": [], "theirs": []}
    for (round_, side, record), served in zip(runs, server, strict=True):
        assert record["completed"] == 256 and record["total_output_tokens"] == 256 * 128
        if round_ > 0:  # round 0 warms the server up
            relative[side].append(record["output_throughput"] / served)
    # The server's own speed drifted run to run (its decode log: 4,200-4,950 tok/s), so the two tools are compared
    # through it: each tool's output throughput as a share of what the server logged during that very run.
    ours, theirs = statistics.median(relative["ours"]), statistics.median(relative["theirs"])
    assert ours / theirs == pytest.approx(1.0, abs=0.03), (relative, ours, theirs)
    assert 0.95 < ours < 1.0 and 0.90 < theirs < 1.0  # below the steady state: ramp-up and ramp-down
