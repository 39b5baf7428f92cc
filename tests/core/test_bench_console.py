"""Unit tests of the console's benchmark form (last used values, validation per field, the label from the running
setup, the queued workloads) and of the live view's model fed a scripted event stream."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from console.bench import events as ev
from console.bench.metrics import RequestResult
from console.core.bench.queue import (
    FORM_FILE,
    BenchForm,
    FormErrors,
    SweepQueued,
    load_form,
    plan_sweeps,
    proposed_label,
    save_form,
)
from console.tui.presenters.bench_live import LiveBench
from tests.tui.support import view


def test_the_form_opens_with_the_last_used_values_but_a_fresh_label(tmp_path: Path) -> None:
    assert load_form(tmp_path) == BenchForm()  # nothing kept yet: bench's defaults
    used = BenchForm(label="eagle3 s2", concurrency="1,30,64", requests="128", workload="random+chat", repeat="3")
    save_form(tmp_path, used)
    assert load_form(tmp_path) == replace(used, label="")
    (tmp_path / FORM_FILE).write_text("{not json")
    assert load_form(tmp_path) == BenchForm()  # an unreadable file: the defaults, nothing raised


def test_the_label_is_proposed_from_the_running_setup() -> None:
    assert proposed_label(view(), "gpu-a") == "eagle3 s2 k1 d3 v2"  # the example
    assert proposed_label(None, "gpu-a") == "gpu-a"


def test_every_wrong_field_is_named_with_what_to_type() -> None:
    form = BenchForm(label=" ", concurrency="1,eight", requests="12", duration="30", input_len="big", repeat="x")
    with pytest.raises(FormErrors) as caught:
        plan_sweeps(form)
    problems = caught.value.problems
    assert set(problems) == {"label", "concurrency", "duration", "input_len", "repeat"}
    assert "e.g. 1,8,32" in problems["concurrency"] and "not both" in problems["duration"]
    with pytest.raises(FormErrors) as caught:
        plan_sweeps(BenchForm(label="a", repeat="0"))
    assert list(caught.value.problems) == ["repeat"] and "repeat must be ≥ 1" in caught.value.problems["repeat"]


def test_both_workloads_queue_two_sweeps() -> None:
    sweeps = plan_sweeps(BenchForm(label="k1 v2", concurrency="1,48", duration="6", workload="random+chat"))
    assert [(s.label, s.workload) for s in sweeps] == [("k1 v2 random", "random"), ("k1 v2 chat", "chat")]
    assert sweeps[1].config.concurrencies == [1, 48] and sweeps[1].config.duration == 6.0
    assert sweeps[1].config.workload.forced_output is False and sweeps[0].config.workload.forced_output is True
    (one,) = plan_sweeps(BenchForm(label="x", request_rate="2,4", requests="20"))
    assert one.label == "x" and one.config.request_rates == [2.0, 4.0] and one.config.requests == 20


def _done(level: ev.Level, n: int, ok: bool = True) -> ev.RequestDone:
    result = RequestResult(success=ok, output_len=11, ttft=0.1, latency=0.6)  # TPOT 50 ms
    return ev.RequestDone(level, result, n if ok else 0, 0 if ok else n)


def test_the_live_view_follows_a_scripted_sweep_and_a_stop_says_why() -> None:
    (sweep,) = plan_sweeps(BenchForm(label="s2", concurrency="1,8,32", requests="4"))
    live = LiveBench("gpu-a", [sweep])
    assert [(r.level, r.state) for r in live.rows] == [("C=1", "waiting"), ("C=8", "waiting"), ("C=32", "waiting")]
    c1, c8 = ev.Level(concurrency=1), ev.Level(concurrency=8)
    for event in (
        SweepQueued(0, 1, "s2", "random"),
        ev.ClientPlaced("console", 0.4, None, "round trip 0.4 ms: at most 5 ms"),
        ev.SweepStarted([c1, c8, ev.Level(concurrency=32)], 1, "0.5.9", "kimi"),
        ev.LevelStarted(c1, 0, 4, None),
        _done(c1, 1),
        _done(c1, 2),
        ev.RunningFigures(c1, 1.5, 2, 0, 1, 88.5, 120.0),
    ):
        live.feed(event)
    row = live.rows[0]
    assert (row.state, row.progress, row.output_tok_s, row.ttft_ms, row.tpot_ms) == (
        "running",
        "2/4",
        88.5,
        120.0,
        pytest.approx(50.0),
    )
    live.show_power(1234.0)
    assert row.power_w == 1234.0 and live.placement.startswith("load generator: here, through the SSH port forward")
    metrics = {"completed": 4, "failed": 0, "output_throughput": 90.1, "mean_ttft_ms": 110.0, "median_tpot_ms": 49.0}
    live.feed(ev.LevelDone(c1, 0, metrics, {"mean_power_w": 1100.0}, None))
    assert (row.state, row.output_tok_s, row.power_w) == ("done", 90.1, 1100.0)
    assert live.rows[1].state == "warm-up"
    live.feed(ev.LevelStarted(c8, 0, 4, None))
    live.feed(_done(c8, 3, ok=False))
    stopped = {**metrics, "completed": 0, "failed": 3}
    live.feed(ev.LevelDone(c8, 0, stopped, {}, "error rate 100% > 50%"))
    live.feed(ev.SweepDone(1, "error rate 100% > 50%"))
    live.finish()
    assert [(r.state, r.why) for r in live.rows[1:]] == [
        ("stopped", "error rate 100% > 50%"), ("not run", "the sweep stopped before it"),
    ]  # fmt: skip
    assert live.state == "stopped" and live.finished_levels == 2


def test_cancel_keeps_the_finished_levels_and_stops_the_rest() -> None:
    sweeps = plan_sweeps(BenchForm(label="s2", concurrency="1,8", requests="4", workload="random+chat"))
    live = LiveBench("gpu-a", sweeps)
    c1 = ev.Level(concurrency=1)
    live.feed(SweepQueued(0, 2, "s2 random", "random"))
    live.feed(ev.SweepStarted([c1, ev.Level(concurrency=8)], 1, "0.5.9", "kimi"))
    live.feed(ev.LevelStarted(c1, 0, 4, None))
    live.feed(ev.LevelDone(c1, 0, {"completed": 4, "failed": 0, "output_throughput": 90.0}, {}, None))
    live.cancel("cancelled by the operator")
    assert [(r.sweep, r.level, r.state) for r in live.rows] == [
        ("s2 random", "C=1", "done"), ("s2 random", "C=8", "stopped"),
        ("s2 chat", "C=1", "not run"), ("s2 chat", "C=8", "not run"),
    ]  # fmt: skip
    assert live.state == "cancelled" and live.finished_levels == 1


def test_a_long_level_keeps_a_bounded_sample_of_tpots_for_its_median_so_far() -> None:
    from console.tui.presenters.bench_live import TpotSample

    sample = TpotSample()
    assert sample.median() is None
    for n in range(100_000):
        sample.add(float(n % 1000))  # uniform 0..999: median 499.5
    assert len(sample.values) < TpotSample.CAP and sample.stride == 64
    assert sample.median() == pytest.approx(499.5, abs=10)


def test_records_say_spec_v2_as_the_versions_rules_read_the_unit() -> None:
    from console.bench.runs import setup_of
    from console.core.bench.host import spec_v2_of
    from tests.tui.support import DEMO_UNIT

    v2 = DEMO_UNIT.replace("SGLANG_ENABLE_SPEC_V2=False", "SGLANG_ENABLE_SPEC_V2=True")
    assert spec_v2_of(v2, "0.5.9") is True and spec_v2_of(DEMO_UNIT, "0.5.9") is False
    assert spec_v2_of(v2, None) is None and spec_v2_of("not a unit", "0.5.9") is None
    args = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 2, "speculative_eagle_topk": 1}
    assert setup_of(args, True) == "eagle3 s2 k1 v2" and setup_of(args, False) == "eagle3 s2 k1"
