"""The testbed recipe: pure text and data, checked without root or network."""

from __future__ import annotations

import pytest

from tests.testbed import recipe

DEB822 = """\
Types: deb
# a comment
URIs: file:///srv/mirror/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: file:///srv/security/debian-security
Suites: bookworm-security
Components: main
"""


def test_mirror_comes_from_the_deb822_stanza_of_the_suite_itself() -> None:
    assert recipe.mirror_from_apt_sources([DEB822], []) == "file:///srv/mirror/debian"


def test_security_only_sources_are_not_a_mirror_for_debootstrap() -> None:
    security_only = DEB822.split("\n\n")[1]
    with pytest.raises(recipe.MirrorNotFound, match="OPSCONSOLE_TESTBED_MIRROR"):
        recipe.mirror_from_apt_sources([security_only], [])


def test_deb_src_stanzas_are_ignored() -> None:
    src = "Types: deb-src\nURIs: file:///srv/src/debian\nSuites: bookworm\n\n" + DEB822
    assert recipe.mirror_from_apt_sources([src], []) == "file:///srv/mirror/debian"


def test_deb822_continuation_lines_are_joined() -> None:
    text = "Types: deb\nURIs:\n file:///srv/a/debian/\n file:///srv/b/debian\nSuites: bookworm\n"
    assert recipe.mirror_from_apt_sources([text], []) == "file:///srv/a/debian"


def test_one_line_sources_list_with_options() -> None:
    lines = (
        "# deb file:///srv/old/debian bookworm main\n"
        "deb-src file:///srv/src/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] file:///srv/one/debian/ bookworm main contrib\n"
    )
    assert recipe.mirror_from_apt_sources([], [lines]) == "file:///srv/one/debian"


def test_deb822_wins_over_one_line_lists() -> None:
    assert recipe.mirror_from_apt_sources([DEB822], ["deb file:///srv/x/d bookworm main\n"]).startswith(
        "file:///srv/mirror"
    )


def test_unit_runs_the_simulator_with_the_operators_flags_one_per_line() -> None:
    unit = recipe.sglang_unit()
    assert "ExecStart=/usr/bin/python3 -m console.sim \\\n    --model-path Qwen/Qwen3.5-122B-A10B-FP8 \\\n" in unit
    assert "    --enable-metrics \\\n" in unit
    assert unit.count("\\\n") == len(recipe.SIM_LAUNCH_FLAGS)
    assert 'Environment="SGLANG_ENABLE_SPEC_V2=1"' in unit
    assert f"PYTHONPATH={recipe.PYTHONPATH}" in unit
    assert "Restart=on-failure" in unit and "WantedBy=multi-user.target" in unit


def test_unit_exec_start_can_be_replaced_for_a_trivial_server() -> None:
    unit = recipe.sglang_unit("ExecStart=/bin/sleep infinity")
    assert "ExecStart=/bin/sleep infinity\n" in unit and "console.sim" not in unit


def test_recipe_key_follows_every_input() -> None:
    base = recipe.recipe_key(recipe.tree_recipe("file:///srv/a/debian"))
    assert base == recipe.recipe_key(recipe.tree_recipe("file:///srv/a/debian"))
    assert base != recipe.recipe_key(recipe.tree_recipe("file:///srv/b/debian"))
    assert recipe.recipe_key(recipe.site_recipe(["a", "b"], "cp311")) == recipe.recipe_key(
        recipe.site_recipe(["b", "a"], "cp311")
    )
    assert recipe.recipe_key(recipe.site_recipe(["a"], "cp311")) != recipe.recipe_key(
        recipe.site_recipe(["a"], "cp312")
    )
