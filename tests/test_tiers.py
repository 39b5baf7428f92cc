"""The long tests (tests/tiers.py): each xdist worker's first slice leads with its share, and each gets a pytest timeout
from its seconds; the running test's budget (tests/support/budget.py) follows pytest-timeout's own timer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from tests.support import budget
from tests.tiers import first_slice_sizes, long_timeout_s, start_long_tests_first, timeouts_from_long_marks


@dataclass
class FakeItem:
    nodeid: str
    seconds: float | None = None
    added: list[pytest.Mark] = field(default_factory=list)

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        if name == "long" and self.seconds is not None:
            return pytest.mark.long(self.seconds).mark
        return next((mark for mark in self.added if mark.name == name), None)

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.added.append(marker.mark)


def slices(items: list[FakeItem], workers: int) -> list[list[str]]:
    out, start = [], 0
    for size in first_slice_sizes(len(items), workers):
        out.append([i.nodeid for i in items[start : start + size]])
        start += size
    return out


def test_worksteal_splits_what_is_left_evenly_among_the_workers_not_served_yet() -> None:
    assert first_slice_sizes(20, 3) == [6, 7, 7]
    assert first_slice_sizes(1779, 5) == [355, 356, 356, 356, 356]


def test_each_worker_starts_with_its_share_longest_first_and_the_rest_keep_their_order() -> None:
    items = [FakeItem(f"t{i}") for i in range(20)]
    items[3].seconds, items[15].seconds, items[16].seconds, items[19].seconds = 40, 135, 136, 63
    start_long_tests_first(items, 3)  # type: ignore[arg-type]
    assert slices(items, 3) == [
        ["t16", "t0", "t1", "t2", "t4", "t5"],
        ["t15", "t6", "t7", "t8", "t9", "t10", "t11"],
        ["t19", "t3", "t12", "t13", "t14", "t17", "t18"],  # 63 + 40 against 136 and 135
    ]
    assert len(items) == 20


def test_one_worker_or_no_long_test_changes_nothing() -> None:
    items = [FakeItem("a"), FakeItem("b", 50), FakeItem("c")]
    start_long_tests_first(items, 1)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["a", "b", "c"]
    plain = [FakeItem("a"), FakeItem("b")]
    start_long_tests_first(plain, 4)  # type: ignore[arg-type]
    assert [i.nodeid for i in plain] == ["a", "b"]


def test_a_long_marker_without_its_seconds_says_what_to_write() -> None:
    item = FakeItem("tests/x.py::t")
    item.get_closest_marker = lambda name: pytest.mark.long.mark  # type: ignore[method-assign]
    with pytest.raises(AssertionError, match="long\\(seconds\\)"):
        start_long_tests_first([item, FakeItem("y")], 2)  # type: ignore[list-item]


def test_a_long_tests_timeout_grows_with_its_seconds_and_never_falls_below_the_default() -> None:
    assert long_timeout_s(136, 300) == 3 * 136 + 60  # the longest tune test: 468 s
    assert long_timeout_s(52, 300) == 300  # 216 s would be less than any other test gets
    assert long_timeout_s(136, 600) == 600


def test_each_long_test_gets_its_timeout_mark_and_the_others_none() -> None:
    short, long, own = FakeItem("short"), FakeItem("long", 136), FakeItem("own", 136)
    own.add_marker(pytest.mark.timeout(900))
    timeouts_from_long_marks([short, long, own], 300)  # type: ignore[list-item]
    assert short.get_closest_marker("timeout") is None
    assert (mark := long.get_closest_marker("timeout")) is not None and mark.args == (468.0,)
    assert [m.args for m in own.added] == [(900,)], "a test's own timeout mark stays the one"


def test_with_timeouts_off_no_long_test_gets_one() -> None:
    item = FakeItem("long", 136)
    timeouts_from_long_marks([item], None)  # type: ignore[list-item]
    timeouts_from_long_marks([item], 0)  # type: ignore[list-item]
    assert item.added == []


@pytest.mark.timeout(100)
def test_a_wait_inside_a_test_ends_before_the_tests_own_timeout() -> None:
    assert budget.describe().startswith("the test's pytest timeout 100 s"), budget.describe()
    assert budget.inner_timeout(20) == 20
    assert 100 - budget.RESERVE_S - 5 < budget.inner_timeout(1000) <= 100 - budget.RESERVE_S


def test_a_wait_gets_at_least_a_moment_and_none_is_cut_outside_a_test() -> None:
    saved = budget._deadline, budget._timeout_s
    try:
        budget.start(10)  # less than the reserve is left
        assert budget.inner_timeout(60) == budget.MIN_WAIT_S
        budget.stop()
        assert budget.inner_timeout(1000) == 1000
        budget.start(300)
        budget._deadline = time.monotonic() + 100  # 200 s of it gone
        assert 100 - budget.RESERVE_S - 5 < budget.inner_timeout(1000) <= 100 - budget.RESERVE_S
    finally:
        budget._deadline, budget._timeout_s = saved
