"""Unit tests of what the verbs that change a host share (console.cli.common): the question, the early failure, the
exceptions each maps to an exit code, Ctrl-C as an intent, and the stamped progress lines."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
import signal
from typing import Any

import pytest

from console.cli.common import Answer, HostVerb, HumanProgress, interruptibly
from console.errors import ExitCode, UsageError
from console.host.base import HostError, UnitLocked


class Terminal(io.StringIO):
    """What the operator types, on a stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def verb(stdin: io.StringIO, *, yes: bool = False, json_out: bool = False) -> HostVerb:
    args = argparse.Namespace(yes=yes, json=json_out, target="gpu-a")
    return HostVerb(
        "apply", args, {"ok": False, "target": args.target}, lambda exc: f"{exc}; nothing was done", stdin=stdin,
        stdout=io.StringIO(), stderr=io.StringIO(),
    )  # fmt: skip


def out(stream: Any) -> str:
    assert isinstance(stream, io.StringIO)
    return stream.getvalue()


@pytest.mark.parametrize(("typed", "answer"), [("y\n", Answer.YES), ("yes\n", Answer.YES), ("\n", Answer.NO),
                                                ("n\n", Answer.NO), ("", Answer.NO)])  # fmt: skip
def test_on_a_terminal_the_operator_is_asked_y_n(typed: str, answer: Answer) -> None:
    run = verb(Terminal(typed))
    assert run.ask("Restart it?") is answer
    assert out(run.stderr) == "Restart it? [y/N] "


def test_yes_asks_nothing_and_without_a_terminal_nobody_can_be_asked() -> None:
    run = verb(Terminal("n\n"), yes=True)
    assert run.ask("Restart it?") is Answer.YES and out(run.stderr) == ""
    piped = verb(io.StringIO("y\n"))
    assert piped.ask("Restart it?") is Answer.NO_TERMINAL and out(piped.stderr) == ""
    assert piped.cannot_ask == "stdin is not a terminal, so apply cannot ask for confirmation; re-run with --yes"


def test_the_lock_and_a_refusing_host_or_unit_are_early_failures_and_a_usage_error_is_exit_2() -> None:
    def raising(exc: Exception) -> Any:
        async def main(_verb: HostVerb) -> int:
            raise exc

        return main

    held = UnitLocked("gpu-a", "sglang.service", "alice")
    locked = verb(io.StringIO(), json_out=True)
    assert locked.run(raising(held)) == ExitCode.FAILED  # said as it is: nothing was read or changed
    assert json.loads(out(locked.stdout)) == {"ok": False, "target": "gpu-a", "state": "locked", "error": str(held)}
    assert out(locked.stderr) == f"opsconsole apply: {held}\n"
    for error in (HostError("link down"), ValueError("not an SGLang unit")):
        failed = verb(io.StringIO())
        assert failed.run(raising(error)) == ExitCode.FAILED
        assert out(failed.stderr) == f"opsconsole apply: {error}; nothing was done\n" and out(failed.stdout) == ""
    usage = verb(io.StringIO(), json_out=True)
    assert usage.run(raising(UsageError("--set X: takes a value"))) == ExitCode.USAGE
    assert out(usage.stderr) == "opsconsole apply: --set X: takes a value\n" and out(usage.stdout) == ""
    checked = verb(io.StringIO())
    ran: list[bool] = []

    def check() -> None:
        raise UsageError("nothing to apply")

    async def main(_verb: HostVerb) -> int:
        ran.append(True)
        return 0

    assert checked.run(main, check=check) == ExitCode.USAGE and ran == []


def test_the_outcome_is_the_one_json_object_or_the_lines_for_a_person() -> None:
    as_json = verb(io.StringIO(), json_out=True)
    as_json.report(lambda: {"ok": True}, lambda stream: print("for a person", file=stream))
    assert out(as_json.stdout) == '{"ok": true}\n' and out(as_json.stderr) == ""
    assert as_json.human is as_json.stderr
    human = verb(io.StringIO())
    human.report(lambda: {"ok": True}, lambda stream: print("for a person", file=stream))
    assert out(human.stdout) == "for a person\n" and human.human is human.stdout


def test_the_first_ctrl_c_asks_the_operation_to_stop_cleanly() -> None:
    async def scenario() -> tuple[str, bool]:
        stopped = asyncio.Event()

        async def operation() -> str:
            os.kill(os.getpid(), signal.SIGINT)  # the operator, once the operation runs
            await stopped.wait()
            return "rolled back"

        return await interruptibly(operation(), stopped.set)

    assert asyncio.run(scenario()) == ("rolled back", True)


def test_a_second_ctrl_c_abandons_the_operation() -> None:
    stops: list[bool] = []

    async def scenario() -> None:
        async def operation() -> str:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.Event().wait()  # a rollback that does not end
            return "never"

        await interruptibly(operation(), lambda: stops.append(True))

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(scenario())
    assert stops == [True]


def test_without_ctrl_c_the_operation_just_ends() -> None:
    async def operation() -> int:
        return 7

    async def scenario() -> tuple[int, bool]:
        return await interruptibly(operation(), lambda: None)

    assert asyncio.run(scenario()) == (7, False)


def test_progress_lines_carry_the_time_their_event_came() -> None:
    class Steps(HumanProgress[str]):
        def show(self, event: str) -> None:
            self.say(f"step {event}")
            self.write(f"  as it is: {event}")

    stream = io.StringIO()
    Steps(stream)("restarting")
    first, second = stream.getvalue().splitlines()
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] step restarting", first)
    assert second == "  as it is: restarting"
