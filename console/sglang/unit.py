"""The SGLang systemd unit as an editable model that renders back byte for byte.

`UnitFile.parse(text)` keeps the file as blocks of raw text (one block per directive, including its
backslash-continued lines, and one per other line), so an unchanged unit renders byte-identical and an
edit rewrites only the characters it must: the value of one flag, one `Environment=` assignment, one
appended flag or line. Comments, unknown lines, blank lines and flag order are never touched.

ExecStart is tokenised the way systemd does it (whitespace-separated words, "double" and 'single'
quotes, backslash escapes, `\\`-newline continuations, `%%` and `$$` escapes) and recognised for
these launchers: `python[3[.X]] [-u ...] -m sglang.launch_server`, a venv's `/x/bin/python -m ...`,
`sglang serve`, and `python -m MODULE` for every launcher registered in console.sglang.launchers (whose
own options are kept but are not SGLang flags). Flag names are matched through SGLang's flag table, so
aliases and prefix abbreviations are recognised when editing (`--speculative-num` changes
`--speculative-num-steps`).

The service settings a process runner needs are read here too (`exec_argv`, `environment`,
`working_directory`, `timeout_stop_s`, `restart_sec`), so that the demo supervisor runs a unit exactly as
this model reads it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from console.names import is_env_name
from console.secrets import redact_argv
from console.sglang.argv import is_option_token
from console.sglang.flags import FlagSpec, FlagTable, flag_table
from console.sglang.launchers import SGLANG, LauncherSpec, launcher_for_module, registered_launchers

FlagValue = str | list[str] | bool

_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$")
_DIRECTIVE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_.\-]*)\s*=")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# ExecStart's prefixes before the program (`-` ignore failure, `@` own argv[0], `:`, `+`, `!` privileges).
_EXEC_PREFIXES = "@-:+!"
# Python options that take a separate argument (`python -X importtime -m ...`).
_PYTHON_OPTIONS_WITH_ARG = ("-X", "-W", "-c")


class UnitError(ValueError):
    """The unit cannot be read or edited as asked; the message says what to change."""


@dataclass(frozen=True, slots=True)
class _Token:
    start: int  # offsets into the directive's value text
    end: int
    value: str  # unquoted, unescaped
    raw: str


@dataclass
class _Block:
    raw: str
    section: str | None = None
    key: str | None = None  # directive name, None for comments/blank/unknown lines

    @property
    def value_offset(self) -> int:
        return self.raw.index("=") + 1

    @property
    def value_text(self) -> str:
        return self.raw[self.value_offset :]


@dataclass(frozen=True, slots=True)
class Launch:
    """What ExecStart runs: the launcher words, which launcher that is, SGLang's flags, and the launcher's own
    options (those its LauncherSpec claims; none for SGLang itself)."""

    launcher: tuple[str, ...]
    spec: LauncherSpec
    flags: tuple[str, ...]
    own_options: tuple[str, ...]

    @property
    def sglang_version(self) -> str | None:
        """The SGLang version the launcher's own options say it behaves as (None: not said, or SGLang itself)."""
        return self.spec.version_in(self.own_options)


@dataclass(frozen=True, slots=True)
class _Item:
    """One flag in ExecStart: its option token and the value tokens that belong to it."""

    option: _Token
    values: tuple[_Token, ...]

    @property
    def name(self) -> str:
        return self.option.value.partition("=")[0]

    @property
    def end(self) -> int:
        return (self.values[-1] if self.values else self.option).end


