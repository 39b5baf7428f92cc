"""profiles/groups.toml (console.fleet.groups): pure parsing over a list of profile names, and the file read."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from console.errors import UsageError
from console.fleet.groups import (
    Group,
    GroupError,
    expand_targets,
    load_groups,
    parse_groups,
    profile_names,
    resolve_group_targets,
)

PROFILES = ["eu-1", "eu-2", "gpu-a", "gpu-b", "gpu-c", "us-1"]


def parse(text: str, profiles: list[str] = PROFILES) -> dict[str, Group]:
    return parse_groups(tomllib.loads(text), profiles=profiles, where="groups.toml")


def test_lists_globs_and_other_groups_resolve_to_profile_names_each_once() -> None:
    groups = parse('prod = ["gpu-b", "gpu-a"]\neu = ["eu-*"]\nall = ["@prod", "gpu-?", "@eu", "us-1"]\n')
    assert groups["prod"] == Group("prod", ("gpu-b", "gpu-a"))
    assert groups["eu"].members == ("eu-1", "eu-2")
    assert groups["all"].members == ("gpu-b", "gpu-a", "gpu-c", "eu-1", "eu-2", "us-1")


def test_the_table_form_names_a_router() -> None:
    groups = parse('[canary]\nmembers = ["gpu-a"]\nrouter = "http://router-1:30000/"\n')
    assert groups["canary"] == Group("canary", ("gpu-a",), router="http://router-1:30000")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('prod = ["gpu-a", "gpu-x"]', "'gpu-x' is not a profile (profiles/gpu-x.toml); the profiles are eu-1"),
        ('prod = ["zz-*"]', "'zz-*' matches no profile"),
        ("prod = []", "group 'prod' is empty"),
        ('prod = ["gpu-a", "@prod"]', "group 'prod' names itself (@prod -> @prod)"),
        ('a = ["@b"]\nb = ["@a"]', "names itself through other groups (@a -> @b -> @a)"),
        ('prod = ["@nope"]', "@nope: no such group; the groups are @prod"),
        ('prod = "gpu-a"', "expected a list of profile names"),
        ('prod = ["gpu-a", ""]', "expected a list of profile names"),
        ('"bad name" = ["gpu-a"]', "group name 'bad name'"),
        ('[prod]\nmembers = ["gpu-a"]\nrouters = "http://r"', "routers: unknown key; the keys are members, router"),
        ('[prod]\nrouter = "http://r:1"', 'needs members = ["profile", ...]'),
        ('[prod]\nmembers = ["gpu-a"]\nrouter = "router:30000"', "router: expected an http(s) URL"),
        ('[prod]\nmembers = ["gpu-a"]\nrouter = "http://r:99999"', "router: expected an http(s) URL"),
    ],
)
def test_bad_groups_are_usage_errors_that_say_what_to_fix(text: str, says: str) -> None:
    with pytest.raises(GroupError) as caught:
        parse(text)
    assert isinstance(caught.value, UsageError)  # exit 2
    assert says in str(caught.value) and str(caught.value).startswith("groups.toml: ")


def test_a_cycle_reached_from_another_group_names_the_groups_of_the_loop() -> None:
    with pytest.raises(GroupError, match=r"group 'a' names itself through other groups \(@a -> @b -> @a\)"):
        parse('x = ["@a"]\na = ["@b"]\nb = ["@a"]')


def test_targets_expand_groups_in_place_and_keep_other_targets() -> None:
    groups = parse('prod = ["gpu-a", "gpu-b"]\neu = ["eu-*"]')
    assert expand_targets(["us-1", "@prod", "gpu-a", "@eu", "ops@h:22"], groups) == [
        "us-1", "gpu-a", "gpu-b", "eu-1", "eu-2", "ops@h:22",
    ]  # fmt: skip
    with pytest.raises(GroupError, match=r"@nope: no such group in groups\.toml; the groups are @eu, @prod"):
        expand_targets(["@nope"], groups)
    with pytest.raises(GroupError, match=r"no groups are defined; write them in profiles/groups\.toml"):
        expand_targets(["@prod"], {})


def _profiles(root: Path, names: list[str]) -> Path:
    root.mkdir(parents=True)
    for name in names:
        (root / f"{name}.toml").write_text('[host]\ntransport = "local"\n')
    return root


def test_the_file_is_read_only_when_a_target_names_a_group(tmp_path: Path) -> None:
    profiles = _profiles(tmp_path / "profiles", ["gpu-a", "gpu-b"])
    (profiles / "snapshots").mkdir()
    (profiles / "snapshots" / "gpu-c.toml").write_text("")
    assert profile_names(profiles) == ["gpu-a", "gpu-b"]
    (profiles / "groups.toml").write_text("not toml [")
    assert resolve_group_targets(["gpu-a"], profiles) == (["gpu-a"], {})  # a broken groups file harms no one else
    with pytest.raises(GroupError, match=r"groups.toml: not valid TOML .*; fix the file"):
        resolve_group_targets(["@prod"], profiles)
    (profiles / "groups.toml").write_text('prod = ["gpu-*"]\nall = ["groups"]\n')
    with pytest.raises(GroupError, match=r"'groups' is not a profile"):  # groups.toml is no profile
        load_groups(profiles)
    (profiles / "groups.toml").write_text('prod = ["gpu-*"]\n')
    assert resolve_group_targets(["@prod"], profiles) == (
        ["gpu-a", "gpu-b"],
        {"prod": Group("prod", ("gpu-a", "gpu-b"))},
    )
    assert load_groups(tmp_path / "elsewhere") == {}


def test_a_selection_is_rolled_as_the_first_group_the_console_named_that_has_it_all() -> None:
    from console.fleet.groups import group_for

    groups = parse('prod = ["gpu-a", "gpu-b"]\nall = ["gpu-*", "eu-1"]\n')
    assert group_for(["gpu-b"], groups, ["prod", "all"]).name == "prod"
    assert group_for(["gpu-a", "eu-1"], groups, ["prod", "all"]).name == "all"
    with pytest.raises(GroupError, match=r"eu-1: not all in one of @prod; select the hosts of one group"):
        group_for(["gpu-a", "eu-1"], groups, ["prod"])
    with pytest.raises(GroupError, match="open the console with @GROUP"):
        group_for(["gpu-a"], groups, [])
