"""Errors that name the operator's inputs by field (console.errors.NamesFields): the core says which input it refuses,
each renderer names it its own way (the CLI as its options, console.cli.common.said; the console in plain words),
and every field the core names is an option the CLI has."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from string import Formatter

from console.cli import build_parser
from console.cli.common import OPTION_OF, option_name, said
from console.core.roll import RollError
from console.core.tune.form import FormError
from console.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]


def test_the_field_is_named_by_the_renderer_and_the_values_stay_as_typed() -> None:
    exc = RollError("{field} {text!r}: give a number; or {max_failures} {value}", field="canary", text="a{b}", value=1)
    assert exc.field == "canary"
    assert str(exc) == "canary 'a{b}': give a number; or max failures 1"
    assert said(exc) == "--canary 'a{b}': give a number; or --max-failures 1"
    assert exc.worded(lambda field: f"[{field}]") == "[canary] 'a{b}': give a number; or [max_failures] 1"


def test_a_message_without_a_field_is_plain_text() -> None:
    assert str(UsageError("{not a template}")) == said(UsageError("{not a template}")) == "{not a template}"
    form = FormError("steps", "give 1,2,3 {or more}")  # sets its own field after: its message is already words
    assert str(form) == said(form) == "steps: give 1,2,3 {or more}"


def _options(parser: argparse.ArgumentParser) -> set[str]:
    found = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


def fields_named_in(root: Path) -> set[str]:
    """The fields console/core names in its errors: every `field="..."` keyword, and the other inputs its templates
    name ({unset}: a placeholder that no keyword fills)."""
    fields: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            field = keywords.get("field")
            if not (isinstance(field, ast.Constant) and isinstance(field.value, str)):
                continue
            fields.add(field.value)
            for arg in node.args[:1]:
                for part in ast.walk(arg):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        for _text, name, _spec, _conv in Formatter().parse(part.value):
                            if name and name != "field" and name not in keywords:
                                fields.add(name)
    return fields


def test_every_field_the_core_names_is_an_option_of_the_cli() -> None:
    fields = fields_named_in(ROOT / "console" / "core")
    assert {"canary", "max_failures", "gate", "set", "unset", "env", "unset_env", "objective", "force"} <= fields
    options = _options(build_parser())
    assert {field: option_name(field) for field in fields if option_name(field) not in options} == {}
    assert option_name("no_such_input") not in options  # the check above can fail
    assert set(OPTION_OF.values()) <= options
