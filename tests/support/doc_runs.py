"""How a command line of the docs (tests/support/doc_commands.py) runs on the demo host, worked out before anything
runs (pure: tests/test_docs_commands.py holds every documented line to it, tests/test_docs_commands_demo.py runs it).

What a line names is mapped to the demo's, generically, so that a line another page adds is covered as it is:
- a host (TARGET, connect's TARGET...): a profile of that name in the run's workspace, a copy of the demo's
  (profiles/demo.toml), so `gpu-host`, `gpu-a`, `kimi-host` all reach the one demo host; a name the docs use for a
  host that does not exist (nosuchhost) stays unknown, and the line must fail as a usage of it should: exit 1, the
  verb's own message, no traceback;
- @GROUP: profiles/groups.toml gets that group, of two such profiles;
- `--url http://...`: the demo server's own URL;
- a file (`--dataset`, `--space`, `--unit`): made in the run's workspace under the name the line gives, by what the
  name says it is (a trace: "trace" in its name; ShareGPT: .json; prompt JSONL: .jsonl; a tune space: --space);
- a run label (compare's RUN, predict's --from-run) or a snapshot (diff's A B, restore's SNAPSHOT) the workspace
  lacks: made first, by a short `bench --label` or a `freeze --name --yes` on the demo.

What would run for minutes is shrunk by options appended after the line's own (argparse keeps the last), listed in
OVERRIDES, each with why; they only ever touch sizes (SIZE_OPTIONS), never what the line asks for.

How it runs (`mode`): `plain` (waited for: its exit status, its output); `terminal` (the console: drawn in tmux, then
quit with q); `web` (served: a browser tab's websocket gets the console drawn, then Ctrl-C); `until-ready` (a verb
that runs until stopped: `demo --no-ui`, `logs -f`: until it says it is up, then Ctrl-C). A line without --yes of a
verb that asks gets a terminal on stdin and `yes` typed, as the operator would answer.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from console.cli import build_parser
from tests.support.doc_commands import DocCommand

NOT_A_HOST = re.compile(r"^(nosuch|no-such|missing|unknown)")  # how the docs name a host that is not there
GROUP_MEMBERS = ("gpu-a", "gpu-b")  # the profiles an @GROUP of a line gets (both the demo host)
# The options an override may set: sizes (how long, how many), never the workload, the setups or the host.
SIZE_OPTIONS = frozenset(
    {"--requests", "--repeat", "--duration", "--shape-from-server", "--dataset-sample", "--trace-window",
     "--concurrency", "--time-cap"}
)  # fmt: skip


@dataclass(frozen=True)
class Override:
    """`option value` appended to a line of `verb` where `applies` says the line would run long."""

    verb: str
    option: str
    value: str | Callable[[argparse.Namespace], str]  # the value, or how it follows from the line's own
    applies: Callable[[argparse.Namespace], bool]
    why: str

    def words(self, args: argparse.Namespace) -> list[str]:
        return [self.option, self.value if isinstance(self.value, str) else self.value(args)]


def _is_trace(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "dataset", None)) and file_kind("--dataset", args.dataset) == "trace"


def _levels(args: argparse.Namespace) -> list[str]:
    return [level for level in str(args.concurrency).split(",") if level]


def _ends_and_best(args: argparse.Namespace) -> str:
    """A tune's levels cut to the line's lowest and highest, and the one --best-at names."""
    levels = _levels(args)
    kept = {levels[0], levels[-1], *([str(args.best_at)] if args.best_at is not None else [])}
    return ",".join(level for level in levels if level in kept)


OVERRIDES = (
    Override("bench", "--requests", "32", lambda a: (a.requests or 0) > 32,
             "a level of 32 requests, not hundreds (C=64 still sends 32 at once)"),
    Override("bench", "--repeat", "2", lambda a: a.repeat > 2, "two repeats still measure the noise"),
    Override("bench", "--duration", "2", lambda a: (a.duration or 0) > 2, "a level of 2 s, not a minute"),
    Override("bench", "--shape-from-server", "3s", lambda a: a.shape_from_server is not None,
             "watch the server's traffic for 3 s, not 10 min or 90 s"),
    Override("bench", "--requests", "48",
             lambda a: a.shape_from_server is not None and a.requests is None and a.duration is None,
             "a level of the shape's rate sends 48 requests, not 30 s of them"),
    Override("bench", "--dataset-sample", "12",
             lambda a: _is_trace(a) and a.trace_window is None and a.dataset_sample is None,
             "a whole trace: its first 12 requests (the test's trace spans 20 min)"),
    Override("bench", "--dataset-sample", "16", lambda a: a.find_capacity and (a.dataset_sample or 1000) > 16,
             "each rate the capacity search tries sends 16 requests, not the whole sample"),
    Override("tune", "--duration", "1", lambda a: a.duration > 1,
             "a full level of 1 s, not 60 (a screening level an eighth of that)"),
    Override("tune", "--repeat", "1", lambda a: a.repeat > 1,
             "one full run a setup and level (more where the search asks for them)"),
    Override("tune", "--concurrency", _ends_and_best, lambda a: len(_levels(a)) > 2,
             "the line's lowest and highest levels (and --best-at's), not every one between"),
    Override("predict", "--duration", "1", lambda a: a.duration > 1,
             "the running setup's benchmark, where it needs one, at 1 s a level, not 20"),
)  # fmt: skip


class CannotRun(AssertionError):
    """A documented line the test does not know how to give what it needs (a kind of file, a setting): teach it."""


@dataclass
class Plan:
    """What a documented line needs and how it runs (see the module's doc)."""

    command: DocCommand
    args: argparse.Namespace  # the line as the CLI parses it
    words: list[str]  # the line's words after the program, then the overrides
    overrides: list[str]  # the words appended: `--duration 2 ...` (empty: it runs exactly as written)
    applied: list[Override]  # the OVERRIDES those words come from
    mode: str  # plain | terminal | web | until-ready
    answers_yes: bool  # a terminal on stdin, `yes` typed at its question
    exit_status: int
    unknown_host: str | None  # a host the docs name as not existing: the line must say so, exit 1
    hosts: list[str] = field(default_factory=list)  # profiles to write as the demo's
    groups: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # relative path -> kind (trace, sharegpt, prompts, space, unit)
    labels: list[tuple[str, str]] = field(default_factory=list)  # (target, label): bench runs to record first
    snapshots: list[tuple[str, str]] = field(default_factory=list)  # (target, name) to freeze first
    traffic: bool = False  # requests sent to the demo while it runs (--shape-from-server watches them)

    @property
    def verb(self) -> str:
        return str(self.args.command)

    @property
    def key(self) -> tuple[str, ...]:
        """The same for two lines that run the same on the demo (their hosts' names aside)."""
        names = {*self.hosts, *(f"@{g}" for g in self.groups)}
        return tuple("HOST" if w in names else w for w in self.words)

    def describe(self) -> str:
        shown = f"`{self.command.text}` ({self.command.where})"
        if self.applied:
            shown += ", run with " + "; ".join(
                f"{' '.join(o.words(self.args))} appended: {o.why}" for o in self.applied
            )
        return shown


def parse(words: list[str]) -> argparse.Namespace:
    """The words through the CLI's parser; AssertionError with argparse's complaint when it refuses them."""
    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint), contextlib.redirect_stdout(io.StringIO()):
            return build_parser().parse_args(words)
    except SystemExit:
        raise AssertionError(f"`opsconsole {' '.join(words)}` does not parse: {complaint.getvalue().strip()}") from None


