"""`opsconsole tune` against a real SGLang 0.5.17 on an H200, replayed from what it recorded there (issue 20).

scripts/real_sglang/tune_session.py ran the search (halving over STANDALONE steps 1-3 x topk 1, 2 with the sa-p90
draft, plus an EAGLE head whose shapes do not fit the target) and then the grid, cut by the session's GPU budget
after two of its six setups. tune_report.py --fixtures copied what it left into fixtures/real-0.5.17/tune/: the two
tunes' JSON, the benchmark records they wrote, the supervisor's whole journal and the session's summary. These
tests run the console's own pure parts on them again: the search replayed from the real records reaches the
recommendations the tune printed, the failing setup carries SGLang's own reason, the journal's starts are the
ones the session measured, the estimate shown before confirmation is within 25 % of the wall time, and the host
ended on its original unit byte for byte.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import statistics
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from console.bench.records import BenchRecord, read_records
from console.cli import build_parser
from console.cli.tune import request_from_args, space_from_args
from console.core.exits import STOPPED_BY_SIGKILL
from console.core.tune import Cell, PendingTune, build_space, estimate, timing, unit_speculation
from console.core.tune.report import recommend
from console.core.tune.search import Policy, Search, StageKind
from console.core.tune.timing import TOKEN_S, level_seconds

HERE = Path(__file__).parent / "fixtures" / "real-0.5.17" / "tune"
ROOT = Path(__file__).resolve().parents[2]
FAILING_REASON = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x1280 and 1536x768)"


def load(name: str) -> Any:
    return json.loads((HERE / name).read_text())


def journal() -> list[dict[str, Any]]:
    with gzip.open(HERE / "journal.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[BenchRecord]:
    """The benchmark records both tunes wrote, read by the console's own reader."""
    path = tmp_path_factory.mktemp("bench") / "bench.jsonl"
    with gzip.open(HERE / "bench-2026-12-01.jsonl.gz", "rb") as f:
        path.write_bytes(f.read())
    return read_records(path)


