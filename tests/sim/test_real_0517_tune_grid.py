"""Issue 20's second GPU session, replayed: the full grid on SGLang 0.5.17 against the first session's search, and
each draft's accept length on the server (fixtures/real-0.5.17/tune2, tune_report.py --fixtures).

run.sh tune with PHASES=start,grid,drafts,final and the first session's settings (STANDALONE with sa-p90, steps 1-3 x
topk 1, 2, random and chat, C = 1, 8, 32, 1.5 s per level, 2 repeats): the grid ran every setup at every level
(703 s), then the drafts phase ran sa-copy, sa-p70, sa-p40 (STANDALONE) and eagle-repeat (EAGLE) at steps 3 topk 1,
random, C = 1 and 32, one run each. The first session's search (fixtures/.../tune) ran on another host of the same
kind; this session's was about 28 % slower (its starts too): winners are compared on the grid's own figures, times
with the hosts' restart lengths set apart.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from console.bench.records import BenchRecord, read_records
from console.core.exits import STOPPED_BY_SIGKILL
from console.core.tune import estimate, timing
from console.core.tune.report import recommend
from console.core.tune.timing import TOKEN_S
from tests.sim.test_real_0517_tune import key_of, planned, replay, sweeps, tune_session
from tests.sim.test_real_0517_tune_calibration import grid2_noise

FIRST = Path(__file__).parent / "fixtures" / "real-0.5.17" / "tune"
HERE = FIRST.parent / "tune2"
DRAFTS = ("sa-copy", "sa-p70", "sa-p40", "eagle-repeat")  # tune_session.TuneSession.DRAFTS, the space file's order


def load(name: str, folder: Path = HERE) -> Any:
    return json.loads((folder / name).read_text())


def journal() -> list[dict[str, Any]]:
    with gzip.open(HERE / "journal.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[BenchRecord]:
    path = tmp_path_factory.mktemp("bench") / "bench.jsonl"
    with gzip.open(HERE / "bench-2026-12-01.jsonl.gz", "rb") as f:
        path.write_bytes(f.read())
    return read_records(path)


def level(tune: dict[str, Any], steps: int, topk: int, workload: str, concurrency: int) -> dict[str, Any]:
    (trial,) = [
        t
        for t in tune["trials"]
        if (t["config"]["speculative_num_steps"], t["config"]["speculative_eagle_topk"]) == (steps, topk)
        and t["config"]["speculative_algorithm"] == "STANDALONE"
    ]
    (lv,) = [lv for lv in trial["levels"] if (lv["workload"], lv["concurrency"]) == (workload, concurrency)]
    return lv


def restart_s(starts: list[dict[str, Any]]) -> float:
    """The median restart (stop + start) of a tune's healthy starts."""
    return statistics.median(s["start_s"] + s["stop_s"] for s in starts if s["healthy"] and s["stop_s"] is not None)


# --- the tunes read back ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "workloads", "levels", "repeats"),
    [("tune-grid.json", 2, (1, 8, 32), 2), ("tune-drafts.json", 1, (1, 32), 1)],
)
def test_the_tune_replayed_on_the_real_records_recommends_what_it_printed(
    name: str, workloads: int, levels: tuple[int, ...], repeats: int, records: list[BenchRecord]
) -> None:
    tune = load(name)
    search, names, configs = replay(tune, records, levels, repeats)
    again = [r.to_json() for r in recommend(search, names, configs)]
    assert len(again) == len(tune["recommendations"]) == workloads * len(levels)  # one per cell
    for mine, printed in zip(again, tune["recommendations"], strict=True):
        assert mine["output_throughput"] == pytest.approx(printed["output_throughput"], abs=0.01)
        assert {k: v for k, v in mine.items() if k != "output_throughput"} == {
            k: v for k, v in printed.items() if k != "output_throughput"
        }


