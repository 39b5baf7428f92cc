"""The options of a rolling change (--rolling, --canary, --wave, --max-failures, --drain-timeout; --gate bench,
--gate-concurrency, --gate-max-regression for the verbs that change the setup), for the verbs that take them
(apply, restart, restore, freeze), and their checks before anything is contacted. Light to import: the
parser is built on every run of the CLI; the roll itself is console/cli/rolling.py."""

from __future__ import annotations

import argparse

from console.core.roll import DEFAULT_GATE_PCT, GateSpec, RollSpec, parse_percent, parse_wave
from console.errors import UsageError


def add_rolling_options(parser: argparse.ArgumentParser, *, gate: bool = False) -> None:
    """--rolling and its options, for the verbs that change a group host by host; with gate, --gate bench and its
    options (apply, restore: a new setup the canary's benchmark can judge)."""
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
    if not gate:
        return
    parser.add_argument(
        "--gate",
        choices=["bench"],
        default=None,
        help="after the canary is verified, a short benchmark against its last record at the same level; a "
        "regression halts the roll and rolls the canary back",
    )
    parser.add_argument(
        "--gate-concurrency",
        type=int,
        default=None,
        metavar="N",
        help="the level the gate compares (default: that of the canary's newest benchmark record)",
    )
    parser.add_argument(
        "--gate-max-regression",
        default=None,
        metavar="PCT",
        help="a throughput loss beyond this (and beyond the noise of the repeats) halts the roll "
        f"(default {DEFAULT_GATE_PCT:g}%%)",
    )


def check_gate(args: argparse.Namespace) -> GateSpec | None:
    """--gate bench and its options; UsageError for an option without --gate, or one out of range."""
    concurrency = getattr(args, "gate_concurrency", None)
    pct_text = getattr(args, "gate_max_regression", None)
    if getattr(args, "gate", None) is None:
        if concurrency is not None or pct_text is not None:
            raise UsageError("--gate-concurrency and --gate-max-regression go with --gate bench")
        return None
    if not getattr(args, "rolling", False):
        raise UsageError("--gate bench judges the canary of a rolling change: add --rolling (and give @GROUP)")
    if concurrency is not None and concurrency < 1:
        raise UsageError(f"--gate-concurrency {concurrency}: give a whole number of at least 1")
    pct = DEFAULT_GATE_PCT if pct_text is None else parse_percent(pct_text)
    return GateSpec(concurrency=concurrency, max_regression_pct=pct)


def check_rolling(args: argparse.Namespace, *, group_needs_rolling: bool = True) -> RollSpec | None:
    """The roll's options (usage errors before anything is contacted); None for a single-host run.
    group_needs_rolling=False (freeze: nothing restarts): a group without --rolling is frozen as one batch."""
    target: str = args.target
    gate = check_gate(args)
    if not getattr(args, "rolling", False):
        if target.startswith("@") and not group_needs_rolling:
            spec = RollSpec(canary=0, wave=parse_wave("100%"), max_failures=args.max_failures)
            spec.check()
            return spec
        if target.startswith("@"):
            raise UsageError(
                f"{target} is a group: add --rolling to change its hosts one batch at a time (canary first)"
            )
        return None
    if not target.startswith("@"):
        raise UsageError(f"--rolling changes a group: give @GROUP (profiles/groups.toml), not {target!r}")
    if not args.drain_timeout > 0:
        raise UsageError(f"--drain-timeout must be a positive number of seconds, not {args.drain_timeout}")
    spec = RollSpec(canary=args.canary, wave=parse_wave(args.wave), max_failures=args.max_failures, gate=gate)
    spec.check()  # the group's size is checked once its members are known (console.core.roll.plan_group_roll)
    return spec
