"""What a restart costs (console/core/apply/restarts.py), pure: a start's record from the server's startup_time or the
journal's phases, the workspace's file, and the median of a host's recent restarts with the phase that dominates."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console.core.apply.restarts import (
    ENGINE_SETUP,
    FILE,
    REST,
    PhaseTime,
    RestartRecord,
    append_restart,
    cost_from_server,
    cost_text,
    duration_text,
    phases_from_startup_time,
    read_restarts,
    restart_cost,
    restart_record,
    start_options,
)
from console.core.phases import PhaseTracker

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

# What SGLang 0.5.23's /server_info says of a start of an EAGLE3 server (observability/startup_time.py's shape).
STARTUP_TIME = {
    "load_weight": 370.0,
    "kv_cache_allocation": 6.0,
    "scheduler_e2e": 470.0,
    "cuda_graph": {
        "prefill": 30.0,
        "decode": 0.0,
        "target_verify": 20.0,
        "draft_prefill": 6.0,
        "draft_decode": 14.0,
        "draft_extend": 12.0,
    },
    "tokenizer_e2e": 472.0,
}


def _record(
    host: str, minutes: float, at: datetime, *, load_share: float = 0.6, unit: str = "sglang.service"
) -> RestartRecord:
    total = minutes * 60
    phases = (PhaseTime("load_weights", total * load_share), PhaseTime(REST, total * (1 - load_share)))
    return RestartRecord(host, unit, at, total, phases, "server", "0.5.23", "EAGLE3 steps 2 topk 1", "apply")


def test_the_servers_startup_time_becomes_the_journals_phases() -> None:
    phases = {p.name: p.seconds for p in phases_from_startup_time(STARTUP_TIME)}
    assert phases == {
        "load_weights": 370.0,
        "kv_cache": 6.0,
        "cuda_graph": 50.0,  # prefill + target verify (+ decode, none with speculation)
        "draft_cuda_graph": 20.0,  # draft prefill + draft decode
        "draft_extend_cuda_graph": 12.0,
    }


def test_a_record_adds_the_rest_of_the_wall_time_to_the_servers_phases() -> None:
    record = restart_record(
        host="gpu-a", unit="sglang.service", began=T0, ready=T0 + timedelta(seconds=600), startup_time=STARTUP_TIME,
        journal_phases=(), sglang_version="0.5.23", setup="EAGLE3 steps 2 topk 1", start="apply",
    )  # fmt: skip
    assert record.phases_from == "server"
    assert record.total_s == 600.0
    assert sum(p.seconds for p in record.phases) == pytest.approx(600.0)
    # the engine's own 472 s beyond its named phases' 458, then what lies outside the engine (stop, imports)
    assert record.phases[-2:] == (PhaseTime(ENGINE_SETUP, 472.0 - 458.0), PhaseTime(REST, 600.0 - 472.0))


def test_without_startup_time_the_journals_phases_are_kept() -> None:
    tracker = PhaseTracker.for_start(speculative=False)
    lines = [
        (0, "Load weight begin. avail mem=90 GB"),
        (300, "Load weight end. type=Llama, avail mem=20 GB"),
        (305, "KV Cache is allocated. #tokens: 1000"),
        (306, "Capture cuda graph begin. This can take up to several minutes."),
        (346, "Capture cuda graph end. Time elapsed: 40 s"),
        (350, "Uvicorn running on http://127.0.0.1:30000"),
        (360, "The server is fired up and ready to roll!"),
    ]
    for seconds, line in lines:
        tracker.feed(line, T0 + timedelta(seconds=seconds))
    record = restart_record(
        host="gpu-a", unit="sglang.service", began=T0 - timedelta(seconds=20), ready=T0 + timedelta(seconds=361),
        startup_time=12.5,  # before 0.5.23 a number (or nothing): the journal says the phases
        journal_phases=tracker.phases, sglang_version="0.5.9", setup="no speculation", start="restart",
    )  # fmt: skip
    phases = {p.name: round(p.seconds, 3) for p in record.phases}
    assert record.phases_from == "journal"
    assert phases == {
        "load_weights": 300.0, "kv_cache": 5.0, "cuda_graph": 40.0, "warmup": 10.0, REST: 381.0 - 355.0,
    }  # fmt: skip


def test_phases_longer_than_the_wall_time_are_scaled_into_it() -> None:
    """The server's clock and ours differ: the phases never add up to more than the wait itself."""
    record = restart_record(
        host="h", unit="u", began=T0, ready=T0 + timedelta(seconds=400), startup_time=STARTUP_TIME,
        journal_phases=(), sglang_version="0.5.23", setup="", start="apply",
    )  # fmt: skip
    assert sum(p.seconds for p in record.phases) == pytest.approx(400.0)
    assert all(p.seconds >= 0 for p in record.phases)
    shares = {p.name: p.seconds / 400 for p in record.phases}
    assert shares["load_weights"] == pytest.approx(370 / 472)  # of the engine's own 472 s, its set-up included