def test_the_grid_ran_every_setup_at_every_level_fully(records: list[BenchRecord]) -> None:
    grid = load("tune-grid.json")
    assert (grid["strategy"], grid["stopped"], grid["error"], grid["restarts"]) == ("grid", None, None, 6)
    assert [t["state"] for t in grid["trials"]] == ["benchmarked"] * 6
    setups = {(t["config"]["speculative_num_steps"], t["config"]["speculative_eagle_topk"]) for t in grid["trials"]}
    assert setups == {(s, k) for s in (1, 2, 3) for k in (1, 2)}
    for trial in grid["trials"]:
        assert {(lv["workload"], lv["concurrency"]) for lv in trial["levels"]} == {
            (w, c) for w in ("random", "chat") for c in (1, 8, 32)
        }
        assert {(lv["measured_by"], lv["samples"]) for lv in trial["levels"]} == {("full", 2)}
    # the first session's settings, so that its search and this grid compare
    first = load("summary.json", FIRST)["plan"]
    plan = load("summary.json")["plan"]
    same = ("draft", "steps", "topk", "workloads", "concurrency", "duration", "repeat", "input_len", "output_len")
    assert {k: plan[k] for k in same} == {k: first[k] for k in same}
    assert len([r for r in records if r.label.startswith("tune-grid/")]) == 6 * 6 * 2


def test_every_record_is_the_real_server_running_the_setup_and_draft_its_label_names(
    records: list[BenchRecord],
) -> None:
    grid, drafts = load("tune-grid.json"), load("tune-drafts.json")
    configs = {f"tune-grid/{key_of(t)}": (t["config"], "sa-p90") for t in grid["trials"]}
    # the drafts tune names setups by the axes that vary (the draft path is none): its trials, in the space file's
    # order, are the drafts the session annotated them with, and each record's server ran that draft
    annotated = [t["draft"] for t in load("summary.json")["steps"]["drafts"]["result"]["trials"]]
    assert annotated == list(DRAFTS)
    configs |= {f"tune-drafts/{key_of(t)}": (t["config"], d) for t, d in zip(drafts["trials"], DRAFTS, strict=True)}
    assert len(records) == 72 + 8
    for r in records:
        config, draft = configs["/".join(r.label.split("/")[:2])]
        assert r.sglang_version == "0.5.17" and r.server_args["speculative_draft_model_path"] == f"/opt/sgm/{draft}"
        assert {k: r.server_args[k] for k in config} == config
        assert r.accept_length is not None and 1.0 < r.accept_length <= config["speculative_num_steps"] + 1


# --- search vs grid ---------------------------------------------------------------------------------------------


def test_the_first_sessions_search_against_the_full_grid() -> None:
    """The winner per cell, the search's pick measured by the grid: 2 cells the same setup, 2 within the grid's
    noise (the pick's range reaches the winner's), 2 behind by 22 and 30 %: more than the two setups' own repeats
    but less than the session's typical noise (37 %, the 75th percentile of its repeat spreads)."""
    comparison = tune_session().compare(
        FIRST / "tune-search.json", HERE / "tune-grid.json", load("summary.json", FIRST)
    )
    cells = {c["cell"]: c for c in comparison["cells"]}
    assert {k for k, c in cells.items() if c["same"]} == {"random C=32", "chat C=1"}
    assert {k for k, c in cells.items() if c.get("within_grid_noise")} == {"random C=8", "chat C=32"}
    behind = {k: c["gap_pct"] for k, c in cells.items() if c.get("within_grid_noise") is False}
    assert behind == {"random C=1": -22.1, "chat C=8": -30.4}
    assert comparison["same_or_within_noise"] is False
    assert all(abs(gap) / 100 < grid2_noise() for gap in behind.values())
    # random C=1: the search's steps 3 topk 1 misses the grid winner's range by less than 1 %
    grid = load("tune-grid.json")
    pick, winner = level(grid, 3, 1, "random", 1), level(grid, 1, 2, "random", 1)
    assert 0.98 < pick["high"] / winner["low"] < 1.0


def test_on_chat_no_draft_token_is_accepted_so_more_steps_only_cost() -> None:
    """Why the search's chat C = 8 pick (steps 3 topk 1, ahead of steps 2 topk 1 by 20 % in the first session) is
    the grid's loser there: chat samples at 0.7 from a near-uniform target, the accept length is 1.016 for every
    setup in both sessions, and the grid ranks steps 3 topk 1 behind steps 1 topk 1 at every chat level."""
    for tune in (load("tune-grid.json"), load("tune-search.json", FIRST)):
        for trial in tune["trials"]:
            for lv in trial["levels"]:
                if lv["workload"] == "chat":
                    assert lv["accept_length"] == pytest.approx(1.016, abs=0.002)
    grid = load("tune-grid.json")
    for c in (1, 8, 32):
        assert level(grid, 3, 1, "chat", c)["output_throughput"] < level(grid, 1, 1, "chat", c)["output_throughput"]
    search = load("tune-search.json", FIRST)
    assert (
        level(search, 3, 1, "chat", 8)["output_throughput"] > 1.2 * level(search, 2, 1, "chat", 8)["output_throughput"]
    )
    assert level(grid, 3, 1, "chat", 8)["output_throughput"] < 0.7 * level(grid, 2, 1, "chat", 8)["output_throughput"]


