"""What every verb's renderer shares: running its coroutine, and turning errors into messages and exit codes.

The verbs that change a host (apply, restore, freeze, tune) share more, in HostVerb: where a person's lines go
(stdout, or stderr when stdout holds the one --json object), how a run that did nothing says why (exit 1, the
--json object still printed), the y/N question, Ctrl-C as an intent, and the timestamped progress lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Generic, TextIO, TypeVar

from console.errors import ExitCode, NamesFields, UsageError
from console.host.base import HostError, UnitLocked

T = TypeVar("T")
E = TypeVar("E")

# A --json run prints no progress unless this is set (to anything but 0): then the same timestamped lines go to
# stderr, stdout still holding only the JSON object. For the log of a scripted run, and for the tests: a CLI that ran
# past its time shows where it was (tests/e2e/cli.py).
PROGRESS_ENV = "OPSCONSOLE_PROGRESS"


# The core's inputs whose option is not --NAME (console.errors.UsageError.field: the core names what it refuses by its
# own names, and the CLI says them as its options).
OPTION_OF = {"document": "--doc", "gate_level": "--gate-concurrency", "gate_max_loss": "--gate-max-regression"}


def option_name(field: str) -> str:
    """A core input as the command line names it: `max_failures` -> `--max-failures`."""
    return OPTION_OF.get(field, "--" + field.replace("_", "-"))


def said(exc: BaseException) -> str:
    """An error in the command line's words: the inputs it names (console.errors.NamesFields) as options."""
    return exc.worded(option_name) if isinstance(exc, NamesFields) else str(exc)


def run_verb(
    verb: str,
    main: Callable[[], Coroutine[Any, Any, int]],
    *,
    check: Callable[[], object] | None = None,
    stderr: TextIO | None = None,
) -> int:
    """check() (the arguments, before anything is contacted), then asyncio.run(main()): a UsageError is exit 2
    and a HostError exit 1, each with its message."""
    err = stderr or sys.stderr
    try:
        if check is not None:
            check()
        return int(asyncio.run(main()))
    except UsageError as exc:
        print(f"opsconsole {verb}: {said(exc)}", file=err)
        return ExitCode.USAGE
    except HostError as exc:
        print(f"opsconsole {verb}: {said(exc)}", file=err)
        return ExitCode.FAILED


def workspace_of(args: argparse.Namespace) -> Any:
    """The workspace the command line names (--workspace, else $OPSCONSOLE_WORKSPACE, else here)."""
    from console.workspace import Workspace

    return Workspace.resolve(getattr(args, "workspace", None))


def is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# A verb's work on its open run: the exit code.
VerbMain = Callable[["HostVerb"], Coroutine[Any, Any, int]]


class Answer(Enum):
    YES = "yes"  # --yes, or the operator typed y
    NO = "no"
    NO_TERMINAL = "no terminal"  # stdin is not a terminal: nobody can be asked


@dataclass
class HostVerb:
    """One run of a verb that changes a host: its name and arguments, its streams, and how it says that nothing
    was done (failure: the one --json object of such a run but for its `state` and `error`; nothing_done: the
    message for a HostError or a ValueError, the unit not being an SGLang unit, in the CLI's words: said)."""

    name: str
    args: argparse.Namespace
    failure: Mapping[str, object]
    nothing_done: Callable[[Exception], str] = said
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)

    @property
    def json(self) -> bool:
        return bool(self.args.json)

    @property
    def human(self) -> TextIO:
        """Where the lines for a person go: stdout, or stderr when stdout holds the one JSON object."""
        return self.stderr if self.json else self.stdout

    @property
    def shows_progress(self) -> bool:
        """The timestamped progress lines (on `human`): without --json always; with it where $OPSCONSOLE_PROGRESS
        asks for them."""
        return not self.json or os.environ.get(PROGRESS_ENV, "0") not in ("", "0")

    def run(self, main: VerbMain, *, check: Callable[[], object] | None = None) -> int:
        """check() (usage errors, exit 2, before anything is contacted), then main(self): the lock held by another
        and a host or unit that refuses are said by early_failure (exit 1); a UsageError is exit 2."""
        return run_verb(self.name, lambda: self._guarded(main), check=check, stderr=self.stderr)

    async def _guarded(self, main: VerbMain) -> int:
        try:
            return await main(self)
        except UnitLocked as exc:
            return self.early_failure(said(exc), state="locked")
        except (HostError, ValueError) as exc:  # ValueError: UnitError, the unit is not an SGLang unit
            return self.early_failure(self.nothing_done(exc))

    def early_failure(self, message: str, *, state: str = "error") -> int:
        """Nothing was changed: say why (with --json, still as the one JSON object); exit 1."""
        print(f"opsconsole {self.name}: {message}", file=self.stderr)
        if self.json:
            print(json.dumps({**self.failure, "state": state, "error": message}), file=self.stdout)
        return ExitCode.FAILED

    @property
    def cannot_ask(self) -> str:
        return f"stdin is not a terminal, so {self.name} cannot ask for confirmation; re-run with --yes"

    def ask(self, question: str) -> Answer:
        """--yes answers yes; without a terminal nobody can be asked; else `question [y/N]` on stderr."""
        if self.args.yes:
            return Answer.YES
        if not is_tty(self.stdin):
            return Answer.NO_TERMINAL
        print(f"{question} [y/N] ", end="", file=self.stderr, flush=True)
        return Answer.YES if self.stdin.readline().strip().lower() in {"y", "yes"} else Answer.NO

    def report(self, to_json: Callable[[], dict[str, Any]], render: Callable[[TextIO], None]) -> None:
        """The outcome: the one JSON object on stdout with --json, else the lines for a person."""
        if self.json:
            print(json.dumps(to_json(), default=str), file=self.stdout)
        else:
            render(self.human)


async def interruptibly(operation: Coroutine[Any, Any, T], stop: Callable[[], None]) -> tuple[T, bool]:
    """Await the operation with Ctrl-C as an intent it cannot miss: the first press calls stop() (the operation
    ends cleanly: it rolls back, it puts the unit back), a second cancels it. Also says whether Ctrl-C came."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(operation)
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            stop()
        else:
            task.cancel()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        return await task, presses > 0
    finally:
        loop.remove_signal_handler(signal.SIGINT)


class HumanProgress(Generic[E]):
    """A verb's events as lines a terminal (or a log) can follow, each stamped with the time (UTC) its event came:
    a verb's subclass writes show(event) with say() (stamped) and write() (a line as it is)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._stamp = ""

    def __call__(self, event: E) -> None:
        self._stamp = datetime.now(UTC).strftime("%H:%M:%S")
        self.show(event)

    def show(self, event: E) -> None:
        raise NotImplementedError

    def say(self, text: str) -> None:
        self.write(f"[{self._stamp}] {text}")

    def write(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def ignore(_event: object) -> None:
    """The progress of a --json run: none (stdout holds only the JSON object; see PROGRESS_ENV)."""