def tokenize(text: str, *, exec_escapes: bool) -> list[_Token]:
    """Split a directive value into words with their offsets, systemd style.

    `exec_escapes`: ExecStart also turns `$$` into `$` (it expands `$VAR`); both turn `%%` into `%`.
    A backslash before a newline is a line continuation (whitespace).
    """
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " \t\n\r" or (text[i] == "\\" and text[i + 1 : i + 2] == "\n"):
            i += 2 if text[i] == "\\" else 1
            continue
        start = i
        out: list[str] = []
        quote: str | None = None
        while i < n:
            ch = text[i]
            if quote is None and (ch in " \t\n\r" or (ch == "\\" and text[i + 1 : i + 2] == "\n")):
                break
            if ch in "\"'" and quote is None:
                quote = ch
            elif ch == quote:
                quote = None
            elif ch == "\\" and i + 1 < n and quote != "'":
                i += 1
                out.append({"n": "\n", "t": "\t"}.get(text[i], text[i]))
            elif ch == "%" and text[i + 1 : i + 2] == "%":
                i += 1
                out.append("%")
            elif exec_escapes and ch == "$" and text[i + 1 : i + 2] == "$":
                i += 1
                out.append("$")
            else:
                out.append(ch)
            i += 1
        if quote is not None:
            # The message reaches the terminal before anything else masks it: keep the line's secrets out.
            shown = " ".join(redact_argv(text.split()))
            raise UnitError(f"unbalanced {quote} quote in: {shown[:80]}")
        tokens.append(_Token(start, i, "".join(out), text[start:i]))
    return tokens


def quote_word(value: str, *, exec_escapes: bool) -> str:
    """Render one word so that `tokenize` reads back exactly `value`."""
    escaped = value.replace("%", "%%")
    if exec_escapes:
        escaped = escaped.replace("$", "$$")
    if value and not re.search(r"[\s\"'\\;]", value):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _split_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    section: str | None = None
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        stripped = line.strip()
        header = _SECTION.match(line)
        if header:
            section = header.group(1).strip()
            blocks.append(_Block(line, section))
            continue
        directive = _DIRECTIVE.match(line)
        if directive is None or stripped.startswith(("#", ";")):
            blocks.append(_Block(line, section))
            continue
        raw = line
        while raw.rstrip("\r\n").endswith("\\") and i < len(lines):
            raw += lines[i]
            i += 1
        blocks.append(_Block(raw, section, directive.group(1)))
    return blocks


