"""`opsconsole freeze`: production snapshots. It lands with the freeze issue; until then, say so plainly."""

from __future__ import annotations

import argparse
import sys

from console.errors import ExitCode


def run(args: argparse.Namespace) -> int:
    print(
        "opsconsole freeze: production snapshots are not built yet; nothing was changed on "
        f"{args.target}. Use `opsconsole apply` to set the unit and `opsconsole status` to read it back.",
        file=sys.stderr,
    )
    return ExitCode.FAILED
