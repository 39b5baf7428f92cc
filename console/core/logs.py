"""`opsconsole logs TARGET [-f] [-n N]`: the service journal, followed across reconnects without duplicates."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from console.host.base import HostError, JournalEntry
from console.host.connect import open_host
from console.host.targets import resolve_target
from console.secrets import redact_argv
from console.workspace import Workspace

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def format_entry(entry: JournalEntry) -> str:
    stamp = entry.timestamp.strftime("%Y-%m-%d %H:%M:%S")
    # SGLang logs its launch settings verbatim at start-up (`server_args=ServerArgs(..., api_key='...')`,
    # 0.5.23's launch_command `--api-key ...`): mask secret-named words as the audit log does.
    message = " ".join(redact_argv(entry.message.split(" ")))
    return f"{stamp} [{entry.pid}] {message}" if entry.pid else f"{stamp} {message}"


async def logs_main(args: argparse.Namespace, out: TextIO) -> int:
    if args.lines < 0:
        print("opsconsole logs: -n must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    from console.sim.plugin import register as register_sim

    register_sim()  # composition root: the demo transport and the stand-in launcher (console.sim registers them)
    workspace = Workspace.resolve(args.workspace)
    target = resolve_target(args.target, profiles_dir=workspace.profiles, ssh_config=args.ssh_config)
    session = await open_host(target, logs_dir=workspace.logs)
    try:
        async for entry in session.service.journal(lines=args.lines, follow=args.follow):
            print(format_entry(entry), file=out, flush=True)
    finally:
        await session.close()
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(logs_main(args, sys.stdout))
    except HostError as exc:
        print(f"opsconsole logs: {exc}", file=sys.stderr)
        return EXIT_FAILED
