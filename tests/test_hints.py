"""Every command line a message names parses as written (issue 36): the lines of console.hints, each parsed by the
CLI's own parser with its placeholders left as the reader sees them and with examples in their places, and no other
string in console/ naming an opsconsole verb. The line that did not parse ("opsconsole apply HOST --set
--collect-tokens-histogram", argparse: --set expects one argument) is the control."""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from console import hints
from console.cli import HANDLERS, build_parser
from console.core.change import parse_edits
from console.sglang.traffic_shape import HISTOGRAMS, Scrape, ShapeUnavailable, refuse_before

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"HOST": "gpu-a", "GROUP": "@prod", "FLAG": "collect-tokens-histogram", "LEVEL": "8", "NAME": "v2",
            "SNAPSHOT": "v2", "RUN_A": "base", "RUN_B": "steps3", "DEPLOYMENT": "kimi-2node"}  # fmt: skip
LINES = {name: value for name, value in vars(hints).items() if isinstance(value, hints.CommandLine)}
VERB_MENTION = re.compile(rf"\b{hints.PROGRAM} ({'|'.join(map(re.escape, hints.VERBS))})\b(?!:)")


def parse(line: str) -> argparse.Namespace:
    """The line through the CLI's parser; AssertionError with argparse's complaint when it refuses it."""
    words = shlex.split(line)
    assert words[0] == hints.PROGRAM, line
    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint):
            return build_parser().parse_args(words[1:])
    except SystemExit:
        raise AssertionError(f"{line!r} does not parse: {complaint.getvalue().strip()}") from None


def test_the_hints_know_the_clis_verbs() -> None:
    assert set(hints.VERBS) == set(HANDLERS)
    with pytest.raises(ValueError, match="not an opsconsole verb"):
        hints.verb("rolling")


@pytest.mark.parametrize("name", sorted(LINES))
def test_every_line_parses_as_the_reader_sees_it_and_with_values_in_its_places(name: str) -> None:
    line = LINES[name]
    assert set(line.placeholders) <= set(EXAMPLES), f"give {name}'s placeholders an example here"
    as_shown = parse(line.line())
    assert as_shown.command == line.verb
    filled = parse(line.line(**{p: EXAMPLES[p] for p in line.placeholders}))
    if line.verb == "apply" and filled.set:  # the edit it names is one apply takes
        parse_edits(filled.set, filled.unset)


def test_values_are_quoted_and_a_placeholder_the_line_lacks_is_refused() -> None:
    assert hints.TRUST.line(HOST="gpu-a") == "opsconsole trust gpu-a"
    assert hints.TRUST.line(HOST="ops@[::1]:22") == "opsconsole trust 'ops@[::1]:22'"
    assert parse(hints.TRUST.line(HOST="ops@[::1]:22")).target == "ops@[::1]:22"
    assert hints.APPLY_SET.line(FLAG="enable-metrics") == "opsconsole apply HOST --set enable-metrics"
    with pytest.raises(ValueError, match="no placeholder NAME"):
        hints.TRUST.line(NAME="v2")


def test_the_refused_shape_names_an_apply_that_parses() -> None:
    """SGLang 0.5.9 without --collect-tokens-histogram: the refusal's command line, taken from the message."""
    with pytest.raises(ShapeUnavailable) as refused:
        refuse_before(Scrape({}, {}), "0.5.9", {"collect_tokens_histogram": False})
    named = re.findall(r"`(opsconsole [^`]+)`", str(refused.value))
    assert named == ["opsconsole apply HOST --set collect-tokens-histogram"], str(refused.value)
    args = parse(named[0].replace("HOST", "gpu-a"))
    assert parse_edits(args.set).set_flags == (("--collect-tokens-histogram", True),)
    assert refused.value.missing == HISTOGRAMS
    with pytest.raises(AssertionError, match="expected one argument"):  # the control: the line it used to name
        parse("opsconsole apply gpu-a --set --collect-tokens-histogram")


def _strings_naming_a_verb(path: Path, root: Path = ROOT) -> list[str]:
    """The string constants of a module (f-strings' parts too; docstrings aside) that name an opsconsole verb
    other than as an error's prefix (`opsconsole apply: ...`)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and VERB_MENTION.search(node.value)
    ]


def test_no_message_in_console_writes_a_command_line_of_its_own() -> None:
    found = [hit for path in sorted((ROOT / "console").rglob("*.py")) if path.name != "hints.py"
             for hit in _strings_naming_a_verb(path)]  # fmt: skip
    assert found == [], "name these through console.hints (a CommandLine, or hints.verb):\n" + "\n".join(found)


def test_the_scan_would_find_a_line_written_by_hand(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Docs may say `opsconsole apply HOST`."""\n'
        'PREFIX = "opsconsole apply: "\n'
        'HINT = f"run `opsconsole apply {1} --set --x`"\n'
    )
    hits = _strings_naming_a_verb(module, tmp_path)
    assert [hit.split(": ", 1)[1] for hit in hits] == ["'run `opsconsole apply '"]
