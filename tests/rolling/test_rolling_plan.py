"""The pure half of a rolling change: waves, the router's N - wave rule, outcomes, stop rules, the gate verdict,
and the router's worker lists of every release."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.cli.common import said
from console.core.roll import (
    Batch,
    HostOutcome,
    RollError,
    RollLedger,
    RollSpec,
    WaveSize,
    batches,
    gate_verdict,
    may_start,
    outcome_of_apply,
    parse_wave,
)
from console.sglang.router import RouterWorker, normalize_url, parse_workers

NOW = datetime(2026, 12, 1, tzinfo=UTC)
HOSTS = ["a", "b", "c", "d", "e"]


def test_waves_count_or_share_of_the_group() -> None:
    assert parse_wave("2") == WaveSize(count=2)
    assert parse_wave("25%") == WaveSize(percent=25.0)
    assert parse_wave("25%").hosts(4) == 1 and parse_wave("25%").hosts(3) == 1 and parse_wave("50%").hosts(5) == 2
    assert parse_wave("100%").hosts(5) == 5 and parse_wave("9").hosts(5) == 5
    for bad in ("0", "-1", "1.5", "0%", "120%", "two", ""):
        with pytest.raises(RollError) as caught:
            parse_wave(bad)
        assert caught.value.field == "wave" and said(caught.value).startswith("--wave ")


def test_canary_first_then_waves_never_more_than_a_wave_at_once() -> None:
    spec = RollSpec(canary=1, wave=WaveSize(count=2))
    assert batches(HOSTS, spec) == [
        Batch("canary", 1, ("a",)),
        Batch("wave", 1, ("b", "c")),
        Batch("wave", 2, ("d", "e")),
    ]
    assert [b.hosts for b in batches(HOSTS, RollSpec(canary=3, wave=WaveSize(count=2)))] == [
        ("a", "b"),
        ("c",),
        ("d", "e"),
    ]
    assert [b.kind for b in batches(HOSTS, RollSpec(canary=0))] == ["wave"] * 5
    with pytest.raises(RollError, match="only 5 hosts"):
        batches(HOSTS, RollSpec(canary=6))


def test_the_router_rule_keeps_n_minus_wave_serving() -> None:
    assert may_start(1, serving=5, group_size=5, wave=1)
    assert not may_start(1, serving=4, group_size=5, wave=1)  # one is already out: taking another leaves 3 < 4
    assert may_start(2, serving=5, group_size=5, wave=2)
    assert may_start(0, serving=3, group_size=5, wave=1) is False  # already below: nothing more starts


def test_the_first_failure_stops_the_roll_unless_more_are_allowed() -> None:
    ledger = RollLedger(HOSTS)
    ledger.begin("a", Batch("canary", 1, ("a",)), NOW)
    ledger.finish("a", HostOutcome.DONE, "verified", NOW)
    assert ledger.stop_reason() is None
    ledger.finish("b", HostOutcome.ROLLED_BACK, "failed: missing draft model", NOW)
    assert ledger.stopped is not None and ledger.stopped[0] == "failures" and "b:" in ledger.stopped[1]
    assert ledger.outcomes()["c"] is HostOutcome.NOT_STARTED and not ledger.ok and ledger.exit_code == 1

    lenient = RollLedger(HOSTS, max_failures=1)
    lenient.finish("b", HostOutcome.FAILED, "mismatch", NOW)
    assert lenient.stop_reason() is None
    lenient.finish("c", HostOutcome.ROLLED_BACK, "failed", NOW)
    assert lenient.stop_reason() is not None and "2 failed" in lenient.stop_reason()


def test_outcomes_from_where_the_apply_ended() -> None:
    assert outcome_of_apply("verified") is HostOutcome.DONE
    assert outcome_of_apply("unchanged") is HostOutcome.UNCHANGED
    assert outcome_of_apply("healthy_on_old") is HostOutcome.ROLLED_BACK
    assert outcome_of_apply("aborted") is HostOutcome.NOT_STARTED
    for state in ("mismatch", "rollback_failed", "restart_failed", "write_failed", "refused"):
        assert outcome_of_apply(state) is HostOutcome.FAILED


def test_the_gate_halts_on_a_regression_beyond_the_noise_or_the_percentage() -> None:
    assert gate_verdict([1000.0], [990.0], level="C=8").passed  # -1 %: within 5 %
    worse = gate_verdict([1000.0], [900.0], level="C=8")
    assert not worse.passed and "-10.0%" in worse.message and worse.within_noise is None
    # Repeats whose ranges overlap: the difference is what repeating the same setup already gives.
    noisy = gate_verdict([1000.0, 880.0, 950.0], [900.0, 870.0, 890.0], level="C=8")
    assert noisy.passed and noisy.within_noise is True and "noise" in noisy.message
    clear = gate_verdict([1000.0, 990.0], [800.0, 810.0], level="C=8")
    assert not clear.passed and clear.within_noise is False
    assert gate_verdict([1000.0], [940.0], level="C=8", max_regression_pct=10).passed
    assert not gate_verdict([], [900.0], level="C=8").passed  # nothing to compare with: halt, say so


def test_worker_lists_of_every_router_release() -> None:
    v03 = {"workers": [{"id": "u-1", "url": "http://10.0.0.5:30000/", "is_healthy": True}], "total": 1}
    assert parse_workers(v03) == ("workers-by-id", [RouterWorker("http://10.0.0.5:30000", "u-1", True)])
    v02 = {"workers": [{"url": "http://H:30000", "is_healthy": False}]}
    assert parse_workers(v02) == ("workers-by-url", [RouterWorker("http://h:30000", None, False)])
    assert parse_workers({"urls": ["http://a:1"]}) == ("legacy", [RouterWorker("http://a:1")])
    assert parse_workers(["http://a:1"]) == ("legacy", [RouterWorker("http://a:1")])
    for bad in ({"workers": [{"id": "x"}]}, {"status": "ok"}, "nope"):
        with pytest.raises(ValueError):
            parse_workers(bad)
    assert normalize_url("HTTP://Host:30000/") == "http://host:30000"


def test_the_consoles_roll_form_reads_as_the_cli_options_do_and_names_the_field() -> None:
    from console.core.roll import GateSpec, gate_from_fields, spec_from_fields

    assert spec_from_fields("1", "25%", "0") == RollSpec(canary=1, wave=WaveSize(percent=25.0), max_failures=0)
    assert spec_from_fields(" 0 ", "3", "2", hosts=3) == RollSpec(canary=0, wave=WaveSize(count=3), max_failures=2)
    for fields, says in (
        (("x", "1", "0"), "canary 'x': give a whole number, 0 or more"),
        (("1", "0%", "0"), "wave 0%: a share of the group is more than 0%"),
        (("1", "two", "0"), "wave 'two': give a number of hosts (2) or a share of the group (25%)"),
        (("1", "1", "-1"), "max failures '-1': give a whole number, 0 or more"),
    ):
        with pytest.raises(RollError) as caught:
            spec_from_fields(*fields)
        assert str(caught.value).startswith(says), caught.value
    with pytest.raises(RollError, match="canary 4: only 3 hosts are rolled"):
        spec_from_fields("4", "1", "0", hosts=3)
    with pytest.raises(RollError) as gated:
        spec_from_fields("0", "1", "0", gate=GateSpec())
    # one rule, worded once (RollSpec.check): in the form's words here, in the options' for the CLI
    assert str(gated.value) == "gate bench judges the canary: give canary 1 or more"
    assert said(gated.value) == "--gate bench judges the canary: give --canary 1 or more"
    assert gate_from_fields("", "") == GateSpec(concurrency=None, max_regression_pct=5.0)
    assert gate_from_fields("8", "7.5%") == GateSpec(concurrency=8, max_regression_pct=7.5)
    for level, loss, says in (("0", "5", "gate level '0'"), ("eight", "5", "gate level 'eight'"),
                              ("8", "lots", "gate max loss 'lots'")):  # fmt: skip
        with pytest.raises(RollError, match=says):
            gate_from_fields(level, loss)
