"""The TOML writer against the standard library's reader: what it writes, tomllib reads back exactly."""

from __future__ import annotations

import math
import tomllib
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.tomlwrite import dumps

scalars = st.one_of(
    st.text(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30))])),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
tables = st.dictionaries(st.text(max_size=10), values, max_size=6)


@settings(max_examples=300, deadline=None)
@given(tables)
def test_what_is_written_reads_back_the_same(data: dict[str, Any]) -> None:
    assert tomllib.loads(dumps(data)) == data


def test_a_unit_file_is_written_as_a_readable_multiline_string() -> None:
    unit = '[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server \\\n    --model-path "a b"\n'
    text = dumps({"unit": {"text": unit}})
    assert '    --model-path \\"a b\\"\n' in text
    assert "\\n" not in text.split('"""')[1]  # real lines, not escapes
    assert tomllib.loads(text) == {"unit": {"text": unit}}


def test_tables_come_after_the_values_of_their_parent_and_lists_of_tables_get_their_own_headers() -> None:
    data = {"t": {"nested": {"x": 1}, "a": 1}, "name": "v2", "rows": [{"level": "C=1"}, {"level": "C=8"}]}
    text = dumps(data)
    assert text.index('name = "v2"') < text.index("[t]") < text.index("[t.nested]") < text.index("[[rows]]")
    assert text.count("[[rows]]") == 2
    assert tomllib.loads(text) == data


def test_none_is_refused_and_special_floats_are_written() -> None:
    with pytest.raises(TypeError, match="no null"):
        dumps({"a": None})
    back = tomllib.loads(dumps({"a": math.inf, "b": -math.inf, "c": math.nan}))
    assert back["a"] == math.inf and back["b"] == -math.inf and math.isnan(back["c"])


def test_keys_that_are_not_bare_are_quoted() -> None:
    data = {"a b": {"x.y": 1, "": 2, "é": 3}}
    assert tomllib.loads(dumps(data)) == data
    assert '["a b"]' in dumps(data)


def test_an_aware_datetime_keeps_its_instant() -> None:
    at = datetime(2026, 11, 30, 12, 0, 1, 123456, tzinfo=UTC)
    assert tomllib.loads(dumps({"at": at}))["at"] == at