def test_the_search_cost_more_than_the_full_grid_its_restarts_not_its_benchmarks() -> None:
    """Halving restarts its survivors for the full runs (11 restarts against the grid's 6), and a restart (~60-85 s)
    outweighs a setup's benchmarks (~30 s) on this server: the search took 1.25 x the grid's wall time, 1.08 x
    without the failing setup, and about 1.6 x with the grid's host's restart length."""
    search_step = load("summary.json", FIRST)["steps"]["search"]
    grid_step = load("summary.json")["steps"]["grid"]
    search, grid = load("tune-search.json", FIRST), load("tune-grid.json")
    assert (search["restarts"], grid["restarts"]) == (11, 6)
    comparison = tune_session().compare(
        FIRST / "tune-search.json", HERE / "tune-grid.json", load("summary.json", FIRST)
    )
    assert comparison["search_share_of_grid"] == pytest.approx(1.253, abs=0.001)
    assert comparison["search_share_without_failed_trial"] == pytest.approx(1.077, abs=0.001)
    # the benchmarks are the small part of both, and the search's are the smaller
    assert search_step["measured_parts"]["rest_s"] < grid_step["measured_parts"]["rest_s"] < 0.3 * grid_step["wall_s"]
    # the hosts apart: the search's starts at the grid's host's restart length
    r1, r2 = restart_s(search_step["starts"]), restart_s(grid_step["starts"])
    assert r1 == pytest.approx(64.1, abs=0.1) and r2 == pytest.approx(84.0, abs=0.1)
    normalised = search_step["measured_parts"]["starts_s"] * r2 / r1 + search_step["measured_parts"]["rest_s"]
    assert 1.5 < normalised / grid["elapsed_s"] < 1.7


def test_the_same_setups_in_both_sessions_grids_move_with_the_host_not_apart() -> None:
    """Steps 1 and 2 topk 1, which both grids measured: this session's host ran every cell 11-40 % slower (median
    28 %), and its starts were slower too; the two setups' ratio in a cell moved less than the session's noise."""
    first, grid = load("tune-grid.json", FIRST), load("tune-grid.json")
    cells = [(w, c) for w in ("random", "chat") for c in (1, 8, 32)]
    ratios = [
        level(grid, s, 1, w, c)["output_throughput"] / level(first, s, 1, w, c)["output_throughput"]
        for s in (1, 2)
        for w, c in cells
    ]
    assert all(0.59 < r < 0.9 for r in ratios) and statistics.median(ratios) == pytest.approx(0.72, abs=0.01)
    for w, c in cells:
        before = level(first, 2, 1, w, c)["output_throughput"] / level(first, 1, 1, w, c)["output_throughput"]
        now = level(grid, 2, 1, w, c)["output_throughput"] / level(grid, 1, 1, w, c)["output_throughput"]
        assert abs(now / before - 1.0) < grid2_noise(), (w, c, round(before, 2), round(now, 2))


# --- times --------------------------------------------------------------------------------------------------------


def test_start_times_on_the_second_journal_are_the_starts_the_session_measured() -> None:
    steps = load("summary.json")["steps"]
    starts = tune_session().start_times(journal())
    grid, drafts = steps["grid"]["starts"], steps["drafts"]["starts"]
    assert len(starts) == 1 + len(grid) + len(drafts) == 12  # the base start, the grid's, the drafts'
    assert starts[1:7] == grid and starts[7:] == drafts
    assert all(s["healthy"] for s in starts)
    # a slower host than the first session's (49-71 s, median 57 s): the cold first start 149 s (the journal's;
    # healthy 153 s after the supervisor started; 117 s there)
    assert starts[0]["start_s"] == pytest.approx(148.6, abs=0.1)
    healthy = [s["start_s"] for s in starts[1:]]
    assert min(healthy) >= 66.0 and max(healthy) <= 93.0 and statistics.median(healthy) == pytest.approx(73.1, abs=0.1)


