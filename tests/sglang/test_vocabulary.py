"""The one table of speculative and serving settings (console/sglang/vocabulary.py): its rows agree with the
releases' own flag tables, and each view lists what operators have always seen there, in that order."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from console.sglang.flags import SUPPORTED_VERSIONS, flag_table, parse_version
from console.sglang.rules import spec_v2_env_default
from console.sglang.vocabulary import (
    _OUT_OF_ORDER,
    SPEC_V2_ENV,
    TERMS,
    Term,
    View,
    dests,
    flag_of,
    setup_letters,
    term,
    terms,
)

ROOT = Path(__file__).resolve().parents[2]
ALGORITHM, STEPS, TOPK, DRAFT = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)
OVERLAP, DRAFT_MODEL, MAX_RUNNING = "disable_overlap_schedule", "speculative_draft_model_path", "max_running_requests"

# What each place lists, in the order it shows it (the lists these places held before the table).
SHOWN = {
    View.DRAFT_TREE: (STEPS, TOPK, DRAFT),
    View.TUNE_CONFIG: (ALGORITHM, STEPS, TOPK, DRAFT, OVERLAP),
    View.SPECULATIVE: (ALGORITHM, DRAFT_MODEL, STEPS, TOPK, DRAFT, OVERLAP),
    View.RESTART_CHECK: (ALGORITHM, STEPS, TOPK, DRAFT, OVERLAP, MAX_RUNNING),
    View.DASHBOARD: (ALGORITHM, STEPS, TOPK, DRAFT, OVERLAP, DRAFT_MODEL, MAX_RUNNING),
    View.DRIFT: (ALGORITHM, STEPS, TOPK, DRAFT, OVERLAP, DRAFT_MODEL, MAX_RUNNING, "model_path", "version"),
    View.SNAPSHOT: (
        *(ALGORITHM, DRAFT_MODEL, STEPS, TOPK, DRAFT, OVERLAP, MAX_RUNNING),
        *("model_path", "served_model_name"),
    ),
    View.CHECK_ARGS: (
        *(ALGORITHM, STEPS, TOPK, DRAFT, MAX_RUNNING, OVERLAP),
        *("attention_backend", "page_size", "tp_size"),
    ),
    View.EDITOR: (
        *(ALGORITHM, STEPS, TOPK, DRAFT, f"env:{SPEC_V2_ENV}", DRAFT_MODEL),
        # 0.5.23's adaptive steps and the new drafts' fields (each offered only where its release has the flag)
        *("speculative_adaptive", "speculative_adaptive_config", "speculative_dflash_block_size"),
        *("speculative_dspark_block_size", "uno_lora_path", MAX_RUNNING),
        *("mem_fraction_static", "cuda_graph_max_bs", "chunked_prefill_size", "attention_backend", "tp_size"),
        "collect_tokens_histogram",
        "uvicorn_access_log_exclude_prefixes",
        # the options that shorten a start (wave5 §6), each where its release has it
        *("load_format", "model_loader_extra_config", "weight_loader_prefetch_checkpoints"),
        *("startup_weight_load_mode", "weight_cache_mode", "weight_cache_socket", "env:SGLANG_CACHE_DIR"),
    ),
    View.RECORD: (ALGORITHM, STEPS, TOPK, DRAFT, DRAFT_MODEL, OVERLAP, MAX_RUNNING, "cuda_graph_max_bs"),
    View.RUN_SETUP: (ALGORITHM, STEPS, TOPK, DRAFT, DRAFT_MODEL, OVERLAP),
}


def test_every_view_lists_what_its_place_has_always_shown_in_that_order() -> None:
    assert set(SHOWN) == set(View)  # a new view gets its order written here too
    assert {view: dests(view) for view in View} == SHOWN


def test_a_view_is_drawn_from_the_table_and_every_row_appears_somewhere() -> None:
    for view in View:
        assert all(t in TERMS for t in terms(view)), view
        assert len(set(dests(view))) == len(dests(view)), view
    assert all(t.views for t in TERMS)
    assert {t for view in View for t in terms(view)} == set(TERMS)


def test_each_reordering_moves_a_setting_of_its_view_next_to_another_one_of_it() -> None:
    for view, dest, after in _OUT_OF_ORDER:
        assert dest in dests(view) and after in dests(view), (view, dest, after)
        shown = dests(view)
        assert shown[shown.index(after) + 1] == dest


def test_dests_names_labels_and_letters_are_each_unique() -> None:
    for column in ("dest", "label", "name", "flag", "letter"):
        values = [getattr(t, column) for t in TERMS if getattr(t, column) is not None]
        assert len(values) == len(set(values)), column


def test_a_setups_short_form_has_a_letter_for_each_number_of_the_draft_tree() -> None:
    assert setup_letters() == (("s", STEPS), ("k", TOPK), ("d", DRAFT))
    assert tuple(dest for _letter, dest in setup_letters()) == dests(View.DRAFT_TREE)


def _applies(row: Term, version: str) -> bool:
    after_first = row.first_version is None or parse_version(version) >= parse_version(row.first_version)
    return after_first and (row.last_version is None or parse_version(version) <= parse_version(row.last_version))


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_every_flag_of_the_table_is_that_settings_flag_in_every_release_it_applies_to(version: str) -> None:
    """The dest and the flag name one argparse action of that release (its canonical option), and a setting said
    to stop at a release is really gone after it."""
    table = flag_table(version)
    checked = 0
    for row in TERMS:
        if row.flag is None:
            continue
        spec = table.spec_for(row.dest)
        if not _applies(row, version):
            assert spec is None, f"{row.dest} is a flag of {version}: widen its first_version or last_version"
            continue
        assert spec is not None, f"{row.dest} is no flag of SGLang {version}"
        assert spec.name == row.flag and table.spec_for(row.flag) == spec, (version, row.dest)
        assert flag_of(row.dest) == row.flag
        checked += 1
    assert checked >= 12


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_the_spec_v2_variable_applies_to_the_releases_that_read_it(version: str) -> None:
    row = term(f"env:{SPEC_V2_ENV}")
    assert (row.env, row.flag, row.group) == (SPEC_V2_ENV, None, "speculative")
    assert _applies(row, version) == (spec_v2_env_default(version) is not None)


def test_only_settings_without_a_flag_are_without_one() -> None:
    assert {t.dest for t in TERMS if t.flag is None} == {f"env:{SPEC_V2_ENV}", "env:SGLANG_CACHE_DIR", "version"}
    with pytest.raises(ValueError, match="version is not set by a launch flag"):
        flag_of("version")
    with pytest.raises(KeyError):
        term("speculative_no_such_setting")


def _spelled_settings(node: ast.Tuple | ast.List | ast.Set, known: set[str]) -> list[str]:
    found: list[str] = []
    for element in node.elts:
        if isinstance(element, ast.Constant) and element.value in known:
            found.append(element.value)
        elif isinstance(element, ast.Tuple | ast.List):
            found.extend(_spelled_settings(element, known))
    return found


def test_no_module_but_the_table_spells_out_a_list_of_speculative_settings() -> None:
    """A tuple, list or set literal naming three or more speculative settings (by dest or flag, pairs included)
    is a copy of the table: it should be a view of it."""
    speculative = [t for t in TERMS if t.group == "speculative"]
    known = {t.dest for t in speculative} | {t.flag for t in speculative if t.flag is not None}
    copies = []
    sources = sorted((ROOT / "console").rglob("*.py"))
    for path in sources:
        if path == ROOT / "console" / "sglang" / "vocabulary.py":
            continue
        text = path.read_text(encoding="utf-8")
        if not any(name in text for name in known):
            continue  # nothing to find: spare the parse
        outermost: set[int] = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Tuple | ast.List | ast.Set) and id(node) not in outermost:
                outermost.update(id(inner) for inner in ast.walk(node))
                spelled = _spelled_settings(node, known)
                if len(spelled) >= 3:
                    copies.append(f"{path.relative_to(ROOT)}:{node.lineno}: {spelled}")
    assert len(sources) > 100 and copies == []


def test_the_copy_finder_would_see_a_copy() -> None:
    known = {"speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"}
    listed = ast.parse(
        'KEYS = (("s", "speculative_num_steps"), ("k", "speculative_eagle_topk"), "speculative_num_draft_tokens")'
    )
    node = next(n for n in ast.walk(listed) if isinstance(n, ast.Tuple))
    assert _spelled_settings(node, known) == [STEPS, TOPK, DRAFT]


def views_and_their_places() -> dict[str, list[str]]:
    """Each View and the files its comment names (paths under console/), read from the class's source."""
    source = (ROOT / "console" / "sglang" / "vocabulary.py").read_text()
    body = source[source.index("class View(StrEnum):") :].split("\n\n\n")[0]
    places: dict[str, list[str]] = {}
    member = ""
    for line in body.splitlines():
        named = re.match(r"\s{4}([A-Z_]+) = ", line)
        if named:
            member = named.group(1)
            places[member] = []
        if member and "#" in line:
            places[member] += re.findall(r"[a-z_]+(?:/[a-z_]+)*\.py", line.split("#", 1)[1])
    return places


def test_each_view_names_the_modules_that_use_it() -> None:
    """The comments say where each view is listed: every file named exists and asks for that view (they named
    modules that were gone after the last restructuring)."""
    places = views_and_their_places()
    assert set(places) == {view.name for view in View} and all(places.values()), places
    wrong = {
        f"{view}: {path}"
        for view, paths in places.items()
        for path in paths
        if not (ROOT / "console" / path).is_file() or f"View.{view}" not in (ROOT / "console" / path).read_text()
    }
    assert wrong == set()
