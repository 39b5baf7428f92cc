"""Unit tests of the console's benchmark form with the operator's own traffic (issue 23): the dataset picked from
the workspace's datasets/ (sampled with the form's size and seed), the SLO field (the profile's [slo] when empty),
find capacity, each problem beside its field; and of the live view's goodput, verdicts and capacity at the SLO."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.bench.events import Level, LevelDone, LevelStarted, RequestDone, RunningFigures, SweepStarted
from console.bench.metrics import RequestResult
from console.core.bench import (
    BenchForm,
    FormErrors,
    SweepQueued,
    dataset_files,
    load_form,
    plan_sweeps,
    save_form,
    slo_text,
)
from console.sim.datasets import write_datasets, write_trace
from console.tui.presenters.bench_live import LiveBench
from console.tui.screens.bench import running_mark, slo_summary


@pytest.fixture
def datasets(tmp_path: Path) -> Path:
    folder = tmp_path / "datasets"
    write_datasets(folder, count=40)  # the demo's chat.json (ShareGPT) and code.jsonl (prompt JSONL)
    (folder / "notes.txt").write_text("not a dataset")
    chat = [json.dumps({"messages": [{"role": "user", "content": f"help me with item {n} please"}]}) for n in range(12)]
    (folder / "support.jsonl").write_text("\n".join(chat) + "\n")
    write_trace(folder / "trace.jsonl", count=30)
    return folder


def problems_of(form: BenchForm, **kwargs: object) -> dict[str, str]:
    with pytest.raises(FormErrors) as caught:
        plan_sweeps(form, **kwargs)  # type: ignore[arg-type]
    return caught.value.problems


def test_the_picker_lists_the_json_and_jsonl_files_of_datasets(datasets: Path, tmp_path: Path) -> None:
    assert dataset_files(datasets) == ["chat.json", "code.jsonl", "support.jsonl", "trace.jsonl"]
    assert dataset_files(tmp_path / "nowhere") == []


def test_a_picked_dataset_is_sampled_with_the_forms_size_and_seed(datasets: Path) -> None:
    form = BenchForm(label="k1", workload="dataset", dataset="code.jsonl", dataset_sample="10", seed="7")
    (sweep,) = plan_sweeps(form, datasets=datasets)
    workload = sweep.config.workload
    assert (sweep.label, sweep.workload, workload.name, workload.api) == ("k1", "dataset", "dataset", "generate")
    sample = workload.dataset
    assert sample is not None and (sample.file, sample.format, sample.seed) == ("code.jsonl", "prompt-jsonl", 7)
    assert len(sample.requests) == 10 and sample.output_len_cap == 256  # the output tokens field caps
    (again,) = plan_sweeps(form, datasets=datasets)
    assert again.config.workload.dataset == sample  # the same requests in the same order for every run
    (other,) = plan_sweeps(BenchForm(**{**form.__dict__, "seed": "8"}), datasets=datasets)
    assert other.config.workload.dataset is not None and other.config.workload.dataset.requests != sample.requests
    (own,) = plan_sweeps(BenchForm(**{**form.__dict__, "output_len": ""}), datasets=datasets)
    assert own.config.workload.dataset is not None and own.config.workload.dataset.output_len_cap is None
    (chat,) = plan_sweeps(BenchForm(label="k1", workload="dataset", dataset="support.jsonl"), datasets=datasets)
    assert chat.config.workload.api == "chat"  # chat messages go to the chat API, as `bench --dataset` sends them


def test_each_traffic_problem_stands_beside_its_field(datasets: Path) -> None:
    assert set(problems_of(BenchForm(label="a", workload="dataset"), datasets=datasets)) == {"dataset"}
    beside = problems_of(BenchForm(label="a", dataset="chat.json"), datasets=datasets)
    assert list(beside) == ["dataset"] and "workload dataset" in beside["dataset"]
    (datasets / "broken.jsonl").write_text('{"prompt": "one two three"}\n{"prompt": "cut\n')
    broken = problems_of(BenchForm(label="a", workload="dataset", dataset="broken.jsonl"), datasets=datasets)
    assert (
        "broken.jsonl" in broken["dataset"]
        and "line 2" in broken["dataset"]
        and "nothing was sent" in broken["dataset"]
    )
    wrong = BenchForm(label="a", workload="dataset", dataset="chat.json", dataset_sample="0", seed="x", slo="ttft=9")
    found = problems_of(wrong, datasets=datasets)
    assert set(found) == {"dataset_sample", "seed", "slo"} and "e.g. ttft_p95=800ms" in found["slo"]
    # the file is read even when another field is wrong: everything to fix is said at once
    assert (
        "broken.jsonl"
        in problems_of(BenchForm(label=" ", workload="dataset", dataset="broken.jsonl"), datasets=datasets)["dataset"]
    )


def test_find_capacity_needs_an_slo_from_the_field_or_the_profile() -> None:
    searching = BenchForm(label="a", find_capacity="yes", request_rate="2")
    assert "SLO" in problems_of(searching)["slo"]
    (sweep,) = plan_sweeps(searching, profile_slo=True)  # bench_host gives it the profile's [slo]
    assert sweep.config.find_capacity and sweep.config.slo is None
    (held,) = plan_sweeps(BenchForm(**{**searching.__dict__, "slo": "ttft_p95=800ms, tpot_p95=60"}))
    assert held.config.slo == {"ttft_p95": 800.0, "tpot_p95": 60.0} and held.config.find_capacity


def test_the_forms_traffic_fields_are_kept_and_the_profiles_slo_reads_as_the_field_takes_it(tmp_path: Path) -> None:
    used = BenchForm(workload="dataset", dataset="chat.json", dataset_sample="50", seed="3", slo="e2e_p99=4s",
                     find_capacity="yes")  # fmt: skip
    save_form(tmp_path, used)
    assert load_form(tmp_path) == used
    assert slo_text((("ttft_p95", 800.0), ("tpot_p95", 60.0))) == "ttft_p95=800ms,tpot_p95=60ms"
    assert slo_text(()) == ""


def _request(level: Level, n: int, ttft: float) -> RequestDone:
    return RequestDone(level, RequestResult(success=True, output_len=11, ttft=ttft, latency=ttft + 0.5), n, 0)


def test_the_live_view_counts_goodput_and_says_each_levels_verdict_and_the_capacity() -> None:
    (sweep,) = plan_sweeps(BenchForm(label="s2", concurrency="1,8", requests="4", slo="ttft_p95=300ms,tpot_p95=60ms"))
    live = LiveBench("gpu-a", [sweep])
    c1, c8 = Level(concurrency=1), Level(concurrency=8)
    live.feed(SweepQueued(0, 1, "s2", "random"))
    live.feed(SweepStarted([c1, c8], 1, "0.5.9", "kimi"))
    live.feed(LevelStarted(c1, 0, 4, None))
    live.feed(_request(c1, 1, 0.1))  # TTFT 100 ms, TPOT 50 ms: good
    live.feed(_request(c1, 2, 0.5))  # TTFT 500 ms: not good
    live.feed(RunningFigures(c1, 2.0, 2, 0, 1, 88.5, 300.0))
    assert live.judged and live.rows[0].goodput == pytest.approx(0.5)  # 1 good request in 2 s so far
    met = {"completed": 4, "failed": 0, "request_throughput": 1.9, "request_goodput": 1.5, "slo_met": True}
    live.feed(LevelDone(c1, 0, met, {}, None))
    live.feed(LevelStarted(c8, 0, 4, None))
    assert running_mark(live) == "▶ benchmark 2/2 C=8 · C=1 1.50 good/s ✔"
    missed = {"completed": 4, "failed": 0, "request_throughput": 6.0, "request_goodput": 0.2, "slo_met": False,
              "slo_misses": ["TTFT p95 912.0 ms > 300 ms"]}  # fmt: skip
    live.feed(LevelDone(c8, 0, missed, {}, None))
    live.finish()
    assert [(r.goodput, r.slo_met) for r in live.rows] == [(1.5, True), (0.2, False)]
    cap = live.capacity("s2")
    assert cap is not None and (cap.level, cap.first_miss) == ("C=1", "C=8")
    summary = slo_summary(live).plain
    assert "SLO: TTFT p95 ≤ 300 ms, TPOT p95 ≤ 60 ms" in summary
    assert "✖ C=8: TTFT p95 912.0 ms > 300 ms" in summary
    assert "capacity at the SLO (highest level): C=1 (1.90 req/s); C=8 (700 % above) misses it" in summary


def test_a_capacity_search_gets_a_row_per_searched_rate_and_the_profiles_slo_from_the_records() -> None:
    (sweep,) = plan_sweeps(BenchForm(label="cap", find_capacity="yes", request_rate="2"), profile_slo=True)
    live = LiveBench("gpu-a", [sweep])
    assert live.rows == [] and live.searching and not live.judged
    live.feed(SweepQueued(0, 1, "cap", "random"))
    for rate, met in ((2.0, True), (4.0, False), (2.828, True)):
        level = Level(request_rate=rate)
        live.feed(LevelStarted(level, 0, 60, None))
        assert running_mark(live).startswith(f"▶ capacity search rate={rate:g}/s")
        metrics = {"completed": 60, "request_throughput": rate, "request_goodput": rate * 0.9, "slo_met": met,
                   "slo": {"ttft_p95": 800.0}}  # fmt: skip
        live.feed(LevelDone(level, 0, metrics, {}, None))
    live.finish()
    assert [r.level for r in live.rows] == ["rate=2/s", "rate=4/s", "rate=2.828/s"]
    assert live.slo == {"ttft_p95": 800.0}  # the profile's, as the levels' records carry it
    cap = live.capacity("cap")
    assert cap is not None and (cap.level, cap.first_miss) == ("rate=2.828/s", "rate=4/s")
    assert "capacity at the SLO (searched): rate=2.828/s" in slo_summary(live).plain


def test_a_trace_picked_as_the_dataset_is_replayed_on_its_own_clock(datasets: Path) -> None:
    form = BenchForm(label="t", workload="dataset", dataset="trace.jsonl", concurrency="1,8")
    (sweep,) = plan_sweeps(form, datasets=datasets)
    config = sweep.config
    assert config.workload.dataset is not None and config.workload.dataset.is_trace
    assert [level.label for level in config.levels()] == ["trace ×1"]
    assert len(config.workload.dataset.requests) == 30  # the whole trace, not the form's sample size
    form = BenchForm(label="t", workload="dataset", dataset="trace.jsonl", request_rate="2", find_capacity="yes")
    found = problems_of(form, datasets=datasets)
    assert "own clock" in found["request_rate"] and "own clock" in found["find_capacity"]
