"""`opsconsole connect`: the Textual console. It lands with the console issue; until then, say so plainly."""

from __future__ import annotations

import argparse
import sys

from console.errors import ExitCode


def run(args: argparse.Namespace) -> int:
    print(
        "opsconsole connect: the interactive console is not built yet. The same verbs work headless today:\n"
        f"  opsconsole status {args.targets[0]}    opsconsole apply ...    opsconsole bench ...    opsconsole logs ...",
        file=sys.stderr,
    )
    return ExitCode.FAILED