class UnitFile:
    """An SGLang systemd unit. Edits return nothing and change only the part they name."""

    def __init__(self, blocks: list[_Block], table: FlagTable):
        self._blocks = blocks
        self._table = table

    @classmethod
    def parse(cls, text: str, version: str | None = None) -> UnitFile:
        """Read a unit; `version` picks the flag table used to recognise aliases (default: newest)."""
        return cls(_split_blocks(text), flag_table(version))

    def render(self) -> str:
        return "".join(block.raw for block in self._blocks)

    # -- reading ------------------------------------------------------------------------------------

    def directives(self, key: str, section: str = "Service") -> list[str]:
        """The values of every `key=` line in `section`, continuation lines joined."""
        return [
            re.sub(r"\\\r?\n", " ", b.value_text).strip() for b in self._blocks if b.key == key and b.section == section
        ]

    def directive(self, key: str, section: str = "Service") -> str | None:
        """The last `key=` value in `section` (systemd: the last assignment wins), or None."""
        values = self.directives(key, section)
        return values[-1] if values else None

    @property
    def working_directory(self) -> str | None:
        return self.directive("WorkingDirectory")

    @property
    def user(self) -> str | None:
        return self.directive("User")

    @property
    def restart(self) -> str | None:
        return self.directive("Restart")

    def environment_files(self) -> list[str]:
        """`EnvironmentFile=` paths (a leading `-` means optional); their contents live on the host."""
        return self.directives("EnvironmentFile")

    def environment(self) -> dict[str, str]:
        """Every `Environment=` assignment of [Service], in order; a later one overrides an earlier one."""
        env: dict[str, str] = {}
        for block in self._env_blocks_in_effect():
            for token in tokenize(block.value_text, exec_escapes=False):
                key, sep, value = token.value.partition("=")
                if sep:
                    env[key] = value
        return env

    @property
    def launch(self) -> Launch:
        block = self._exec_block()
        tokens = tokenize(block.value_text, exec_escapes=True)
        launcher, spec = _launcher(tokens)
        rest = tokens[len(launcher) :]
        own_starts = {
            t.start for item in self._items(rest, spec) if spec.owns(item.name) for t in (item.option, *item.values)
        }
        # Every other word goes to SGLang, stray ones too: its parser refuses them, so the rules must see them.
        flags = tuple(t.value for t in rest if t.start not in own_starts)
        own = tuple(t.value for t in rest if t.start in own_starts)
        return Launch(tuple(t.value for t in launcher), spec, flags, own)

    def flags(self) -> list[str]:
        """The SGLang launch flags (argv after the launcher, without the launcher's own options)."""
        return list(self.launch.flags)

    # -- reading what a process runner needs ----------------------------------------------------------

    def exec_argv(self) -> list[str]:
        """The full argv ExecStart runs (launcher, flags and the launcher's own options), as systemd splits it;
        the prefixes before the program (`-`, `@`, `:`, `+`, `!`) are not part of it. Raises UnitError without
        an ExecStart= in effect. Any program: this does not require an SGLang launcher."""
        words = [t.value for t in tokenize(self._exec_block().value_text, exec_escapes=True)]
        if not words or not words[0].lstrip(_EXEC_PREFIXES):
            raise UnitError("ExecStart= names no program")
        words[0] = words[0].lstrip(_EXEC_PREFIXES)
        return words

    @property
    def timeout_stop_s(self) -> float | None:
        """TimeoutStopSec= (or TimeoutSec=, whichever is set last) in seconds: how long a stop waits after SIGTERM
        before SIGKILL. math.inf for `infinity` or 0 (systemd reads 0 as no timeout); None when unset."""
        seconds = self._timespan("TimeoutStopSec", "TimeoutSec")
        return math.inf if seconds == 0 else seconds

    @property
    def restart_sec(self) -> float | None:
        """RestartSec= in seconds (the pause before an automatic restart), or None when unset."""
        return self._timespan("RestartSec")

    def _timespan(self, *keys: str) -> float | None:
        """The last valid time span among `keys` in [Service], in file order. As in systemd, an invalid value is
        ignored (systemd logs a warning) and the one before it stays; an empty one resets to the default."""
        found: float | None = None
        for block in self._blocks:
            if block.section != "Service" or block.key not in keys:
                continue
            text = re.sub(r"\\\r?\n", " ", block.value_text).strip()
            if not text:
                found = None
                continue
            try:
                found = parse_timespan(text)
            except ValueError:
                continue
        return found

    # -- editing flags ------------------------------------------------------------------------------

    def set_flag(self, name: str, value: FlagValue) -> None:
        """Set `name` (`--flag`, an alias, a prefix, or a dest) to `value`: a string, a list of strings for a
        list flag, True for an on/off flag (False removes it). An existing flag is changed in place, keeping its
        spelling; a new one is appended to ExecStart. The launcher's own options are set as written."""
        if value is False:
            self.unset_flag(name)
            return
        spec = self._spec(name)
        option = spec.name if spec else name
        if not option.startswith("--"):
            raise UnitError(f"{name!r} is not a flag SGLang {self._table.version} knows; write it as --flag-name")
        _check_value_shape(option, spec, value)
        block = self._exec_block()
        text = block.value_text
        tokens = tokenize(text, exec_escapes=True)
        launcher, launcher_spec = _launcher(tokens)
        items = [
            it for it in self._items(tokens[len(launcher) :], launcher_spec) if self._same_flag(it.name, spec, option)
        ]
        if items:
            text = _edit_item(text, items[-1], option, value)
        else:
            rendered = _render_new(option, value)
            last_end = tokens[-1].end
            text = text[:last_end] + _append_separator(block) + rendered + text[last_end:]
        block.raw = block.raw[: block.value_offset] + text

    def unset_flag(self, name: str) -> bool:
        """Remove every occurrence of the flag (with the whitespace before it); False when it was absent."""
        spec = self._spec(name)
        option = spec.name if spec else name
        block = self._exec_block()
        text = block.value_text
        tokens = tokenize(text, exec_escapes=True)
        launcher, launcher_spec = _launcher(tokens)
        removed = False
        for item in reversed(self._items(tokens[len(launcher) :], launcher_spec)):
            if not self._same_flag(item.name, spec, option):
                continue
            # From the end of the word before it (a flag's value, a stray word, the launcher), so nothing else goes.
            previous_end = tokens[tokens.index(item.option) - 1].end
            text = text[:previous_end] + text[item.end :]
            removed = True
        block.raw = block.raw[: block.value_offset] + text
        return removed

    # -- editing the environment --------------------------------------------------------------------

    def set_env(self, key: str, value: str) -> None:
        """Set an `Environment=` variable: the existing (last) assignment changes in place, otherwise a new
        `Environment="KEY=VALUE"` line goes after the last Environment= line (or before ExecStart)."""
        if not is_env_name(key):
            raise UnitError(f"{key!r} is not a valid environment variable name (letters, digits and _)")
        rendered = quote_word(f"{key}={value}", exec_escapes=False)
        for block in reversed(self._env_blocks_in_effect()):
            text = block.value_text
            matches = [t for t in tokenize(text, exec_escapes=False) if t.value.partition("=")[0] == key]
            if matches:
                token = matches[-1]
                if token.raw.startswith('"') and not rendered.startswith('"'):
                    rendered = f'"{rendered}"'  # keep the line's quoting style
                block.raw = block.raw[: block.value_offset] + text[: token.start] + rendered + text[token.end :]
                return
        if not rendered.startswith('"'):
            rendered = f'"{rendered}"'
        self._insert_env_line(f"Environment={rendered}")

    def unset_env(self, key: str) -> bool:
        """Remove every assignment of `key`; an Environment= line left empty is removed. False if absent."""
        removed = False
        for block in self._env_blocks():
            text = block.value_text
            hits = [t for t in tokenize(text, exec_escapes=False) if t.value.partition("=")[0] == key]
            for token in reversed(hits):
                before, after = text[: token.start], text[token.end :]
                if before.strip():
                    before = before.rstrip(" \t")
                else:
                    after = after.lstrip(" \t")
                text = before + after
            if hits:
                removed = True
                block.raw = block.raw[: block.value_offset] + text
                if not tokenize(text, exec_escapes=False):
                    self._blocks.remove(block)
        return removed

    # -- internals ----------------------------------------------------------------------------------

    def _env_blocks(self) -> list[_Block]:
        return [b for b in self._blocks if b.key == "Environment" and b.section == "Service"]

    def _env_blocks_in_effect(self) -> list[_Block]:
        """The Environment= lines after the last empty one: systemd's `Environment=` resets the list."""
        blocks = self._env_blocks()
        resets = [i for i, b in enumerate(blocks) if not tokenize(b.value_text, exec_escapes=False)]
        return blocks[resets[-1] + 1 :] if resets else blocks

    def _exec_block(self) -> _Block:
        """The ExecStart= in effect: the last one after the last empty `ExecStart=`, which resets the list."""
        blocks = [b for b in self._blocks if b.key == "ExecStart" and b.section == "Service"]
        resets = [i for i, b in enumerate(blocks) if not b.value_text.strip()]
        candidates = blocks[resets[-1] + 1 :] if resets else blocks
        if not candidates:
            raise UnitError("the unit has no ExecStart= line in [Service]; it does not start SGLang")
        return candidates[-1]

    def _spec(self, name: str) -> FlagSpec | None:
        """SGLang's spec for a flag name, or None for a name SGLang does not know or the launcher's own option."""
        if self._launcher_spec().owns(name):
            return None
        return self._table.spec_for(name)

    def _launcher_spec(self) -> LauncherSpec:
        try:
            return _launcher(tokenize(self._exec_block().value_text, exec_escapes=True))[1]
        except UnitError:
            return SGLANG  # the edit itself reports the missing or foreign ExecStart

    def _same_flag(self, written: str, spec: FlagSpec | None, option: str) -> bool:
        if spec is None:
            return written == option
        found = self._table.lookup(written)
        return found is not None and found.dest == spec.dest

    def _items(self, tokens: list[_Token], launcher: LauncherSpec) -> list[_Item]:
        items: list[_Item] = []
        i = 0
        while i < len(tokens):
            token = tokens[i]
            i += 1
            if not is_option_token(token.value, self._table):
                continue  # a stray word; stays where it is, owned by nobody
            spec = None if launcher.owns(token.value) else self._table.lookup(token.value.partition("=")[0])
            start = i
            while i < len(tokens) and not is_option_token(tokens[i].value, self._table):
                i += 1
            following = tokens[start:i]
            if "=" in token.value or (spec is not None and spec.is_boolean):
                following = []
            elif spec is not None and not spec.is_list and spec.nargs != "?":
                following = following[:1]
            i = start + len(following)
            items.append(_Item(token, tuple(following)))
        return items

    def _insert_env_line(self, line: str) -> None:
        env_blocks = self._env_blocks()
        if env_blocks:
            anchor = self._blocks.index(env_blocks[-1]) + 1
        else:
            exec_block = self._exec_block()
            anchor = self._blocks.index(exec_block)
        newline = "\r\n" if self._blocks[anchor - 1].raw.endswith("\r\n") else "\n"
        if anchor and not self._blocks[anchor - 1].raw.endswith("\n"):
            self._blocks[anchor - 1].raw += newline
        self._blocks.insert(anchor, _Block(line + newline, "Service", "Environment"))