def test_the_estimates_shown_before_confirmation_against_the_wall_times() -> None:
    """The estimates the session was shown (the model before issue 20's fix). The drafts tune's is within 25 %
    (+12.7 %). The grid's is 26.2 % over: it counts a start for every setup, though the setup the host already runs
    needs none (7 against the journal's 6), and its benchmark part (1.5 s + 5 s per level) is 2.4 x what the
    benchmarks took on this tiny model; one start fewer would be +17.7 %."""
    steps = load("summary.json")["steps"]
    drafts, grid = steps["drafts"], steps["grid"]
    for step in (drafts, grid):
        est = step["estimate"]
        assert est["estimate_s"] == pytest.approx(est["bench_s"] + est["starts"] * est["restart_s"], abs=0.2)
    assert abs(drafts["estimate"]["estimate_s"] / drafts["wall_s"] - 1.0) <= 0.25
    assert drafts["estimate"]["starts"] == len(drafts["starts"]) == 5  # the drafts' base is none of the four
    est = grid["estimate"]
    assert grid["estimate_error_pct"] == pytest.approx(26.2, abs=0.1)
    assert est["starts"] == len(grid["starts"]) + 1 == 7
    assert est["bench_s"] / grid["measured_parts"]["rest_s"] == pytest.approx(2.4, abs=0.05)
    assert abs((est["estimate_s"] - est["restart_s"]) / grid["wall_s"] - 1.0) <= 0.25


@pytest.mark.parametrize(("name", "starts"), [("grid", 6), ("drafts", 5)])
def test_the_estimate_recomputed_from_the_plan_is_within_25_percent_of_the_wall_time(
    name: str, starts: int, tmp_path: Path
) -> None:
    """The grid and the drafts tune as the console planned them, asked again with the restart length the session
    gave each (60 s, then 84 s, the grid's median): the starts are the journal's (the grid none for steps 2 topk 1,
    which the host ran; the drafts' base is none of the four), the levels as the bench engine runs them (each
    request at the estimate's prior, 64 tokens x 10 ms)."""
    summary = load("summary.json")
    step = summary["steps"][name]
    shown = step["estimate"]
    pending = planned(summary, name, tmp_path)
    assert [c.name for c in pending.space.candidates] == shown["candidates"]  # the plan the session had
    parts = estimate(pending.estimate_s)
    assert parts.starts == len(step["starts"]) == starts
    again = pending.estimate_s(shown["restart_s"])
    assert again == pytest.approx(parts.bench_s + parts.starts * shown["restart_s"])
    assert abs(again / step["wall_s"] - 1.0) <= 0.25, (again, step["wall_s"])
    assert abs(again / step["wall_s"] - 1.0) < abs(shown["estimate_s"] / step["wall_s"] - 1.0) - 0.02  # closer


