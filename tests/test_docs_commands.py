"""The `opsconsole ...` lines of README.md and docs/*.md held to the CLI's parser (issue 43; pure, the fast tier):
- a synopsis (`opsconsole bench TARGET|--url URL ... [--client auto|console|host]`) names only options its verb has,
  and lists for an option with choices only values among them, so a renamed option or value fails here;
- a verb named (`opsconsole bench`) exists;
- a line that runs parses, and the test that runs it on the demo (tests/test_docs_commands_demo.py) knows how to give it
  what it names: its files, its runs; what that test appends to shorten it are sizes only.
The reading of the pages is tests/support/doc_commands.py's, checked here on a page made for it."""

from __future__ import annotations

import pytest

from tests.support.doc_commands import DocCommand, commands_in, doc_commands, named_options, option_alternatives
from tests.support.doc_runs import OVERRIDES, SIZE_OPTIONS, CannotRun, Plan, plan, verb_parsers

COMMANDS = doc_commands()
PROGRAM_OPTIONS = {"--workspace", "--version", "-h", "--help"}


def synopsis_problems(command: DocCommand) -> list[str]:
    """What in a synopsis the CLI does not have: its verb, an option of it, a value among an option's choices."""
    parsers = verb_parsers()
    verb = command.verb
    if verb is None:  # `opsconsole ...`: the program, any verb
        return [f"{o} is not an option of opsconsole" for o in named_options(command.text) if o not in PROGRAM_OPTIONS]
    if verb not in parsers:
        return [f"{verb!r} is not an opsconsole verb ({', '.join(sorted(parsers))})"]
    actions = parsers[verb]._option_string_actions
    problems = [
        f"{option} is not an option of `opsconsole {verb}`"
        for option in named_options(command.text)
        if option not in actions and option not in PROGRAM_OPTIONS
    ]
    for option, values in option_alternatives(command.text):
        choices = actions[option].choices if option in actions else None
        if choices is not None:
            problems += [
                f"{option} {value}: `opsconsole {verb}` takes {option} {'|'.join(map(str, choices))}"
                for value in values
                if value not in choices
            ]
    return problems


def _where(command: DocCommand) -> str:
    return f"{command.where}-{command.verb}"


PAGE = """# A page

Run `opsconsole status demo`, or `opsconsole bench` alone; the table's `opsconsole logs TARGET [-f\\|-n N]`.

```
$ opsconsole check-args --env A=1 -- \\
    --model-path m --speculative-algorithm EAGLE   # a comment
SGLang would refuse to start.
$ echo $?
1
opsconsole compare base topk4          # labels from logs/
[section]
opsconsole freeze gpu-a --name v2 --note "a # is no comment in quotes"
make unit     # not ours
```
"""


def test_the_pages_are_read_for_blocks_spans_prompts_comments_continuations_and_shown_statuses() -> None:
    found = commands_in(PAGE, "page.md")
    assert [(c.line, c.text, c.in_block, c.exit_status, c.kind) for c in found] == [
        (3, "opsconsole status demo", False, 0, "run"),
        (3, "opsconsole bench", False, 0, "mention"),
        (3, "opsconsole logs TARGET [-f|-n N]", False, 0, "synopsis"),
        (6, "opsconsole check-args --env A=1 -- --model-path m --speculative-algorithm EAGLE", True, 1, "run"),
        (11, "opsconsole compare base topk4", True, 0, "run"),
        (13, 'opsconsole freeze gpu-a --name v2 --note "a # is no comment in quotes"', True, 0, "run"),
    ]
    assert found[5].words == ["freeze", "gpu-a", "--name", "v2", "--note", "a # is no comment in quotes"]
    assert named_options(found[2].text) == ["-f", "-n"] and found[2].verb == "logs"