def _launcher(tokens: list[_Token]) -> tuple[list[_Token], LauncherSpec]:
    if not tokens:
        raise UnitError("ExecStart= is empty")
    program = tokens[0].value.lstrip(_EXEC_PREFIXES)
    base = program.rsplit("/", 1)[-1]
    if base == "sglang" and len(tokens) > 1 and tokens[1].value == "serve":
        return tokens[:2], SGLANG
    if _PYTHON.match(base):
        i = 1
        while i < len(tokens) and tokens[i].value != "-m" and tokens[i].value.startswith("-"):
            i += 2 if tokens[i].value in _PYTHON_OPTIONS_WITH_ARG else 1
        if i + 1 < len(tokens) and tokens[i].value == "-m":
            spec = launcher_for_module(tokens[i + 1].value)
            if spec is not None:
                return tokens[: i + 2], spec
    shown = " ".join(t.value for t in tokens[:3])
    expected = [f"`{spec.command}`" for spec in registered_launchers()]
    expected.insert(1, "`sglang serve`")
    raise UnitError(f"ExecStart runs {shown!r}, not SGLang: expected {', '.join(expected[:-1])} or {expected[-1]}")


# systemd.time(7): the units of a time span, in seconds. Case matters (`m` minutes, `M` months).
_TIMESPAN_UNITS = {
    "usec": 1e-6, "us": 1e-6, "µs": 1e-6, "μs": 1e-6,
    "msec": 1e-3, "ms": 1e-3,
    "seconds": 1.0, "second": 1.0, "sec": 1.0, "s": 1.0, "": 1.0,
    "minutes": 60.0, "minute": 60.0, "min": 60.0, "m": 60.0,
    "hours": 3600.0, "hour": 3600.0, "hr": 3600.0, "h": 3600.0,
    "days": 86400.0, "day": 86400.0, "d": 86400.0,
    "weeks": 604800.0, "week": 604800.0, "w": 604800.0,
    "months": 2629800.0, "month": 2629800.0, "M": 2629800.0,
    "years": 31557600.0, "year": 31557600.0, "y": 31557600.0,
}  # fmt: skip
_TIMESPAN_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([^\d\s.]*)")