def tune_session() -> ModuleType:
    """scripts/real_sglang/tune_session.py (not a package: loaded by path, as run.sh runs it)."""
    spec = importlib.util.spec_from_file_location("tune_session", ROOT / "scripts" / "real_sglang" / "tune_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def planned(summary: dict[str, Any], name: str, work: Path) -> PendingTune:
    """The tune `name` (search, grid, drafts) of a session as the console planned it before confirmation: the argv
    it ran, the space file tune_session.py wrote for it (its own code), the unit the host ran and the version's
    rules. Nothing of a host is needed to ask its estimate_s."""
    plan, unit = summary["plan"], summary["steps"]["start"]["unit"]
    models = Path(plan["models"])
    script = tune_session().TuneSession
    writer = SimpleNamespace(
        algorithm="STANDALONE",
        args=SimpleNamespace(steps=plan["steps"], topk=plan["topk"]),
        draft=models / plan["draft"],
        failing=models / "eagle-wide",
        models=models,
        work=work,
        DRAFTS=script.DRAFTS,
    )
    space_file = (
        script.drafts_space_file(writer) if name == "drafts" else script.space_file(writer, name, name == "search")
    )
    argv = list(summary["steps"][name]["cli"]["argv"][3:])  # after `console --workspace DIR`
    argv[argv.index("--space") + 1] = str(space_file)
    args = build_parser().parse_args(argv)
    request = request_from_args(args, space_from_args(args, unit_speculation(unit, "0.5.17")))
    space = build_space(request.space, unit, unit_name="sglang.service", version="0.5.17",
                        architecture="LlamaForCausalLM")  # fmt: skip
    return PendingTune(None, request, space, unit, AsyncExitStack(), None, "replay")  # type: ignore[arg-type]


def key_of(trial: dict[str, Any]) -> str:
    """The candidate's key, from its benchmark labels (tune/<key>/<workload>/s<stage>); the failing trial has none."""
    return trial["labels"][0].split("/")[1] if trial["labels"] else trial["name"]


def replay(
    tune: dict[str, Any], records: list[BenchRecord], levels: tuple[int, ...] = (1, 8, 32), repeats: int = 2
) -> tuple[Search, dict[str, str], dict[str, Any]]:
    """The tune's search run again on the real records: the stages it asks for, each fed the records the tune wrote
    for that stage (label .../s<stage>), the failing setup dropped, a budget stop where the tune stopped."""
    trials = tune["trials"]
    keys = [key_of(t) for t in trials]
    names = {key_of(t): t["name"] for t in trials}
    configs = {key_of(t): t["config"] for t in trials}
    workloads = list(dict.fromkeys(lv["workload"] for t in trials for lv in t["levels"]))
    cells = [Cell(w, c) for w in workloads for c in levels]
    search = Search(keys, cells, Policy(strategy=tune["strategy"], repeats=repeats))
    mine = [r for r in records if r.label.startswith(f"{tune['label']}/")]
    while (stage := search.next_stage()) is not None:
        ran = {r.label.split("/")[1] for r in mine if r.label.endswith(f"/s{stage.index}")}
        planned = {run.candidate for run in stage.runs}
        failed = {key_of(t) for t in trials if t["state"] == "failed"}
        if tune["stopped"] == "budget":
            assert ran < planned  # the grid: cut before every setup ran
        else:
            assert ran == planned - failed, f"stage {stage.index}: ran {ran}, the search asks for {planned}"
        for run in stage.runs:
            runs = [r for r in mine if r.label.split("/")[1] == run.candidate and r.label.endswith(f"/s{stage.index}")]
            for r in runs:
                cell = Cell(r.label.split("/")[2], int(r.max_concurrency or 0))
                assert cell in run.cells and not r.failed and r.completed
                search.record(run.candidate, cell, stage.kind, r.output_throughput)
        for key in failed & planned:
            search.drop(key, "its start failed")
        if tune["stopped"] == "budget":
            search.stop("budget")
        search.finish_stage()
    return search, names, configs


# --- the results read back ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tune-search.json", "tune-grid.json"])
def test_the_search_replayed_on_the_real_records_recommends_what_the_tune_printed(
    name: str, records: list[BenchRecord]
) -> None:
    tune = load(name)
    search, names, configs = replay(tune, records)
    again = [r.to_json() for r in recommend(search, names, configs)]
    for mine, printed in zip(again, tune["recommendations"], strict=True):
        assert mine["output_throughput"] == pytest.approx(printed["output_throughput"], abs=0.01)
        assert {k: v for k, v in mine.items() if k != "output_throughput"} == {
            k: v for k, v in printed.items() if k != "output_throughput"
        }
    # every trial's figures are its standing in the replayed search: the median of its records of that kind
    for trial in tune["trials"]:
        for lv in trial["levels"]:
            standing = search.standing(key_of(trial), Cell(lv["workload"], lv["concurrency"]))
            assert standing is not None
            figures = (round(standing.median, 2), round(standing.low, 2), round(standing.high, 2), standing.kind)
            assert figures == (lv["output_throughput"], lv["low"], lv["high"], lv["measured_by"])


def test_every_record_is_the_real_server_running_the_setup_its_label_names(records: list[BenchRecord]) -> None:
    configs = {key_of(t): t["config"] for t in load("tune-search.json")["trials"]}
    assert len(records) == 84
    for r in records:
        config = configs[r.label.split("/")[1]]
        assert r.sglang_version == "0.5.17" and r.server_args["speculative_draft_model_path"] == "/opt/sgm/sa-p90"
        assert {k: r.server_args[k] for k in config} == config
        assert r.accept_length is not None and 1.0 < r.accept_length <= config["speculative_num_steps"] + 1


def test_a_recommendation_is_never_behind_its_runner_up_on_its_own_measurements(records: list[BenchRecord]) -> None:
    for name in ("tune-search.json", "tune-grid.json"):
        tune = load(name)
        keys = {t["name"]: key_of(t) for t in tune["trials"]}

        def median(key: str, cell: Cell, kind: StageKind, tune: dict[str, Any] = tune) -> float | None:
            stage = "s0" if kind == "screen" or tune["strategy"] == "grid" else ""
            runs = [
                r.output_throughput
                for r in records
                if r.label.startswith(f"{tune['label']}/{key}/{cell.workload}/")
                and r.max_concurrency == cell.concurrency
                and (r.label.endswith("/s0") == (stage == "s0"))
            ]
            return statistics.median(runs) if runs else None

        for rec in tune["recommendations"]:
            cell = Cell(rec["workload"], rec["concurrency"])
            kind = rec["measured_by"]
            winner, runner_up = keys[rec["name"]], keys[rec["runner_up"]]
            if median(runner_up, cell, kind) is None:  # left at the screening: like with like, the short runs
                kind = "screen"
            mine, theirs = median(winner, cell, kind), median(runner_up, cell, kind)
            assert mine is not None and theirs is not None
            assert mine >= theirs, f"{name} {cell.label}: {rec['name']} {mine} < {rec['runner_up']} {theirs}"


# --- the failing setup ------------------------------------------------------------------------------------------


def test_the_failing_setup_carries_sglangs_reason_was_rolled_back_and_the_tune_went_on(
    records: list[BenchRecord],
) -> None:
    search = load("tune-search.json")
    (failed,) = [t for t in search["trials"] if t["state"] == "failed"]
    assert failed["config"]["speculative_algorithm"] == "EAGLE" and failed["levels"] == []
    assert failed["error"] == f"the service failed (result: signal): {FAILING_REASON}"
    assert FAILING_REASON in failed["journal"] and "sglang.service: Failed with result 'signal'." in failed["journal"]
    rows = journal()
    at = next(i for i, r in enumerate(rows) if r["message"] == FAILING_REASON)
    assert any("Scheduler hit an exception" in r["message"] for r in rows[at - 80 : at])  # SGLang's own traceback
    # the start that failed, then the rollback's start of the unit before it, healthy, with no stop between
    starts = tune_session().start_times(rows)
    failing = next(i for i, s in enumerate(starts) if not s["healthy"])
    assert starts[failing]["error"] == FAILING_REASON
    assert starts[failing + 1]["healthy"] and starts[failing + 1]["stop_s"] is None
    # the tune went on: benchmarks of other setups after the failure, and every other trial benchmarked
    failed_at = rows[at]["ts"]
    assert sum(1 for r in records if r.label.startswith("tune-search/") and r.started_at.timestamp() > failed_at) > 10
    assert {t["state"] for t in search["trials"] if t is not failed} == {"benchmarked"}


# --- times ----------------------------------------------------------------------------------------------------


def test_start_times_on_the_real_journal_are_the_starts_the_session_measured() -> None:
    steps = load("summary.json")["steps"]
    starts = tune_session().start_times(journal())
    search, grid = steps["search"]["starts"], steps["grid"]["starts"]
    assert len(starts) == 1 + len(search) + len(grid) == 15  # the base start, the search's, the grid's
    assert starts[1 : 1 + len(search)] == search and starts[1 + len(search) :] == grid
    assert steps["search"]["result"]["restarts"] == 11 and steps["grid"]["result"]["restarts"] == 2
    # tune_session.py's docstring: a start with the start options takes 49-71 s, median ~57 s; a stop ~5.5 s
    healthy = [s["start_s"] for s in starts[1:] if s["healthy"]]
    assert min(healthy) >= 49.0 and max(healthy) <= 72.0 and 56.0 <= statistics.median(healthy) <= 59.0
    stops = [s["stop_s"] for s in starts[1:] if s["stop_s"] is not None]
    assert min(stops) >= 5.0 and max(stops) <= 6.5 and statistics.median(stops) == pytest.approx(5.5, abs=0.3)


def test_the_estimate_shown_before_confirmation_is_within_25_percent_of_the_searchs_wall_time() -> None:
    search = load("summary.json")["steps"]["search"]
    est = search["estimate"]
    # what the Tune screen shows: benchmark seconds + starts x the restart length known before the tune
    assert est["estimate_s"] == pytest.approx(est["bench_s"] + est["starts"] * est["restart_s"], abs=0.2)
    assert abs(est["estimate_s"] / search["wall_s"] - 1.0) <= 0.25, (est["estimate_s"], search["wall_s"])
    assert search["estimate_error_pct"] == pytest.approx((est["estimate_s"] / search["wall_s"] - 1.0) * 100, abs=0.1)


def sweeps(records: list[BenchRecord], duration_s: float = 1.5, warmup: int = 2) -> list[tuple[str, float, float]]:
    """Each benchmark sweep a tune ran (one setup, one workload, one stage): its kind (screen, full), its wall time
    (the sweep's start in its run_id to its last level's end) and the time the estimate's level model gives it with
    each level's own request length (its median end-to-end latency), the duration a screening run had."""
    out = []
    for run_id in dict.fromkeys(r.run_id for r in records):
        mine = [r for r in records if r.run_id == run_id]
        began = datetime.strptime(run_id.split("@")[1], "%Y%m%dT%H%M%S.%f%z").timestamp()
        wall = max(r.ended_at.timestamp() for r in mine) - began
        kind = "screen" if run_id.startswith("tune-search/") and run_id.split("@")[0].endswith("/s0") else "full"
        level = duration_s * (Policy().screen_fraction if kind == "screen" else 1.0)
        model = sum(
            level_seconds(level, r.max_concurrency or 1, warmup=warmup, request_s=r.median_e2e_latency_ms / 1000)
            for r in mine
        )
        out.append((kind, wall, model))
    return out


def level_walls(records: list[BenchRecord], kind: str) -> list[float]:
    """The wall seconds of one level (warm-up, flush, duration, tail) in the sweeps of this kind, sweep by sweep."""
    counts = [sum(1 for r in records if r.run_id == run_id) for run_id in dict.fromkeys(r.run_id for r in records)]
    return [wall / n for (k, wall, _), n in zip(sweeps(records), counts, strict=True) if k == kind]


def test_the_estimates_level_model_with_the_measured_request_length_gives_the_benchmarks_wall_time(
    records: list[BenchRecord],
) -> None:
    """Each term of the estimate's level (console/core/tune/timing.py) is what the bench engine does: the warm-up
    requests, the duration, the tail of the requests in flight at its end. Given the request length each level
    measured, it gives the session's 23 sweeps (12 screening, 7 full, the grid's 4) their wall time within 5 % in
    all, each within 25 %. The estimate shown had priced a level at its duration + 5 s, and a screening level at an
    eighth of that: a full level took about 2 s (not 6.5), a screening level about 1 s (not 0.81; its warm-up and
    tail do not shrink with its duration)."""
    found = sweeps(records)
    assert [k for k, _, _ in found].count("screen") == 12 and len(found) == 23
    for kind in ("screen", "full"):
        wall = sum(w for k, w, _ in found if k == kind)
        model = sum(m for k, _, m in found if k == kind)
        assert abs(model / wall - 1.0) < 0.05, (kind, model, wall)
    assert all(abs(m / w - 1.0) < 0.25 for _, w, m in found)
    old_level = 1.5 + 5.0
    assert statistics.median(level_walls(records, "full")) < old_level / 3
    assert statistics.median(level_walls(records, "screen")) > old_level * Policy().screen_fraction


def test_the_estimate_recomputed_from_the_searchs_plan_is_within_25_percent_of_its_wall_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search as the console planned it, asked again with the restart length the session gave it (60 s): its
    starts as the tune runs them (the screening none for the setup the host runs; the full runs at most every
    setup, 7, of which it ran 4; the restore) and its levels as the bench engine runs them, each request at the
    estimate's prior (64 tokens x 10 ms; this tiny model took 0.31 s at the median)."""
    # that session's levels warmed without settling (before issue 46): its tune had no settle wave to count
    monkeypatch.setattr(timing, "SETTLE_WAVES", 0)
    summary = load("summary.json")
    search = summary["steps"]["search"]
    shown = search["estimate"]
    pending = planned(summary, "search", tmp_path)
    assert [c.name for c in pending.space.candidates] == shown["candidates"]  # the plan the session had
    assert pending.running is not None
    assert pending.space.candidate(pending.running).name == "STANDALONE steps 2 topk 1"
    parts = estimate(pending.estimate_s)
    assert parts.starts == 6 + 7 + 1 >= len(search["starts"])  # 12: 10 trial starts, the rollback's, the restore
    request = 64 * TOKEN_S
    requests = (2 + 1 / 2) + (1 + 8 / 9) + (1 + 32 / 33)  # warm-up rounds and tail at C = 1, 8, 32
    screening = 7 * 2 * (3 * 1.5 / 8 + requests * request)  # every setup, both workloads, one run each
    full = 2 * 2 * 2 * (3 * 1.5 + requests * request)  # the best two per level, 2 repeats, both workloads
    assert parts.bench_s == pytest.approx(screening + full)
    again = pending.estimate_s(shown["restart_s"])
    assert again == pytest.approx(parts.bench_s + parts.starts * shown["restart_s"])
    assert abs(again / search["wall_s"] - 1.0) <= 0.25, (again, search["wall_s"])
    assert abs(again / search["wall_s"] - 1.0) < abs(shown["estimate_s"] / search["wall_s"] - 1.0) - 0.02  # closer


def test_the_grid_was_cut_by_the_budget_so_its_estimate_is_no_estimate_error() -> None:
    """The grid's 399 % "error" is the session's budget stopping it after two of six setups, not the estimate."""
    grid = load("tune-grid.json")
    assert grid["stopped"] == "budget" and grid["strategy"] == "grid"
    states = [t["state"] for t in grid["trials"]]
    assert states.count("benchmarked") == 2 and states.count("skipped") == 4
    assert grid["final_unit"] == "original" and grid["host_healthy"] is True


# --- the end state -----------------------------------------------------------------------------------------------


def test_the_host_ended_on_its_original_unit_byte_for_byte_healthy_with_the_same_values() -> None:
    steps = load("summary.json")["steps"]
    start, final = steps["start"], steps["final"]
    assert hashlib.sha256(start["unit"].encode()).hexdigest() == start["original"]["sha256"] == final["unit_sha256"]
    assert final["unit_byte_for_byte"] is True and final["healthy_after_s"] is not None
    assert final["server"] == start["original"]["server"] and final["server_as_at_start"] is True
    assert final["server"]["speculative_draft_model_path"] == "/opt/sgm/sa-p90"
    for name in ("tune-search.json", "tune-grid.json"):
        tune = load(name)
        assert (tune["final_unit"], tune["host_healthy"], tune["error"]) == ("original", True, None)
    status = load("status-final.json")
    assert status["sglang"]["healthy"] is True and status["service"]["active_state"] == "active"
    assert status["sglang"]["speculative_num_steps"] == 2 and status["sglang"]["speculative_eagle_topk"] == 1
    stopped = load("status-stopped.json")["service"]
    assert stopped["summary"] == STOPPED_BY_SIGKILL  # the session's stop: SGLang 0.5.17 ends by its own SIGKILL
    started = datetime.fromisoformat(final["state"]["started_at"]).timestamp()
    last = [r for r in journal() if r["message"].startswith("Started sglang.service")][-1]
    assert last["ts"] == pytest.approx(started, abs=1.0)  # the process checked is the last one started
