"""`opsconsole logs TARGET [-f] [-n N]`: the service journal, followed across reconnects without duplicates.

Lines arrive masked from the session (console.core.session.MaskedService): SGLang logs its launch settings
verbatim at every start (`server_args=ServerArgs(..., api_key='...')`)."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from console.cli.common import run_verb, workspace_of
from console.core.session import open_session
from console.errors import ExitCode, UsageError
from console.host.base import JournalEntry


def format_entry(entry: JournalEntry) -> str:
    stamp = entry.timestamp.strftime("%Y-%m-%d %H:%M:%S")
    return f"{stamp} [{entry.pid}] {entry.message}" if entry.pid else f"{stamp} {entry.message}"


async def logs_main(args: argparse.Namespace, out: TextIO) -> int:
    if args.lines < 0:
        raise UsageError("-n must be 0 or more")
    async with open_session(args.target, workspace_of(args), ssh_config=args.ssh_config) as session:
        async for entry in session.service.journal(lines=args.lines, follow=args.follow):
            print(format_entry(entry), file=out, flush=True)
    return ExitCode.OK


def run(args: argparse.Namespace) -> int:
    return run_verb("logs", lambda: logs_main(args, sys.stdout))
