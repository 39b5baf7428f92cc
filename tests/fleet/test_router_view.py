"""smg's view of the fleet's workers, read from its metrics (console.fleet.router) and said on the overview and in
`status @GROUP` (pure: Prometheus's answers written out here; the real smg and Prometheus are in
test_router_metrics.py)."""

from __future__ import annotations

from console.core.status.group import MemberStatus
from console.fleet.promql import FIGURE_LABEL, parse_vector, router_samples, split_by_host
from console.fleet.router import WorkerAtRouter, workers_at_router
from console.fleet.rows import router_note, taken_out_line
from console.fleet.telemetry import FleetTracker, HostNames
from console.tui.widgets.fleet_overview import banner, fleet_row

A, B, C = "http://10.0.0.5:30000", "http://10.0.0.6:30000", "http://10.0.0.7:30000"
MODEL = "Qwen/Qwen3.5-122B-A10B-FP8"


def answer(*items: tuple[dict[str, str], str], at: float = 1000.0) -> dict[str, object]:
    result = [{"metric": m, "value": [at, v]} for m, v in items]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def tag(figure: str, **labels: str) -> dict[str, str]:
    return {FIGURE_LABEL: figure, **labels}


# smg 1.13 in front of three workers: A routed to, B's circuit open, C overloaded (its queue at 9), and one SGLang
# figure per host under the fleet's own label.
ANSWER = answer(
    *(
        (tag(figure, host=h, job="sglang"), value)
        for h in ("gpu-a", "gpu-b", "gpu-c")
        for figure, value in (("up", "1"), ("scraped_at", "999"))
    ),
    (tag("throughput", host="gpu-a"), "100"),
    (tag("throughput", host="gpu-b"), "90"),
    (tag("throughput", host="gpu-c"), "80"),
    (tag("router_health", worker=A), "1"),
    (tag("router_health", worker=B), "1"),
    (tag("router_health", worker=C), "1"),
    (tag("router_circuit", worker=A), "0"),
    (tag("router_circuit", worker=B), "1"),
    (tag("router_circuit", worker=C), "0"),
    (tag("router_waiting", worker=A, model=MODEL), "1"),
    (tag("router_waiting", worker=C, model=MODEL), "9"),
    (tag("router_token_usage", worker=C, model=MODEL), "0.42"),
    (tag("router_overloaded", model=MODEL), "1"),
    (tag("router_stalled", worker=A, reason="transport"), "0"),  # a veto that is off
)
NAMES = HostNames({"gpu-a": ["10.0.0.5"], "gpu-b": ["10.0.0.6"], "gpu-c": ["10.0.0.7"]})


def test_smg_series_name_each_worker_and_why_it_is_out_of_routing() -> None:
    samples = parse_vector(ANSWER)
    workers, overloaded = workers_at_router(router_samples(samples))
    assert overloaded == {MODEL: 1}
    assert workers[A] == WorkerAtRouter(A, True, "closed", (), 1.0, None, MODEL, False) and workers[A].out == []
    assert workers[B].out == ["circuit open"]
    assert workers[C].overloaded and workers[C].out == ["overloaded (queue 9, KV 42 %)"]
    # the router's series are not the hosts' figures
    assert {h: s.figures for h, s in split_by_host(samples, "host").items()} == {
        "gpu-a": {"throughput": 100.0}, "gpu-b": {"throughput": 90.0}, "gpu-c": {"throughput": 80.0}}  # fmt: skip
    # a model with no overloaded worker: a long queue alone is not smg's overload
    calm, _ = workers_at_router(r for r in router_samples(samples) if r.figure != "router_overloaded")
    assert not calm[C].overloaded
    # thresholds other than smg's defaults ([fleet] router_overload_*)
    strict, _ = workers_at_router(router_samples(samples), overload_waiting=20, overload_token_usage=0.4)
    assert strict[C].out == ["overloaded (queue 9, KV 42 %)"]
    lax, _ = workers_at_router(router_samples(samples), overload_waiting=20, overload_token_usage=0.9)
    assert lax[C].out == []


def test_every_state_smg_routes_around_is_said() -> None:
    assert WorkerAtRouter(A, healthy=False).out == ["unhealthy"]
    assert WorkerAtRouter(A, circuit="half_open").out == ["circuit half-open (trial requests only)"]
    assert WorkerAtRouter(A, stalled=("transport", "wedge")).out == ["stalled (transport)", "stalled (wedge)"]
    stalled = workers_at_router(
        router_samples(parse_vector(answer((tag("router_stalled", worker=A, reason="wedge"), "1")))))[0]  # fmt: skip
    assert stalled[A].out == ["stalled (wedge)"]


def test_the_overview_and_status_say_which_hosts_smg_routes_around() -> None:
    samples = parse_vector(ANSWER)
    tracker = FleetTracker("http://prom:9090", NAMES, scrape_interval_s=5)
    view = tracker.answered(split_by_host(samples, "host"), 1000.0, *workers_at_router(router_samples(samples)))
    assert list(view.routers) == ["gpu-a", "gpu-b", "gpu-c"]  # by the address in smg's worker URL
    assert view.taken_out() == {"gpu-b": ["circuit open"], "gpu-c": ["overloaded (queue 9, KV 42 %)"]}
    assert taken_out_line(view) == "smg routes around 2: gpu-b (circuit open); gpu-c (overloaded (queue 9, KV 42 %))"
    assert router_note(view.routers["gpu-a"]) == ""
    assert router_note(view.routers["gpu-b"]) == "smg: circuit open"
    row = fleet_row("gpu-b", view, None)
    assert row[-1].plain == "smg: circuit open" and "red" in str(row[-1].style)
    assert fleet_row("gpu-a", view, None)[-1].plain == "–"
    assert "smg routes around 2: gpu-b (circuit open)" in banner(view, 3, 1000.0).plain
    member = MemberStatus("gpu-b", "prometheus", figures=view.hosts["gpu-b"], router=view.routers["gpu-b"])
    data = member.to_json()
    assert data["router"]["out"] == ["circuit open"] and data["router"]["circuit"] == "open"
    assert member.ok  # the host is up: where smg sends requests is said, not judged
    # Prometheus down: the last view's routers are kept with the rest, said as Prometheus down
    down = tracker.failed("refused", 1010.0)
    assert down.routers == view.routers and down.down
    assert "smg routes around" not in banner(down, 3, 1010.0).plain


def test_a_worker_url_names_its_host_by_address() -> None:
    assert NAMES.host_of("http://10.0.0.5:30000") == "gpu-a"
    assert NAMES.host_of("https://10.0.0.6") == "gpu-b"
    assert HostNames({"v6": ["fd00::5"]}).host_of("http://[fd00::5]:30000") == "v6"
    assert NAMES.host_of("http://10.9.9.9:30000") is None
