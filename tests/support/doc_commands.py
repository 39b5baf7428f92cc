"""The `opsconsole ...` command lines that README.md and docs/*.md show, read out of the Markdown (pure, no process).

Where they are found:
- in fenced code blocks, one a line: a `$ ` prompt and a trailing `# comment` taken off, a line ending in `\\` joined
  with the next; a `$ echo $?` right after a command, followed by a number, is the exit status the page promises for
  it (else 0). Lines of a block that do not start with the program (output, TOML, `make ...`) are not commands.
- in inline code spans (`` `opsconsole status demo` ``), `\\|` read as `|` (a table's escaped pipe).

What each is (`kind`):
- `mention`: an inline `opsconsole VERB` names a verb ("the same engine as `opsconsole bench`"), as console.hints.verb
  does, not a line to run: the verb must exist.
- `synopsis`: a line with `[optional]` parts, `a|b` alternatives, `...`, or a placeholder in capitals (TARGET,
  FLAG=V, @GROUP, TRACE.jsonl) cannot run as written: every option it names must exist for its verb, and every
  alternative it lists for an option with choices must be one of them (tests/test_docs_commands.py).
- `run`: anything else runs as written on the demo (tests/test_docs_commands_demo.py).
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = "opsconsole"

# The program as the first word: `opsconsole`, or a path to it (`.venv/bin/opsconsole`).
_COMMAND = re.compile(r"^(?:\S*/)?opsconsole(?:\s|$)")
_FENCE = re.compile(r"^\s*```")
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_EXIT_SHOWN = re.compile(r"^\s*(\d+)\s*$")
# A placeholder word: capitals and underscores (TARGET, RUN_A, S), maybe KEY=VALUE in capitals (FLAG=V) or a file
# name's extension (TRACE.jsonl). SGLang's algorithm names are values, not placeholders.
_PLACEHOLDER = re.compile(r"^@?[A-Z][A-Z_]*(=[A-Z][A-Z_]*)?(\.[a-z]+)?$")
SGLANG_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "FROZEN_KV_MTP"})
# An option word: -x or --name, not the middle of a value (20m-30m) nor the bare `--` that ends the options.
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@dataclass(frozen=True)
class DocCommand:
    """One command line of a page: where it is, as written (prompt, comment and continuations taken off)."""

    page: str  # relative to the repository: README.md, docs/bench.md
    line: int  # where it starts (1-based)
    text: str  # `opsconsole ...` on one line
    in_block: bool  # a fenced block's line (else an inline code span)
    exit_status: int = 0  # the status the page shows for it (`$ echo $?`), else 0

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def words(self) -> list[str]:
        """The words after the program, as a shell splits them (whitespace where the line is no valid shell)."""
        rest = _COMMAND.sub("", self.text, count=1)
        try:
            return shlex.split(rest)
        except ValueError:
            return rest.split()

    @property
    def kind(self) -> str:
        """`mention`, `synopsis` or `run` (see the module's doc)."""
        words = self.words
        if not self.in_block and len(words) <= 1 and not any(w.startswith("-") for w in words):
            return "mention"
        return "synopsis" if is_synopsis(words) else "run"

    @property
    def verb(self) -> str | None:
        """The verb: the first word that is not an option of the program itself (--workspace DIR); None where the
        line names none, or any (`opsconsole ...`, `opsconsole VERB`)."""
        words = self.words
        i = 0
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i] == "--workspace" else 1
        if i == len(words) or is_synopsis([words[i]]):
            return None
        return words[i]


def is_synopsis(words: list[str]) -> bool:
    """Whether the words hold a part that cannot run as written: [optional], a|b, ..., a placeholder."""
    for word in _program_words(words):
        if any(mark in word for mark in ("[", "]", "|", "...", "…")):
            return True
        if _PLACEHOLDER.match(word) and word.lstrip("@").split("=")[0] not in SGLANG_ALGORITHMS:
            return True
    return False


def _program_words(words: list[str]) -> list[str]:
    """The words opsconsole reads itself: those before a bare `--` (after it: SGLang's launch flags)."""
    return words[: words.index("--")] if "--" in words else words


def named_options(text: str) -> list[str]:
    """The options a (synopsis) line names, in order: -f, --set, ... (not SGLang's flags after a bare `--`)."""
    words = text.split()
    return _OPTION.findall(" ".join(_program_words(words)))


def option_alternatives(text: str) -> list[tuple[str, list[str]]]:
    """(option, the values it lists) for each `--option a|b|c` of a synopsis: `--client auto|console|host`."""
    words = [w.strip("[]") for w in _program_words(text.split())]
    found = []
    for option, value in itertools.pairwise(words):
        if _OPTION.fullmatch(option) and "|" in value and not value.startswith("-"):
            found.append((option, [v for v in value.split("|") if v]))
    return found


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def commands_in(text: str, page: str) -> list[DocCommand]:
    """Every command line of one page's Markdown, in the order they appear."""
    found: list[DocCommand] = []
    lines = text.splitlines()
    fenced = False
    prose: list[str] = []  # the page with its fenced blocks blanked, for the inline spans
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            fenced = not fenced
            prose.append("")
            i += 1
            continue
        if not fenced:
            prose.append(line)
            i += 1
            continue
        prose.append("")
        start = i
        command = _without_prompt(line)
        while command.endswith("\\") and i + 1 < len(lines) and not _FENCE.match(lines[i + 1]):
            i += 1
            prose.append("")
            command = command[:-1].rstrip() + " " + _without_prompt(lines[i]).strip()
        i += 1
        command = _without_comment(command).strip()
        if _COMMAND.match(command):
            status = _exit_shown(lines, i)
            found.append(DocCommand(page, start + 1, command, in_block=True, exit_status=status))
    found += _spans(prose, page)
    return sorted(found, key=lambda c: c.line)


def _spans(prose: list[str], page: str) -> list[DocCommand]:
    text = "\n".join(prose)
    found = []
    for match in _SPAN.finditer(text):
        content = " ".join(match.group(2).replace("\\|", "|").split())
        if _COMMAND.match(content):
            line = text.count("\n", 0, match.start()) + 1
            found.append(DocCommand(page, line, content, in_block=False))
    return found


def _exit_shown(lines: list[str], after: int) -> int:
    """The status a block shows for the command that ends before line `after`: `$ echo $?` and a number below it,
    before the next command or the block's end."""
    for j in range(after, len(lines)):
        if _FENCE.match(lines[j]) or _COMMAND.match(_without_prompt(lines[j]).strip()):
            return 0
        if _without_prompt(lines[j]).strip() == "echo $?" and j + 1 < len(lines):
            shown = _EXIT_SHOWN.match(lines[j + 1])
            return int(shown.group(1)) if shown else 0
    return 0


def _without_prompt(line: str) -> str:
    stripped = line.strip()
    return stripped[2:] if stripped.startswith("$ ") else stripped


def _without_comment(line: str) -> str:
    """The line up to a `#` that starts a shell comment (after whitespace, outside quotes)."""
    quote = ""
    for k, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip()
    return line


def doc_commands(root: Path = ROOT) -> list[DocCommand]:
    """Every command line of README.md and docs/*.md."""
    found = []
    for page in pages(root):
        found += commands_in(page.read_text(encoding="utf-8"), str(page.relative_to(root)))
    return found