def test_the_docs_show_lines_of_each_kind() -> None:
    kinds = [c.kind for c in COMMANDS]
    assert kinds.count("run") >= 20 and kinds.count("synopsis") >= 15 and kinds.count("mention") >= 5, kinds


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.kind == "synopsis"], ids=_where)
def test_a_synopsis_names_only_what_its_verb_has(command: DocCommand) -> None:
    assert synopsis_problems(command) == [], command.where


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("opsconsole bench TARGET --dataset FILE [--dataset-samples N]", "--dataset-samples is not an option"),
        ("opsconsole bench TARGET [--client auto|console|remote]", "--client remote: `opsconsole bench` takes"),
        ("opsconsole rolling @GROUP [--yes]", "'rolling' is not an opsconsole verb"),
    ],
)
def test_a_synopsis_with_a_renamed_option_value_or_verb_fails(text: str, problem: str) -> None:
    (found,) = synopsis_problems(DocCommand("page.md", 1, text, in_block=True))
    assert found.startswith(problem), found


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.kind == "mention" and c.verb], ids=_where)
def test_a_verb_the_docs_name_exists(command: DocCommand) -> None:
    assert command.verb in verb_parsers(), command.where


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.kind == "run"], ids=_where)
def test_a_line_that_runs_parses_and_the_demo_test_can_give_it_what_it_names(command: DocCommand) -> None:
    made = plan(command)  # AssertionError with argparse's complaint, CannotRun with what the test lacks
    assert made.verb == command.verb
    assert made.words[: len(command.words)] == command.words  # the line's own words, then the overrides only


def test_the_overrides_shorten_sizes_only_and_name_options_of_their_verb() -> None:
    parsers = verb_parsers()
    for override in OVERRIDES:
        assert override.option in SIZE_OPTIONS, override
        assert override.option in parsers[override.verb]._option_string_actions, override


def _planned(text: str) -> Plan:
    return plan(DocCommand("page.md", 1, text, in_block=True))


def test_a_line_is_planned_with_its_names_mapped_its_needs_made_and_its_sizes_shrunk() -> None:
    tune = _planned("opsconsole tune gpu-a --steps 1,2 --concurrency 1,8,32,64 --best-at 32 --space s.toml")
    assert tune.hosts == ["gpu-a"] and tune.files == {"s.toml": "space"} and tune.answers_yes
    assert tune.overrides == ["--duration", "1", "--repeat", "1", "--concurrency", "1,32,64"]
    group = _planned("opsconsole status @prod --json")
    assert group.groups == {"prod": ["gpu-a", "gpu-b"]} and group.overrides == [] and group.mode == "plain"
    missing = _planned("opsconsole status nosuchhost")
    assert (missing.unknown_host, missing.exit_status, missing.hosts) == ("nosuchhost", 1, [])
    compare = _planned("opsconsole compare base new")
    assert compare.labels == [("demo", "base"), ("demo", "new")]
    restore = _planned("opsconsole restore gpu-a v1")
    assert restore.snapshots == [("gpu-a", "v1")] and restore.answers_yes
    assert _planned("opsconsole demo --web").mode == "web"
    assert _planned("opsconsole connect gpu-a gpu-b").mode == "terminal"
    assert _planned("opsconsole demo --no-ui").mode == "until-ready"
    trace = _planned("opsconsole bench gpu-a --dataset prod_trace.jsonl")
    assert trace.files == {"prod_trace.jsonl": "trace"} and trace.overrides == ["--dataset-sample", "12"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("opsconsole bench gpu-a --dataset /data/prompts.jsonl", "an absolute path"),
        ("opsconsole bench gpu-a --dataset prompts.csv", "does not know what file this is"),
        ("opsconsole status gpu-a --ssh-config my_config", "--ssh-config"),
        ("opsconsole compare runs.jsonl other", "a records file"),
    ],
)
def test_a_line_the_demo_test_cannot_give_what_it_names_says_what_to_teach_it(text: str, says: str) -> None:
    with pytest.raises(CannotRun, match=says):
        _planned(text)
