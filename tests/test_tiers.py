"""The order the long tests are started in (tests/tiers.py): each xdist worker's first slice leads with its share."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.tiers import first_slice_sizes, start_long_tests_first


@dataclass
class FakeItem:
    nodeid: str
    seconds: float | None = None

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        if name != "long" or self.seconds is None:
            return None
        return pytest.mark.long(self.seconds).mark


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