def parse_timespan(value: str) -> float:
    """A systemd time span (`90`, `500ms`, `2min 30s`, `1.5h`, `infinity`) in seconds; a bare number is
    seconds. Raises ValueError on anything else, naming the value."""
    text = value.strip()
    if text == "infinity":
        return math.inf
    if not text:
        raise ValueError("an empty time span (for example 90, 500ms, 2min 30s or infinity)")
    total, pos = 0.0, 0
    while pos < len(text):
        part = _TIMESPAN_PART.match(text, pos)
        glued = part is not None and not part.group(2) and part.end() < len(text) and not text[part.end()].isspace()
        if part is None or part.group(2) not in _TIMESPAN_UNITS or glued:  # glued: `1.2.3`, a number with no unit
            raise ValueError(f"{value!r} is not a time span (for example 90, 500ms, 2min 30s or infinity)")
        total += float(part.group(1)) * _TIMESPAN_UNITS[part.group(2)]
        pos = part.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return total


def _check_value_shape(option: str, spec: FlagSpec | None, value: FlagValue) -> None:
    if spec is None:
        return
    if spec.is_boolean and value is not True:
        raise UnitError(f"{option} is an on/off flag: set it to True (or False to remove it), not {value!r}")
    if not spec.is_boolean and value is True:
        raise UnitError(f"{option} takes a value; give one (for example {option}=VALUE)")
    if isinstance(value, list) and not spec.is_list:
        raise UnitError(f"{option} takes a single value, not a list")


