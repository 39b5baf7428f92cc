"""Exit codes and usage errors: one home for every verb, the CLI and the console.

  0  the operation succeeded (or there was nothing to do)
  1  the operation failed or was refused
  2  usage error: the command line or an input was malformed; nothing was done
130  interrupted by Ctrl-C
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from string import Formatter


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    INTERRUPTED = 130
    BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell pipeline's writer that its reader left


def plain_name(field: str) -> str:
    """An input as the core calls it, in words: `max_failures` -> `max failures` (how str() of a UsageError says it,
    and the console's forms label most of their fields)."""
    return field.replace("_", " ")


class NamesFields(Exception):
    """An error whose message names the operator's inputs. The core does not know how they are typed (an option on
    the command line, a field of a console form), so it names an input by `field`, its own name for it (`canary`,
    `max_failures`, `set`), and the message is then a template that says `{field}` where that input is named and
    `{other}` for another input; the values it quotes come as keywords, never through the template, so what the
    operator typed stays as typed:

        raise UsageError("{field} {value}: give 0 or more hosts", field="canary", value=-1)

    Each renderer words it its own way: the CLI with its options (`--canary -1: give 0 or more hosts`, console.cli
    .common.said), str() and the console with the plain names (`canary -1: ...`). A message without a field is plain
    text, braces and all."""

    def __init__(self, message: str, *args: object, field: str | None = None, **values: object) -> None:
        super().__init__(message, *args)
        self.field = field
        self._values = values if field is not None else None  # None: the message is plain text, not a template

    def worded(self, name: Callable[[str], str] = plain_name) -> str:
        """The message with every input named by `name` (an input's field -> how this renderer calls it)."""
        message = str(self.args[0]) if self.args else ""
        if self._values is None or self.field is None:
            return message
        named: dict[str, object] = {"field": name(self.field)}
        for _text, placeholder, _spec, _conversion in Formatter().parse(message):
            if placeholder and placeholder not in self._values and placeholder != "field":
                named[placeholder] = name(placeholder)
        return message.format_map({**named, **self._values})

    def __str__(self) -> str:
        return self.worded()


class UsageError(NamesFields):
    """Malformed input (a flag, a value, a file): exit 2 with the message, which says what to write instead, naming
    the input by its field where it is about one (NamesFields).

    Not a ValueError: the verbs catch ValueError for a unit that is not an SGLang unit (UnitError, exit 1), and a
    usage error must pass those handlers by on its way to exit 2 without a guard in each of them."""
