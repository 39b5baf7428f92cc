"""`opsconsole demo [--no-ui | --web]`: the console on the embedded demo GPU host (console.sim.demo), in this process
(--web: in a browser, one `connect demo` process per tab, console.tui.web).

The console opens at once: the demo server's start runs in its journal. Quitting the console stops the demo
host; so do SIGTERM and SIGHUP (the terminal closed). Killed outright, the supervisor's guard and the kernel's
parent-death signal stop the simulated server (console/sim/supervisor.py)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from console import hints
from console.cli.common import run_verb
from console.cli.connect import on_hangup, settle
from console.errors import ExitCode, UsageError


def _demo(args: argparse.Namespace) -> Any:
    """The demo host, or a demo deployment for `--profile two-node | pd` (console.sim.demo_deployments): both are
    reached as `demo` (a host profile, or profiles/deployments/demo.toml)."""
    from console.sim.demo import DEPLOYMENT_DEMOS, demo_host

    if args.profile in DEPLOYMENT_DEMOS:
        from console.sim.demo_deployments import deployment_demo

        return deployment_demo(args)
    return demo_host(args)


def _targets(host: Any) -> list[str]:
    """What the console opens: the demo host, or a demo deployment's SGLang members, one tab each (their host
    profiles; smg is the deployment's router, not a host to tune)."""
    from console.sim.demo import PROFILE_NAME

    members = getattr(host, "members", None)
    if members is None:
        return [PROFILE_NAME]
    return [m.name for m in sorted(members, key=lambda m: m.name) if m.role != "router"]


async def _with_console(args: argparse.Namespace) -> int:
    from console.cli.connect import build_app
    from console.sim.demo import DemoAlreadyRunning

    try:
        async with _demo(args) as host:
            connect = argparse.Namespace(
                workspace=str(host.workspace.root),
                ssh_config=None,
                refresh=None,
                read_only=bool(getattr(args, "read_only", False)),
                targets=_targets(host),
            )
            app = build_app(connect, _targets(host))
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, app.exit)
            on_hangup(host.abandon)
            settle()
            try:
                await app.run_async()
            finally:
                loop.remove_signal_handler(signal.SIGTERM)
                signal.signal(signal.SIGHUP, signal.SIG_DFL)
    except DemoAlreadyRunning as exc:
        print(exc, file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK


async def _with_web(args: argparse.Namespace) -> int:
    """`demo --web`: the demo host lives as long as the web server; each browser tab runs `connect demo`."""
    from console.sim.demo import UNIT, DemoAlreadyRunning
    from console.tui import web

    try:
        async with _demo(args) as host:
            argv = web.console_argv(
                host.workspace.root, _targets(host), read_only=bool(args.read_only), refresh=None, ssh_config=None
            )
            server = web.server_for(args, argv, title=hints.DEMO.line())
            web.say(f"Demo GPU host: {UNIT} (SGLang stand-in, profile {args.profile}) starting ...")
            code = await web.serve(server, verb="demo", read_only=bool(args.read_only))
            web.say("Stopping the demo host ...")
    except DemoAlreadyRunning as exc:
        print(exc, file=sys.stderr)
        return ExitCode.FAILED
    web.say("Demo host stopped.")
    return code


def run(args: argparse.Namespace) -> int:
    from console.tui import web

    try:
        web.check_options(args)
        if args.web and args.no_ui:
            raise UsageError("--web and --no-ui: pick one (--web serves the console, --no-ui serves none)")
    except UsageError as exc:
        print(f"opsconsole demo: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if args.web:
        return run_verb("demo", lambda: _with_web(args))
    if args.no_ui:
        from console.sim.demo import DEPLOYMENT_DEMOS
        from console.sim.demo import run as run_headless

        if args.profile in DEPLOYMENT_DEMOS:
            from console.sim import demo_deployments

            return run_verb("demo", lambda: demo_deployments.run_headless(args))
        return run_headless(args)
    return run_verb("demo", lambda: _with_console(args))