def _words(value: FlagValue) -> list[str]:
    if value is True:
        return []
    return list(value) if isinstance(value, list) else [str(value)]


def _looks_like_option(word: str) -> bool:
    """argparse would read a separate word like `-x` as an option, so such a value needs `--flag=-x`."""
    return word.startswith("-") and not re.match(r"^-\d+$|^-\d*\.\d+$", word)


def _render_new(option: str, value: FlagValue) -> str:
    words = _words(value)
    if len(words) == 1 and _looks_like_option(words[0]):
        return f"{option}={quote_word(words[0], exec_escapes=True)}"
    return " ".join([option, *(quote_word(w, exec_escapes=True) for w in words)])


def _edit_item(text: str, item: _Item, option: str, value: FlagValue) -> str:
    """Change one existing flag with the smallest edit: only the value word when that is enough."""
    head = item.option.raw.partition("=")[0]
    if value is True:
        # `--no-x` becomes `--x`; an on flag that is already there stays exactly as written.
        if not item.name.startswith("--no-"):
            return text
        return text[: item.option.start] + option + text[item.end :]
    words = [quote_word(w, exec_escapes=True) for w in _words(value)]
    if len(words) == 1 and ("=" in item.option.value or _looks_like_option(_words(value)[0])):
        return text[: item.option.start] + f"{head}={words[0]}" + text[item.end :]
    if len(item.values) == 1 and len(words) == 1:
        value_token = item.values[0]
        return text[: value_token.start] + words[0] + text[value_token.end :]
    return text[: item.option.start] + " ".join([head, *words]) + text[item.end :]


def _append_separator(block: _Block) -> str:
    """Continue a one-flag-per-line ExecStart in the same style; otherwise a plain space."""
    lines = block.raw.split("\n")
    if len([line for line in lines if line]) > 1:
        last = lines[-1] if lines[-1] else lines[-2]
        indent = last[: len(last) - len(last.lstrip(" \t"))]
        return " \\\n" + indent
    return " "


def unit_api_key(text: str) -> str | None:
    """The key the unit starts SGLang with (`--api-key K`, `--api-key=K`, an abbreviation SGLang accepts); None
    when it sets none or is no SGLang unit. Never show it: it is a secret (console.secrets masks it)."""
    from console.sglang.argv import parse_argv

    try:
        key = parse_argv(UnitFile.parse(text).flags(), flag_table(None)).values.get("api_key")
    except ValueError:
        return None
    return key if isinstance(key, str) and key else None
