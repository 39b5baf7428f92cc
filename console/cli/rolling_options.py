"""The options of a rolling change (--rolling, --canary, --wave, --max-failures, --drain-timeout), for the verbs
that take them (apply, restart, restore), and their checks before anything is contacted. Light to import: the
parser is built on every run of the CLI; the roll itself is console/cli/rolling.py."""

from __future__ import annotations

import argparse

from console.core.rolling_plan import RollError, RollSpec, parse_wave
from console.errors import UsageError


def add_rolling_options(parser: argparse.ArgumentParser) -> None:
    """--rolling and its options, for the verbs that change a group host by host."""
    parser.add_argument(
        "--rolling",
        action="store_true",
        help="TARGET is a group (@name): change its hosts one batch at a time, canary first; stop at the first failure",
    )
    parser.add_argument("--canary", type=int, default=1, metavar="N", help="hosts changed first (default 1)")
    parser.add_argument(
        "--wave", default="1", metavar="N|P%", help="hosts changed at once after the canary (default 1)"
    )
    parser.add_argument(
        "--max-failures", type=int, default=0, metavar="N", help="failed hosts the roll goes on past (default 0)"
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="with a router: seconds a removed worker's running requests get to finish before its restart",
    )


def check_rolling(args: argparse.Namespace) -> RollSpec | None:
    """The roll's options (usage errors before anything is contacted); None for a single-host run."""
    target: str = args.target
    if not getattr(args, "rolling", False):
        if target.startswith("@"):
            raise UsageError(
                f"{target} is a group: add --rolling to change its hosts one batch at a time (canary first)"
            )
        return None
    if not target.startswith("@"):
        raise UsageError(f"--rolling changes a group: give @GROUP (profiles/groups.toml), not {target!r}")
    if not args.drain_timeout > 0:
        raise UsageError(f"--drain-timeout must be a positive number of seconds, not {args.drain_timeout}")
    spec = RollSpec(canary=args.canary, wave=parse_wave(args.wave), max_failures=args.max_failures)
    if spec.canary < 0 or spec.max_failures < 0:
        raise RollError("--canary and --max-failures take 0 or more")
    return spec