def test_the_cost_is_the_median_of_the_hosts_recent_restarts_and_its_dominant_phase() -> None:
    records = [
        _record("gpu-a", 10.0, T0, load_share=0.62),
        _record("gpu-a", 9.0, T0 + timedelta(hours=1), load_share=0.60),
        _record("gpu-a", 11.0, T0 + timedelta(hours=2), load_share=0.64),
        _record("gpu-a", 30.0, T0 + timedelta(hours=3), load_share=0.9),  # one slow start: the median keeps its head
        _record("gpu-b", 2.0, T0 + timedelta(hours=4)),  # another host's
    ]
    cost = restart_cost(records, "gpu-a", "sglang.service")
    assert cost is not None
    assert cost.count == 4 and cost.median_s == pytest.approx(630.0)
    assert cost.dominant == "load_weights" and cost.dominant_label == "loading weights"
    # each phase's median (loading weights: 324, 372, 422.4, 1620 s) over the median wall time
    assert cost.dominant_share == pytest.approx((372 + 422.4) / 2 / 630.0)
    assert cost.text() == "a restart of gpu-a takes ~10 min 30 s (median of 4; loading weights 63 %)"
    assert restart_cost(records, "gpu-c") is None
    assert restart_cost(records, "gpu-a", "other.service") is None


def test_only_the_latest_restarts_count() -> None:
    """An option that shortened the start shows in the figure once its restarts are the recent ones."""
    old = [_record("gpu-a", 10.0, T0 + timedelta(minutes=i)) for i in range(5)]
    new = [_record("gpu-a", 4.0, T0 + timedelta(hours=1, minutes=i)) for i in range(5)]
    cost = restart_cost([*new, *old], "gpu-a")  # in any order in the file
    assert cost is not None and cost.median_s == pytest.approx(240.0) and cost.count == 5


def test_the_rest_can_dominate() -> None:
    cost = restart_cost([_record("h", 1.0, T0, load_share=0.2)], "h")
    assert cost is not None and cost.dominant == REST
    assert "the rest (stop, start-up) 80 %" in cost.text()


def test_a_host_without_restarts_says_so_or_uses_the_servers_own_account() -> None:
    assert cost_text(None, "gpu-a") == "no restart of gpu-a recorded yet (its cost is known after the first)"
    cost = cost_from_server("gpu-a", STARTUP_TIME)
    assert cost is not None and cost.source == "server" and cost.count == 0
    assert cost.median_s == 472.0 and cost.dominant == "load_weights"
    assert cost.text().startswith("gpu-a's server took ~7 min 52 s to start last time, by its own startup_time")
    assert cost_from_server("gpu-a", 12.5) is None  # before 0.5.23: a number, no phases
    assert cost_from_server("gpu-a", None) is None


