"""Exit codes and usage errors: one home for every verb, the CLI and the console.

  0  the operation succeeded (or there was nothing to do)
  1  the operation failed or was refused
  2  usage error: the command line or an input was malformed; nothing was done
130  interrupted by Ctrl-C
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    INTERRUPTED = 130


class UsageError(Exception):
    """Malformed input (a flag, a value, a file): exit 2 with the message, which says what to write instead.

    Not a ValueError: the verbs catch ValueError for a unit that is not an SGLang unit (UnitError, exit 1), and a
    usage error must pass those handlers by on its way to exit 2 without a guard in each of them."""
