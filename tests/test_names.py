"""The environment variable name, checked in one place (console/names.py) by everything that takes one: an apply's
--env, check-args' --env, the unit model's Environment= edits and a profile's api_key_env."""

from __future__ import annotations

import pytest

from console.cli.check_args import UsageError as CheckArgsUsageError
from console.cli.check_args import parse_env
from console.core.change import EditError, parse_edits
from console.names import is_env_name
from console.sglang.unit import UnitError, UnitFile

UNIT = """[Service]
ExecStart=/opt/sglang/bin/python3 -m sglang.launch_server --model-path /models/m --port 30000
"""
GOOD = ("SGLANG_ENABLE_SPEC_V2", "_private", "a1")
BAD = ("1ABC", "WITH-DASH", "HAS SPACE", "", "TRAILING\n", "X=Y", "ÄPFEL")


@pytest.mark.parametrize("name", GOOD)
def test_a_name_is_taken_everywhere(name: str) -> None:
    assert is_env_name(name)
    assert parse_env([f"{name}=1"]) == {name: "1"}
    assert parse_edits([], envs=[f"{name}=1"]).set_env == ((name, "1"),)
    unit = UnitFile.parse(UNIT)
    unit.set_env(name, "1")
    assert unit.environment()[name] == "1"


@pytest.mark.parametrize("name", BAD)
def test_a_bad_name_is_refused_everywhere_with_what_to_write(name: str) -> None:
    assert not is_env_name(name)
    if "=" not in name:  # KEY=VALUE splits at the first '='
        with pytest.raises(CheckArgsUsageError, match="--env expects KEY=VALUE"):
            parse_env([f"{name}=1"])
        with pytest.raises(EditError, match="expected KEY=VALUE with KEY like SGLANG_ENABLE_SPEC_V2"):
            parse_edits([], envs=[f"{name}=1"])
    with pytest.raises(UnitError, match="is not a valid environment variable name"):
        UnitFile.parse(UNIT).set_env(name, "1")