def test_the_workspace_file_keeps_every_restart_and_skips_a_line_cut_short(tmp_path: Path) -> None:
    first, second = _record("gpu-a", 10.0, T0), _record("gpu-a", 8.0, T0 + timedelta(hours=1))
    append_restart(tmp_path, first)
    append_restart(tmp_path, second)
    with (tmp_path / FILE).open("a") as out:
        out.write('{"host": "gpu-a", "unit": "sglang.ser')  # a crash mid-line
    assert read_restarts(tmp_path) == [first, second]
    assert json.loads((tmp_path / FILE).read_text().splitlines()[0])["phases"][0] == {
        "name": "load_weights", "label": "loading weights", "seconds": 360.0,
    }  # fmt: skip
    assert read_restarts(tmp_path / "none") == []


def test_a_record_keeps_the_options_that_shorten_a_start() -> None:
    unit = (
        "[Service]\nEnvironment=SGLANG_CACHE_DIR=/var/cache/sglang\n"
        "ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m --load-format presharded\n"
    )
    resolved = {"load_format": "presharded", "startup_weight_load_mode": "serial", "weight_cache_mode": "off"}
    assert start_options(resolved, unit, "0.5.23") == {
        "load_format": "presharded", "SGLANG_CACHE_DIR": "/var/cache/sglang",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(1.37, "1.4 s"), (42.4, "42 s"), (612, "10 min 12 s"), (600, "10 min"), (3900, "1 h 05 min")],
)
def test_durations_read_as_a_person_says_them(seconds: float, said: str) -> None:
    assert duration_text(seconds) == said


def test_tunes_estimate_prices_its_starts_at_the_hosts_restart_cost() -> None:
    from console.core.tune import estimate

    def estimate_s(restart_s: float) -> float:  # PendingTune.estimate_s: 12 min of benchmarks and 7 starts
        return 720.0 + 7 * restart_s

    cost = restart_cost([_record("gpu-a", 8.0, T0, load_share=0.7)], "gpu-a")
    parts = estimate(estimate_s, cost)
    assert parts.starts == 7 and parts.total_s == pytest.approx(720.0 + 7 * 480.0)
    assert parts.text("gpu-a") == (
        "About 12 min of benchmarks + 7 starts of ~8 min each (a restart of gpu-a takes ~8 min (median of 1; loading "
        "weights 70 %)): about 1 h 08 min in all"
    )
    unknown = estimate(estimate_s, None)
    assert unknown.total_s is None and unknown.text("gpu-a", at_most=True) == (
        "At most 12 min of benchmarks + 7 starts (no restart of gpu-a recorded yet (its cost is known after the first))"
    )


def test_a_rolls_plan_says_what_each_members_restart_costs() -> None:
    import io
    from types import SimpleNamespace

    from console.cli.rolling import render_roll_plan
    from console.core.roll import ApplyChange, PendingRoll, RollHost, RollSpec, WaveSize

    costs = {"gpu-a": restart_cost([_record("gpu-a", 10.0, T0)], "gpu-a"), "gpu-b": None}
    hosts = [
        RollHost(label, None, ApplyChange(SimpleNamespace(  # type: ignore[arg-type]  # what the plan reads of one
            restart_only=True, restart_cost=cost, session=SimpleNamespace(label=label))))
        for label, cost in costs.items()
    ]  # fmt: skip
    roll = PendingRoll("duo", "restart", hosts, RollSpec(canary=1, wave=WaveSize(count=1)), router=None,
                       router_before=[], refusals=[], drain_timeout_s=1.0)  # fmt: skip
    out = io.StringIO()
    render_roll_plan(roll, "restart", out)
    assert out.getvalue().splitlines()[-2:] == [
        "  a restart of gpu-a takes ~10 min (median of 1; loading weights 60 %)",
        "  no restart of gpu-b recorded yet (its cost is known after the first)",
    ]
