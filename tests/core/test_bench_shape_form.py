"""Unit tests of the bench form's production shape (`bench --shape-from-server WINDOW --rate-scale X,Y` in the
console): the window and rate scale read beside their fields, the clashes with another workload or typed rates,
the planned sweep carrying the ask, and the live view's rows and shape line once the window was observed."""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from console.bench.events import Level, LevelStarted, SweepStarted
from console.core.bench import (
    BenchForm,
    FormErrors,
    ShapeAsk,
    ShapeObserved,
    ShapeObserving,
    SweepQueued,
    plan_sweeps,
    shaped_sweep,
)
from console.sglang.histograms import Histogram
from console.sglang.traffic_shape import TrafficShape
from console.tui.presenters.bench_live import LiveBench
from console.tui.screens.bench import running_mark, slo_hint

EVEN = Histogram(((100.0, 0.0), (300.0, 105.0), (500.0, 210.0), (1000.0, 474.0), (2000.0, 1000.0), (math.inf, 1000.0)))
SHAPE = TrafficShape(window_s=10.0, requests=31, prompt=EVEN, output=EVEN, prompt_tokens=1000.0, cached_tokens=410.0)


def problems_of(form: BenchForm) -> dict[str, str]:
    with pytest.raises(FormErrors) as caught:
        plan_sweeps(form)
    return caught.value.problems


def test_a_shape_window_and_rate_scale_plan_one_sweep_that_asks_for_the_shape() -> None:
    (sweep,) = plan_sweeps(BenchForm(label="prod", shape_window="90s", rate_scale="1, 1.5,2"))
    assert sweep.shape == ShapeAsk(90.0, (1.0, 1.5, 2.0))
    (plain,) = plan_sweeps(BenchForm(label="prod"))
    assert plain.shape is None  # empty window: off
    shaped = shaped_sweep(sweep.config, SHAPE, list(sweep.shape.scales))
    assert shaped.request_rates == [3.1, 4.65, 6.2] and shaped.workload.name == "shape"


def test_each_shape_problem_stands_beside_its_field() -> None:
    wrong = problems_of(BenchForm(label="p", shape_window="ten minutes", rate_scale="1,fast"))
    assert set(wrong) == {"shape_window", "rate_scale"}
    assert "like 10m, 90s or 1h" in wrong["shape_window"] and "'ten minutes'" in wrong["shape_window"]
    assert "rate scales must be comma-separated numbers" in wrong["rate_scale"]
    assert "positive" in problems_of(BenchForm(label="p", shape_window="0s"))["shape_window"]
    assert "positive" in problems_of(BenchForm(label="p", shape_window="1m", rate_scale="0"))["rate_scale"]
    # the shape makes the workload and the rates: another workload or typed rates are refused, not overridden
    chat = problems_of(BenchForm(label="p", shape_window="1m", workload="chat"))
    assert set(chat) == {"shape_window"} and "pick the workload random" in chat["shape_window"]
    rates = problems_of(BenchForm(label="p", shape_window="1m", request_rate="2"))
    assert set(rates) == {"request_rate"} and "rate seen times the rate scale" in rates["request_rate"]
    # a scale without a window scales nothing: said, rather than silently ignored
    alone = problems_of(BenchForm(label="p", rate_scale="2"))
    assert set(alone) == {"rate_scale"} and "give a window" in alone["rate_scale"]


def test_the_live_view_says_the_window_then_the_shape_and_gets_the_shaped_rows() -> None:
    (sweep,) = plan_sweeps(BenchForm(label="prod", shape_window="10s", rate_scale="1,2", concurrency="64"))
    live = LiveBench("gpu-a", [sweep])
    assert live.rows == []  # the rates are not known before the window is observed
    live.feed(SweepQueued(0, 1, "prod", "random"))
    live.feed(ShapeObserving(10.0, datetime(2026, 1, 1, 12, 0, 10)))
    assert live.watching and running_mark(live) == "▶ benchmark watching the traffic"
    assert live.shape == [
        "watching the server's /metrics for 10 s (until 12:00:10): the traffic of that window is the shape "
        "(/metrics holds totals since the server started; the console keeps no history of them)"
    ]
    live.feed(ShapeObserved(SHAPE, (3.1, 6.2)))
    assert not live.watching
    assert live.shape[0].startswith("shape: last 10 s: 3.10 req/s (31 requests), input p50 ")
    assert live.shape[0].endswith("cache hit 41%")
    assert live.shape[1] == "workload: drawn from that shape, Poisson arrivals at 3.1, 6.2 req/s"
    assert [(r.sweep, r.level, r.state) for r in live.rows] == [
        ("prod", "rate=3.1/s, max C=64", "waiting"),
        ("prod", "rate=6.2/s, max C=64", "waiting"),
    ]
    live.feed(SweepStarted([Level(64, 3.1), Level(64, 6.2)], 1, "0.5.17", "m"))
    live.feed(LevelStarted(Level(64, 3.1), 0, 31, None))
    assert live.rows[0].state == "running" and running_mark(live).startswith("▶ benchmark 1/2")


def test_the_slo_hint_says_what_an_empty_field_holds_the_levels_to() -> None:
    assert slo_hint("ttft_p95=300ms,tpot_p95=60ms") == "empty: the profile's ttft_p95=300ms,tpot_p95=60ms"
    assert slo_hint("").endswith("(empty: none)")