def file_kind(option: str, name: str) -> str:
    """What file a line's option names, by its option and its name; CannotRun for one the test cannot make."""
    if name.startswith(("/", "~")):
        raise CannotRun(f"{option} {name}: an absolute path; the test makes files in the run's workspace only")
    if option == "--space":
        return "space"
    if option == "--unit":
        return "unit"
    if option == "--dataset":
        lower = name.lower()
        if "trace" in lower:
            return "trace"
        if lower.endswith(".json"):
            return "sharegpt"
        if lower.endswith(".jsonl"):
            return "prompts"
    raise CannotRun(f"{option} {name}: the test does not know what file this is (tests/support/doc_runs.py)")


def plan(command: DocCommand) -> Plan:
    """How `command` (a `run` line) runs on the demo; CannotRun where the test cannot give it what it needs."""
    words = command.words
    args = parse(words)
    verb = str(args.command)
    applied = [o for o in OVERRIDES if o.verb == verb and o.applies(args)]
    overrides = [word for override in applied for word in override.words(args)]
    asks = "--yes" in _options_of(verb) or verb == "trust"  # trust asks for `yes` typed, and has no --yes
    result = Plan(
        command=command,
        args=args,
        words=[*words, *overrides],
        overrides=overrides,
        applied=applied,
        mode=_mode(args),
        answers_yes=asks and not getattr(args, "yes", False),
        exit_status=command.exit_status,
        unknown_host=None,
    )
    for target in _targets(args):
        if target.startswith("@"):
            result.groups[target[1:]] = list(GROUP_MEMBERS)
            result.hosts += [m for m in GROUP_MEMBERS if m not in result.hosts]
        elif NOT_A_HOST.match(target):
            result.unknown_host = target
            result.exit_status = 1
        elif target != "demo" and target not in result.hosts:
            result.hosts.append(target)
    for option, dest in (("--dataset", "dataset"), ("--space", "space"), ("--unit", "unit")):
        name = getattr(args, dest, None)
        if name:
            result.files[name] = file_kind(option, name)
    if getattr(args, "ssh_config", None):
        raise CannotRun("--ssh-config: the demo is reached without SSH; the test has no ssh_config to give")
    if getattr(args, "prometheus", None):
        raise CannotRun("--prometheus: the test runs no Prometheus beside the demo")
    runs = list(args.runs) if verb == "compare" else []
    if getattr(args, "from_run", None):
        runs.append(args.from_run)
    for run in runs:
        if run.endswith(".jsonl"):
            raise CannotRun(f"{run}: a records file; the test makes labelled runs in logs/ only")
        result.labels.append((getattr(args, "target", None) or "demo", run))
    if verb == "diff":
        result.snapshots += [("demo", args.a), ("demo", args.b)]
    if verb == "restore":
        result.snapshots.append((args.target, args.snapshot))
    result.traffic = getattr(args, "shape_from_server", None) is not None
    return result


def _targets(args: argparse.Namespace) -> list[str]:
    if getattr(args, "targets", None):
        return list(args.targets)
    target = getattr(args, "target", None)
    return [target] if target else []


def _mode(args: argparse.Namespace) -> str:
    if args.command == "connect":
        return "web" if args.web else "terminal"
    if args.command == "demo":
        return "web" if args.web else ("until-ready" if args.no_ui else "terminal")
    if args.command == "logs" and args.follow:
        return "until-ready"
    return "plain"


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each verb's own parser (the subcommands of console.cli.build_parser)."""
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the CLI's parser has no verbs")


def _options_of(verb: str) -> set[str]:
    return set(verb_parsers()[verb]._option_string_actions)
