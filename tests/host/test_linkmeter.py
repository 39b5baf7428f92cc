"""The round-trip meter (pure): exchanges that went out together share a round, a chain of them adds up."""

from __future__ import annotations

from console.host.linkmeter import HTTP, SHELL, LinkMeter


def test_exchanges_sent_together_cost_one_round_trip() -> None:
    meter = LinkMeter()
    before = meter.reading()
    sent = [meter.begin(SHELL), meter.begin(HTTP), meter.begin(HTTP)]
    for exchange in reversed(sent):
        meter.end(exchange)
    cost = meter.reading() - before
    assert cost.depth == 1 and cost.counts == {HTTP: 2, SHELL: 1} and cost.requests == 3


def test_an_exchange_that_waits_for_another_costs_another_round_trip() -> None:
    meter = LinkMeter()
    first = meter.begin(SHELL)
    meter.end(first)
    second = meter.begin(SHELL)
    meter.end(second)
    assert meter.reading().depth == 2


def test_the_longest_chain_counts_not_the_number_of_exchanges() -> None:
    """A two-step chain (a channel opened, then a command on it) beside a one-step one: two round trips."""
    meter = LinkMeter()
    chain_first, single = meter.begin("channel_open"), meter.begin(HTTP)
    meter.end(chain_first)
    chain_second = meter.begin("exec")  # began while `single` is still out: it still waited for chain_first
    meter.end(single)
    meter.end(chain_second)
    assert meter.reading().depth == 2


def test_a_started_exchange_counts_before_it_ends() -> None:
    meter = LinkMeter()
    meter.begin(SHELL)
    assert meter.reading().depth == 1


def test_round_trip_is_the_median_of_the_last_pings() -> None:
    meter = LinkMeter(keep_round_trips=3)
    assert meter.round_trip_s is None
    for value in (0.30, 0.31, 5.0, 0.29):
        meter.round_trip_measured(value)
    assert meter.round_trip_s == 0.31  # the last three: 0.31, 5.0, 0.29
