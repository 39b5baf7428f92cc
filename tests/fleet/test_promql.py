"""The fleet's PromQL and the parsing of Prometheus's answers (pure), and the tracker's staleness rules."""

from __future__ import annotations

import math

import pytest

from console.fleet.promql import (
    FIGURE_LABEL,
    FIGURES,
    PromAnswerError,
    figure_expr,
    fleet_query,
    parse_vector,
    split_by_host,
)
from console.fleet.router import ROUTER_FIGURES
from console.fleet.settings import FleetSettings
from console.fleet.telemetry import FleetTracker, HostNames

SETTINGS = FleetSettings(prometheus="http://prom:9090", label="host", sglang_job="sg.lang", scrape_interval_s=5)


def answer(*items: tuple[dict[str, str], str], at: float = 1000.0) -> dict[str, object]:
    result = [{"metric": m, "value": [at, v]} for m, v in items]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def test_every_figure_is_aggregated_by_the_hosts_label_and_quantiles_keep_le() -> None:
    assert figure_expr("throughput", SETTINGS) == "sum by (host) (sglang:gen_throughput)"
    assert figure_expr("ttft_p99", SETTINGS) == (
        "histogram_quantile(0.99, sum by (host, le) (rate(sglang:time_to_first_token_seconds_bucket[1m])))"
    )
    assert figure_expr("up", SETTINGS) == 'max by (host, job) (up{job=~"sg\\\\.lang|dcgm"})'
    query = fleet_query(SETTINGS)
    # one expression for the whole fleet: its figures, the two per-job ones and smg's view of the workers
    assert query.count(" or ") == len(FIGURES) + 2 + len(ROUTER_FIGURES) - 1
    assert f'label_replace(max by (worker) (smg_worker_cb_state), "{FIGURE_LABEL}", "router_circuit", "", "")' in query
    assert f'label_replace(max by (host) (DCGM_FI_DEV_GPU_TEMP), "{FIGURE_LABEL}", "temp_c", "", "")' in query


def test_an_answer_is_split_per_host_with_nan_dropped_and_jobs_kept_apart() -> None:
    samples = parse_vector(
        answer(
            ({"host": "a", FIGURE_LABEL: "throughput"}, "1234.5"),
            ({"host": "a", FIGURE_LABEL: "ttft_p99"}, "NaN"),
            ({"host": "a", FIGURE_LABEL: "up", "job": "sglang"}, "1"),
            ({"host": "a", FIGURE_LABEL: "scraped_at", "job": "sglang"}, "999.5"),
            ({"host": "b", FIGURE_LABEL: "power_w", "job": "x"}, "+Inf"),
            ({FIGURE_LABEL: "throughput"}, "1"),  # no host label: not the fleet's
        )
    )
    assert samples[0].at == 1000.0 and math.isnan(samples[1].value)
    by_host = split_by_host(samples, "host")
    assert set(by_host) == {"a", "b"}
    assert by_host["a"].figures == {"throughput": 1234.5}
    assert by_host["a"].up == {"sglang": 1.0} and by_host["a"].scraped_at == {"sglang": 999.5}
    assert by_host["b"].figures == {}


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "bad_data: parse error"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "expected an instant vector"),
        ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}}, "a malformed sample"),
        ([], "not a JSON object"),
    ],
)
def test_bad_answers_say_what_was_wrong(document: object, says: str) -> None:
    with pytest.raises(PromAnswerError, match=says):
        parse_vector(document)


def test_label_values_name_hosts_by_name_or_ssh_host_without_the_port() -> None:
    names = HostNames({"gpu-a": ["10.0.0.5"], "gpu-b": ["b.example"], "b.example": []})
    assert names.host_of("gpu-a:9400") == "gpu-a"
    assert names.host_of("10.0.0.5:30000") == "gpu-a"
    assert names.host_of("b.example") == "b.example"  # a host's own name wins over another's alias
    assert names.host_of("[::1]:9400") is None and names.host_of("gpu-c") is None


def _series(host: str, up: str, at: float, **figures: str) -> list[tuple[dict[str, str], str]]:
    items = [({"host": host, FIGURE_LABEL: k, "job": "sglang"}, v) for k, v in (("up", up), ("scraped_at", str(at)))]
    return items + [({"host": host, FIGURE_LABEL: k}, v) for k, v in figures.items()]


def test_the_tracker_keeps_last_figures_and_says_why_they_are_old() -> None:
    tracker = FleetTracker("http://p", HostNames({"a": [], "b": [], "c": []}), scrape_interval_s=5)
    first = split_by_host(parse_vector(answer(*_series("a", "1", 99, running="3"), *_series("b", "1", 99))), "host")
    view = tracker.answered(first, 100)
    assert view.unknown == ("c",) and view.hosts["a"].get("running") == 3 and view.hosts["a"].stale == ""
    # a's scrape fails: its series vanish, its last figures stay with the reason
    second = split_by_host(parse_vector(answer(*_series("a", "0", 104), *_series("b", "1", 99))), "host")
    view = tracker.answered(second, 105)
    assert view.hosts["a"].get("running") == 3 and view.hosts["a"].stale == "scrape failing: sglang"
    assert view.hosts["b"].stale == ""  # 6 s old: within two intervals of 5 s
    view = tracker.answered(second, 110)
    assert view.hosts["b"].stale == "stale 11s"
    down = tracker.failed("http://p cannot be reached (connection refused)", 111)
    assert down.down and down.hosts["b"].stale == "stale 12s" and down.unknown == ("c",)
