"""`opsconsole connect TARGET [TARGET...] [--read-only] [--refresh S] [--web ...]`: the live console (console.tui),
in this terminal or, with --web, in a browser (console.tui.web).

Settings come from <workspace>/console.toml (console.tui.config); a malformed one is a usage error (exit 2)
that names the key. Every TARGET is resolved before the screen opens, so a typo is reported plainly."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from console.cli.common import run_verb, said, workspace_of
from console.errors import ExitCode, UsageError
from console.host.base import HostError


def build_app(args: argparse.Namespace, targets: list[str]):  # type: ignore[no-untyped-def]
    """The app for these targets (textual is imported here, not by the CLI's fast path); `@group` targets are
    expanded (profiles/groups.toml), and with a Prometheus ([fleet] or --prometheus) the overview reads it."""
    from console.core.status import FleetWatcher, HostWatcher, host_names
    from console.fleet.groups import resolve_group_targets
    from console.fleet.settings import check_prometheus_url
    from console.host.targets import resolve_target
    from console.tui.app import ConsoleOptions, OpsConsoleApp
    from console.tui.config import load_config

    workspace = workspace_of(args)
    known = OpsConsoleApp.binding_ids()
    config = load_config(workspace.root, known_ids=known)
    if getattr(args, "refresh", None) is not None:
        if not 0.1 < args.refresh <= 60:
            raise UsageError(f"--refresh must be between 0.1 and 60 seconds, not {args.refresh}")
        config = config.model_copy(update={"refresh_s": args.refresh})
    if len(set(targets)) != len(targets):
        raise UsageError("each TARGET once: the same host twice would hold two connections and two tabs")
    deployments, members, targets = _deployments(targets, workspace.profiles, args.ssh_config)
    targets, groups = resolve_group_targets(targets, workspace.profiles)
    fleet = config.fleet
    if getattr(args, "prometheus", None):
        try:
            fleet = fleet.model_copy(update={"prometheus": check_prometheus_url(args.prometheus)})
        except ValueError as exc:
            raise UsageError(f"--prometheus: {exc}") from None
    resolved = {t: members.get(t) or resolve_target(t, profiles_dir=workspace.profiles, ssh_config=args.ssh_config)
                for t in targets}  # fmt: skip

    def make_source(label, on_view, on_journal):  # type: ignore[no-untyped-def]
        return HostWatcher(
            resolved[label], workspace, on_view=on_view, on_journal=on_journal, interval_s=config.refresh_s
        )

    def make_fleet(on_view):  # type: ignore[no-untyped-def]
        return FleetWatcher(fleet, host_names(resolved), on_view=on_view, interval_s=config.refresh_s)

    options = ConsoleOptions(tuple(targets), config, bool(args.read_only), workspace, groups=tuple(groups),
                             fleet=fleet.prometheus is not None and not deployments, ssh_config=args.ssh_config,
                             deployments=tuple(deployments))  # fmt: skip
    app = OpsConsoleApp(options, make_source, make_fleet=make_fleet if options.fleet else None)
    if config.theme and config.theme not in app.available_themes:
        raise UsageError(
            f"{workspace.root / 'console.toml'}: theme {config.theme!r} is not a Textual theme; "
            f"one of: {', '.join(sorted(app.available_themes))}"
        )
    return app


def _deployments(
    targets: list[str], profiles: Any, ssh_config: str | None
) -> tuple[list[Any], dict[str, Any], list[str]]:
    """The deployments among the targets (profiles/deployments/NAME.toml): each member becomes a tab, named by the
    member (its host's target with the member's unit and port), and the deployment one panel on the overview."""
    import dataclasses

    from console.core.deployment import is_deployment, load_deployment
    from console.fleet.groups import is_group_ref

    deployments: list[Any] = []
    members: dict[str, Any] = {}
    out: list[str] = []
    for target in targets:
        if is_group_ref(target) or not is_deployment(target, profiles):
            out.append(target)
            continue
        deployment = load_deployment(target, profiles, ssh_config=ssh_config)
        deployments.append(deployment)
        for member in deployment.members:
            if member.name in members or member.name in targets:
                raise UsageError(f"{member.name}: a member of {deployment.name} and another TARGET; name it once")
            members[member.name] = dataclasses.replace(member.target, label=member.name)
            out.append(member.name)
    return deployments, members, out


def on_hangup(abandon: Callable[[], None] | None = None) -> None:
    """SIGHUP: the terminal is gone (window closed, tmux killed, SSH dropped). Textual's own shutdown writes to
    the terminal and can block on it for ever (its writer queue fills and nothing drains it), with the event
    loop stuck inside a write, so the handler is a plain signal handler, run in the main thread even there: it
    lets go of what must not outlive the console (`abandon`: the demo host's unit) and leaves at once. Remote
    hosts need nothing: their locks go with the closed connections."""

    def leave(signum: int, _frame: object) -> None:
        try:
            if abandon is not None:
                abandon()
        finally:
            os._exit(128 + signum)

    signal.signal(signal.SIGHUP, leave)


def settle() -> None:
    """Before the console runs: what exists now (modules, the app) lives as long as the process, so out of the
    garbage collector's sight; a full collection then walks only what came later (50-160 ms less, which a key
    pressed meanwhile waited for). Here and not in the app: tests run many apps in one process."""
    gc.freeze()


def run(args: argparse.Namespace) -> int:
    from console.tui import web

    try:
        web.check_options(args)
        app = build_app(args, list(args.targets))
    except UsageError as exc:
        print(f"opsconsole connect: {said(exc)}", file=sys.stderr)
        return ExitCode.USAGE
    except HostError as exc:
        print(f"opsconsole connect: {said(exc)}", file=sys.stderr)
        return ExitCode.FAILED
    if args.web:  # the app above was built only to check the targets and settings before serving
        return run_verb("connect", lambda: _serve(args))
    on_hangup()
    settle()
    return int(app.run() or ExitCode.OK)


async def _serve(args: argparse.Namespace) -> int:
    """`connect --web`: each browser tab runs this same `connect` (without --web) as its own process."""
    from console.tui import web

    argv = web.console_argv(
        workspace_of(args).root,
        list(args.targets),
        read_only=bool(args.read_only),
        refresh=args.refresh,
        ssh_config=args.ssh_config,
        prometheus=getattr(args, "prometheus", None),
    )
    server = web.server_for(args, argv, title=f"opsconsole {' '.join(args.targets)}")
    return await web.serve(server, verb="connect", read_only=bool(args.read_only))