def test_the_grids_benchmark_part_is_the_levels_with_the_priors_request_length(
    records: list[BenchRecord], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate's level model, given the request length each level measured, gives the second session's 16
    sweeps their wall time within 5 %. Before the tune has measured the server it prices a request at its prior
    (64 tokens x 10 ms = 0.64 s, a large model's pace alone), where this tiny model's took 0.41 s (median; 0.26-0.69 s
    for 80 % of the levels): the grid's benchmark part is 206 s against the 196 s the wall time had beside the
    starts (the sweeps 177 s, the rest the console's own work between them); it was 468 s."""
    # that session's levels warmed without settling (before issue 46): its tune had no settle wave to count
    monkeypatch.setattr(timing, "SETTLE_WAVES", 0)
    found = sweeps(records)
    assert len(found) == 16 and {k for k, _, _ in found} == {"full"}
    assert abs(sum(m for _, _, m in found) / sum(w for _, w, _ in found) - 1.0) < 0.05
    measured = statistics.median(r.median_e2e_latency_ms / 1000 for r in records)
    assert measured == pytest.approx(0.41, abs=0.01) and measured < 64 * TOKEN_S
    summary = load("summary.json")
    grid = summary["steps"]["grid"]
    bench = estimate(planned(summary, "grid", tmp_path).estimate_s).bench_s
    runs = list(dict.fromkeys(r.run_id for r in records))
    assert all(run.startswith("tune-grid/") for run in runs[:12])  # the grid's 12 sweeps, then the drafts' 4
    grid_sweeps = sum(w for _, w, _ in found[:12])
    assert grid_sweeps == pytest.approx(177.3, abs=0.5)
    assert grid_sweeps < grid["measured_parts"]["rest_s"] < bench < grid["estimate"]["bench_s"]
    assert bench / grid["measured_parts"]["rest_s"] == pytest.approx(1.05, abs=0.03)


# --- the drafts on the server --------------------------------------------------------------------------------------


def server_accept() -> dict[str, dict[int, float]]:
    """Each draft's accept length on the server at steps 3 topk 1, random, C = 1 and 32 (sa-p90: the grid's)."""
    out: dict[str, dict[int, float]] = {}
    for trial, name in zip(load("tune-drafts.json")["trials"], DRAFTS, strict=True):
        out[name] = {lv["concurrency"]: lv["accept_length"] for lv in trial["levels"]}
    grid = load("tune-grid.json")
    out["sa-p90"] = {c: level(grid, 3, 1, "random", c)["accept_length"] for c in (1, 32)}
    return out


def test_on_the_server_standalones_accept_length_hardly_follows_the_drafts_agreement() -> None:
    """Offline (build_drafts.py, the same prompts greedy) the STANDALONE drafts span 1.50-3.67 at steps 3; on the
    server all four sit at 1.23-1.39, below their offline figure, the target's own weights (sa-copy) included. The
    EAGLE head that proposes the last token again (eagle-repeat) reaches its offline figure and more at C = 1."""
    offline = {
        name: d["accept_length"]["3"] for name, d in load("drafts.json")["drafts"].items() if "accept_length" in d
    }
    assert offline == {"sa-copy": 3.668, "sa-p90": 3.326, "sa-p70": 2.328, "sa-p40": 1.5, "eagle-repeat": 1.618}
    server = server_accept()
    standalone = [a for name, levels in server.items() if name.startswith("sa-") for a in levels.values()]
    assert len(standalone) == 8 and min(standalone) > 1.2 and max(standalone) < 1.4
    for name in ("sa-copy", "sa-p90", "sa-p70", "sa-p40"):
        assert max(server[name].values()) < offline[name] - 0.2, name
    assert min(server, key=lambda n: server[n][32]) == "sa-p40"  # the least agreeing draft is still the lowest
    assert server["eagle-repeat"][1] == pytest.approx(1.807, abs=0.001)
    assert server["eagle-repeat"][1] > offline["eagle-repeat"]
    assert server["eagle-repeat"][32] == pytest.approx(1.513, abs=0.001)
    assert all(server["eagle-repeat"][c] > max(server[n][c] for n in server if n.startswith("sa-")) for c in (1, 32))


def test_the_eagle_head_wins_the_drafts_tune_at_both_levels() -> None:
    drafts = load("tune-drafts.json")
    assert [r["name"] for r in drafts["recommendations"]] == ["EAGLE", "EAGLE"]
    eagle = drafts["trials"][DRAFTS.index("eagle-repeat")]
    best_standalone = {
        c: max(lv["output_throughput"] for t in drafts["trials"][:3] for lv in t["levels"] if lv["concurrency"] == c)
        for c in (1, 32)
    }
    for lv in eagle["levels"]:
        assert lv["output_throughput"] > 1.4 * best_standalone[lv["concurrency"]]


# --- the end state ------------------------------------------------------------------------------------------------


def test_the_host_ended_on_its_original_unit_byte_for_byte_healthy_with_the_same_values() -> None:
    steps = load("summary.json")["steps"]
    start, final = steps["start"], steps["final"]
    assert hashlib.sha256(start["unit"].encode()).hexdigest() == start["original"]["sha256"] == final["unit_sha256"]
    assert final["unit_byte_for_byte"] is True and final["healthy_after_s"] is not None
    assert final["server"] == start["original"]["server"] and final["server_as_at_start"] is True
    for name in ("tune-grid.json", "tune-drafts.json"):
        tune = load(name)
        assert (tune["final_unit"], tune["host_healthy"], tune["error"]) == ("original", True, None)
    status = load("status-final.json")
    assert status["sglang"]["healthy"] is True and status["service"]["active_state"] == "active"
    assert status["sglang"]["speculative_num_steps"] == 2 and status["sglang"]["speculative_eagle_topk"] == 1
    assert load("status-stopped.json")["service"]["summary"] == STOPPED_BY_SIGKILL
    started = datetime.fromisoformat(final["state"]["started_at"]).timestamp()
    last = [r for r in journal() if r["message"].startswith("Started sglang.service")][-1]
    assert last["ts"] == pytest.approx(started, abs=1.0)
